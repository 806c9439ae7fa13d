"""Hugging Face Trainer's ``trainer_state.json``: its ``log_history`` list, one record per
entry::

    {"epoch": 1.0023, "grad_norm": 1.31, "learning_rate": 1.9e-05, "loss": 0.41, "step": 2170}
        -> Record(offset=<the entry's "{">, kind="train", data=<the entry>)
        and, before it, Record(kind="event", data={"event": "epoch_start", "step": 2170,
                                                   "epoch": 1})
    {"epoch": 1.0, "eval_loss": 0.52, "eval_runtime": 31.2, "step": 2165}       -> "eval"
    {"epoch": 4.0, "step": 8660, "train_loss": 0.29, "train_runtime": 20387.7}  -> "summary"
    {"epoch": 1.0, "predict_loss": 0.65, "predict_runtime": 2766.9}             -> "eval"

An entry whose metrics are all ``predict_*`` or ``test_*`` is a prediction or test pass
(``trainer.predict``, Seq2SeqTrainer's ``--do_predict``): an evaluation row. Logged without a
step, it is at the step of the entry before it, where training stood when it ran (issue 19).

Kinds follow keys.kind_of. The fractional ``epoch`` crossing an integer is the start of an
epoch (v1's ``epoch_start``), except where it reaches ``num_train_epochs``: that is the end.
The Trainer saves a checkpoint at every multiple of ``save_steps`` (written after the list):
each multiple the entries pass is a save cliffwatch infers, after the last step logged before
it (issue 19)::

    {"event": "checkpoint_end", "step": 500, "inferred": true,
     "source": "save_steps 500 in trainer_state.json"}

The Trainer rewrites the file whole at every save, and entries are only ever appended to
``log_history``, each written the same way every time. So what was read is remembered as a
``Resume``: where the entries read end, counted from the list's ``[`` (the members before it,
``epoch`` and ``global_step``, change length at every save), and a hash of the bytes before
that point. A rewrite is then read from that point on: a few new entries of a 250 MB file cost
a hash of 4 KiB and the bytes after them, not the whole file (issue 18). When the hash does not
match, or the file is shorter (a new run, one resumed from an older checkpoint), every entry
is read again with ``status="rewritten"``, as a new attempt. Without a ``Resume`` (``parse``,
or a state stored before there was one), ``stored`` entries are skipped and the step of entry
``stored - 1`` checks that the history is the one read.

Reading never builds the whole file: it goes a window of ``WINDOW`` bytes at a time, and
yields the records of one window at a time (one transaction each). A file longer than a
window is first scanned to its end (without normalising an entry), so that nothing of a file
cut mid-save is stored and ``num_train_epochs`` (written after the list) is known. One entry
that cannot be read (5,000 levels deep, a number of 5,000 digits, bytes that are no JSON) is a
problem at its offset and the next entry is read. A file that is not whole JSON (cut
mid-rewrite, or broken) gives ``status="incomplete"`` and the ``reason``: read it again when
it changes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ...keys import EPOCH, SPECIAL, STEP
from ..parse import LONE_SURROGATE, excerpt, first_line, without_surrogates
from . import EVAL, EVENT, SUMMARY, Problem, Record
from .keys import normalise, planned_record

HISTORY = "log_history"
SAVE_STEPS = "save_steps"  # the Trainer saves a checkpoint at every multiple of it
PASSES = ("predict_", "test_")  # the metric prefixes of a prediction or test pass's entry
OK, INCOMPLETE, REWRITTEN, INVALID = "ok", "incomplete", "rewritten", "invalid"
WINDOW = 8 << 20  # bytes decoded at a time: ~50,000 entries, ~60 MB of Python objects
HEAD_WINDOW = 64 << 10  # the members before log_history are a few hundred bytes
HASHED = 4096  # bytes before the resume point whose hash says the history is the one read
MAX_DIGITS = 4000  # Python's int() refuses past 4,300 digits; such a number is an infinity
_SPACE = re.compile(r"[ \t\n\r]*")
_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
# a value's tokens for finding where one that cannot be decoded ends (no recursion)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*(")?|[\[\]{},]', re.S)


def _int(text: str) -> int | float:
    if len(text) <= MAX_DIGITS:
        return int(text)
    return -math.inf if text.startswith("-") else math.inf


_DECODER = json.JSONDecoder(parse_int=_int)  # the stdlib's: it reads the NaN loss written


@dataclass
class Resume:
    """Where the entries read end, kept in ``files.tail`` (as JSON text) between reads."""

    at: int  # bytes from log_history's "[" to the end of the last entry read
    digest: str  # hash of the HASHED bytes before that end (fewer if the list is shorter)
    epoch: object = None  # the epoch of the last entry read that had one
    epochs: object = None  # num_train_epochs, once seen
    step: object = None  # the step of the last entry read: saves inferred after it are new
    save_steps: object = None  # save_steps, once seen

    def text(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def of(cls, text: str | None) -> Resume | None:
        try:
            return cls(**json.loads(text)) if text else None
        except (ValueError, TypeError):
            return None  # not one of ours: the entries are counted instead


@dataclass
class StateRead:
    status: str  # OK, INCOMPLETE (try again when it changes), REWRITTEN (all entries: a new
    #              attempt), or INVALID (no log_history list: not a Trainer state)
    records: list[Record] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    entries: int = 0  # log_history entries read, in all: the next call's ``stored``
    last_step: object = None  # the last entry's step: the next call's ``last_step``
    resume: Resume | None = None  # the next call's ``resume``
    done: bool = True  # the whole file is read (False: more windows follow)
    reason: str = ""  # INCOMPLETE: why (empty for an empty file)
    offset: int = 0  # INCOMPLETE: where the text stops being JSON


class _Truncated(Exception):
    """The text ends inside the document: a file cut, or being written."""


class _Malformed(Exception):
    def __init__(self, offset: int, what: str):
        super().__init__(f"{what} at byte {offset}")
        self.offset = offset


def parse(data: bytes, stored: int = 0, last_step: object = None) -> StateRead:
    """The entries after the first ``stored`` ones of the whole file ``data``, in one
    StateRead (``read`` gives them a window at a time, from a file)."""
    parts = []
    for part in read(lambda offset, size: data[offset:offset + size], len(data), stored,
                     last_step=last_step):
        if part.status in (INCOMPLETE, INVALID):
            return part
        parts.append(part)
    return dataclasses.replace(parts[-1], status=parts[0].status,
                               records=[r for p in parts for r in p.records],
                               problems=[q for p in parts for q in p.problems])


def read(source: Callable[[int, int], bytes], size: int, stored: int = 0,
         resume: Resume | None = None, last_step: object = None,
         window: int = WINDOW, folders_from: int | None = None) -> Iterator[StateRead]:
    """The entries not read yet of a file of ``size`` bytes (``source(offset, size)`` gives
    its bytes), a window at a time; the last StateRead has ``done`` (or is INCOMPLETE or
    INVALID, with no records). ``folders_from``: the lowest step of the checkpoint-N folders
    beside the file; saves from there on are inferred from those folders (with their times,
    app/ingest/saves.py), not from save_steps, so that each save is one event."""
    try:
        top, problems, array = _head(source, size)
    except (_Truncated, _Malformed) as exc:
        yield _incomplete(exc, size)
        return
    if array is None:
        yield StateRead(INVALID, problems=[Problem(0, "error", f"no '{HISTORY}' list: not a "
                                                   "Hugging Face trainer state; skipped",
                                                   excerpt(source(0, 200)))])
        return
    reading = _Reading(source, size, array, top.get("num_train_epochs"), window)
    reading.save_steps, reading.folders_from = top.get(SAVE_STEPS), folders_from
    if resume is not None and stored:
        reading.resume_at(resume, stored)
    else:
        reading.skip = stored
    reading.problems = problems if reading.start == array + 1 and not stored else []
    yield from reading.run(last_step)


def _incomplete(exc: Exception, size: int) -> StateRead:
    if isinstance(exc, _Malformed):
        return StateRead(INCOMPLETE, reason=f"not valid JSON ({exc})", offset=exc.offset)
    return StateRead(INCOMPLETE, reason="incomplete JSON, perhaps a save in progress"
                     if size else "", offset=size)


class _Text:
    """The file's text from a byte offset, one window at a time. Bytes that are not UTF-8
    become surrogate escapes, so every character still maps to its bytes (offsets stay
    exact)."""

    def __init__(self, source, size: int, start: int, window: int):
        self.source, self.size, self.window = source, size, window
        self._load(start, window)

    def _load(self, start: int, length: int) -> None:
        raw = self.source(start, min(length, self.size - start)) if start < self.size else b""
        self.base, self.end = start, start + len(raw)
        self.text, self.ascii = raw.decode("utf-8", "surrogateescape"), raw.isascii()
        self.eof = self.end >= self.size
        self.pos, self.mark = 0, (0, start)  # mark: a (character, byte) pair already counted

    def offset(self, i: int | None = None) -> int:
        """The byte offset of character ``i`` (default: the position)."""
        i = self.pos if i is None else i
        if self.ascii:
            return self.base + i
        char, byte = self.mark if i >= self.mark[0] else (0, self.base)
        byte += len(self.text[char:i].encode("utf-8", "surrogateescape"))
        self.mark = (i, byte)
        return byte

    def more(self) -> None:
        """Load from the position on, at least twice what is left (a value longer than a
        window still ends); _Truncated at the end of the file."""
        if self.eof:
            raise _Truncated
        here = self.offset()
        self._load(here, max(self.window, 2 * (self.end - here)))

    def peek(self) -> str:
        """The next character that is no space; _Truncated at the end of the file."""
        while True:
            self.pos = _SPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return self.text[self.pos]
            self.more()

    def expect(self, chars: str, what: str) -> str:
        char = self.peek()
        if char not in chars:
            raise _Malformed(self.offset(), f"expected {what}")
        self.pos += 1
        return char

    def at_end(self) -> bool:
        try:
            self.peek()
        except _Truncated:
            return True
        return False

    def value(self) -> tuple[object, bool]:
        """The JSON value at the position, and True; or why it cannot be read, and False
        (the position is then past it all the same)."""
        while True:
            if self.pos >= len(self.text) or self.text[self.pos] in " \t\n\r":
                self.peek()
            start = self.begin = self.pos  # in this window: a load moves it
            try:
                value, end = _DECODER.raw_decode(self.text, start)
            except RecursionError:
                why = "nested too deeply"
            except ValueError as exc:
                why = f"invalid JSON ({first_line(exc)})"
            else:
                if end < len(self.text) or self.eof:  # a number may go on in the next window
                    self.pos = end
                    return value, True
                self.more()
                continue
            end = _value_end(self.text, start)
            if end is None:  # it goes past the window
                self.more()
                continue
            self.pos = end
            return why, False


def _value_end(text: str, start: int) -> int | None:
    """Where the value starting at ``start`` ends, by its brackets and strings (no
    recursion, however deep); None when the text ends first."""
    depth = 0
    for match in _TOKEN.finditer(text, start):
        token = match.group()
        if token[0] == '"':
            if match.group(1) is None:
                return None  # a string the text ends in
            if depth == 0:
                return match.end()
        elif token in "[{":
            depth += 1
        elif depth == 0:  # "," "]" "}" after a bare value: it ended before
            return match.start()
        elif token != ",":
            depth -= 1
            if depth == 0:
                return match.end()
    return None


def _head(source, size: int) -> tuple[dict, list[Problem], int | None]:
    """The members before log_history, problems with them, and the byte offset of its "["
    (None: the object ends without it)."""
    text = _Text(source, size, 0, HEAD_WINDOW)
    text.expect("{", "a JSON object")
    top: dict = {}
    problems: list[Problem] = []
    if _members(text, top, problems, first=True):
        return top, problems, text.offset()
    _end(text)
    return top, problems, None


def _members(text: _Text, top: dict, problems: list[Problem], first: bool) -> bool:
    """Read members into ``top`` up to log_history's "[" (True; the position is at it) or to
    the object's "}" (False; past it)."""
    while True:
        if text.peek() == "}":
            text.pos += 1
            return False
        if not first:
            text.expect(",", "',' or '}'")
        first = False
        if text.peek() != '"':
            raise _Malformed(text.offset(), "expected a key")
        at = text.offset()
        key, ok = text.value()
        if not ok:
            raise _Malformed(at, f"a key that cannot be read ({key})")
        text.expect(":", "':'")
        if key == HISTORY and text.peek() == "[":
            return True
        at = text.offset()
        value, ok = text.value()
        if ok:
            top[key] = value
        else:
            problems.append(Problem(at, "warning", f"top-level member "
                                    f"{json.dumps(key)[:40]} not read: {value}; ignored"))


