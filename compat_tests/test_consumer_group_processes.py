"""The consumer-group story with stock kafka-python consumers in separate processes against a gateway process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

MEMBER = Path(__file__).with_name("group_member.py")
PARTITIONS = 6


class Member:
    """A group_member.py process; its JSON events are collected by a reader thread."""

    def __init__(self, bootstrap: str, topic: str, group: str, *extra: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(MEMBER), bootstrap, topic, group, *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    @property
    def assignment(self) -> set[int] | None:
        """The latest assignment, or None before the first (or right after a revoke)."""
        for e in reversed(self.events):
            if e["event"] == "assigned":
                return set(e["partitions"])
            if e["event"] in ("revoked", "closed"):
                return None
        return None

    def records(self) -> list[tuple[int, int]]:
        return [(e["partition"], e["offset"]) for e in self.events if e["event"] == "record"]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout)
        self._reader.join(5)


def wait_for(predicate, timeout: float, what: str) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def split_evenly(members: list[Member]) -> bool:
    assignments = [m.assignment for m in members]
    if any(not a for a in assignments):
        return False
    union = set().union(*assignments)
    return union == set(range(PARTITIONS)) and sum(len(a) for a in assignments) == PARTITIONS


def setup_topic(bootstrap: str, topic: str, per_partition: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(per_partition * PARTITIONS):
        producer.send(topic, str(i).encode(), partition=i % PARTITIONS)
    producer.flush()
    producer.close()


def test_three_members_failover_and_clean_leave(gateway_process):
    gw = gateway_process.start()
    setup_topic(gw.bootstrap, "story", 100)
    members = [Member(gw.bootstrap, "story", "g") for _ in range(3)]
    try:
        joined = wait_for(lambda: split_evenly(members), 60, "three members to split six partitions")
        print(f"3-member group formed {joined:.2f}s after the last member started")

        a, b, c = members
        a.stop(signal.SIGKILL)
        took = wait_for(lambda: split_evenly([b, c]), 60, "the survivors to take over a killed member's partitions")
        print(f"failover after SIGKILL of a member: {took:.2f}s (session.timeout.ms=6000)")
        assert took > 3.0  # it waited for the session to time out

        b.stop(signal.SIGTERM)
        took = wait_for(lambda: c.assignment == set(range(PARTITIONS)), 30, "the last member to get everything")
        print(f"rebalance after a clean leave: {took:.2f}s")
        assert took < 6.0  # LeaveGroup rebalances at once, no session timeout

        everything = {(p, o) for p in range(PARTITIONS) for o in range(100)}
        wait_for(lambda: {r for m in members for r in m.records()} == everything, 30, "every record consumed")
    finally:
        for m in members:
            m.stop(signal.SIGKILL)


def test_resume_after_gateway_sigkill_mid_commit(gateway_process):
    gw = gateway_process.start()
    setup_topic(gw.bootstrap, "resume", 200)
    member = Member(gw.bootstrap, "resume", "r", "--manual-commit")
    try:
        wait_for(lambda: sum(e["event"] == "committed" for e in member.events) >= 150, 60, "commits")
        gw.stop("KILL")  # in the middle of a stream of synchronous commits
        member.stop(signal.SIGKILL)
    finally:
        member.stop(signal.SIGKILL)
    acknowledged: dict[int, int] = {}
    for e in member.events:
        if e["event"] == "committed":
            acknowledged[e["partition"]] = max(acknowledged.get(e["partition"], 0), e["offset"])

    gw.start()
    consumer = KafkaConsumer(bootstrap_servers=gw.bootstrap, group_id="r", enable_auto_commit=False,
                             auto_offset_reset="earliest")
    tps = [TopicPartition("resume", p) for p in range(PARTITIONS)]
    committed = {tp.partition: consumer.committed(tp) or 0 for tp in tps}
    for partition, offset in acknowledged.items():
        assert committed[partition] >= offset  # every acknowledged commit survived the SIGKILL
    consumer.subscribe(["resume"])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 30
    while len(first) < PARTITIONS and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=500).items():
            first.setdefault(tp.partition, records[0].offset)
    consumer.close()
    # Resumes exactly at the committed offset: nothing committed is re-delivered, nothing is skipped.
    assert first == {p: o for p, o in committed.items() if o < 200}
