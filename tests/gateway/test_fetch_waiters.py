"""Long-polling fetches are woken by an append to a partition they read, and only by that; what they wait on is
registered per topic, and a request's partitions are read only when an append to their topic comes."""

from __future__ import annotations

from types import SimpleNamespace

import trio

from logway.gateway.fetch_sessions import FetchSessionCache
from logway.gateway.fetch_waiters import FetchWaiters

OWNER = ("PLAINTEXT", "User:ANONYMOUS")


async def test_an_append_wakes_only_the_fetches_reading_its_partition():
    waiters = FetchWaiters()
    woken: dict[str, bool] = {}

    async def fetch(name: str, partitions: list[tuple[str, object]], seconds: float) -> None:
        woken[name] = await waiters.wait(partitions, trio.current_time() + seconds)

    async with trio.open_nursery() as nursery:
        # A session's kept set, a request's partitions as it lists them, a topic named twice in one request.
        nursery.start_soon(fetch, "reads t-1 and u-0", [("t", {1, 2}), ("u", iter([0]))], 5.0)
        nursery.start_soon(fetch, "reads t-3", [("t", iter([3]))], 0.2)
        nursery.start_soon(fetch, "reads v-1 and v-4", [("v", iter([1])), ("v", {4})], 5.0)
        await trio.sleep(0.05)
        waiters.notify("t", 7)  # nobody reads t-7
        waiters.notify("w", 1)  # nor topic w
        await trio.sleep(0.05)
        assert woken == {}
        waiters.notify("u", 0)
        waiters.notify("v", 4)
    assert woken == {"reads t-1 and u-0": True, "reads t-3": False, "reads v-1 and v-4": True}


async def test_a_fetch_reads_its_partitions_only_when_its_topic_gets_an_append():
    """A consumer tailing 1,000 idle partitions: its long poll registers one entry per topic, and the request's
    partitions are not read at all unless an append to their topic comes while it waits."""
    waiters = FetchWaiters()
    read: list[str] = []

    def partitions(topic: str, indexes: range):
        for index in indexes:
            read.append(f"{topic}-{index}")
            yield index

    assert not await waiters.wait([("idle", partitions("idle", range(1000)))], trio.current_time() + 0.01)
    assert read == []
    async with trio.open_nursery() as nursery:
        async def fetch() -> None:
            assert await waiters.wait([("idle", partitions("idle", range(1000))), ("busy", partitions("busy", range(3)))],
                                      trio.current_time() + 5)

        nursery.start_soon(fetch)
        await trio.sleep(0.05)
        waiters.notify("busy", 9)  # not one of its partitions: read once, then known
        waiters.notify("busy", 8)
        assert read == ["busy-0", "busy-1", "busy-2"]
        waiters.notify("busy", 2)
    assert read == ["busy-0", "busy-1", "busy-2"]


async def test_a_fetch_leaves_no_registration_behind():
    waiters = FetchWaiters()
    assert not await waiters.wait([("t", {0}), ("u", iter([1]))], trio.current_time() + 0.01)
    waiters.notify("t", 0)
    assert waiters._by_topic == {}


async def test_a_sessions_long_poll_follows_the_partitions_its_requests_add_and_forget():
    """Incremental requests of a fetch session (KIP-227) change what its next long poll waits on."""
    cache, waiters = FetchSessionCache(), FetchWaiters()

    def request(session_id: int, epoch: int, partitions: list[int], forgotten: list[int] = ()) -> SimpleNamespace:
        parts = [SimpleNamespace(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in partitions]
        return SimpleNamespace(session_id=session_id, session_epoch=epoch, max_bytes=1 << 20, min_bytes=1,
                               isolation_level=0, max_wait=0,
                               topics=[SimpleNamespace(topic="t", topic_id=None, partitions=parts)] if parts else [],
                               forgotten_topics_data=[SimpleNamespace(topic="t", partitions=forgotten)])

    session_id = cache.context(12, request(0, 0, [0, 1]), OWNER).session_id
    context = cache.context(12, request(session_id, 1, [2], forgotten=[0]), OWNER)
    assert [p.partition for t in context.request.topics for p in t.partitions] == [1, 2]
    watched = context.watched(["t"], set())

    async def appends() -> None:
        await trio.sleep(0.05)
        waiters.notify("t", 0)  # forgotten
        await trio.sleep(0.05)
        assert not woken
        waiters.notify("t", 2)  # added

    woken: list[bool] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(appends)
        woken.append(await waiters.wait(watched, trio.current_time() + 5))
    assert woken == [True]
    # A quiet request of the session waits on the same partitions.
    quiet = cache.context(12, request(session_id, 2, []), OWNER)
    assert [(name, set(indexes)) for name, indexes in quiet.watched(["t"], set())] == [("t", {1, 2})]