def _end(text: _Text) -> None:
    if not text.at_end():
        raise _Malformed(text.offset(), "text after the object")


class _Reading:
    """One read of the entries not read yet: where it starts, then ``run``."""

    def __init__(self, source, size: int, array: int, epochs: object, window: int):
        self.source, self.size, self.array, self.window = source, size, array, window
        self.start, self.comma, self.skip = array + 1, False, 0  # after "[" by default
        self.status, self.stored, self.epoch, self.epochs = OK, 0, None, epochs
        self.last_end: int | None = None  # where the last entry read ends
        self.last_step: object = None
        self.max_steps: object = None  # the planned total, once seen
        self.save_steps: object = None
        self.folders_from: int | None = None
        self.problems: list[Problem] = []

    def resume_at(self, resume: Resume, stored: int) -> None:
        end = self.array + resume.at
        if resume.at > 1 and end <= self.size and _digest(self.source, self.array,
                                                            end) == resume.digest:
            self.start, self.comma, self.stored, self.epoch = end, True, stored, resume.epoch
            self.last_end = end
            self.epochs = resume.epochs if self.epochs is None else self.epochs
            self.last_step = resume.step
            self.save_steps = resume.save_steps if self.save_steps is None else self.save_steps
        else:  # not the history read: a new run, or one resumed from an older checkpoint
            self.status = REWRITTEN

    def run(self, last_step: object) -> Iterator[StateRead]:
        try:
            if self.size - self.start > self.window:  # scanned first: nothing of a cut file
                self._scan()                          # is stored, and num_train_epochs known
            yield from self._windows(last_step)
        except (_Truncated, _Malformed) as exc:
            yield _incomplete(exc, self.size)

    def _scan(self) -> None:
        text = _Text(self.source, self.size, self.start, self.window)
        for _ in _entries(text, self.comma):
            pass
        self._tail(text)

    def _tail(self, text: _Text) -> None:
        top: dict = {}
        if _members(text, top, [], first=False):
            raise _Malformed(text.offset(), f"a second '{HISTORY}'")
        _end(text)
        self.max_steps = top.get("max_steps", self.max_steps)
        if self.epochs is None:
            self.epochs = top.get("num_train_epochs")
        if top.get(SAVE_STEPS) is not None:
            self.save_steps = top[SAVE_STEPS]

    def _windows(self, last_step: object) -> Iterator[StateRead]:
        text = _Text(self.source, self.size, self.start, self.window)
        batch, begin = [], self.start
        if self.status == REWRITTEN:
            self.last_step = None  # every entry is read again: no save is behind them
        elif last_step is not None or not self.stored:
            self.last_step = last_step  # else where the Resume left it
        for entry in _entries(text, self.comma):
            if self.skip:
                if not self._skipped(entry, last_step):
                    yield from self._again(last_step)
                    return
                continue
            batch.append(entry)
            if entry[3] - begin >= self.window:
                yield self._part(batch, done=False)
                batch, begin = [], entry[3]
        if self.skip:  # fewer entries than were read before
            yield from self._again(last_step)
            return
        self._tail(text)
        yield self._part(batch, done=True)

    def _skipped(self, entry, last_step: object) -> bool:
        """Count an entry read before; False when the history is not the one read."""
        _, value, ok, end, _ = entry
        self.skip, self.stored, self.last_end = self.skip - 1, self.stored + 1, end
        value = _placed(value, self.last_step) if ok else value  # as when it was read
        self._note_epoch(value if ok else None)
        self.last_step = _step_of(value) if ok else None
        return bool(self.skip or last_step is None or self.last_step == last_step)

    def _again(self, last_step: object) -> Iterator[StateRead]:
        self.status, self.skip, self.stored, self.epoch = REWRITTEN, 0, 0, None
        self.last_step = None
        self.start, self.comma, self.last_end = self.array + 1, False, None
        yield from self.run(last_step)

    def _note_epoch(self, entry: object) -> None:
        epoch = entry.get(EPOCH) if isinstance(entry, dict) else None
        if _number(epoch):
            self.epoch = epoch

    def _part(self, batch: list, done: bool) -> StateRead:
        """The records of a window's entries, and where the next read starts."""
        out = StateRead(self.status, problems=self.problems, done=done)
        self.status, self.problems = OK, []
        for offset, value, ok, end, notes in batch:
            self._records(out, offset, value, ok, notes)
            self.last_end, self.last_step = end, _step_of(value) if ok else None
        self.stored += len(batch)
        if done and (end := planned_record(out.records, self.max_steps)):
            out.records.append(end)  # the last entry is at max_steps: training ended
        if self.last_end is not None:
            at = self.last_end - self.array
            out.resume = Resume(at, _digest(self.source, self.array, self.last_end), self.epoch,
                                self.epochs, self.last_step, self.save_steps)
        out.entries, out.last_step = self.stored, self.last_step
        return out

    def _records(self, out: StateRead, offset: int, value: object, ok: bool,
                 notes: list[str]) -> None:
        reason = value if not ok else None
        if ok and isinstance(value, dict):
            try:
                reason = self._entry(out, offset, _placed(value, self.last_step), notes)
                if reason is None:
                    return
            except MemoryError:
                raise
            except Exception as exc:  # the promise: no entry's content stops a file
                reason = f"could not read it ({type(exc).__name__}: {first_line(exc)})"
        elif ok:
            reason = "not an object"
        out.problems.append(Problem(offset, "error", f"{HISTORY} entry: {reason}; skipped",
                                    excerpt(self.source(offset, 200))))

    def _entry(self, out: StateRead, offset: int, entry: dict, notes: list[str]) -> str | None:
        """Records of one entry; or why there are none."""
        result, reason = normalise(entry)
        if result is None:
            return reason
        if notes:
            out.problems.append(Problem(offset, "warning", "; ".join(notes),
                                        excerpt(self.source(offset, 200))))
        epoch = entry.get(EPOCH)
        if _crossed(self.epoch, epoch, self.epochs) and result.kind != SUMMARY:
            out.records.append(Record(offset, EVENT, {"event": "epoch_start",
                                                      STEP: result.data[STEP],
                                                      EPOCH: math.floor(epoch)}))
        self._note_epoch(entry)
        saved = _saved_after(self.last_step, result.data[STEP], self.save_steps)
        if saved is not None and self.folders_from is not None \
                and result.data[STEP] // self.save_steps * self.save_steps >= self.folders_from:
            saved = None  # a checkpoint folder says this save, with its time
        if saved is not None and saved < result.data[STEP] and result.kind != SUMMARY:
            out.records.append(_save(offset, saved, self.save_steps))  # before this entry
        kind = EVAL if _predicted(entry) else result.kind
        out.records.append(Record(offset, kind, result.data))
        if saved == result.data[STEP] and result.kind != SUMMARY:
            out.records.append(_save(offset, saved, self.save_steps))  # after its own line
        return None


