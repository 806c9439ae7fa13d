"""Talking to the running server from the command line: finding it (server.json, trusted
only when this user wrote it and it names this machine), sending the token, reading answers::

    url = server_url(db_path, settings)      # "http://127.0.0.1:8501", or None: no server
    answer(url, lambda: httpx.get(f"{url}/api/alerts", headers=auth_headers(settings)))
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from ..errors import CliffwatchError
from ..lazy import LazyModule
from ..serverfile import server_file

# `ingest --once` asks whether a server holds the folder; only talking to one needs httpx
httpx = LazyModule("httpx")

log = logging.getLogger("cliffwatch.cli")


def server_url(db_path: Path, settings) -> str | None:
    """The URL of a live server holding this database, if any.

    server.json decides where the query (and CLIFFWATCH_TOKEN) goes, so it counts only when
    this user wrote it and nobody else can rewrite it, and only when its URL is an address of
    this machine: a planted or edited file must not send the token elsewhere."""
    info = server_file(db_path)
    try:
        if not _ours(info):
            return None
        written = orjson.loads(info.read_bytes())
        url = written["url"]
        if not is_local_url(url):
            log.warning("ignoring %s: its URL %r is not an address of this machine", info, url)
            return None
        if not listening(written["pid"], urlsplit(url).port):
            log.warning("ignoring %s: its server (pid %s) is gone or no longer listens there "
                        "(left by a server that was killed?)", info, written["pid"])
            return None
    except (OSError, ValueError, KeyError, TypeError):  # no server.json: no httpx import
        return None
    try:
        httpx.get(f"{url}/api/health", headers=auth_headers(settings), timeout=2.0)
    except httpx.HTTPError:
        return None
    return url


def refuse_if_served(logdir: Path, db: Path | None, settings, command: str) -> None:
    """A second ``serve`` or ``ingest`` on a folder a server holds would wait for the database
    and fail 15 s later with a traceback: say at once where the folder is served."""
    from ..command import COMMAND
    from ..monitor import default_db

    db_path = Path(db or default_db(Path(logdir).resolve())).resolve()
    url = server_url(db_path, settings)
    if url is None:
        return
    then = ("open that address, or stop that server (Ctrl-C where it runs) before serving the "
            "folder again" if command == "serve" else
            f"that server reads the logs already: ask it with `{COMMAND} sql --logdir "
            f"{logdir} ...`, or stop it (Ctrl-C where it runs) before running `{command}`")
    raise CliffwatchError(f"{logdir} is already served by cliffwatch at {url} (database "
                          f"{db_path}); {then}")


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


def auth_headers(settings) -> dict[str, str]:
    token = getattr(settings, "token", "")
    return {"Authorization": f"Bearer {token}"} if token else {}


def answer(url: str, send) -> dict:
    try:
        response = send()
    except httpx.HTTPError as exc:
        raise CliffwatchError(f"the server at {url} did not answer ({exc})") from None
    return answer_json(url, response)


def answer_json(url: str, response: httpx.Response) -> dict:
    """The JSON body of a 200 answer; any other answer as a CliffwatchError."""
    try:
        payload = response.json()
    except ValueError:
        payload = {}
    if response.status_code == 200 and isinstance(payload, dict):
        return payload
    message = payload.get("error") if isinstance(payload, dict) else None
    if response.status_code == 401:
        message = (f"the server at {url} needs its token: set CLIFFWATCH_TOKEN (or "
                   "--token-file) to the one it was started with or printed at start-up")
    raise CliffwatchError(message or f"the server at {url} answered {response.status_code}")
