"""Private scratch folders, and the sweep that removes those a killed monitor left behind.

A folder is removed only when this tool can prove it made it and that its maker is gone: the
name is one no person would choose, the folder and its marker file are plain (no links) and
belong to this user, and the marker says which process made it, in which boot and pid
namespace, started when. A folder named like ours without that proof is someone else's, and
stays (a user's ``cliffwatch-2024-archive`` once went with the old name-only rule)::

    /dev/shm/.cliffwatch-scratch-4242-9f1c2e7a/            the folder (mode 0700)
    /dev/shm/.cliffwatch-scratch-4242-9f1c2e7a/.cliffwatch-scratch.json
        {"magic": "cliffwatch-scratch/1", "pid": 4242, "started": 81234567,
         "boot": "8d1c...", "pidns": 4026531836, "folder": ".cliffwatch-scratch-4242-9f1c2e7a"}
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

import orjson

log = logging.getLogger("cliffwatch.scratch")

PREFIX = ".cliffwatch-scratch-"
MARKER = ".cliffwatch-scratch.json"
MAGIC = "cliffwatch-scratch/1"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-[a-z0-9_]{8,}")
_MARKER_MAX = 4096


def make(base: Path) -> Path:
    """A new private folder in ``base``, with its marker written before anything else."""
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base))
    fd = os.open(folder / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(orjson.dumps({"magic": MAGIC, "folder": folder.name, **_whoami()}))
    return folder


def sweep(base: Path) -> list[Path]:
    """Remove the scratch folders in ``base`` whose makers are provably gone; returns them."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if _NAME.fullmatch(entry.name) and _abandoned(Path(entry.path)):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(Path(entry.path))
    return removed


def _abandoned(folder: Path) -> bool:
    marker = _marker(folder)
    if marker is None:
        return False  # not provably ours: leave it
    me = _whoami()
    if marker.get("boot") != me["boot"]:
        return True  # made before the last reboot: its process is gone
    if marker.get("pidns") != me["pidns"]:
        return False  # another container sharing /dev/shm: its pids are not ours to judge
    pid = marker.get("pid")
    return isinstance(pid, int) and _start_time(pid) != marker.get("started")


def _marker(folder: Path) -> dict | None:
    """The folder's marker if both are plain, this user's, and the marker names the folder."""
    try:
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return None
        fd = os.open(folder / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        mark = os.fstat(fd)
        if not stat.S_ISREG(mark.st_mode) or mark.st_uid != os.getuid() \
                or mark.st_size > _MARKER_MAX:
            return None
        saved = orjson.loads(os.read(fd, _MARKER_MAX))
    except (OSError, orjson.JSONDecodeError):
        return None
    finally:
        os.close(fd)
    ok = isinstance(saved, dict) and saved.get("magic") == MAGIC \
        and saved.get("folder") == folder.name
    return saved if ok else None


def _whoami() -> dict:
    return {"pid": os.getpid(), "started": _start_time(os.getpid()), "boot": _boot_id(),
            "pidns": _pid_namespace()}


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (None if no such process): a pid
    reused by another process has another start time."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # the command name in parentheses may hold spaces or ')': count from the last ')'
    return int(raw[raw.rindex(b")") + 2:].split()[19])


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _pid_namespace() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
