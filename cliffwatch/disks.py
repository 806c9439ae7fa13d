"""Which disk holds a folder, by the name psutil's per-disk counters give it.

    >>> disk_of(Path("runs/demo"), psutil.disk_io_counters(perdisk=True))
    'nvme0n1'

A folder's `st_dev` names its block device (`/sys/dev/block/MAJ:MIN`); a partition
(`nvme0n1p2`) is counted as its disk (`nvme0n1`), since a stall's writes are the disk's to
carry. A filesystem with no device number of its own (btrfs, ZFS, overlay) is looked up by its
mount's source in `/proc/self/mountinfo`. A folder whose disk cannot be told (tmpfs, NFS, not
Linux) reads `ALL`: the sampler then records the totals of every disk.
"""

from __future__ import annotations

import os
import re
from collections.abc import Container
from pathlib import Path

ALL = "all"
SYS_BLOCK = Path("/sys/dev/block")
MOUNTINFO = Path("/proc/self/mountinfo")


def disk_of(folder: Path, names: Container[str]) -> str:
    """The name in ``names`` (psutil's per-disk counters) of the disk holding ``folder``."""
    folder = existing(Path(folder).absolute())
    candidates = [sysfs_disk(os.stat(folder).st_dev), mount_disk(folder)]
    for name in candidates:
        if name and name in names:
            return name
    return ALL


def existing(folder: Path) -> Path:
    """``folder``, or its nearest ancestor that exists (the run folder may not be made yet)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def sysfs_disk(dev: int) -> str | None:
    """The disk of device number ``dev``: ``/sys/dev/block/259:2`` -> ``nvme0n1``."""
    if os.major(dev) == 0:  # an anonymous device (btrfs, overlay, tmpfs): no block device
        return None
    node = SYS_BLOCK / f"{os.major(dev)}:{os.minor(dev)}"
    try:
        real = node.resolve(strict=True)
    except OSError:
        return None
    if (real / "partition").exists():
        real = real.parent
    return real.name.replace("!", "/")  # sysfs writes cciss/c0d0 as cciss!c0d0


def mount_disk(folder: Path) -> str | None:
    """The disk of the mount holding ``folder``, from its source (``/dev/nvme0n1p2``)."""
    try:
        text = MOUNTINFO.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    source = mount_source(os.path.realpath(folder), text)
    if not source or not source.startswith("/dev/"):
        return None
    try:
        return sysfs_disk(os.stat(source).st_rdev)
    except OSError:
        return None


def mount_source(path: str, mountinfo: str) -> str | None:
    """The source device of the mount that ``path`` lies in (the last one mounted wins)."""
    best, best_len = None, -1
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        point = unescape(fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best_len:
            after = line.split(" - ", 1)[1].split()
            best, best_len = (unescape(after[1]) if len(after) > 1 else None), len(point)
    return best


def unescape(field: str) -> str:
    """mountinfo writes a space as ``\\040`` (octal escapes for space, tab, newline, ``\\``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)
