"""A daemon thread that works in a loop and can be woken early: the shape of the server's
diagnosis and alert workers::

    class Worker(Background):
        def _loop(self):
            while not self.stopping:
                ...                       # one pass
                self.wake.wait(2.0)       # until poke() or the timeout
                self.wake.clear()
"""

from __future__ import annotations

import threading


class Background:
    def __init__(self, name: str):
        self.wake, self.stopping = threading.Event(), False
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def _loop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self.thread.start()

    def poke(self) -> None:
        """Something changed (called from other threads; never blocks them)."""
        self.wake.set()

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()
        self.thread.join(timeout=10)
