"""Long-polling fetches are woken by an append to a partition they read, and only by that."""

from __future__ import annotations

import trio

from logway.gateway.fetch_waiters import FetchWaiters


async def test_an_append_wakes_only_the_fetches_reading_its_partition():
    waiters = FetchWaiters()
    woken: dict[str, bool] = {}

    async def fetch(name: str, partitions: dict[str, set[int]], seconds: float) -> None:
        woken[name] = await waiters.wait(partitions, trio.current_time() + seconds)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fetch, "reads t-1 and u-0", {"t": {1, 2}, "u": {0}}, 5.0)
        nursery.start_soon(fetch, "reads t-3", {"t": {3}}, 0.2)
        await trio.sleep(0.05)
        waiters.notify("t", 7)  # nobody reads t-7
        waiters.notify("v", 1)  # nor topic v
        await trio.sleep(0.05)
        assert woken == {}
        waiters.notify("u", 0)
    assert woken == {"reads t-1 and u-0": True, "reads t-3": False}  # the other one ran out its max wait


async def test_a_fetch_leaves_no_registration_behind():
    waiters = FetchWaiters()
    assert not await waiters.wait({"t": {0}}, trio.current_time() + 0.01)
    waiters.notify("t", 0)
    assert waiters._by_topic == {}
