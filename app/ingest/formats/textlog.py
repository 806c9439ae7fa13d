"""Text logs as people have them (``python train.py | tee train.log``, a SLURM ``.out``, a
record ``.txt``), read by one set of rules, not a regex per trainer. A line such as::

    [rank0]:[titan] 2026-05-10 20:47:31,851 - root - INFO - step: 6501  loss:  2.22753  tps: 1,815

becomes ``Record(offset, "train", {"step": 6501, "loss": 2.22753, "tps": 1815.0,
"time": 1778446051.851})``. Every shape is data, in the tables below:

- ``SKIP``: what is no log line (tqdm redraws). ``ANSI``: colour and cursor codes, removed.
  ``PREFIXES``: logging prefixes, removed (a date in one becomes the row's ``time``);
- ``PAIR``: ``key:value``, ``key=value``, ``key value`` (a key of several words too, such as
  Megatron's ``lm loss``), in a line or in ``|``-separated fields; a field that gives its
  value first (llm.c's ``| 3788.44 ms |``, ``| 42.1% bf16 MFU |``) is ``VALUE_FIRST``, named by
  its words or by its unit (``UNIT_KEYS``). Numbers may hold thousands separators
  (``1,825``), an exponent (``7.9E+00``), a unit (``UNITS``: ``ms``, ``%``, ``GiB``...) or a
  multiplier (``134k``). ``N/M`` after a step key: step N of a planned M;
- ``STEP_KEYS``: a line is a row only with one of them holding an integer, and one number
  more. ``EVAL_STEP``: a phrase that gives the step of a validation line
  (``validation loss at iteration 100``);
- ``ALIASES``: key names as the monitor's globs look for them (``lm loss`` -> ``loss``,
  ``grad norm`` -> ``grad_norm``), ``EVAL_ALIASES`` the same on a validation line;
- a line with a validation key (``val_loss``, ``val loss``, ``eval_*``) goes to ``evals``
  whole, the train loss a nanoGPT eval line also holds included (it is an estimate over
  ``eval_iters`` batches at that step, not a training step's loss);
- ``SHAPES``: whole-line forms with rules of their own: llm.c's ``main.log`` (``s:N trl:X``,
  llmc.py's pattern and names), where the bare ``s`` is a step key only there;
- a printed Python dict (``{'loss': 2.1, 'epoch': 0.1}``, the Hugging Face Trainer's stdout;
  ``{'loss': '3.914'}`` as transformers 5 prints it) is read by ``ast.literal_eval``, at most
  ``DICT_MAX`` bytes and ``DICT_DEPTH`` levels, then by keys.py's rules (``eval_*`` dicts are
  ``eval``, ``train_runtime`` a ``summary``). Such a dict has no step: a training dict's step
  is its ordinal in the file (the file's last step stored so far, ``after``, plus one), an
  eval or summary dict takes the step of the training dict before it;
- a training line whose step reaches its planned total (``step 6200/6200``) also gives a
  ``summary`` row at that step: the log's end of training (run_status reads it);
- a line that says a checkpoint was saved or loaded in words (torchtitan's ``Finished saving
  the checkpoint ... in 17.46 seconds``, Megatron's ``saving checkpoint at iteration 50``) is
  an ``event`` record by textevents.py's table, at the step it names or the last training
  step before it: never a row, and never what makes a file a log (``sniff`` counts rows).

Each ``\\r``-separated piece of a line is read on its own (tqdm redraws put a printed dict at
the end of a line of bars), its record at the piece's own offset. Lines of no shape (banners,
config dumps, pasted source, nvidia-smi tables) are skipped without a word: they are no error.
"""

from __future__ import annotations

import ast
import math
import re

from ...keys import BUCKETS, ELAPSED_S, EPOCH, STEP, TIME
from ...keys import EVENT as EVENT_KEY
from ..parse import excerpt
from . import EVAL, EVENT, SUMMARY, TRAIN, Problem, Record, llmc, textevents
from .keymap import KeyMap
from .keys import normalise, unix_time

# not "steps": DeepSpeed's "steps: 2 loss: ..." repeats the step its Megatron line gives, and
# "Steps 1-50: Energy=..." or "STEPS=7000" are ranges and settings
STEP_KEYS = frozenset({"step", "iter", "iteration", "it", "global_step", "current_step",
                       "current_steps", "num_updates"})  # fairseq counts updates
