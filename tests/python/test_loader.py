"""The disclosing sampler with PyTorch's DataLoader on a real mounted volume: every sample arrives
exactly once per epoch with the same bytes as without it; the daemon's counters show the
disclosed blocks consumed (by the worker processes, when there are workers); nothing disclosed is
left outstanding at the end of the epoch; a second epoch's hints follow the second order."""

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tipfs
from conftest import REPO, Volume, delta, fuse_unavailable, make_samples

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset, RandomSampler, Sampler  # noqa: E402


class Files(Dataset):
    """A map-style data set of whole files: index -> (index, sha256 of the file's bytes)."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            return i, hashlib.sha256(f.read()).hexdigest()

    def path_of(self, i):
        return self.paths[i]


class SeededSampler(Sampler):
    """A fresh permutation per epoch, from (seed, epoch), as DistributedSampler draws it."""

    def __init__(self, n, seed):
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 1000 + self.epoch)
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self):
        return self.n


def blocks_of(paths, block_bytes):
    return sum(math.ceil(os.path.getsize(p) / block_bytes) for p in paths)


def one_epoch(loader):
    seen = {}
    for indices, digests in loader:
        for i, d in zip(indices.tolist(), digests):
            assert i not in seen, f"sample {i} arrived twice"
            seen[i] = d
    return seen


@pytest.fixture(scope="module")
def block_bytes(volume):
    return tipfs.query(volume.mountpoint)["cache_block_bytes"]


@pytest.mark.parametrize("workers", [0, 2])
def test_every_sample_once_same_bytes_and_the_hints_consumed(volume, samples, block_bytes,
                                                            workers):
    data = Files(samples)
    plain = one_epoch(DataLoader(data, sampler=RandomSampler(data), batch_size=8,
                                 num_workers=workers))
    assert len(plain) == len(samples)

    before = volume.stats()
    # A budget of 1 MiB, about 14 samples: the order goes out in many calls as the loader goes.
    sampler = tipfs.DisclosingSampler(RandomSampler(data), data.path_of, budget_bytes=1 << 20)
    disclosed = one_epoch(DataLoader(data, sampler=sampler, batch_size=8, num_workers=workers))
    after = volume.stats()

    assert disclosed == plain  # every sample once, the same bytes
    blocks = blocks_of(samples, block_bytes)
    assert delta(before, after, "hints.manual.consumed") == blocks
    assert delta(before, after, "hints.shared_consumed") == (blocks if workers else 0)
    assert delta(before, after, "hints.skipped") == 0
    assert delta(before, after, "hints.cancelled") == 0
    assert after["hints.outstanding.bytes"] == 0
    assert sampler.stats["disclosed"] == len(samples)
    assert sampler.stats["disclosed_bytes"] == sum(os.path.getsize(p) for p in samples)
    assert sampler.stats["calls"] > 4
    sampler.close()
    assert sampler.stats["cancelled_bytes"] == 0


def test_the_second_epoch_hints_follow_the_second_order(volume, samples, block_bytes):
    data = Files(samples)
    disclosed_order = []

    def path_of(i):
        disclosed_order.append(i)
        return data.path_of(i)

    seeded = SeededSampler(len(data), seed=7)
    # About 3 samples ahead: hints of a stale order would leave most reads unmatched.
    sampler = tipfs.DisclosingSampler(seeded, path_of, budget_bytes=200_000)
    loader = DataLoader(data, sampler=sampler, batch_size=4, num_workers=0)
    orders = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        orders.append(list(seeded))
        disclosed_order.clear()
        before = volume.stats()
        seen = one_epoch(loader)
        after = volume.stats()
        assert sorted(seen) == list(range(len(samples)))
        assert disclosed_order == orders[epoch]
        assert delta(before, after, "hints.manual.consumed") == blocks_of(samples, block_bytes)
        assert delta(before, after, "hints.skipped") == 0
        assert delta(before, after, "hints.cancelled") == 0
    assert orders[0] != orders[1]
    sampler.close()


def test_an_epoch_dropped_halfway_cancels_the_rest(volume, samples):
    data = Files(samples)
    sampler = tipfs.DisclosingSampler(RandomSampler(data), data.path_of)  # the whole order
    before = volume.stats()
    for batch_number, _ in enumerate(DataLoader(data, sampler=sampler, batch_size=8,
                                                num_workers=2)):
        if batch_number == 5:
            break  # the loader's iterator is dropped: its workers stop
    after = volume.stats()
    assert after["hints.outstanding.bytes"] == 0
    assert delta(before, after, "hints.cancelled") > 0
    assert sampler.stats["cancelled_bytes"] > 0


def test_the_default_kernel_cache_mode_consumes_too(block_bytes):
    reason = fuse_unavailable()
    if reason:
        pytest.skip(reason)
    v = Volume()
    try:
        paths = make_samples(v.mountpoint / "samples", 64, seed=3)
        # Read on a fresh mount with the page cache on top: nothing of the files is cached yet.
        v.unmount()
        v.mount(("--cache-size", "12M"))
        data = Files(paths)
        before = v.stats()
        sampler = tipfs.DisclosingSampler(RandomSampler(data), data.path_of)
        seen = one_epoch(DataLoader(data, sampler=sampler, batch_size=8, num_workers=2))
        after = v.stats()
        assert sorted(seen) == list(range(len(paths)))
        blocks = blocks_of(paths, block_bytes)
        assert delta(before, after, "hints.manual.consumed") == blocks
        assert delta(before, after, "hints.shared_consumed") == blocks
        assert after["hints.outstanding.bytes"] == 0
    finally:
        v.remove()


def test_the_example_of_docs_python_md_runs(volume, tmp_path):
    text = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    program = text.split("```python\n#!/usr/bin/python3\n", 1)[1].split("```", 1)[0]
    (tmp_path / "example.py").write_text(program)
    make_samples(volume.mountpoint / "example", 80, seed=21, max_bytes=20_000)  # 4 classes
    done = subprocess.run([sys.executable, str(tmp_path / "example.py"),
                           str(volume.mountpoint / "example")], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["epoch 0", "epoch 1", "epoch 2"]
    assert "'disclosed': 80," in lines[0] and "'cancelled_bytes': 0" in lines[-1]
