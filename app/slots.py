"""A few slots, taken from the server's event loop or from any thread, first come first served.

The ad-hoc query slots are taken by ``/api/sql`` (awaiting, so a queued request holds no
worker thread) and by the SQL page, whose script runs in a Streamlit thread of its own and
may wait only a bounded time (it cannot be interrupted while it waits)::

    slots = Slots(2)
    await slots.acquire(); ...; slots.release()          # on the event loop
    if slots.take(wait_s=10.0): ...; slots.release()     # in a thread: False once 10 s passed
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque


class _Waiter:
    """One queued taker; ``granted`` is set under the lock when a release hands it a slot."""

    def __init__(self, wake):
        self.wake = wake
        self.granted = False


class Slots:
    def __init__(self, total: int):
        self.total = total
        self._lock = threading.Lock()
        self._held = 0
        self._queue: deque[_Waiter] = deque()

    def _try(self) -> bool:
        # under the lock; a free slot goes to whoever queued first
        if self._held < self.total and not self._queue:
            self._held += 1
            return True
        return False

    async def acquire(self) -> None:
        """Wait for a slot; cancelling the wait (anyio.move_on_after) leaves no slot held."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._try():
                return
            waiter = _Waiter(lambda: loop.call_soon_threadsafe(_resolve, future))
            self._queue.append(waiter)
        try:
            await future
        except BaseException:
            if not self._leave(waiter):  # cancelled as the slot arrived: pass it on
                self.release()
            raise

    def take(self, wait_s: float) -> bool:
        """A slot for this thread, waiting up to ``wait_s`` seconds; False if none freed."""
        event = threading.Event()
        with self._lock:
            if self._try():
                return True
            waiter = _Waiter(event.set)
            self._queue.append(waiter)
        event.wait(wait_s)
        return not self._leave(waiter)

    def release(self) -> None:
        with self._lock:
            if not self._queue:
                self._held -= 1
                return
            waiter = self._queue.popleft()  # the slot passes on; held stays the same
            waiter.granted = True
        waiter.wake()

    def _leave(self, waiter: _Waiter) -> bool:
        """A waiter that gives up: out of the queue, or, if a slot reached it meanwhile, that
        slot passed on. True when it left holding nothing."""
        with self._lock:
            if not waiter.granted:
                self._queue.remove(waiter)
                return True
        return False

    def free(self) -> int:
        with self._lock:
            return self.total - self._held


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
