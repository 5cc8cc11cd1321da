"""A process for test_sharing.py: reads commands on stdin, one per line, answers one JSON line.

  hint MOUNT NAME FILE...   disclose FILE... on named stream NAME, shared with descendants
  query                     that stream's state (HintStream.query())
  read UID FILE...          a forked child that runs as UID (and its group) reads FILE... whole
  read-self FILE...         this process reads FILE...
  cancel-all MOUNT          cancel every stream of this process on MOUNT
  quit
"""

import json
import os
import sys

sys.path.insert(0, sys.argv[1])
import tipfs  # noqa: E402

stream = None


def read_all(paths):
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += len(f.read())
    return total


def read_as(uid, paths):
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.write(w, str(read_all(paths)).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 64)
    os.close(r)
    os.waitpid(child, 0)
    return int(got or b"-1")


for line in sys.stdin:
    command, *args = line.split()
    if command == "hint":
        stream = tipfs.HintStream(args[0], name=int(args[1]), share=True)
        reply = stream.disclose(args[2:])
    elif command == "query":
        reply = stream.query()
    elif command == "read":
        reply = read_as(int(args[0]), args[1:])
    elif command == "read-self":
        reply = read_all(args)
    elif command == "cancel-all":
        tipfs.cancel_all(args[0])
        reply = 0
    elif command == "quit":
        break
    else:
        reply = f"unknown command {command}"
    print(json.dumps(reply), flush=True)
