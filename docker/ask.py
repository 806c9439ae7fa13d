"""The client half of `make image-check`: waits for the container's server, then checks that it
refuses a request without the token, answers /api/health with it, and answers one SQL query on
the seed run it serves. Standard library only: it runs on the host, outside any venv."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

WAIT_S = 120  # first start imports Streamlit and pandas and reads the sample: tens of seconds
SQL = "SELECT run, count(*) AS lines, max(step) AS last_step FROM metrics GROUP BY run"


def ask(url: str, token: str | None, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, {}


def wait_for_health(base: str, token: str) -> dict:
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            status, health = ask(f"{base}/api/health", token)
            if status == 200:
                return health
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"image-check: no answer from {base}/api/health within {WAIT_S} s")
        time.sleep(1)


def wait_for_rows(base: str, token: str) -> list[list]:
    """The sample's lines, once ingest has read them (the server answers before it has)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        status, answer = ask(f"{base}/api/sql", token, {"sql": SQL})
        rows = answer.get("rows", []) if status == 200 else []
        if rows or time.monotonic() > deadline:
            return rows
        time.sleep(1)


def main(base: str, token: str) -> None:
    health = wait_for_health(base, token)
    print(f"image-check: /api/health: {json.dumps(health)[:200]}")
    status, _ = ask(f"{base}/api/health", None)
    if status != 401:
        sys.exit(f"image-check: /api/health without the token answered {status}, not 401")
    rows = wait_for_rows(base, token)
    print(f"image-check: SQL {SQL!r}: {rows}")
    if not rows or int(rows[0][1]) < 100:  # rows are lists in the columns' order
        sys.exit("image-check: the served sample's metrics did not come back from /api/sql")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
