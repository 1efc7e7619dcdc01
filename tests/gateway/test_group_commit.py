"""The group commit (gateway/group_commit.py): waiters share rounds of flushes, one flush per log per round."""

from __future__ import annotations

import threading

import trio
import trio.testing

from logway.gateway.group_commit import GroupCommit, flush_logs
from logway.storage.errors import KafkaStorageError


class FakeLog:
    """What the group commit uses of a PartitionLog: flush (in a worker thread), topic and partition."""

    def __init__(self, name: str, gate: threading.Event | None = None, fail: bool = False) -> None:
        self.topic, self.partition = name, 0
        self.gate = gate
        self.fail = fail
        self.flushes = 0

    def flush(self) -> None:
        if self.gate is not None:
            self.gate.wait(10)
        self.flushes += 1
        if self.fail:
            raise KafkaStorageError(f"flush of {self.topic}-0 failed: EIO")


async def test_waiters_gathered_while_a_round_runs_share_the_next_round():
    gate = threading.Event()
    slow, a, b = FakeLog("slow", gate), FakeLog("a"), FakeLog("b")
    woken: list[FakeLog] = []
    commit = GroupCommit(woken.append)
    done: list[str] = []

    async def waiter(name: str, logs) -> None:
        assert await commit.wait(logs) == {}
        done.append(name)

    async with trio.open_nursery() as nursery:
        await nursery.start(commit.run)
        nursery.start_soon(waiter, "first", [slow])
        await trio.testing.wait_all_tasks_blocked()  # the first round runs, held up by the gate
        for i in range(5):  # five requests on a and b arrive meanwhile
            nursery.start_soon(waiter, f"w{i}", [a, b] if i % 2 else [a])
        await trio.testing.wait_all_tasks_blocked()
        assert done == [] and a.flushes == b.flushes == 0
        gate.set()
        while len(done) < 6:
            await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert done[0] == "first"
    assert (slow.flushes, a.flushes, b.flushes) == (1, 1, 1)  # one flush per log per round
    assert commit.rounds == 2 and woken == [slow, a, b]


async def test_a_failed_flush_is_reported_to_the_waiters_of_that_log_only():
    good, bad = FakeLog("good"), FakeLog("bad", fail=True)
    commit = GroupCommit(lambda plog: None)
    async with trio.open_nursery() as nursery:
        await nursery.start(commit.run)
        failed = await commit.wait([good, bad])
        assert list(failed) == [bad] and "EIO" in str(failed[bad])
        assert await commit.wait([good]) == {}
        unflushed = {good, bad}
        try:
            await flush_logs(commit, unflushed)
        except KafkaStorageError as exc:  # the coordinators' flush raises it, as PartitionLog.flush did
            assert "bad-0" in str(exc)
        else:
            raise AssertionError("no error raised")
        assert unflushed == set()
        nursery.cancel_scope.cancel()
