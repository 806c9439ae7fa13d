"""Events that text logs write in words: checkpoint saves, resumes, launches and the end of
training, as the trainers print them. torchtitan's line (its logging prefix removed by
textlog.py)::

    Finished saving the checkpoint (or staging if async is enabled) in 17.46 seconds.

at byte 81234, after the training line of step 7000, becomes ``Record(81234, "event",
{"event": "checkpoint_end", "step": 7000, "blocked_s": 17.46, "inferred": False, "source":
"log line 'Finished saving the checkpoint (or staging if async is enabled) in 17.46
seconds.' (byte 81234)"})``. Every wording is data, in ``LINES``; its named groups say what
the line gives:

- ``step``: the trainer's own step of the event. A line without one takes the step of the
  event the lines since the last training line began (a save's end, its start's: torchtitan's
  "at last step, step 644" when the log's last line was step 640), else the last training
  step read before it (a save is logged after the step it follows);
- ``from_step``: a resume's checkpoint step (the event's step, as our trainer writes it);
  ``next_step``: the first step trained after a resume (``from_step`` is one less). A
  ``from_step`` of 0 is a fresh start from initial weights, no resume;
- ``blocked_s`` / ``blocked_ms``: how long the training loop waited for the save (these logs
  time a blocking save, or the blocking staging of an async one), stored in seconds;
  ``load_s``: how long a resume's load took; ``path``, ``checkpoint``, ``state``, ``epoch``,
  ``attempt``, ``exitcode``: as named;
- ``facts``: what the wording itself says. A line that says training ended (torchtitan's
  "Training completed", the HF Trainer's "Training completed. Do not forget to share your
  model...", Megatron's "[after training is done]", Lightning's "`Trainer.fit` stopped:
  `max_epochs=40` reached.", llm.c's "total average iteration time") is a ``run_end`` with
  status ``completed``; torchelastic's "failed (exitcode: -6) local_rank: ..." (a worker
  died, the launch is over) one with status ``failed``. An error, a traceback or a shell's
  "Killed" is none: every rank prints them, some are caught, and a kill names no run.
  nanoGPT prints nothing at its end;
- ``launch``: the line starts a process that trains (torchtitan's "Training starts at step",
  a wrapper's "ATTEMPT #2 ... RESUME", the Trainer's "***** Running training *****",
  Megatron's "[before the start of training step]", llm.c's "| train_num_batches | N |" in
  its table of settings): a ``run_start`` comes first, once per
  launch, as our trainer writes one at every attempt, so a run a line ended is running again
  when its log shows it launched again (runs.status is the last run_start or run_end).

Lines about one event follow each other with no training line between (Megatron's "saving",
"successfully saved" and its timer; torchtitan's "Loading the checkpoint" and "Training
starts at step"): a line of the same kind adds its facts to the event the lines before began
(``Said``) when their steps agree or one of them took its step from the last training line,
unless a line of its wording is in that event already (the same message again is another
save or launch: the HF Trainer's last checkpoint and its final save_model). A line marked
``alone=False`` only adds facts; on its own it is no event. Lines in separate reads stay
separate events, at one step. A line is only a whole message that ends the line: pasted
source (``logger.info(f"Saving model checkpoint to {output_dir}")``) is none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...keys import EVENT as EVENT_KEY
from ...keys import STEP, TIME
from . import EVENT, Record, llmc


@dataclass(frozen=True)
class EventLine:
    trainer: str  # whose wording (docs/formats.md, the tests' fixtures)
    kind: str  # the v1 event kind (docs/log-format.md)
    pattern: re.Pattern
    alone: bool = True  # False: only adds its facts to the event the lines before began
    facts: tuple = ()  # what the wording itself says: (("status", "completed"),)
    launch: bool = False  # a process starting to train: a run_start comes before its event


_NUM = r"\d+(?:\.\d*)?"
_PATH = r"[^\s\"'{}()]+"  # no quote, brace or parenthesis: a path printed, not a format string
_ASYNC = r"(?: \(or staging if async is enabled\))?"


def _line(trainer: str, kind: str, body: str, alone: bool = True, facts: tuple = (),
          launch: bool = False) -> EventLine:
    """The message ``body`` after a line's start or a separator (a tqdm bar, a logger's
    ``- INFO - name - ``), ending the line."""
    return EventLine(trainer, kind, re.compile(rf"(?:^|(?<=[\s\]>|:-])){body}\s*$"), alone,
                     facts, launch)


COMPLETED = (("status", "completed"),)
FAILED = (("status", "failed"),)


LINES = (
    # torchtitan (torchtitan/components/checkpoint.py; "staging)in" as some versions print it)
    _line("torchtitan", "checkpoint_start", rf"Saving the checkpoint{_ASYNC}\.?"),
    _line("torchtitan", "checkpoint_start", r"Saving a (?:full|model (?:weights )?only) "
          r"checkpoint(?: in \S+)? at (?:last step, )?step (?P<step>\d+)\.?"),
    _line("torchtitan", "checkpoint_end", rf"Finished saving the checkpoint{_ASYNC}\s*in "
          rf"(?P<blocked_s>{_NUM}) seconds\.?"),
    _line("torchtitan", "resume", rf"Loading (?:the|resume) checkpoint from "
          rf"(?P<checkpoint>{_PATH}?step-(?P<from_step>\d+))/?\.?"),
    _line("torchtitan", "resume", r"Loading the checkpoint at step (?P<from_step>\d+)\.?"),
    _line("torchtitan", "resume", rf"Finished loading (?:the|resume) checkpoint in "
          rf"(?P<load_s>{_NUM}) seconds\.?", alone=False),
    _line("torchtitan", "resume", r"Training starts at step (?P<next_step>\d+)(?:,.*)?",
          launch=True),
    # train.py's last line, the whole message ("Epoch 3: Training completed" is a script's)
    _line("torchtitan", "run_end", r"^Training completed\.?", facts=COMPLETED),
    # a retry wrapper's line around torchrun (realdata/torchtitan-crash-resume)
    _line("wrapper", "resume", rf"ATTEMPT #(?P<attempt>\d+)(?: [\w=.-]+)* RESUME from "
          rf"(?P<checkpoint>{_PATH})", launch=True),
    # torchelastic's agent: a worker process died (a signal, an error), so the launch is over;
    # a "CUDA error" or a traceback is not (every rank prints them, and some are caught)
    _line("torchelastic", "run_end", r"failed \(exitcode: (?P<exitcode>-?\d+)\) local_rank: "
          r"\d+ \(pid: \d+\) of binary: .*", facts=FAILED),
    # Megatron-LM and Megatron-DeepSpeed (megatron/training/checkpointing.py, its timers)
    _line("megatron", "checkpoint_start", rf"saving checkpoint at iteration\s+(?P<step>\d+) "
          rf"to (?P<path>{_PATH})(?: in \S+ format)?"),
    _line("megatron", "checkpoint_end", rf"successfully saved checkpoint (?:from|at) iteration"
          rf"\s+(?P<step>\d+) to (?P<path>{_PATH})(?: \[[^\]]*\])?"
          rf"(?: \(?took (?P<blocked_s>{_NUM}) ?s\)?)?"),
    _line("megatron", "checkpoint_end", rf"Checkpoint Save GB: {_NUM}, GB/Sec: {_NUM}, "
          rf"Latency\(second\): (?P<blocked_s>{_NUM})"),  # Megatron-DeepSpeed's
    _line("megatron", "checkpoint_end", rf"save-checkpoint \.*: \({_NUM}, "
          rf"(?P<blocked_ms>{_NUM})\)"),  # "(min, max) time across ranks (ms)"
    _line("megatron", "checkpoint_end", rf"time \(ms\) \|(?: [^|]*\|)*? save-checkpoint: "
          rf"(?P<blocked_ms>{_NUM})(?: \|.*)?"),  # the older timers' one line
    _line("deepspeed", "checkpoint_start", rf"\[Rank \d+\] Saving model checkpoint: "
          rf"(?P<path>(?:{_PATH}?/)?global_step(?P<step>\d+)(?:/{_PATH})?)"),
    # megatron/training/training.py's print_datetime around train()
    _line("megatron", "run_start", r"^\[before the start of training step\](?: datetime: .*)?",
          launch=True),
    _line("megatron", "run_end", r"^\[after training is done\](?: datetime: .*)?",
          facts=COMPLETED),
    _line("megatron", "resume", rf"loading checkpoint from (?P<checkpoint>{_PATH}) at iteration "
          rf"(?P<from_step>\d+)"),
    _line("megatron", "resume", rf"successfully loaded checkpoint from (?P<checkpoint>{_PATH})"
          rf"(?: \[[^\]]*\])? at iteration (?P<from_step>\d+)"),
    # nanoGPT (train.py prints it before torch.save)
    _line("nanogpt", "checkpoint_end", rf"saving checkpoint to (?P<path>{_PATH})"),
    # llm.c stdout (train_gpt2.cu: the model's checkpoint, then each process's state file)
    _line("llm.c", "checkpoint_end", rf"Writing model to (?P<path>{_PATH}?model_(?P<step>\d+)"
          r"\.bin)"),
    _line("llm.c", "checkpoint_end", rf"Writing state to (?P<state>{_PATH}?state_(?P<step>\d+)"
          r"_\d+\.bin)"),
    _line("llm.c", "run_start", r"^\| train_num_batches +\| \d+ +\|", launch=True),  # its table
    _line("llm.c", "run_end", rf"^total average iteration time: {_NUM} ms",  # after the loop
          facts=COMPLETED),
    # the Hugging Face Trainer at INFO (Trainer._save, _inner_training_loop)
    _line("transformers", "checkpoint_end", rf"Saving model checkpoint to (?P<path>{_PATH})"),
    _line("transformers", "run_start", r"\*{5} Running training \*{5}", launch=True),
    _line("transformers", "run_end", r"Training completed\. Do not forget to share your model "
          r"on huggingface\.co/models =\)", facts=COMPLETED),
    # Lightning's ModelCheckpoint(verbose=True)
    _line("lightning", "checkpoint_end", r"Epoch (?P<epoch>\d+), global step (?P<step>\d+): "
          r".{1,200}?, saving model to (?P<path>'[^']*'|\"[^\"]*\"|\S+) as top \d+"),
    # Lightning's fit loop at its planned end (not "No training batches", nor an early stop)
    _line("lightning", "run_end", r"`Trainer\.fit` stopped: `max_(?:epochs|steps)=\d+` "
          r"reached\.?", facts=COMPLETED),
)
# every pattern above holds one of these: the cheap first test of every line of a log, case
# exact and without the first letter ("Checkpoint", "checkpoint"): 7x cheaper than case-blind
MENTION = re.compile(r"heckpoint|aving model|RESUME|raining|riting (?:model|state) to|"
                     r"exitcode|otal average|` stopped|_num_batches")
SECONDS = {"blocked_s": "blocked_s", "blocked_ms": "blocked_s", "load_s": "load_s"}
TEXTS = frozenset({"path", "checkpoint", "state"})
EXCERPT = 100  # characters of the line quoted in an event's source


class Said:
    """The event the lines before began, until a training line ends it (one per read)."""

    def __init__(self):
        self.record: Record | None = None
        self.counted = False  # its step came from the last training line, not its own words
        self.wordings: set[EventLine] = set()  # the entries of LINES it was read from
        self.launched: Record | None = None  # the run_start since the last training line

    def end(self) -> None:
        self.record, self.launched = None, None


def read(line: str, when: float | None, offset: int, last_step: int | None,
         said: Said) -> list[Record] | None:
    """The event ``line`` (a log line without its prefixes) says: ``[record]``, ``[]`` when
    it only added facts to the event before, or None when it is no event line."""
    if not MENTION.search(line):
        return None
    for entry in LINES:
        match = entry.pattern.search(line)
        if match:
            return _event(entry, match, line, when, offset, last_step, said)
    return None


def _event(entry: EventLine, match: re.Match, line: str, when: float | None, offset: int,
           last_step: int | None, said: Said) -> list[Record]:
    data = {**_facts(match), **dict(entry.facts)}
    step, counted = data.pop(STEP, None), False
    if entry.kind == "resume":
        step = step if step is not None else data.get("from_step")
    if step is None and said.record is not None:  # a save's end: at its start's step
        step, counted = said.record.data[STEP], said.counted
    if step is None:
        step, counted = last_step, True
    source = f"log line '{_excerpt(match.group(0))}' (byte {offset})"
    start = _launch(entry, step, data, source, offset, when, said)
    if entry.kind == "resume" and data.get("from_step") == 0:
        return start  # loading a seed checkpoint (step 0): a fresh start
    if entry.kind == "run_start" or _merge(entry, step, counted, data, source, when, said):
        _resumed_at(said)
        return start
    if not entry.alone:
        return start
    record = _record(entry.kind, step, data, source, offset, when)
    said.record, said.counted, said.wordings = record, counted, {entry}
    _resumed_at(said)
    return [*start, record]


def _resumed_at(said: Said) -> None:
    """A launch that resumes starts at its checkpoint's step, as our trainer writes it (the
    wrapper's ATTEMPT line knows no step; the load after it does)."""
    if said.launched is not None and said.record is not None \
            and said.record.data[EVENT_KEY] == "resume":
        said.launched.data[STEP] = said.record.data[STEP]


