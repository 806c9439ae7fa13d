"""What diagnosis could not see in a run: its files not read, and what its lines cannot show::

    unread(cursor, ["prose"])
        -> [Unread(run="prose", file="prose/notes.txt", reason="not a log yet: no line with a
                   step-like key ...", missed=True)]
    judged(cursor, "llmc", watch)
        -> Judged(lines=19552, blind=["no time field: stalls not judged"])

A run with a file ``missed`` is never called clean (issue 19: "a monitor that reassures about a
run it never read is worse than none"); a file skipped because another log of its run repeats
its rows is listed, but misses nothing; unless it alone holds the time, as LLaMA-Factory's
trainer_log.jsonl does beside trainer_state.json (elapsed_time): then what it leaves unseen is
said instead, in its ``unseen`` and as the run's blind spot::

    Unread(run="lf", file="lf/trainer_log.jsonl", reason="not read: trainer_state.json holds ...",
           missed=False, unseen="stalls not judged: the time is in trainer_log.jsonl, which is
           not read")
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..db import queries
from ..ingest.formats import detect
from ..keys import ELAPSED_S, NOT_METRICS, TIME
from .rules import Watch


@dataclass(frozen=True)
class Unread:
    run: str
    file: str  # relative to the log directory
    reason: str
    missed: bool  # False: another log of the run carries the same rows
    unseen: str = ""  # not missed, yet what only this file holds is not judged (the time)

    @property
    def note(self) -> str:
        """What not reading it costs, for a file another log repeats ("" when missed)."""
        if self.missed:
            return ""
        return self.unseen or "nothing is missed: another log of the run is read"


@dataclass
class Judged:
    lines: int  # metric lines read
    blind: list[str] = field(default_factory=list)  # what these lines cannot show


def unread(cursor, runs: list[str] | None = None) -> list[Unread]:
    """Files of ``runs`` (None: every run) not read, and why (queries/diagnose/unread_files)."""
    found = queries.execute(cursor, "diagnose/unread_files", {"runs": runs}).fetchall()
    timed: dict[str, bool] = {}  # run -> whether its lines read have a time field
    out = []
    for run, file, _, reason, missed in found:
        name = file.rpartition("/")[2]
        unseen = ""
        if not missed and name in detect.TIMED_REPEATS:
            if run not in timed:
                timed[run] = _timed(_filled(cursor, run))
            unseen = "" if timed[run] else (f"stalls not judged: the time is in {name}, "
                                            "which is not read")
        out.append(Unread(run, file, reason, missed, unseen))
    return out


def _filled(cursor, run: str) -> dict:
    """How many of ``run``'s lines hold each column (``run``: every line)."""
    result = queries.execute(cursor, "diagnose/run_filled", {"run": run})
    return dict(zip((d[0] for d in result.description), result.fetchone(), strict=True))


def _timed(filled: dict) -> bool:
    return bool(filled.get(TIME) or filled.get(ELAPSED_S))


def judged(cursor, run: str, watch: Watch, unread_files: list[Unread] = ()) -> Judged:
    """How many lines of ``run`` were read, and which detectors had nothing to judge;
    ``unread_files``: the run's files not read (one may hold the time its lines lack)."""
    filled = _filled(cursor, run)
    lines = int(filled.pop("run") or 0)
    if not lines:
        ranks = queries.execute(cursor, "diagnose/run_rank_count", {"run": run}).fetchone()[0]
        if ranks:  # torchrun's rank files alone: their step times were judged (stragglers)
            return Judged(int(ranks), ["no metric line, only the ranks' step times: stalls, "
                                       "spikes, divergences and cliffs not judged"])
        return Judged(0, ["no metric line read: nothing judged"])
    metrics = {name for name, n in filled.items() if n and name not in NOT_METRICS}
    blind = []
    if not _timed(filled):
        blind.append(next((u.unseen for u in unread_files if u.run == run and u.unseen),
                          "no time field: stalls not judged"))
    if not any(watch.kind_of(m) == "spike" for m in metrics):
        blind.append("no loss-like metric: spikes and divergences not judged")
    if not any(watch.kind_of(m) == "cliff" for m in metrics):
        blind.append("no accuracy-like metric: cliffs not judged")
    return Judged(lines, blind)


@dataclass
class Look:
    """What one ``diagnose`` found: incidents (report.as_dict's dicts), the files not read,
    and per run read, its lines and what they cannot show. ``judged`` is None when a server
    answered (it says incidents and files not read); ``unread`` too when that server is older
    than /api/incidents's ``unread``."""
    incidents: list[dict]
    unread: list[Unread] | None = None
    judged: dict[str, Judged] | None = None

    @property
    def missed(self) -> list[Unread]:
        """The files whose absence leaves something of a run unseen: diagnose exits 3."""
        return [u for u in self.unread or () if u.missed]

    @property
    def blank(self) -> bool:
        """Nothing was read at all (not said of a server's answer): no line of any run."""
        return self.judged is not None and not any(j.lines for j in self.judged.values())

    def named(self, run: str, name: str) -> Look:
        """The same look with run ``run`` called ``name`` (a run folder given alone is the
        log directory's own run ``.``)."""
        def rename(r: str) -> str:
            return name if r == run else r
        return Look([{**i, "run": rename(i["run"])} for i in self.incidents],
                    None if self.unread is None else [
                        dataclasses.replace(u, run=rename(u.run)) for u in self.unread],
                    None if self.judged is None else {
                        rename(r): j for r, j in self.judged.items()})


def unread_json(found: list[Unread]) -> list[dict]:
    """/api/incidents's ``unread``: ``[{"run", "file", "reason", "missed", "unseen"}]``."""
    return [dataclasses.asdict(u) for u in found]


def look(cursor, watch: Watch, incidents: list[dict], runs: list[str] | None) -> Look:
    """The Look of a whole-run diagnosis of ``runs`` (None: every run in the database)."""
    known = runs if runs is not None else [
        r[0] for r in queries.execute(cursor, "run_ids").fetchall()]
    files = unread(cursor, runs)
    return Look(incidents, files, {r: judged(cursor, r, watch, files) for r in known})
