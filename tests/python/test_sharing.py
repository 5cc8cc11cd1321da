"""The stream-sharing rule on a real mount: a stream shared with descendants is consumed by the
hinting process's children of its user, and never consumed nor cancelled by anyone else: an
unrelated process of another user, an unrelated process of the same user, or a child of the
hinter that changed its user. Each party is a separate process (tests/python/sharing_peer.py)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import NOBODY, REPO, delta, make_samples

PEER = Path(__file__).with_name("sharing_peer.py")


class Peer:
    """A sharing_peer.py process (as `user`), driven line by line."""

    def __init__(self, user=None):
        self.process = subprocess.Popen(
            [sys.executable, str(PEER), str(REPO / "python")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, user=user, group=user,
            extra_groups=[] if user is not None else None)

    def __call__(self, *words):
        self.process.stdin.write(" ".join(map(str, words)) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"peer died on {words[0]}"
        return json.loads(line)

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()  # the peer ends at end of input
            self.process.wait(timeout=30)


@pytest.fixture
def peers():
    made = []

    def make(user=None):
        made.append(Peer(user))
        return made[-1]

    yield make
    for peer in made:
        peer.close()


def test_only_the_hinters_descendants_of_its_user_consume_a_shared_stream(volume, peers):
    files = make_samples(volume.mountpoint / "shared", 24, seed=5)
    total = sum(os.path.getsize(f) for f in files)
    hinter = peers()
    assert hinter("hint", volume.mountpoint, 9, *files) == len(files)
    assert hinter("query")["stream_hinted_bytes"] == total
    before = volume.stats()

    stranger = peers(NOBODY)  # another user, not a descendant of the hinter
    assert stranger("read-self", *files) == total
    stranger("cancel-all", volume.mountpoint)
    sibling = peers()  # the hinter's user, not its descendant
    assert sibling("read-self", *files) == total
    sibling("cancel-all", volume.mountpoint)
    # The hinter's own child, turned into another user.
    assert hinter("read", NOBODY, *files) == total

    state = hinter("query")
    assert state["stream_hinted_bytes"] == total
    assert state["stream_blocks_consumed"] == 0
    after = volume.stats()
    assert delta(before, after, "hints.manual.consumed") == 0
    assert delta(before, after, "hints.cancelled") == 0

    # The control: the hinter's child of its own user consumes everything.
    assert hinter("read", os.getuid(), *files) == total
    state = hinter("query")
    assert state["stream_hinted_bytes"] == 0
    block = state["cache_block_bytes"]
    blocks = sum(math.ceil(os.path.getsize(f) / block) for f in files)
    assert state["stream_blocks_consumed"] == blocks
    assert delta(after, volume.stats(), "hints.shared_consumed") == blocks