# fields that say what a line is: fairseq's "| valid | epoch 001 | ..." is validation, its
# "| train | epoch 001 | ..." the epoch's summary (at the step of its last update: as a
# training row it would repeat that step, a resume)
LINE_KINDS = ((re.compile(r"\|\s*(?:valid|validation|eval|test)\s*\|"), EVAL),
              (re.compile(r"\|\s*train\s*\|\s*epoch\b"), SUMMARY))
STEP_QUALIFIERS = frozenset({"train", "training", "global", "optimizer"})
EVAL_STEP = re.compile(r"(?:validation|valid|val|eval\w*|test)\b.* at (?:iteration|iter|step)",
                       re.IGNORECASE)
# names as the monitor's globs look for them; Megatron's "loss scale" is the fp16 scaler,
# which the loss glob *loss* must not watch
ALIASES = {"lm_loss": "loss", "trl": "loss", "norm": "grad_norm", "gnorm": "grad_norm",
           "grad_norm_total": "grad_norm", "gradient_norm": "grad_norm",
           "learning_rate": "lr", "loss_scale": "grad_scale", "tok/s": "tok_per_sec",
           "tokens_per_second": "tok_per_sec"}
EVAL_ALIASES = {"lm_loss_value": "val_loss", "lm_loss_ppl": "val_ppl", "loss": "val_loss"}
LONE_EVAL = re.compile(r"(?:val|valid|validation|eval|test)_(?:loss|acc\w*|ppl|perplexity)")
EVAL_WORD = re.compile(r"(?:val|valid|validation|eval|test)(?:_|$)")
UNITS = ("tok/s", "tokens/s", "it/s", "s/it", "TFLOP/s", "ms", "us", "µs", "sec", "s", "min",
         "h", "%", "GiB", "MiB", "KiB", "GB", "MB", "KB")
UNIT_KEYS = {"ms": "dt_ms", "s": "dt_s", "sec": "dt_s", "tok/s": "tok_per_sec",
             "tokens/s": "tok_per_sec", "it/s": "it_per_sec", "s/it": "sec_per_it"}
MULTIPLIERS = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9}
_NUMBER = (r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
           r"|[-+]?(?:nan|inf)(?![a-z])|[-+]?(?:nan|inf)(?=ms\b|s\b)")
_UNIT = "|".join(re.escape(u) for u in UNITS)
_VALUE = (rf"(?P<num>{_NUMBER})(?:\s*/\s*(?P<total>\d+))?(?P<mult>[kKMB](?![A-Za-z]))?"
          rf"(?:\s?(?P<unit>{_UNIT})(?![\w/]))?(?=$|[\s,;:|()\]])")
# bounded (6 words of 40 characters, starting a word) so that a line of a megabyte costs
# linear time: unbounded, a long line of words with no number backtracks quadratically
_WORD = r"[A-Za-z_][\w./-]{0,40}"
_KEY = rf"(?<![\w./-]){_WORD}(?: {_WORD}){{0,5}}"
PAIR = re.compile(rf"(?P<key>{_KEY})(?:\s*\((?P<kunit>[^()]{{1,12}})\))?"
                  rf"(?:\s*[:=]\s*|\s+){_VALUE}")
VALUE_FIRST = re.compile(rf"\s*{_VALUE}\s*(?P<words>{_KEY})?\s*")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SKIP = (re.compile(r"\d+%\|[^|]{0,200}\|\s*\d+/\d+ \["),)  # a tqdm bar: no measurement
_TIME = r"(?P<time>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
_LEVEL = r"(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)"
PREFIXES = (
    re.compile(r"\[rank\d+\]:\s*"),  # torchrun's per-rank prefix
    re.compile(r"\[\w{3} \w{3} +\d+ \d\d:\d\d:\d\d[^\]]{0,20}\]\s*"),  # date(1) in a wrapper
    re.compile(r"\[[\w.-]{1,20}\]\s+(?=\d{4}-)"),  # torchtitan's [titan] before its date
    re.compile(rf"\[{_LEVEL}\|[^\]]*\]\s*"),  # transformers' [INFO|trainer.py:1793]
    re.compile(rf"\[?{_TIME}\]?(?:\s*-\s*[\w.]+\s*-\s*{_LEVEL}\s*-|\s+{_LEVEL}:?|\s*>>"
               rf"|\s*\|\s*{_LEVEL}\s*\|)?\s*"),  # fairseq's "2023-06-13 17:31:08 | INFO | "
    re.compile(rf"{_LEVEL}(?::\s*|\s+-\s+|\s+)"),
)
SHAPES = ((re.compile(rb"s:(\d+)((?:[ \t]+[^\s:]+:\S+)+)[ \t]*"), llmc.NAMES,
           llmc.EVAL_FIELDS),)
