"""Where a running server says where it listens: ``server.json`` beside the database. Kept
apart from serve.py, which pulls in the whole server (Streamlit, pandas: 1.5 s), so that the
CLI's `sql` and `export` find the server without importing it."""

from __future__ import annotations

from pathlib import Path


def server_file(db_path: Path) -> Path:
    return Path(db_path).parent / "server.json"
