"""Readers for other trainers' logs: each turns a file's bytes into log format v1 dicts
(docs/log-format.md), so that the ingest paths store them like our own trainer's lines. Pure
code: no database, no ingest state (what was read before is passed in). docs/formats.md lists
what is read and how keys are mapped.

Every reader returns ``Record``s and ``Problem``s (app/ingest/parse.py). An llm.c line
``s:8715 trl:3.5416 lr:0.000370 norm:4.29`` at byte 348772 of the real GPT-2 log becomes::

    Record(offset=348772, kind="train",
           data={"step": 8715, "loss": 3.5416, "lr": 0.00037, "grad_norm": 4.29})

Modules, one per format: ``keys`` (any JSONL dict: aliases, nesting, kinds), ``jsonl`` (a
JSONL file's complete lines), ``textlog`` (text logs of any trainer: stdout, SLURM ``.out``,
records), ``llmc`` (llm.c ``main.log``, one of textlog's shapes), ``hf_state`` (Hugging Face
``trainer_state.json``), ``tfrecord`` and ``tfevents`` (TensorBoard event files), ``detect``
(which format a file is, and which of two logs of one run is read).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..parse import Problem

__all__ = ["EVAL", "EVENT", "KINDS", "SUMMARY", "TRAIN", "Problem", "Record"]

TRAIN = "train"  # a per-step training row: the line the time-gap and spike analysis read
EVAL = "eval"  # validation or evaluation metrics, kept apart from the training line
SUMMARY = "summary"  # an end-of-run or per-epoch summary row
EVENT = "event"  # a v1 event dict (it has "event"), e.g. an epoch_start a summary implies
KINDS = (TRAIN, EVAL, SUMMARY, EVENT)


@dataclass
class Record:
    offset: int  # byte offset in the file of the line, record or entry it came from
    kind: str  # one of KINDS
    data: dict  # a v1 dict: {"step": int, "elapsed_s"|"time": float, "epoch": ..., metric: ...}
