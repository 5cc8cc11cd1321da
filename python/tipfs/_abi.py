"""The hint ABI of include/tipfs/hint.h, mirrored with ctypes (layouts, constants, ioctl numbers).

tests/python/test_abi.py compiles a C program against hint.h and checks every size, offset and
ioctl number here against it, so the two cannot drift apart.
"""

import ctypes

HINT_VERSION = 1

SOURCE_MANUAL = 0
SOURCE_SPECULATIVE = 1
SOURCE_WARMUP = 2
SOURCE_HISTORY = 3
SOURCE_SPECULATIVE_TAINTED = 4

STREAM_SELF = 0
# Stream ids from 2**32 up with nonzero low 32 bits are the caller's own named streams.
NAMED_STREAM_BASE = 1 << 32

FD_SEGMENTS_MAX = 1020
PATH_RECORDS_BYTES = 16000
PATH_MAX_BYTES = 4095

CANCEL_ALL = 1
CANCEL_EPOCH = 2
CANCEL_TAINTED = 4
SHARE_DESCENDANTS = 1

u32 = ctypes.c_uint32
u64 = ctypes.c_uint64


class HintHeader(ctypes.Structure):
    _fields_ = [("version", u32), ("source", u32), ("stream", u64), ("epoch", u32),
                ("count", u32)]


class Segment(ctypes.Structure):
    _fields_ = [("offset", u64), ("length", u64)]


class HintFd(ctypes.Structure):
    _fields_ = [("header", HintHeader), ("segments", Segment * FD_SEGMENTS_MAX)]


class PathRecord(ctypes.Structure):
    _fields_ = [("offset", u64), ("length", u64), ("path_length", u32), ("reserved", u32)]


class HintPaths(ctypes.Structure):
    _fields_ = [("header", HintHeader), ("bytes", u32), ("reserved", u32),
                ("records", ctypes.c_char * PATH_RECORDS_BYTES)]


class Cancel(ctypes.Structure):
    _fields_ = [("header", HintHeader), ("flags", u32), ("reserved", u32)]


QUERY_FIELDS = [
    "stream_hinted_bytes", "stream_segments_pending", "stream_blocks_consumed",
    "stream_blocks_prefetched", "stream_cap_bytes", "cache_capacity_bytes", "cache_block_bytes",
    "demand_hits", "demand_misses", "readahead_hits", "hinted_prefetched", "hinted_used",
    "hinted_evicted_unused", "hinted_cancelled", "stall_nanos", "prefetch_horizon",
    "lru_buffers", "hinted_buffers",
]


class Query(ctypes.Structure):
    _fields_ = ([("header", HintHeader)] + [(name, u64) for name in QUERY_FIELDS]
                + [("process_consumed", u64 * 5), ("stream_exists", u32), ("reserved32", u32),
                   ("reserved", u64 * 2)])


class SpecAttach(ctypes.Structure):
    _fields_ = [("header", HintHeader), ("wait_for_data", u32), ("reserved", u32)]


class Share(ctypes.Structure):
    _fields_ = [("header", HintHeader), ("flags", u32), ("reserved", u32)]


# <asm-generic/ioctl.h>, as on x86-64 and arm64: dir(2 bits) | size(14) | type(8) | nr(8).
_IOC_WRITE = 1
_IOC_READ = 2


def _ioc(direction: int, nr: int, size: int) -> int:
    if size >= 1 << 14:
        raise ValueError(f"ioctl argument of {size} bytes does not fit the size field")
    return (direction << 30) | (size << 16) | (ord("T") << 8) | nr


IOC_HINT_FD = _ioc(_IOC_WRITE, 1, ctypes.sizeof(HintFd))
IOC_HINT_PATHS = _ioc(_IOC_WRITE, 2, ctypes.sizeof(HintPaths))
IOC_CANCEL = _ioc(_IOC_WRITE, 3, ctypes.sizeof(Cancel))
IOC_QUERY = _ioc(_IOC_READ | _IOC_WRITE, 4, ctypes.sizeof(Query))
IOC_SPEC_ATTACH = _ioc(_IOC_WRITE, 5, ctypes.sizeof(SpecAttach))
IOC_SPEC_DETACH = _ioc(_IOC_WRITE, 6, ctypes.sizeof(SpecAttach))
IOC_SHARE = _ioc(_IOC_WRITE, 7, ctypes.sizeof(Share))


def header(source: int = SOURCE_MANUAL, stream: int = STREAM_SELF, epoch: int = 0,
           count: int = 0) -> HintHeader:
    return HintHeader(HINT_VERSION, source, stream, epoch, count)
