"""Hint streams: disclose future reads to a tipfs mount, cancel them, read its counters.

Every call is an ioctl(2) on the mount (include/tipfs/hint.h, tipfs_hint(3)); this module builds
the fixed-size requests, batches them under the ABI's per-call limits and turns each errno into
an exception that names the path. Thread-safe: a lock serialises each stream's requests.
"""

import ctypes
import enum
import errno
import fcntl
import json
import os
import stat
import struct
import threading
import warnings
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _abi
from ._mounts import Mount, PathMapper, find_mount

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
# A whole file, or (path, offset, length) with length 0 meaning "to end of file".
PathHint = Union[PathLike, Tuple[PathLike, int, int]]


class Source(enum.IntEnum):
    """Where hints come from (enum tipfs_hint_source)."""
    MANUAL = _abi.SOURCE_MANUAL
    SPECULATIVE = _abi.SOURCE_SPECULATIVE
    WARMUP = _abi.SOURCE_WARMUP
    HISTORY = _abi.SOURCE_HISTORY
    SPECULATIVE_TAINTED = _abi.SOURCE_SPECULATIVE_TAINTED


class TipfsError(OSError):
    """A hint call failed: `errno` is the errno of tipfs_hint(3), `filename` the path involved,
    `strerror` what could not be done and why."""

    def __str__(self) -> str:
        name = errno.errorcode.get(self.errno, str(self.errno))
        where = f" '{self.filename}'" if self.filename is not None else ""
        return f"tipfs: {self.strerror}{where} [{name}]"


class NotOnTipfsError(TipfsError):
    """The path is not on a tipfs mount (ENOTTY), or the mount does not know the call."""


class HintLimitError(TipfsError):
    """Too many hints outstanding: the process's cap (EDQUOT) or the mount's (ENOBUFS)."""


class TipfsWarning(UserWarning):
    """A hint was not taken and strict=False asked to go on without it."""


def make_error(err: int, what: str, filename: Optional[str]) -> TipfsError:
    cls = TipfsError
    if err == errno.ENOTTY:
        cls = NotOnTipfsError
    elif err in (errno.EDQUOT, errno.ENOBUFS):
        cls = HintLimitError
    return cls(err, f"{os.strerror(err)}: {what}", filename)


_RECORD = struct.Struct("=QQII")
assert _RECORD.size == ctypes.sizeof(_abi.PathRecord)
_RECORDS_AT = _abi.HintPaths.records.offset
_SEGMENTS_AT = _abi.HintFd.segments.offset
_SEGMENT = struct.Struct("=QQ")
assert _SEGMENT.size == ctypes.sizeof(_abi.Segment)


def _text(path: PathLike) -> str:
    return os.fsdecode(os.fspath(path))


def _local_problem(path: str) -> int:
    """The errno the daemon would most likely give for hinting `path`, checked here (0: none)."""
    try:
        st = os.stat(path)
    except OSError as e:
        return e.errno or errno.ENOENT
    if stat.S_ISDIR(st.st_mode):
        return errno.EISDIR
    if not stat.S_ISREG(st.st_mode):
        return errno.EINVAL
    if not os.access(path, os.R_OK, effective_ids=os.access in os.supports_effective_ids):
        return errno.EACCES
    return 0