RESERVED = frozenset({TIME, ELAPSED_S, BUCKETS, EVENT_KEY})  # v1's own keys: renamed
PROSE_WORD = re.compile(r"[A-Za-z]{2,}")
PROSE_WORDS = 3  # words beyond a line's pairs that it may hold and still be a log line
# a cheap test first: a piece that could hold a row has one of these (a step key, a printed
# dict, a validation value); the rest of a log (tracebacks, banners) costs one search
_STEP_WORDS = "|".join(sorted(STEP_KEYS))
CANDIDATE = re.compile(rf"(?i)\b(?:{_STEP_WORDS})\b|\{{|val|eval|test")
DICT_MAX = 16 * 1024
# a step-less printed dict is the Trainer's (Python's repr, single quotes) with one of these
DICT_METRIC = re.compile(r"loss|_runtime$|^learning_rate$|^grad_norm$|^eval_")
DICT_DEPTH = 4


def parse(data: bytes, base: int, keymap: KeyMap | None = None, after: int | None = None
          ) -> tuple[list[Record], list[Problem]]:
    """Records of the complete lines in ``data`` (``base``: its file offset; a trailing
    piece with no ``\\n`` is left for later). ``after``: the file's last training step stored
    so far, which printed dicts with no step count on from."""
    records: list[Record] = []
    problems: list[Problem] = []
    counter = [after]  # the last training step seen: None before the first
    said = textevents.Said()  # the event the lines since the last training line began
    pos = 0
    for raw in data.split(b"\n")[:-1]:
        offset, pos = base + pos, pos + len(raw) + 1
        piece_at = 0
        for piece in raw.split(b"\r"):
            at, piece_at = offset + piece_at, piece_at + len(piece) + 1
            if piece.strip():
                found = _piece(piece, at, counter, keymap, problems, said)
                if found and any(r.kind == TRAIN for r in found):
                    said.end()
                records += found
    return records, problems


def _piece(piece: bytes, offset: int, counter: list[int], keymap: KeyMap | None,
           problems: list[Problem], said: textevents.Said) -> list[Record]:
    for pattern, names, eval_fields in SHAPES:
        match = pattern.fullmatch(piece)
        if match:
            return _shape(match, names, eval_fields, offset, piece, problems)
    text = ANSI.sub("", piece.decode("utf-8", "replace"))
    if textevents.MENTION.search(text):  # a save or resume said in words (textevents.py)
        line, when = _unprefixed(text)
        event = textevents.read(line, when, offset, counter[0], said)
        if event is not None:
            return event
    if not CANDIDATE.search(text) and not (
            keymap is not None and keymap.step and keymap.step.lower() in text.lower()):
        return []  # no step key, dict or validation word: no row (most lines of a long log)
    if any(p.search(text) for p in SKIP):
        return []
    text, when = _unprefixed(text)
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        return _printed_dict(stripped, offset, counter, keymap, when)
    return _pairs_line(text, offset, when, counter, keymap)


def _shape(match: re.Match, names: dict, eval_fields: frozenset, offset: int, raw: bytes,
           problems: list[Problem]) -> list[Record]:
    """llm.c's line: its step digits and ``key:value`` fields (llmc.py's rules)."""
    digits = match.group(1)
    if len(digits) > llmc.STEP_DIGITS:
        problems.append(Problem(offset, "error", f"'s:' is not a step within 64 bits "
                                f"({len(digits)} digits); line skipped", excerpt(raw)))
        return []
    row, kind, odd = llmc.row(int(digits), match.group(2).split())
    if odd:
        problems.append(Problem(offset, "warning", f"not a number: {', '.join(odd)}; "
                                "stored as NULL", excerpt(raw)))
    return [Record(offset, kind, row)]


