#!/usr/bin/python3
"""A program that parses what it reads (issue 10's Python row): json.load()s every record file
of a directory in an order shuffled with a fixed seed, checks each record's own digest, and prints
one summary line. A record that does not parse or whose digest is wrong ends the program with
status 1, so a run on wrong data cannot pass for a good one.

  json_loader.py generate DIR [--files 600] [--seed 1]   # DIR/json/r00000.json ...
  json_loader.py load DIR [--seed 1] [--limit N]          # reads DIR/json/*.json (the first N)

Uses only the standard library, so any python3 runs it; the benchmarks call /usr/bin/python3.
"""

import argparse
import hashlib
import json
import os
import random
import sys


def record_digest(record: dict) -> str:
    body = json.dumps(record["items"], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def generate(root: str, files: int, seed: int) -> None:
    rng = random.Random(seed)
    out = os.path.join(root, "json")
    os.makedirs(out, exist_ok=True)
    for i in range(files):
        # 4-28 KiB of text per file (median about 16 KiB): a few stripe blocks at most.
        count = rng.randint(40, 280)
        items = [{"id": i * 1000 + k, "label": rng.choice("abcdefghij") * rng.randint(1, 12),
                  "values": [round(rng.random(), 6) for _ in range(8)]} for k in range(count)]
        record = {"index": i, "items": items}
        record["sha256"] = record_digest(record)
        with open(os.path.join(out, f"r{i:05d}.json"), "w", encoding="utf-8") as f:
            json.dump(record, f)
    print(f"json files={files} seed={seed} dir={out}")


def load(root: str, seed: int, limit: int) -> int:
    directory = os.path.join(root, "json")
    names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    random.Random(seed).shuffle(names)
    if limit:
        names = names[:limit]
    items = 0
    total = 0.0
    summary = hashlib.sha256()
    for name in names:
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            try:
                record = json.load(f)
            except ValueError as error:
                print(f"json_loader: {name}: not JSON: {error}", file=sys.stderr)
                return 1
        if record.get("sha256") != record_digest(record):
            print(f"json_loader: {name}: digest mismatch", file=sys.stderr)
            return 1
        items += len(record["items"])
        total += sum(sum(item["values"]) for item in record["items"])
        summary.update(record["sha256"].encode())
    print(f"files={len(names)} items={items} sum={total:.3f} digest={summary.hexdigest()}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["generate", "load"])
    parser.add_argument("dir")
    parser.add_argument("--files", type=int, default=600)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="load only the first N (0: all)")
    args = parser.parse_args()
    if args.command == "generate":
        if args.files < 1:
            parser.error(f"--files {args.files}: at least 1")
        generate(args.dir, args.files, args.seed)
        return 0
    if args.limit < 0:
        parser.error(f"--limit {args.limit}: not a count")
    return load(args.dir, args.seed, args.limit)


if __name__ == "__main__":
    sys.exit(main())