class HintStream:
    """One stream of disclosed future reads on the tipfs mount that holds `path`.

    name=None is the process's own stream (TIPFS_STREAM_SELF); an int in 1..2**32-1 names a
    stream of this process kept apart from the others. share=True lets this process's
    descendants that run as its user (a DataLoader's worker processes) consume the stream
    (TIPFS_IOC_SHARE). With strict=False, failures warn once (TipfsWarning) and the call goes
    on without the hints instead of raising; a path off tipfs makes an inactive stream.

    Raises NotOnTipfsError (ENOTTY) when `path` is not on a tipfs mount, TipfsError with the
    errno of stat(2) when it does not exist, ValueError for a bad name.
    """

    def __init__(self, path: PathLike, *, name: Optional[int] = None,
                 source: Source = Source.MANUAL, share: bool = False, strict: bool = True):
        if name is not None and not 0 < name < 1 << 32:
            raise ValueError(f"stream name {name} is outside 1..2**32-1")
        self.strict = strict
        self.source = Source(source)
        self.stream_id = _abi.STREAM_SELF if name is None else _abi.NAMED_STREAM_BASE | name
        self._lock = threading.Lock()
        self._warned: set = set()
        self._pid = os.getpid()
        self._fd = -1
        self.mount: Optional[Mount] = None
        self._mapper: Optional[PathMapper] = None
        where = _text(path)
        try:
            mount = find_mount(where)
        except OSError as e:
            self._fail(make_error(e.errno or errno.ENOENT, "cannot find the mount of", where))
            return
        if not mount.is_tipfs:
            self._fail(make_error(errno.ENOTTY, f"not on a tipfs mount (on {mount.fstype} "
                                  f"{mount.mountpoint})", where))
            return
        self._fd = os.open(mount.mountpoint, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.mount = mount
        self._mapper = PathMapper(mount)
        self._paths = bytearray(ctypes.sizeof(_abi.HintPaths))
        self._segments = bytearray(ctypes.sizeof(_abi.HintFd))
        if share:
            self.share()

    # ---- state -------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """False when the stream takes no hints (off tipfs with strict=False, or closed)."""
        return self._fd >= 0

    def close(self) -> None:
        """Closes the stream's handle on the mount. Hints already disclosed stay (they belong
        to the process, not to this object): cancel() drops them."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> "HintStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass

    def _owned(self) -> bool:
        # After fork(2) the child holds a copy of this object, but the stream is its parent's:
        # the daemon would take the child's calls as its own stream's.
        return self._fd >= 0 and os.getpid() == self._pid

    def _fail(self, error: TipfsError) -> None:
        if self.strict:
            raise error
        key = (error.errno, type(error))
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(f"{error} (going on without hints)", TipfsWarning, stacklevel=3)

    def _ioctl(self, request: int, buffer: bytearray) -> int:
        try:
            fcntl.ioctl(self._fd, request, buffer, True)
            return 0
        except OSError as e:
            return e.errno or errno.EIO

    def _header(self, buffer: bytearray, count: int, stream: Optional[int] = None) -> None:
        h = _abi.HintHeader.from_buffer(buffer)
        h.version = _abi.HINT_VERSION
        h.source = int(self.source)
        h.stream = self.stream_id if stream is None else stream
        h.epoch = 0
        h.count = count

    # ---- disclosure --------------------------------------------------------------------------

    def disclose(self, hints: Iterable[PathHint]) -> int:
        """Discloses future reads by path, in the order they will happen: each item is a path
        (the whole file) or (path, offset, length), length 0 meaning to end of file. Sent in as
        few ioctls as the ABI allows (TIPFS_IOC_HINT_PATHS, 16,000 bytes of records each).
        Returns the number of items disclosed.

        Raises TipfsError naming the path: ENOENT, ENOTDIR, EACCES, EISDIR, ELOOP, EXDEV (not
        on this stream's mount), EINVAL (not a regular file, a bad range, an empty path);
        HintLimitError (EDQUOT, ENOBUFS) when too much is outstanding. The daemon checks each
        call whole: on an error nothing of the failing batch is hinted, earlier batches stay.
        """
        if not self._owned():
            return 0
        sent = 0
        with self._lock:
            batch: List[Tuple[str, bytes, int, int]] = []
            used = 0
            for item in hints:
                if isinstance(item, tuple):
                    path, offset, length = item
                else:
                    path, offset, length = item, 0, 0
                where = _text(path)
                if offset < 0 or length < 0:
                    self._fail(make_error(errno.EINVAL, f"negative range {offset}+{length}",
                                          where))
                    continue
                inside, err = self._mapper.daemon_path(where)
                if err:
                    self._fail(make_error(err, "cannot disclose", where))
                    continue
                encoded = os.fsencode(inside)
                if not 0 < len(encoded) <= _abi.PATH_MAX_BYTES:
                    self._fail(make_error(errno.ENAMETOOLONG if encoded else errno.EINVAL,
                                          "cannot disclose", where))
                    continue
                need = _RECORD.size + ((len(encoded) + 7) & ~7)
                if used + need > _abi.PATH_RECORDS_BYTES:
                    sent += self._send_paths(batch)
                    batch, used = [], 0
                batch.append((where, encoded, offset, length))
                used += need
            if batch:
                sent += self._send_paths(batch)
        return sent

    def _send_paths(self, batch: List[Tuple[str, bytes, int, int]]) -> int:
        # REQUIRES: self._lock held.
        while batch:
            buffer = self._paths
            at = _RECORDS_AT
            for _, encoded, offset, length in batch:
                _RECORD.pack_into(buffer, at, offset, length, len(encoded), 0)
                at += _RECORD.size
                padded = (len(encoded) + 7) & ~7
                buffer[at:at + padded] = encoded.ljust(padded, b"\0")
                at += padded
            self._header(buffer, len(batch))
            struct.pack_into("=II", buffer, _abi.HintPaths.bytes.offset, at - _RECORDS_AT, 0)
            err = self._ioctl(_abi.IOC_HINT_PATHS, buffer)
            if err == 0:
                return len(batch)
            culprit = self._culprit(batch, err)
            if culprit is None:
                first = batch[0][0]
                what = (f"cannot disclose a batch of {len(batch)} paths from '{first}' to "
                        f"'{batch[-1][0]}'" if len(batch) > 1 else "cannot disclose")
                self._fail(make_error(err, what, first))
                return 0
            self._fail(make_error(err, "cannot disclose", batch[culprit][0]))
            del batch[culprit]  # strict=False: the rest of the batch was not hinted; again
        return 0

    @staticmethod
    def _culprit(batch: Sequence[Tuple[str, bytes, int, int]], err: int) -> Optional[int]:
        """Which record of a refused batch the daemon most likely refused (None: the batch as a
        whole, for a cap, or when no record shows a problem here)."""
        if err in (errno.EDQUOT, errno.ENOBUFS, errno.ENOTTY, errno.EPROTO, errno.EPERM):
            return None
        for i, (where, _, _, _) in enumerate(batch):
            if _local_problem(where):
                return i
        return 0 if len(batch) == 1 else None

    def disclose_ranges(self, file, segments: Iterable[Tuple[int, int]]) -> int:
        """Discloses byte ranges (offset, length) of an open file in the order they will be
        read (TIPFS_IOC_HINT_FD, 1,020 ranges a call); `file` is a file descriptor or an object
        with fileno(), open for reading, on this stream's mount. Returns the ranges disclosed.

        Raises TipfsError: EBADF (not open for reading), EXDEV (another mount), EISDIR,
        EINVAL (a negative or overflowing range); HintLimitError (EDQUOT, ENOBUFS).
        """
        if not self._owned():
            return 0
        fd = file if isinstance(file, int) else file.fileno()
        where = getattr(file, "name", None)
        where = _text(where) if isinstance(where, (str, bytes)) else f"<fd {fd}>"
        if os.fstat(fd).st_dev != self.mount.device:
            self._fail(make_error(errno.EXDEV, "not on the stream's mount", where))
            return 0
        sent = 0
        with self._lock:
            buffer = self._segments
            count = 0
            for offset, length in segments:
                if offset < 0 or length < 0:
                    self._fail(make_error(errno.EINVAL, f"negative range {offset}+{length}",
                                          where))
                    continue
                _SEGMENT.pack_into(buffer, _SEGMENTS_AT + count * _SEGMENT.size, offset, length)
                count += 1
                if count == _abi.FD_SEGMENTS_MAX:
                    sent += self._send_segments(fd, count, where)
                    count = 0
            if count:
                sent += self._send_segments(fd, count, where)
        return sent

    def _send_segments(self, fd: int, count: int, where: str) -> int:
        self._header(self._segments, count)
        try:
            fcntl.ioctl(fd, _abi.IOC_HINT_FD, self._segments, True)
            return count
        except OSError as e:
            self._fail(make_error(e.errno or errno.EIO, "cannot disclose ranges of", where))
            return 0

    # ---- control -----------------------------------------------------------------------------

    def cancel(self) -> None:
        """Drops everything disclosed on this stream and not yet read (TIPFS_IOC_CANCEL)."""
        self._cancel(0)

    def cancel_all(self) -> None:
        """Drops every hint of every stream of this process on the mount."""
        self._cancel(_abi.CANCEL_ALL)

    def _cancel(self, flags: int) -> None:
        if not self._owned():
            return
        with self._lock:
            request = bytearray(ctypes.sizeof(_abi.Cancel))
            self._header(request, 0)
            _abi.Cancel.from_buffer(request).flags = flags
            err = self._ioctl(_abi.IOC_CANCEL, request)
        if err:
            self._fail(make_error(err, "cannot cancel hints on", self.mount.mountpoint))

    def share(self, enabled: bool = True) -> None:
        """Lets this process's descendants of the same user consume the stream, in any order
        (TIPFS_IOC_SHARE), or stops it. NotOnTipfsError (ENOTTY): the mount is older than
        sharing; EPERM: not this process's stream (after fork, in the child)."""
        if self._fd < 0:
            return
        if os.getpid() != self._pid:
            self._fail(make_error(errno.EPERM, "the stream belongs to the parent process",
                                  self.mount.mountpoint))
            return
        with self._lock:
            request = bytearray(ctypes.sizeof(_abi.Share))
            self._header(request, 0)
            _abi.Share.from_buffer(request).flags = _abi.SHARE_DESCENDANTS if enabled else 0
            err = self._ioctl(_abi.IOC_SHARE, request)
        if err:
            self._fail(make_error(err, "cannot share the hint stream on", self.mount.mountpoint))

    def query(self) -> Dict[str, int]:
        """The stream's state and the mount's cache counters (TIPFS_IOC_QUERY) as a dict:
        stream_hinted_bytes (disclosed, not yet read nor cancelled), stream_segments_pending,
        stream_blocks_consumed, stream_blocks_prefetched, stream_cap_bytes, cache_capacity_bytes,
        cache_block_bytes, demand_hits, demand_misses, readahead_hits, hinted_prefetched,
        hinted_used, hinted_evicted_unused, hinted_cancelled, stall_nanos, prefetch_horizon,
        lru_buffers, hinted_buffers. Empty for an inactive stream."""
        if self._fd < 0:
            return {}
        with self._lock:
            request = bytearray(ctypes.sizeof(_abi.Query))
            self._header(request, 0)
            err = self._ioctl(_abi.IOC_QUERY, request)
        if err:
            self._fail(make_error(err, "cannot query", self.mount.mountpoint))
            return {}
        reply = _abi.Query.from_buffer(request)
        return {name: int(getattr(reply, name)) for name in _abi.QUERY_FIELDS}

    def stats(self) -> Dict[str, object]:
        """Every counter of the mount (its .tipfs/stats.json) as a dict."""
        if self.mount is None:
            return {}
        return stats(self.mount.mountpoint)


# ---- module-level conveniences ----------------------------------------------------------------

_default_streams: Dict[Tuple[int, int], HintStream] = {}
_default_lock = threading.Lock()


def _default_stream(path: str, strict: bool) -> HintStream:
    """The process's own stream on the mount of `path` (one handle per mount and process)."""
    mount = find_mount(path)
    key = (os.getpid(), mount.device)
    with _default_lock:
        stream = _default_streams.get(key)
        if stream is None or not stream.active:
            stream = HintStream(path, strict=strict)
            if stream.active:
                _default_streams[key] = stream
        return stream


def disclose(hints: Iterable[PathHint], *, strict: bool = True) -> int:
    """Discloses future reads by path on the process's own stream of each path's mount (see
    HintStream.disclose for items and errors). Returns the number of items disclosed."""
    sent = 0
    groups: Dict[int, Tuple[str, list]] = {}
    for item in hints:
        where = _text(item[0] if isinstance(item, tuple) else item)
        try:
            device = os.stat(where).st_dev
        except OSError as e:
            error = make_error(e.errno or errno.ENOENT, "cannot disclose", where)
            if strict:
                raise error from None
            warnings.warn(f"{error} (going on without hints)", TipfsWarning, stacklevel=2)
            continue
        groups.setdefault(device, (where, []))[1].append(item)
    for where, items in groups.values():
        try:
            stream = _default_stream(where, strict)
        except OSError as e:
            raise make_error(e.errno or errno.ENOENT, "cannot find the mount of", where) from None
        stream.strict = strict
        sent += stream.disclose(items)
    return sent


def cancel_all(path: PathLike) -> None:
    """Drops every hint of every stream of this process on the mount that holds `path`."""
    with HintStream(path) as stream:
        stream.cancel_all()


def query(path: PathLike) -> Dict[str, int]:
    """HintStream.query() of the process's own stream on the mount that holds `path`."""
    with HintStream(path) as stream:
        return stream.query()


def is_tipfs(path: PathLike) -> bool:
    """True when `path` exists on a tipfs mount."""
    try:
        return find_mount(_text(path)).is_tipfs
    except OSError:
        return False


def stats(path: PathLike) -> Dict[str, object]:
    """Every counter of the mount that holds `path`, from its .tipfs/stats.json."""
    where = _text(path)
    mount = find_mount(where)
    if not mount.is_tipfs:
        raise make_error(errno.ENOTTY, f"not on a tipfs mount (on {mount.fstype})", where)
    with open(os.path.join(mount.mountpoint, ".tipfs", "stats.json"), encoding="utf-8") as f:
        return json.load(f)
