"""The package's ctypes layouts, constants and ioctl numbers agree with include/tipfs/hint.h.

A C program compiled against the header prints what the C compiler makes of each structure
(size, and each field's offset and size), each ioctl number and each constant; the test compares
that with tipfs._abi. The program is generated from the Python mirror, and the header is parsed
for structures and ioctls the mirror lacks, so neither side can grow alone. No mount needed.
"""

import ctypes
import re
import shutil
import subprocess

import pytest

from conftest import REPO
from tipfs import _abi

HEADER = REPO / "include" / "tipfs" / "hint.h"
STRUCTS = {
    "tipfs_hint_header": _abi.HintHeader, "tipfs_segment": _abi.Segment,
    "tipfs_hint_fd": _abi.HintFd, "tipfs_path_record": _abi.PathRecord,
    "tipfs_hint_paths": _abi.HintPaths, "tipfs_cancel": _abi.Cancel, "tipfs_query": _abi.Query,
    "tipfs_spec_attach": _abi.SpecAttach, "tipfs_share": _abi.Share,
}
CONSTANTS = {
    "TIPFS_HINT_VERSION": _abi.HINT_VERSION, "TIPFS_SOURCE_MANUAL": _abi.SOURCE_MANUAL,
    "TIPFS_SOURCE_SPECULATIVE": _abi.SOURCE_SPECULATIVE,
    "TIPFS_SOURCE_WARMUP": _abi.SOURCE_WARMUP, "TIPFS_SOURCE_HISTORY": _abi.SOURCE_HISTORY,
    "TIPFS_SOURCE_SPECULATIVE_TAINTED": _abi.SOURCE_SPECULATIVE_TAINTED,
    "TIPFS_STREAM_SELF": _abi.STREAM_SELF,
    "TIPFS_FD_SEGMENTS_MAX": _abi.FD_SEGMENTS_MAX,
    "TIPFS_PATH_RECORDS_BYTES": _abi.PATH_RECORDS_BYTES, "TIPFS_CANCEL_ALL": _abi.CANCEL_ALL,
    "TIPFS_CANCEL_EPOCH": _abi.CANCEL_EPOCH, "TIPFS_CANCEL_TAINTED": _abi.CANCEL_TAINTED,
    "TIPFS_SHARE_DESCENDANTS": _abi.SHARE_DESCENDANTS,
}


def ioctls_in_header() -> list:
    return re.findall(r"^#define (TIPFS_IOC_\w+) _IO", HEADER.read_text(), re.M)


def c_program() -> str:
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "tipfs/hint.h"',
             "int main(void) {"]
    for name, cls in STRUCTS.items():
        lines.append(f'  printf("{name} %zu\\n", sizeof(struct {name}));')
        for field, _ in cls._fields_:
            lines.append(f'  printf("{name}.{field} %zu %zu\\n", offsetof(struct {name}, {field}),'
                         f" sizeof(((struct {name} *)0)->{field}));")
    for name in ioctls_in_header():
        lines.append(f'  printf("{name} %lu\\n", (unsigned long){name});')
    for name in CONSTANTS:
        lines.append(f'  printf("{name} %llu\\n", (unsigned long long){name});')
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def c_view(tmp_path_factory) -> dict:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler: setup.sh installs build-essential")
    work = tmp_path_factory.mktemp("abi")
    (work / "abi.c").write_text(c_program())
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", str(REPO / "include"),
                    str(work / "abi.c"), "-o", str(work / "abi")], check=True)
    out = subprocess.run([str(work / "abi")], check=True, capture_output=True, text=True).stdout
    view = {}
    for line in out.splitlines():
        key, *values = line.split()
        view[key] = tuple(int(v) for v in values)
    return view


def test_every_structure_of_the_header_is_mirrored():
    in_header = set(re.findall(r"^struct (tipfs_\w+) \{", HEADER.read_text(), re.M))
    assert in_header == set(STRUCTS)


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_layouts_agree(c_view, name):
    cls = STRUCTS[name]
    assert c_view[name] == (ctypes.sizeof(cls),), f"sizeof(struct {name})"
    for field, _ in cls._fields_:
        python = (getattr(cls, field).offset, getattr(cls, field).size)
        assert c_view[f"{name}.{field}"] == python, f"struct {name}: field {field}"


def test_ioctl_numbers_agree(c_view):
    names = ioctls_in_header()
    assert len(names) >= 7
    for name in names:
        python = getattr(_abi, name[len("TIPFS_"):])
        assert c_view[name] == (python,), f"{name}: C {c_view[name][0]:#x}, Python {python:#x}"


def test_constants_agree(c_view):
    for name, python in CONSTANTS.items():
        assert c_view[name] == (python,), name
    sources = set(re.findall(r"^\s+(TIPFS_SOURCE_\w+) = ", HEADER.read_text(), re.M))
    assert sources <= set(CONSTANTS), "a hint source of hint.h is missing in tipfs._abi"
