"""Opening a log file safely: only regular files, only inside the log directory, never blocking.

A FIFO named ``run.json`` would block a plain ``open()`` for ever, a link to ``/dev/zero`` would
be read until memory runs out, and a link to ``/etc/passwd`` would copy a file from outside the
log directory into the database. So a log's path is resolved and checked to be inside the log
directory, then opened one folder at a time from the log directory with ``O_NOFOLLOW`` (a link
swapped in after the check is not followed) and ``O_NONBLOCK``, and the opened descriptor must
be a regular file::

    with open_log(Path("/home/me/runs"), "demo/metrics.jsonl") as log:
        data = log.read(0, 65536)      # os.pread on the checked descriptor

A file that cannot be read raises ``Refused`` with the ``files.state`` to record and a message
that says what to do; a file that is gone raises ``FileNotFoundError``.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
# a folder on the way: O_PATH needs no read permission on it, only search (Linux)
FOLDER = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):  # a verdict on the file, not an error of ours
    """The file exists but is not read: ``state`` goes to ``files.state``."""

    def __init__(self, state: str, severity: str, message: str):
        super().__init__(message)
        self.state, self.severity, self.message = state, severity, message


@dataclass
class LogHandle:
    fd: int
    info: os.stat_result  # fstat of the opened descriptor
    real: Path  # the resolved path that was checked and opened (never opened again by name)

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self.fd, size, offset) if size > 0 else b""

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> LogHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_log(root: Path, rel: str) -> LogHandle:
    """Open ``root / rel`` if it is a regular file whose real path lies inside ``root``
    (``root`` itself already resolved)."""
    path = os.path.join(root, rel)
    real = _resolve(path, rel)
    if not inside(root, real):
        raise Refused("outside", "warning", f"{rel} links outside the log directory; it is "
                      "not read (copy the file into the run folder to monitor it)")
    try:
        fd = _open_beneath(root, Path(real).relative_to(root).parts)
    except PermissionError:
        raise Refused("unreadable", "error", "cannot read the file: permission denied; fix its "
                      "permissions and cliffwatch reads it on the next scan") from None
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        # a part of the path became a link after it was resolved: look again later
        raise FileNotFoundError(path) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise Refused("not_regular", "warning", f"{rel} is not a regular file (a FIFO, device "
                      "or socket); it is not read")
    return LogHandle(fd, info, Path(real))


def _open_beneath(root: Path, parts: tuple[str, ...]) -> int:
    """Open ``root/parts...`` following no link on the way (each part is opened relative to
    the folder before it, with O_NOFOLLOW)."""
    folder = os.open(root, FOLDER & ~os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            inner = os.open(part, FOLDER, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(parts[-1], FLAGS, dir_fd=folder)
    finally:
        os.close(folder)


def _resolve(path: str, rel: str) -> str:
    try:
        return os.path.realpath(path, strict=True)
    except FileNotFoundError:
        raise
    except PermissionError:
        raise Refused("unreadable", "error", "cannot read the file: permission denied; fix its "
                      "permissions and cliffwatch reads it on the next scan") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused("symlink_loop", "warning", f"{rel} is a symlink loop; it is not "
                          "read") from None
        raise


def inside(root: Path, real: str) -> bool:
    return real.startswith(str(root).rstrip("/") + "/")