def _entries(text: _Text, comma: bool):
    """``(offset, value, ok, end offset, notes)`` of each log_history entry from the position
    (past the "[", or past an entry when ``comma``); the position is past the "]" at the end.
    Lone surrogates (an escape like \\ud800, or bytes that are not UTF-8) are kept as their
    escape text, as in JSONL, with a note: DuckDB stores no such text."""
    while True:
        step = _COMMA.match(text.text, text.pos) if comma else None
        if step and step.end() < len(text.text) and text.text[step.end()] not in "]":
            text.pos = step.end()  # the usual case, in one match: ", {"
        elif text.peek() == "]":
            text.pos += 1
            return
        elif comma:
            text.expect(",", "',' or ']' in log_history")
            if text.peek() == "]":
                raise _Malformed(text.offset(), "',' before ']'")
        comma = True
        at = text.offset()
        value, ok = text.value()
        notes: list[str] = []
        if ok and (text.text.find("\\u", text.begin, text.pos) >= 0 or (not text.ascii
                   and LONE_SURROGATE.search(text.text, text.begin, text.pos))):
            value = without_surrogates(value, notes)
        yield at, value, ok, text.offset(), notes


def _digest(source, array: int, end: int) -> str:
    start = max(array, end - HASHED)
    return hashlib.blake2b(source(start, end - start), digest_size=16).hexdigest()


