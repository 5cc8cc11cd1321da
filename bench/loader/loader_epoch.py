#!/usr/bin/python3
"""One epoch of a PyTorch training-data loader over the loader data set (tipfs-bench-gen loader:
samples/cNNN/sNNNNNN.smp), plain or with tipfs.DisclosingSampler; prints one JSON line.

    bench/loader/loader_epoch.py --dir MOUNT/set --workers 4 --variant disclosing

Each sample is read whole and decoded the way a loader checks an encoded image: its TSMP header
(magic, version, payload size) and a CRC-32 of the payload, turned into a tensor. The order is
RandomSampler's with a fixed seed, so plain and disclosing runs read the same order. The JSON
line: seconds (the epoch, from the first batch asked for to the last received), samples,
digest (of the labels and CRCs in index order, equal across variants), timeline (seconds at
each batch's arrival), sampler (DisclosingSampler.stats after close()).
"""

import argparse
import hashlib
import json
import os
import struct
import sys
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset, RandomSampler  # noqa: E402

import tipfs  # noqa: E402

HEADER = struct.Struct("<4sIIIQQ")  # bench/workloads/sample_format.h


class Samples(Dataset):
    def __init__(self, directory: str):
        root = Path(directory) / "samples"
        self.paths = sorted(str(p) for p in root.glob("c*/s*.smp"))
        if not self.paths:
            raise SystemExit(f"loader_epoch: no samples/c*/s*.smp under {directory}")

    def __len__(self):
        return len(self.paths)

    def path_of(self, i):
        return self.paths[i]

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            data = f.read()
        magic, version, index, label, payload, _ = HEADER.unpack_from(data)
        if magic != b"TSMP" or version != 1 or payload != len(data) - HEADER.size:
            raise ValueError(f"{self.paths[i]}: not a TSMP sample of its size")
        crc = zlib.crc32(memoryview(data)[HEADER.size:])
        return index, label, torch.tensor(crc, dtype=torch.int64)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="the data set's directory")
    parser.add_argument("--variant", choices=["plain", "disclosing"], default="plain")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1, help="the sampler's seed")
    parser.add_argument("--budget", type=int, default=None,
                        help="DisclosingSampler budget_bytes (default: its own)")
    args = parser.parse_args()

    data = Samples(args.dir)
    order = RandomSampler(data, generator=torch.Generator().manual_seed(args.seed))
    sampler = order
    if args.variant == "disclosing":
        sampler = tipfs.DisclosingSampler(order, data.path_of, budget_bytes=args.budget,
                                          strict=True)
    loader = DataLoader(data, sampler=sampler, batch_size=args.batch_size,
                        num_workers=args.workers)
    crcs = {}
    timeline = []
    start = time.monotonic()
    for indices, labels, crc in loader:
        timeline.append(round(time.monotonic() - start, 4))
        for i, label, c in zip(indices.tolist(), labels.tolist(), crc.tolist()):
            if i in crcs:
                raise SystemExit(f"loader_epoch: sample {i} arrived twice")
            crcs[i] = (label, c)
    seconds = time.monotonic() - start
    stats = {}
    if args.variant == "disclosing":
        sampler.close()
        stats = sampler.stats
    digest = hashlib.sha256(json.dumps(sorted(crcs.items())).encode()).hexdigest()[:16]
    print(json.dumps(dict(seconds=round(seconds, 4), samples=len(crcs), digest=digest,
                          batch_size=args.batch_size, timeline=timeline, sampler=stats,
                          pid=os.getpid())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