def _unprefixed(text: str) -> tuple[str, float | None]:
    """The line without its logging prefixes, and the time one of them gave."""
    when = None
    for _ in range(len(PREFIXES) * 2):
        text = text.lstrip()
        for pattern in PREFIXES:
            match = pattern.match(text)
            if match and match.end():
                if "time" in pattern.groupindex and match.group("time"):
                    when = unix_time(match.group("time").replace(",", "."))
                text = text[match.end():]
                break
        else:
            break
    return text, when


def _pairs_line(text: str, offset: int, when: float | None, counter: list[int],
                keymap: KeyMap | None = None) -> list[Record]:
    pairs, step, total, is_eval, rest = _collect(text, keymap)
    marked = next((kind for mark, kind in LINE_KINDS if mark.search(f"|{text}")), None)
    is_eval = is_eval or marked == EVAL
    if not pairs or _prose(rest):
        return []
    keys = [k for k, _ in pairs]
    is_eval = is_eval or any(EVAL_WORD.match(k) for k in keys)
    if step is None:
        if counter[0] is None or not _lone_eval(text, keys):
            return []
        step = counter[0]  # llm.c's "val loss 3.2801": at the training step before it
    elif not is_eval and marked is None and isinstance(step, int):
        counter[0] = step
    row = _row(step, pairs, is_eval, keymap)
    if when is not None:
        row[TIME] = when
    if marked == SUMMARY:
        return [Record(offset, SUMMARY, row)]
    records = [Record(offset, EVAL if is_eval else TRAIN, row)]
    planned = int(total) if total is not None and len(total) <= llmc.STEP_DIGITS else None
    if planned and not is_eval and isinstance(step, int) and step >= planned:
        records.append(Record(offset, SUMMARY, {STEP: step, "planned_steps": planned}))
    return records


def _collect(text: str, keymap: KeyMap | None):
    """``(pairs, step, planned total, is a validation line, what is not pairs)`` of a line:
    pairs in ``key value`` order, or value first in a ``|`` field (llm.c's ``| 3788.44 ms |``)."""
    pairs: list[tuple[str, re.Match]] = []
    step = total = None
    is_eval = False
    rest = []  # what is not pairs: a log line has little of it
    in_table = "|" in text
    for field in text.split("|") if in_table else [text]:
        found = list(PAIR.finditer(field))
        if not found:
            match = VALUE_FIRST.fullmatch(field)
            if match and (match.group("words") or match.group("unit") in UNIT_KEYS):
                pairs.append((_key(match.group("words")) if match.group("words")
                              else UNIT_KEYS[match.group("unit")], match))
            elif not in_table or any(c.isdigit() for c in field):
                rest.append(field)  # a "| valid |" label in a table of fields is no prose
            continue
        rest.append(PAIR.sub(" ", field))
        for match in found:
            key = _key(match.group("key"))
            if step is None and (_is_step_key(key, match)
                                 or (keymap is not None and key == _key(keymap.step or ""))):
                value = _integer(match)
                if value is not None:
                    step, total = value, match.group("total")
                    is_eval = is_eval or EVAL_STEP.fullmatch(match.group("key")) is not None
                    continue
            pairs.append((key, match))
    return pairs, step, total, is_eval, " ".join(rest)


def _row(step: int | float, pairs: list[tuple[str, re.Match]], is_eval: bool,
         keymap: KeyMap | None) -> dict:
    """The v1 dict of a line's pairs, names as the tables say (the first of a name wins)."""
    row: dict = {STEP: step}
    for key, match in pairs:
        name = (EVAL_ALIASES.get(key) if is_eval else None) or ALIASES.get(key, key)
        if keymap is not None:
            name = keymap.rename.get(name, name)  # the run's own mappings (keymap.py)
        if name in RESERVED:  # nanoGPT's "time 35.21ms" is a duration, not v1's time
            name = f"{name}_{match.group('unit')}" if match.group("unit") else f"log_{name}"
        if name not in row:
            value = _number(match)
            row[name] = int(value) if name == EPOCH and _integral(value) else value
    return row


def _is_step_key(key: str, match: re.Match) -> bool:
    """``step``, ``iter``...; ``train step``, ``global step`` too (not a wrapper's
    ``target step 7000``); a validation line's phrase (``validation loss at iteration``)."""
    words = key.split("_") if " " in match.group("key") else [key]
    return (key in STEP_KEYS or (len(words) == 2 and words[0] in STEP_QUALIFIERS
                                 and words[-1] in STEP_KEYS and not match.group("kunit"))
            or EVAL_STEP.fullmatch(match.group("key")) is not None)