def _record(kind: str, step: int | None, data: dict, source: str, offset: int,
            when: float | None) -> Record:
    record = Record(offset, EVENT, {EVENT_KEY: kind, STEP: step, **data, "inferred": False,
                                    "source": source})
    if when is not None:
        record.data[TIME] = when
    return record


def _launch(entry: EventLine, step: int | None, data: dict, source: str, offset: int,
            when: float | None, said: Said) -> list[Record]:
    """``[run_start]`` when the line starts a process that trains (the first such line of a
    launch), as our own trainer writes one at every attempt: a run that a line ended
    (run_end) is running again when the same log shows it launched again."""
    if not entry.launch or said.launched is not None:
        return []
    resumed = data.get("from_step", 0) > 0 or "checkpoint" in data
    said.launched = _record("run_start", step, {"resumed": resumed}, source, offset, when)
    return [said.launched]


def _facts(match: re.Match) -> dict:
    """The line's groups as v1 keys: integers, seconds, text."""
    data: dict = {}
    for name, value in match.groupdict().items():
        if value is None:
            continue
        if name in SECONDS:
            # rounded: 17925.59 ms is 17.92559 s, not 17.925590000000003
            data[SECONDS[name]] = round(float(value) / (1000 if name.endswith("_ms") else 1), 6)
        elif name in TEXTS:
            data[name] = value.strip("'\"")
        elif len(value) <= llmc.STEP_DIGITS:  # a step within 64 bits; longer is no step
            data[name] = int(value)
    if "next_step" in data:
        data["from_step"] = data.pop("next_step") - 1
    return data


def _merge(entry: EventLine, step: int | None, counted: bool, data: dict, source: str,
           when: float | None, said: Said) -> bool:
    """Add the line's facts to the event before when it is about the same one."""
    before = said.record
    if before is None or before.data[EVENT_KEY] != entry.kind:
        return False
    if entry in said.wordings and entry.kind != "run_end":  # one end, whatever each rank says
        return False
    if not (counted or said.counted or before.data[STEP] == step):
        return False
    said.wordings.add(entry)
    if said.counted and not counted:  # the line's own step is the better one
        before.data[STEP], said.counted = step, False
    before.data.update(data)
    before.data["source"] += f"; {source}"
    if when is not None:
        before.data.setdefault(TIME, when)
    return True


def _excerpt(line: str) -> str:
    text = " ".join(line.split())
    return text if len(text) <= EXCERPT else text[:EXCERPT - 1] + "…"
