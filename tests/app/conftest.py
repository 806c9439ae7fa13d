"""Fixtures shared by the app's tests."""

from __future__ import annotations

import dataclasses

import pytest

from app import settings as settings_mod
from app.ingest.worker import IngestWorker
from app.monitor import Monitor


@pytest.fixture
def live(tmp_path):
    """(logs, monitor): an empty logs folder tailed live by the real watchdog worker. The tick
    is 5 s, so rows that arrive sooner were woken by inotify events, not by polling."""
    logs = tmp_path / "logs"
    logs.mkdir()
    settings = dataclasses.replace(settings_mod.resolve(), scan_interval=0.5, tick_interval=5.0)
    monitor = Monitor.open(logs, settings)
    worker = IngestWorker(monitor.tailer, settings)
    worker.start()
    yield logs, monitor
    worker.stop()
    monitor.close()
