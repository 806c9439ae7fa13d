"""The ad-hoc slots (app/slots.py), shared by /api/sql on the event loop and the SQL page's
script thread: first come first served across both, a bounded wait in a thread, and a wait
given up (a timeout, a cancelled request) leaves no slot held."""

from __future__ import annotations

import asyncio
import threading

import anyio

from app.slots import Slots


def test_a_thread_and_a_request_queue_in_turn_and_give_up_holding_nothing():
    slots = Slots(1)
    order = []

    async def scenario():
        await slots.acquire()  # a running /api/sql query
        thread = threading.Thread(target=lambda: order.append(("page", slots.take(30))))
        thread.start()
        while not slots._queue:  # the page waits first
            await asyncio.sleep(0.01)

        async def request():
            await slots.acquire()
            order.append(("request", True))
            slots.release()

        waiting = asyncio.create_task(request())
        while len(slots._queue) < 2:  # and the request after it
            await asyncio.sleep(0.01)
        with anyio.move_on_after(0.05) as gave_up:  # a third one that times out
            await slots.acquire()
        assert gave_up.cancelled_caught
        slots.release()  # the first query ends: the slot goes to the page, queued first
        await anyio.to_thread.run_sync(thread.join)
        assert order == [("page", True)]
        slots.release()  # the page's query ends: the request that waited runs
        await waiting

    asyncio.run(scenario())
    assert order == [("page", True), ("request", True)]
    assert slots.free() == 1 and not slots._queue


def test_a_bounded_wait_in_a_thread_ends_with_no_slot():
    slots = Slots(1)
    assert slots.take(wait_s=0)
    assert not slots.take(wait_s=0.05)
    slots.release()
    assert slots.free() == 1 and not slots._queue
