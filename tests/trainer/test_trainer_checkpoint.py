"""Checkpoints: async saves are never seen half-written, blocked time, keep K."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from trainer_testlib import events

from trainer.checkpoint import Saver, find_checkpoint, list_checkpoints, load_checkpoint
from trainer.errors import TrainerError


def big_state() -> dict:
    torch.manual_seed(0)
    return {"step": 1, "weights": torch.randn(1_000_000), "nested": {"m": torch.ones(10)}}


def watch(folder, stop: threading.Event, seen: list) -> None:
    """Poll the folder; load every finished-looking file the moment it appears."""
    while not stop.is_set():
        for step, path in list_checkpoints(folder):
            seen.append((step, load_checkpoint(path)["weights"].numel()))
        if (folder / "ckpt").is_dir():
            seen.extend(("tmp", 0) for p in (folder / "ckpt").iterdir() if p.name.endswith(".tmp"))
        time.sleep(0.005)


def test_async_save_is_atomic_loadable_and_barely_blocks(tmp_path):
    log: list[tuple] = []
    saver = Saver(tmp_path, "async", mbps=16.0, keep=2, on_event=lambda *a, **k: log.append((a, k)))
    stop, seen = threading.Event(), []
    poller = threading.Thread(target=watch, args=(tmp_path, stop, seen))
    poller.start()
    state = big_state()
    blocked = saver.save(state, 1)
    state["weights"].zero_()  # the loop goes on changing its tensors: the copy must not care
    saver.wait()
    time.sleep(0.05)
    stop.set()
    poller.join()
    assert ("tmp", 0) in seen  # the poller did watch the write in progress
    assert all(item == (1, 1_000_000) for item in seen if item[0] != "tmp")
    loaded = load_checkpoint(tmp_path / "ckpt" / "step-1.pt")
    assert torch.equal(loaded["weights"], big_state()["weights"])
    end = next(k for a, k in log if a[0] == "checkpoint_end")
    assert end["bytes"] > 4_000_000 and end["duration_s"] >= 0.2  # 4 MB at 16 MB/s
    assert blocked == pytest.approx(end["blocked_s"], abs=1e-3) and blocked < 0.1


def test_blocking_save_blocks_for_its_whole_duration(tmp_path):
    log: list[tuple] = []
    saver = Saver(tmp_path, "blocking", mbps=40.0, keep=2, on_event=lambda *a, **k: log.append(k))
    blocked = saver.save(big_state(), 3)
    end = log[-1]
    assert blocked >= 0.09 and end["blocked_s"] == end["duration_s"]


def test_keep_prunes_old_checkpoints_and_latest_finds_the_newest(tmp_path):
    saver = Saver(tmp_path, "async", mbps=0.0, keep=2, on_event=lambda *a, **k: None)
    for step in (5, 10, 15):
        saver.save({"step": step}, step)
    saver.wait()
    assert [s for s, _ in list_checkpoints(tmp_path)] == [10, 15]
    assert find_checkpoint("latest", tmp_path).name == "step-15.pt"


def test_resume_latest_without_checkpoint_is_a_user_error(tmp_path):
    with pytest.raises(TrainerError, match="no checkpoint"):
        find_checkpoint("latest", tmp_path)


def test_async_run_logs_small_blocked_time(run_tiny):
    run = run_tiny("async", steps=12, ckpt_every=4, ckpt_mode="async", storage_mbps=0.5)
    ends = events(run, "checkpoint_end")
    assert [e["step"] for e in ends] == [4, 8, 12]
    assert all(e["blocked_s"] < e["duration_s"] for e in ends)
    starts = events(run, "checkpoint_start")
    assert all(s["path"] == e["path"] for s, e in zip(starts, ends, strict=True))
