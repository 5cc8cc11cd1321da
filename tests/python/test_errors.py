"""Every documented error of the package raises its documented exception, naming the path and
the errno; strict=False warns once instead and goes on without the hints."""

import errno
import os
import subprocess
import sys
import warnings

import pytest

import tipfs
from conftest import NOBODY, REPO


def test_a_path_off_tipfs_raises_not_on_tipfs(tmp_path):
    plain = tmp_path / "plain.bin"
    plain.write_bytes(b"x" * 100)
    with pytest.raises(tipfs.NotOnTipfsError) as caught:
        tipfs.HintStream(tmp_path)
    assert caught.value.errno == errno.ENOTTY
    assert caught.value.filename == str(tmp_path)
    assert "not on a tipfs mount" in str(caught.value)
    with pytest.raises(tipfs.NotOnTipfsError):
        tipfs.disclose([plain])
    assert tipfs.is_tipfs(plain) is False


def test_off_tipfs_with_strict_false_warns_once_and_does_nothing(tmp_path):
    files = []
    for i in range(3):
        files.append(tmp_path / f"f{i}")
        files[-1].write_bytes(b"y")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stream = tipfs.HintStream(tmp_path, strict=False)
        assert not stream.active
        assert stream.disclose(files) == 0
        assert stream.disclose(files) == 0
        stream.cancel()
        assert stream.query() == {}
    assert [w.category for w in caught] == [tipfs.TipfsWarning]
    assert "not on a tipfs mount" in str(caught[0].message)


def test_a_missing_path_raises_with_its_name(volume):
    missing = volume.mountpoint / "no-such-file"
    with pytest.raises(tipfs.TipfsError) as caught:
        tipfs.HintStream(missing)  # the stream's own path must exist: stat's error
    assert caught.value.errno == errno.ENOENT and caught.value.filename == str(missing)
    stream = tipfs.HintStream(volume.mountpoint)
    with pytest.raises(tipfs.TipfsError) as caught:
        stream.disclose([missing])
    assert caught.value.errno == errno.ENOENT
    assert caught.value.filename == str(missing)


def test_in_a_batch_the_refused_path_is_named_and_nothing_of_it_is_hinted(volume):
    good = volume.mountpoint / "good.bin"
    good.write_bytes(b"g" * 5000)
    directory = volume.mountpoint / "a-directory"
    directory.mkdir(exist_ok=True)
    with tipfs.HintStream(volume.mountpoint, name=77) as stream:
        with pytest.raises(tipfs.TipfsError) as caught:
            stream.disclose([good, good, directory, good])
        assert caught.value.errno == errno.EISDIR
        assert caught.value.filename == str(directory)
        assert stream.query()["stream_hinted_bytes"] == 0
        # strict=False: one warning, and the rest of the batch goes in.
        stream.strict = False
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            assert stream.disclose([good, directory, good]) == 2
            assert stream.disclose([directory]) == 0
        assert len(warned) == 1 and str(directory) in str(warned[0].message)
        assert stream.query()["stream_hinted_bytes"] == 10_000
        stream.cancel()
        assert stream.query()["stream_hinted_bytes"] == 0


def test_a_path_of_another_mount_is_exdev(volume, tmp_path):
    elsewhere = tmp_path / "elsewhere.bin"
    elsewhere.write_bytes(b"e")
    with tipfs.HintStream(volume.mountpoint) as stream:
        with pytest.raises(tipfs.TipfsError) as caught:
            stream.disclose([elsewhere])
        assert caught.value.errno == errno.EXDEV
        assert caught.value.filename == str(elsewhere)
        with open(elsewhere, "rb") as f, pytest.raises(tipfs.TipfsError) as caught:
            stream.disclose_ranges(f, [(0, 1)])
        assert caught.value.errno == errno.EXDEV


def test_ranges_of_a_file_open_only_for_writing_are_ebadf(volume):
    path = volume.mountpoint / "write-only.bin"
    path.write_bytes(b"w" * 4096)
    with tipfs.HintStream(volume.mountpoint) as stream, open(path, "r+b") as readable:
        assert stream.disclose_ranges(readable, [(0, 100), (1000, 0)]) == 2
        assert stream.query()["stream_hinted_bytes"] == 100 + 3096
        stream.cancel()
        fd = os.open(path, os.O_WRONLY)
        try:
            with pytest.raises(tipfs.TipfsError) as caught:
                stream.disclose_ranges(fd, [(0, 100)])
            assert caught.value.errno == errno.EBADF
            with pytest.raises(tipfs.TipfsError) as caught:
                stream.disclose_ranges(fd, [(-1, 100)])
            assert caught.value.errno == errno.EINVAL
        finally:
            os.close(fd)


def test_too_many_hints_outstanding_raise_hint_limit_error(volume):
    path = volume.mountpoint / "many-ranges.bin"
    path.write_bytes(b"r" * 65536)
    with tipfs.HintStream(volume.mountpoint, name=78) as stream, open(path, "rb") as f:
        # The per-process cap: 65,536 outstanding segments (tipfs_hint(3), EDQUOT).
        with pytest.raises(tipfs.HintLimitError) as caught:
            stream.disclose_ranges(f, ((i % 65536, 1) for i in range(70_000)))
        assert caught.value.errno == errno.EDQUOT
        assert caught.value.filename == str(path)
        assert stream.query()["stream_segments_pending"] == 64 * 1020  # whole calls only
        stream.strict = False
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            assert stream.disclose_ranges(f, [(0, 1)] * 256) == 256  # up to the cap
            assert stream.disclose_ranges(f, [(0, 1)] * 10) == 0
            assert stream.disclose_ranges(f, [(0, 1)]) == 0
        assert [w.category for w in warned] == [tipfs.TipfsWarning]
        assert "EDQUOT" in str(warned[0].message) or "quota" in str(warned[0].message).lower()
        stream.cancel()
        assert stream.disclose_ranges(f, [(0, 1)]) == 1
        stream.cancel()


def test_bad_arguments_raise_value_error(volume):
    with pytest.raises(ValueError):
        tipfs.HintStream(volume.mountpoint, name=0)
    with pytest.raises(ValueError):
        tipfs.HintStream(volume.mountpoint, name=1 << 32)
    with pytest.raises(ValueError):
        tipfs.DisclosingSampler([1, 2], str, budget_bytes=0)


UNREADABLE_AS_NOBODY = """
import errno, sys
sys.path.insert(0, sys.argv[1])
import tipfs
stream = tipfs.HintStream(sys.argv[2])
try:
    stream.disclose([sys.argv[3]])
except tipfs.TipfsError as e:
    print(e.errno, e.filename)
"""


def test_an_unreadable_file_raises_eacces_for_its_user(volume):
    secret = volume.mountpoint / "secret.bin"
    secret.write_bytes(b"s" * 100)
    os.chmod(secret, 0o600)
    done = subprocess.run(
        [sys.executable, "-c", UNREADABLE_AS_NOBODY, str(REPO / "python"),
         str(volume.mountpoint), str(secret)],
        user=NOBODY, group=NOBODY, extra_groups=[], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(errno.EACCES), str(secret)]
