"""The ``server.json`` contract: a running server writes, beside its database, where it
listens; a command believes it only when it can trust it (``reach.py`` reads it)::

    {"pid": 4242, "url": "http://127.0.0.1:8501", "logdir": "/home/me/runs"}

It never holds the token, yet it decides where a query and CLIFFWATCH_TOKEN go, so it counts
only when this user wrote it and nobody else can rewrite it, its URL is an address of this
machine, and its pid still listens on that port: a planted, edited or stale file (a killed
server leaves its own behind) gets neither. Kept apart from serve.py, which pulls in the whole
server (Streamlit, pandas: 1.5 s), so that `sql` and `export` find the server without it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import orjson

log = logging.getLogger("cliffwatch.cli")


@dataclass(frozen=True)
class Written:
    pid: int
    url: str


def server_file(db_path: Path) -> Path:
    return Path(db_path).parent / "server.json"


def write(db_path: Path, payload: dict) -> Path:
    """Whole or not at all, and writable by this user alone whatever the umask: readers
    trust no other server.json (``read``)."""
    info = server_file(db_path)
    partial = info.with_name(info.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.fchmod(fd, 0o644)
        os.write(fd, orjson.dumps(payload))
    finally:
        os.close(fd)
    os.replace(partial, info)
    return info


def remove(db_path: Path) -> None:
    server_file(db_path).unlink(missing_ok=True)


def read(db_path: Path) -> Written | None:
    """The server.json beside ``db_path`` when it can be trusted, else None (with a warning
    saying why, for a file that is there but not believed)."""
    info = server_file(db_path)
    try:
        if not _ours(info):
            return None
        written = orjson.loads(info.read_bytes())
        url, pid = written["url"], written["pid"]
        if not is_local_url(url):
            log.warning("ignoring %s: its URL %r is not an address of this machine", info, url)
            return None
        if not listening(pid, urlsplit(url).port):
            log.warning("ignoring %s: its server (pid %s) is gone or no longer listens there "
                        "(left by a server that was killed?)", info, pid)
            return None
    except (OSError, ValueError, KeyError, TypeError):  # no server.json: the common case
        return None
    return Written(pid, url)


def listening(pid: int, port: int | None) -> bool:
    """True if process ``pid`` is alive and holds the listening socket on ``port``. A killed
    server leaves its server.json behind, and whatever listens on that port later must not
    get our queries and token. Where /proc cannot say (not Linux), a live pid is enough."""
    if type(pid) is not int or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, someone else's: the /proc check below decides
    inodes = _listening_inodes(port)
    if inodes is None:
        return True
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
    return False


def _listening_inodes(port: int | None) -> set[str] | None:
    """``socket:[INODE]`` of every TCP socket listening on ``port``, from /proc/net/tcp{,6};
    None where those files cannot be read."""
    found, read_any = set(), False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        read_any = True
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and port is not None and int(local.rsplit(":", 1)[1], 16) == port:
                found.add(f"socket:[{inode}]")
    return found if read_any else None


def _ours(info: Path) -> bool:
    stat = info.stat()
    if stat.st_uid != os.getuid() or stat.st_mode & 0o022:
        log.warning("ignoring %s: it must belong to you and be writable by you alone", info)
        return False
    return True


def is_local_url(url: str) -> bool:
    """An http URL whose host is localhost or an IP address of this machine. Names other than
    localhost are not resolved: DNS could send them anywhere."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme != "http" or not host:
        return False
    if host == "localhost":
        return True
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return False
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))  # succeeds only for this machine's own addresses
        except OSError:
            return False
    return True