def _prose(rest: str) -> bool:
    """Whether the line is more than its pairs: pasted source (``x = dict(step=1, loss=2)
    # a comment``) or a sentence that holds numbers. A log line's other text is a word or
    so (llm.c's ``(+nanz)``), its pairs and separators the rest."""
    return len(PROSE_WORD.findall(rest)) > PROSE_WORDS


def _lone_eval(text: str, keys: list[str]) -> bool:
    """A line of validation values only, with no step: llm.c's stdout prints ``val loss
    3.2801`` after the step it was measured at. Only a line that is nothing but such pairs:
    prose that mentions a val loss is no row."""
    return all(LONE_EVAL.fullmatch(k) for k in keys) and not PAIR.sub("", text).strip(" \t,;|")


def _integral(value: float | None) -> bool:
    return value is not None and value.is_integer()


def _key(words: str) -> str:
    return "_".join(words.lower().split())


def _integer(match: re.Match) -> int | float | None:
    """A step's integer; past 20 digits (no 64-bit step has more, and int() refuses past
    4,300) infinity, which the ingest path refuses as a step with an error at its line."""
    text = match.group("num").replace(",", "")
    if not text.isdigit() or match.group("mult"):
        return None
    return int(text) if len(text) <= llmc.STEP_DIGITS else math.inf


def _number(match: re.Match) -> float | None:
    try:
        value = float(match.group("num").replace(",", ""))
    except ValueError:
        return None
    return value * MULTIPLIERS.get(match.group("mult") or "", 1)


def _printed_dict(text: str, offset: int, counter: list[int], keymap: KeyMap | None,
                  when: float | None) -> list[Record]:
    """A Python dict as the Hugging Face Trainer prints it; its step as the module says."""
    if len(text) > DICT_MAX or _depth(text) > DICT_DEPTH:
        return []
    try:
        obj = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return []
    if not isinstance(obj, dict) or not obj:
        return []
    values = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            continue
        number = _dict_value(value)
        if number is not None:
            values[key] = number
    if not values:
        return []
    result, _ = normalise(values, keymap)
    if result is None and not (text.startswith("{'") and any(map(DICT_METRIC.search, values))):
        return []  # a JSON config or Python settings printed, not the Trainer's metrics
    if result is None:  # no step of its own: count one on
        kind = _dict_kind(values)
        if kind == TRAIN:
            counter[0] = (counter[0] or 0) + 1
        result, _ = normalise({STEP: counter[0] or 0, **values}, keymap)
        if result is None:
            return []
    elif result.kind == TRAIN and isinstance(result.data[STEP], int):
        counter[0] = result.data[STEP]
    if when is not None:
        result.data.setdefault(TIME, when)
    records = [Record(offset, result.kind, result.data)]
    if result.boundary is not None:
        records.append(Record(offset, EVENT, result.boundary))
    return records


def _dict_kind(values: dict) -> str:
    from .keys import kind_of

    return kind_of({STEP: 0, **values})


def _dict_value(value: object) -> float | int | None:
    """A number, or a number printed as text (transformers 5 quotes every value)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str) and len(value) <= 40:
        try:
            return float(value.replace(",", ""))
        except ValueError:
            return None
    return None


def _depth(text: str) -> int:
    """How deeply brackets nest, counted before ``literal_eval`` (which recurses)."""
    deepest = level = 0
    for char in re.findall(r"[\[\]{}()]", text):
        level += 1 if char in "[{(" else -1
        deepest = max(deepest, level)
    return deepest


def sniff(head: bytes, keymap: KeyMap | None = None) -> bool:
    """Whether any complete line of ``head`` reads as a row."""
    end = head.rfind(b"\n") + 1
    try:
        records, _ = parse(head[:end], 0, keymap)
    except Exception:  # a line its rules did not foresee: the others still tell
        records = []
        for line in head[:end].split(b"\n"):
            try:
                records += parse(line + b"\n", 0, keymap)[0]
            except Exception:  # that line is no row; careful.py records it when read
                continue
    return any(r.kind in (TRAIN, EVAL) for r in records)
