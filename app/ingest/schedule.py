"""Which files a tick looks at: from what events named and the clocks, the files worth a look.

Those events named or that are new; those with work under way (an unfinished line, a rotated
file, a retry, more to read than the last budget); those of live runs that grew lately
(LIVE_S); and the sweep's share of all. A file of a finished run that nothing names costs
nothing until the sweep comes round::

    schedule = Schedule(db, files, settings.scan_interval)
    states = schedule.focus(named | waiting)   # this tick's files, by file_id
    schedule.grew(state)                       # a followed file changed
"""

from __future__ import annotations

import time

from .activity import Pace
from .filestate import FileState

# A file of a run without run_end that grew this recently is also looked at every tick, event
# or not: inotify sees no appends made on another machine of a network filesystem (without
# --poll), and drops events when its queue overflows. Quieter files wait for an event or the
# sweep.
LIVE_S = 600.0


class Schedule:
    def __init__(self, db, files: dict[str, FileState], scan_interval: float):
        self.db, self.files = db, files
        self.finished = self._finished_runs()  # runs whose log has run_end
        self.ends_seen = False  # an events file grew this tick: ask the runs' status again
        self.live = self._recently_written()  # path -> time.monotonic() it last grew
        self.busy: set[str] = set()  # files with more to read than the last tick's budget
        self.file_pace = Pace(scan_interval)  # the sweep over tracked files
        self.sweep_at = 0  # index in self.files of the sweep's next file

    def focus(self, paths: set[str]) -> list[FileState]:
        """The tracked files among ``paths`` (named by events, new, or with work under way),
        with those of live runs that grew lately and this tick's share of the sweep."""
        now = time.monotonic()
        paths = set(paths) | self.busy
        for path, grew in list(self.live.items()):
            state = self.files.get(path)
            if now - grew > LIVE_S or state is None or state.run in self.finished:
                del self.live[path]
            else:
                paths.add(path)
        paths.update(self._sweep_files())
        return sorted((self.files[p] for p in paths if p in self.files),
                      key=lambda state: state.file_id)

    def grew(self, state: FileState) -> None:
        """A followed file changed: keep it looked at every tick while its run is live."""
        if state.run not in self.finished:
            self.live[state.path] = time.monotonic()
        if state.kind == "events":  # run_start or run_end may have come (not counted in rows)
            self.ends_seen = True  # asked once at the tick's end, not once per file

    def read_finished(self) -> None:
        self.finished, self.ends_seen = self._finished_runs(), False

    def _sweep_files(self) -> list[str]:
        """This tick's share of the slow pass over every tracked file."""
        count = self.file_pace.due(len(self.files))
        if not count:
            return []
        paths = list(self.files)
        start = self.sweep_at % len(paths)
        self.sweep_at = start + count
        return paths[start:start + count] + paths[:max(0, start + count - len(paths))]

    def _finished_runs(self) -> set[str]:
        return {run for (run,) in self.db.run("ingest/finished_runs").fetchall()}

    def _recently_written(self) -> dict[str, float]:
        """At start: the files of live runs written in the last LIVE_S seconds."""
        now, wall = time.monotonic(), time.time()
        return {s.path: now for s in self.files.values()  # grew_at: our clock, not the file's
                if s.run not in self.finished and s.grew_at and wall - s.grew_at < LIVE_S}
