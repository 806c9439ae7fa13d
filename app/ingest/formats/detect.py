"""Which format a file is, from its name and first bytes, and which of two logs of one run a
folder's reader takes::

    detect("trainer_log.jsonl", b'{"current_steps": 10, "loss": 2.49}\\n')  -> ("jsonl", ...)
    detect("main.log", b"s:0 tel:11.0095\\n")                              -> ("text", ...)
    detect("train.log", b"iter 100: loss 4.2100, time 35.21ms\\n")          -> ("text", ...)
    detect("notes.txt", b"remember the milk\\n")  -> ("pending", "not a log yet: ...")
    detect("train.log", b"version https://git-lfs.github.com/spec/v1\\noid sha256:4d7a...\\n"
                        b"size 81234\\n")
        -> ("pending", "not a log yet: a Git LFS pointer (81,234 bytes of log not fetched): ...")
    choose(["trainer_log.jsonl", "trainer_state.json"])
        -> (["trainer_state.json"], [("trainer_log.jsonl", "trainer_state.json holds ...")])

Our own v1 names (``metrics.jsonl``, ``events.jsonl``, ``rank{N}.jsonl``, ``run.json``, and
the sampler's ``system.jsonl``, never a metrics log) keep their meaning whatever they hold.
``PENDING``: the bytes cannot tell yet (an empty file, no complete line): ask again when the
file has grown. ``None``: not a log, with the reason to
show once. docs/formats.md has the rules as a table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...keys import EVENT
from ...lazy import LazyModule
from ..parse import BOM, decode
from . import csvlog, llmc, system, textlog
from .keymap import KeyMap
from .keys import STEP_ALIASES

METRICS, EVENTS, RANK, RUN_META = "metrics", "events", "rank", "run_meta"  # v1 (scan.py's)
SYSTEM = system.KIND  # system.jsonl: the sampler's, stored in system_samples (formats/system.py)
JSONL, HF_STATE, TFEVENTS, TEXT, CSV = "jsonl", "hf_state", "tfevents", "text", "csv"
LLMC = "llmc"  # what text logs were called when only llm.c's were read: files stored so
FOREIGN = frozenset({JSONL, HF_STATE, TFEVENTS, TEXT, LLMC, CSV})  # formats that are not v1
TEXT_SUFFIXES = (".log", ".txt", ".out")  # tee'd stdout, records, SLURM's slurm-<job>.out
PENDING = "pending"
# its framing is numpy's: only a folder holding an event file imports it (app/lazy.py)
tfrecord = LazyModule("app.ingest.formats.tfrecord")
NOT_YET = "not a log yet"  # PENDING's reason for a text file with no log line so far
V1_NAMES = {"metrics.jsonl": METRICS, "events.jsonl": EVENTS, "run.json": RUN_META,
            system.NAME: SYSTEM}
RANK_FILE = re.compile(r"rank(\d+)\.jsonl")
HF_STATE_NAME = "trainer_state.json"
TFEVENTS_PREFIX = "events.out.tfevents."
NOT_A_NAME = ("not a log: not a name read (*.jsonl, trainer_state.json, events.out.tfevents.*, "
              "text logs *.log, *.txt, *.out, Lightning's metrics.csv)")
NOT_JSON = "not a log: a JSON file other than run.json and trainer_state.json"
SNIFF_LINES = 20  # complete lines looked at
SNIFF_BYTES = 64 * 1024  # pass at least this much (or the whole file) as ``head``
# a text log may open with hundreds of lines of config, source or shell trace (Megatron's
# first iteration line is at ~100 KiB): its sample is larger, and a file shorter than it
# with no log line yet is decided again as it grows
TEXT_SNIFF_BYTES = 1024 * 1024


# A clone without `git lfs` leaves each large file as its pointer (the spec:
# https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md): "version", then "key value"
# lines sorted by key ("ext-N-name" ones, then "oid sha256:<64 hex>", then "size <bytes>":
# nothing after it), the whole file under 1024 bytes
LFS_POINTER = re.compile(rb"version https://git-lfs\.github\.com/spec/v1\n"
                         rb"(?:ext-\d-[a-z0-9.-]+ [^\n]*\n)*oid sha256:[0-9a-f]{64}\n"
                         rb"size (\d+)\n?")
LFS_MAX = 1024


def lfs_pointer(head: bytes) -> int | None:
    """The size of the file a Git LFS pointer stands for, or None for any other bytes."""
    found = LFS_POINTER.fullmatch(head) if len(head) < LFS_MAX else None
    return int(found.group(1)) if found else None


def by_name(name: str) -> str | None:
    """The format a file name points to (JSONL and llm.c are then checked on the bytes)."""
    if name in V1_NAMES:
        return V1_NAMES[name]
    if RANK_FILE.fullmatch(name):
        return RANK
    if name == HF_STATE_NAME:
        return HF_STATE
    if name.startswith(TFEVENTS_PREFIX):
        return TFEVENTS
    if name.endswith(".jsonl"):
        return JSONL
    if name.endswith(TEXT_SUFFIXES):
        return TEXT
    if name in csvlog.NAMES:
        return CSV
    return None


def sniff_bytes(name: str) -> int:
    """How many first bytes ``detect`` is to be given for a file of this name."""
    return TEXT_SNIFF_BYTES if by_name(name) == TEXT else SNIFF_BYTES


# the Trainer's save folders (output_dir/checkpoint-500): the trainer_state.json copied into
# each is a state of the output folder's run (scan.py), the newest read (saves.take_over)
CHECKPOINT = re.compile(r"checkpoint-\d+")


def detect(name: str, head: bytes, keymap: KeyMap | None = None, before: int = 0
           ) -> tuple[str | None, str]:
    """``(format, what it is)``, ``(PENDING, why)`` or ``(None, "not a log: ...")``;
    ``head``: the file's first ``sniff_bytes(name)`` (or all of it); ``keymap``: the run's extra
    key mappings (its step key counts as step-like). ``before``: for a text log, the bytes
    before ``head`` (whole lines) already found to hold no log line: ``head`` goes on from
    there, so a growing file is not read from its start at every look."""
    fmt = by_name(name)
    if fmt is None:
        return None, NOT_JSON if name.endswith(".json") else NOT_A_NAME
    if fmt in (METRICS, EVENTS, RANK, RUN_META, SYSTEM):
        return fmt, "log format v1"
    if not before and (size := lfs_pointer(head)) is not None:
        # PENDING: `git lfs pull` replaces it with the log, which is then read
        return PENDING, (f"{NOT_YET}: a Git LFS pointer ({size:,} bytes of log not fetched): "
                         "run `git lfs pull` in its repository")
    if fmt == HF_STATE:
        if not head.strip():
            return PENDING, "empty so far"
        if not head.removeprefix(BOM).lstrip().startswith(b"{"):
            return None, "not a log: trainer_state.json that is not a JSON object"
        return fmt, "Hugging Face Trainer state"
    if fmt == CSV:
        found = csvlog.sniff(head)
        if found is None:
            return PENDING, "no complete header line yet"
        if not found:
            return None, "not a log: metrics.csv whose header names no step column"
        return fmt, "Lightning CSVLogger metrics"
    if fmt == TFEVENTS:
        if len(head) < tfrecord.HEADER:
            return PENDING, "no whole record header yet"
        if not tfrecord.header_ok(head):
            return None, "not a log: the first record's checksum does not match (not TFRecord)"
        return fmt, "TensorBoard event file"
    return _sniff_lines(fmt, head, keymap or KeyMap(), before)


def _sniff_lines(fmt: str, head: bytes, keymap: KeyMap, before: int = 0
                 ) -> tuple[str | None, str]:
    lines = head.removeprefix(BOM).split(b"\n")[:-1][:SNIFF_LINES]
    if not lines:
        sample = TEXT_SNIFF_BYTES if fmt == TEXT else SNIFF_BYTES  # tqdm's \r redraws: long
        if before + len(head) >= sample:
            return None, f"not a log: no line end in its first {sample // 1024} KiB"
        return PENDING, "no complete line yet"
    if fmt == TEXT:
        return _sniff_text(head, keymap, before)
    steps = (keymap.step, *STEP_ALIASES) if keymap.step else STEP_ALIASES
    if any(_has_step(line, keymap, steps) for line in lines):
        return fmt, "JSONL log"
    return None, (f"not a log: none of its first {len(lines)} line(s) is a JSON object with a "
                  f"step-like key ({', '.join(steps)})")


def _sniff_text(head: bytes, keymap: KeyMap, before: int = 0) -> tuple[str | None, str]:
    """A text log once a line of its sample reads as a row (a step-like key and a number);
    none in a sample shorter than ``TEXT_SNIFF_BYTES`` (the whole file so far): not yet."""
    if llmc.sniff(head):
        return TEXT, "llm.c log"
    if textlog.sniff(head[:max(0, TEXT_SNIFF_BYTES - before)], keymap):
        return TEXT, "text log"
    why = (f"no line with a step-like key ({', '.join(sorted(textlog.STEP_KEYS))}) and a "
           "number, and no printed metrics dict")
    if before + len(head) >= TEXT_SNIFF_BYTES:
        return None, f"not a log: {why} in its first {TEXT_SNIFF_BYTES >> 20} MiB"
    return PENDING, f"{NOT_YET}: {why}; looked at again as it grows"


def _has_step(line: bytes, keymap: KeyMap, steps: tuple[str, ...]) -> bool:
    try:
        obj, _ = decode(line.removesuffix(b"\r"))
    except ValueError:
        return False
    if not isinstance(obj, dict):
        return False
    obj = keymap.lifted(obj)
    return EVENT in obj or any(k in obj for k in steps)


# (winner, losers, why): a folder holding the winner does not read the losers, which hold the
# same run. None as losers: every log that is not v1.
DUPLICATES = (
    ("metrics.jsonl", None, "the run writes log format v1 (metrics.jsonl) for the monitor; "
     "{loser} would repeat its rows"),
    (HF_STATE_NAME, {"trainer_log.jsonl"}, "trainer_state.json holds the Trainer's whole "
     "log_history (grad_norm, eval entries, the final summary); LLaMA-Factory's {loser} "
     "repeats its training entries"),
)

# losers whose lines carry a time field the winner's lack (LLaMA-Factory's elapsed_time; the
# Trainer's log_history has none): not reading them leaves stalls unjudged (diagnose/coverage)
TIMED_REPEATS = frozenset({"trainer_log.jsonl"})


def choose(names: Iterable[str], current: Iterable[str] = ()
           ) -> tuple[list[str], list[tuple[str, str]]]:
    """Of the log names in one folder, ``(names to read, [(name skipped, why)])``. A name in
    ``current`` (already being read for this run) keeps being read: the rival that appears
    later is skipped instead, so a run never switches source halfway (LLaMA-Factory writes
    trainer_state.json only when training ends)."""
    names, current = sorted(set(names)), set(current)
    skipped: dict[str, str] = {}
    for winner, losers, why in DUPLICATES:
        if winner not in names or winner in skipped:
            continue
        for loser in names:
            if loser == winner or loser in skipped or not (
                    loser in losers if losers else by_name(loser) in FOREIGN):
                continue
            if loser in current and winner not in current:
                skipped[winner] = (f"{loser} is already read for this run; {winner} would "
                                   "repeat it")
                break
            skipped[loser] = why.format(loser=loser)
    return [n for n in names if n not in skipped], sorted(skipped.items())