def _crossed(previous: object, epoch: object, epochs: object) -> bool:
    if not (_number(previous) and _number(epoch)):
        return False
    if _number(epochs) and epoch >= epochs:
        return False  # the last epoch ended: no epoch starts here
    return math.floor(epoch) > math.floor(previous)


def _saved_after(previous: object, step: object, save_steps: object) -> object:
    """The step after which the Trainer saved, when a multiple of ``save_steps`` lies in
    (``previous``, ``step``]: ``step`` itself if it is one (the save follows its log line),
    else ``previous`` (the last step logged before the save); None when no save lies there.
    Several multiples between two logged steps are one save as far as the lines can tell."""
    if not (type(save_steps) is int and save_steps > 0 and type(step) is int):
        return None
    if step % save_steps == 0 and (type(previous) is not int or previous < step):
        return step
    if type(previous) is not int or previous >= step:
        return None
    return previous if step // save_steps > previous // save_steps else None


def _save(offset: int, step: int, save_steps: int) -> Record:
    return Record(offset, EVENT, {"event": "checkpoint_end", STEP: step, "inferred": True,
                                  "source": f"{SAVE_STEPS} {save_steps} in trainer_state.json"})


def _predicted(entry: dict) -> bool:
    """A prediction or test pass: every metric is ``predict_*`` or ``test_*``."""
    metrics = [k for k in entry if k not in SPECIAL]
    return bool(metrics) and all(k.startswith(PASSES) for k in metrics)


def _placed(entry: object, previous: object) -> object:
    """A prediction or test entry logged without a step at ``previous``, the step of the entry
    before it (in place: the step is then the entry's, for the next entry's saves too)."""
    if isinstance(entry, dict) and STEP not in entry and type(previous) is int \
            and _predicted(entry):
        entry[STEP] = previous
    return entry


def _step_of(entry: object) -> object:
    return entry.get(STEP) if isinstance(entry, dict) else None


def _number(value: object) -> bool:
    """A finite number (an integer too big for a double is none: it is no epoch)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
