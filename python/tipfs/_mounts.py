"""Which mount a path is on, and the path the tipfs daemon knows it by.

The daemon resolves hinted paths relative to the root of its file system. A path the program
uses may reach that file system through a bind mount of a subdirectory, or through symbolic
links outside the mount, so the mount is found by device number in /proc/self/mountinfo, whose
fourth field says which directory of the file system is mounted there.
"""

import errno
import os
from dataclasses import dataclass
from typing import Dict, Optional, Tuple, Union

TIPFS_FSTYPE = "fuse.tipfs"


@dataclass(frozen=True)
class Mount:
    mountpoint: str  # where the program sees it
    root: str  # the directory of the file system mounted there ("/" for the whole volume)
    fstype: str
    device: int  # st_dev of files on it

    @property
    def is_tipfs(self) -> bool:
        return self.fstype == TIPFS_FSTYPE


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _mounts_of_device(device: int) -> list:
    found = []
    wanted = f"{os.major(device)}:{os.minor(device)}"
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 7 or fields[2] != wanted:
                continue
            try:
                fstype = fields[fields.index("-", 6) + 1]
            except (ValueError, IndexError):
                continue
            found.append(Mount(_unescape(fields[4]), _unescape(fields[3]), fstype, device))
    return found


def _under(path: str, directory: str) -> bool:
    return directory == "/" or path == directory or path.startswith(directory + "/")


def find_mount(path: str) -> Mount:
    """The mount that holds `path` (which must exist). OSError from stat(2) as raised."""
    device = os.stat(path).st_dev
    real = os.path.realpath(path)
    candidates = [m for m in _mounts_of_device(device) if _under(real, m.mountpoint)]
    if not candidates:
        # Mounted in another namespace, or mountinfo unreadable: nothing to say about it.
        return Mount("/", "/", "unknown", device)
    return max(candidates, key=lambda m: len(m.mountpoint))


class PathMapper:
    """Maps program paths to the daemon's paths for one mount, remembering each directory."""

    def __init__(self, mount: Mount):
        self.mount = mount
        self._dirs: Dict[str, Union[str, int]] = {}  # directory -> daemon path or errno

    def daemon_path(self, path: str) -> Tuple[Optional[str], int]:
        """(path relative to the volume's root, 0), or (None, errno) when `path` is not on this
        mount (EXDEV) or its directory cannot be resolved (the errno of that)."""
        directory, name = os.path.split(os.path.abspath(path))
        inside = self._dirs.get(directory)
        if inside is None:
            inside = self._resolve_dir(directory)
            if len(self._dirs) > 65536:
                self._dirs.clear()
            self._dirs[directory] = inside
        if isinstance(inside, int):
            return None, inside
        if not name:
            return None, errno.EISDIR
        return (inside + "/" + name).lstrip("/"), 0

    def _resolve_dir(self, directory: str) -> Union[str, int]:
        try:
            real = os.path.realpath(directory, strict=True)
            if os.stat(real).st_dev != self.mount.device:
                return errno.EXDEV
        except OSError as e:
            return e.errno or errno.ENOENT
        if not _under(real, self.mount.mountpoint):
            return errno.EXDEV
        rest = real[len(self.mount.mountpoint):] if self.mount.mountpoint != "/" else real
        root = "" if self.mount.root == "/" else self.mount.root
        return root + rest
