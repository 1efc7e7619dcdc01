"""An exactly-once Python stream processor (eos_processor.py, confluent-kafka) killed with SIGKILL mid-stream and
restarted, against Logway direct and through `logway proxy`: its output holds every input record once, with the
running count per key a user would see if nothing had happened (issue 30: a restart of such a processor once
timed out fetching its committed offsets while the killed instance's transaction was still open).

Each kill lands while a transaction is open (after its offsets are sent, before its commit) when the processor
is that quick; the restart fences it (InitProducerId), reads its counts back and resumes. LOGWAY_EOS_RESTARTS
(default 3) sets how many kill-and-restart rounds each run has; `LOGWAY_EOS_RESTARTS=20` is the issue's 20.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # bench/ as a package (the broker and proxy processes)
from bench.procs import Logway  # noqa: E402
from bench.proxy import LogwayProxy  # noqa: E402

PROCESSOR = Path(__file__).with_name("eos_processor.py")
RESTARTS = int(os.environ.get("LOGWAY_EOS_RESTARTS", "3"))
KEYS, PER_ROUND = 7, 40  # 40 records a round: at least 4 transactions of up to 10 records to interrupt


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Iterator[Logway]:
    broker = Logway(tmp_path_factory.mktemp("eos-broker"), {"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    try:
        yield broker
    finally:
        broker.cleanup()


@pytest.fixture(params=["direct", "proxy"])
def bootstrap(request, upstream: Logway, tmp_path) -> Iterator[str]:
    if request.param == "direct":
        yield upstream.bootstrap
        return
    proxy = LogwayProxy(tmp_path / "proxy", upstream)
    proxy.start()
    try:
        yield proxy.bootstrap
    finally:
        proxy.cleanup()


class Processor:
    """An eos_processor.py process; its JSON events are read by a thread."""

    def __init__(self, bootstrap: str, topics: dict[str, str], group: str, log: Path) -> None:
        # stderr (librdkafka's log) to a file: a pipe nobody reads fills up and blocks the processor.
        self.log = log
        with log.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, str(PROCESSOR), bootstrap, topics["input"],
                                          topics["output"], topics["state"], group, "120"],
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    def committed(self) -> int:
        return sum(e["records"] for e in self.events if e["event"] == "committed")

    def wait(self, what: str, predicate, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None:
                raise AssertionError(f"the processor exited ({self.proc.returncode}) waiting for {what}: "
                                     f"{self.events[-5:]}\n{self.log.read_text()[-3000:]}")
            assert time.monotonic() < deadline, f"no {what} after {timeout} s: {self.events[-5:]}"
            time.sleep(0.01)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i % KEYS}", value=str(i))
    assert producer.flush(30) == 0


def _committed_output(bootstrap: str, topic: str, want: int) -> list[tuple[str, str]]:
    """(key, value) of OUTPUT as a read_committed consumer sees it, in offset order per partition."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                       "isolation.level": "read_committed"})
    try:
        partitions = reader.list_topics(topic, timeout=30).topics[topic].partitions
        reader.assign([TopicPartition(topic, p, 0) for p in partitions])
        got: list[tuple[str, str]] = []
        deadline = time.monotonic() + 30
        while len(got) < want and time.monotonic() < deadline:
            msg = reader.poll(0.2)
            if msg is not None and not msg.error():
                got.append((msg.key().decode(), msg.value().decode()))
        for _ in range(5):  # anything past `want` (a duplicate) shows too
            msg = reader.poll(0.2)
            if msg is not None and not msg.error():
                got.append((msg.key().decode(), msg.value().decode()))
        return got
    finally:
        reader.close()


def test_kill_and_restart_keeps_exactly_once_output_and_state(bootstrap: str, tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topics = {"input": f"eos-in-{run}", "output": f"eos-out-{run}", "state": f"eos-state-{run}"}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(topics["input"], 3, 1), NewTopic(topics["output"], 3, 1),
           NewTopic(topics["state"], 3, 1, config={"cleanup.policy": "compact"})]
    for future in admin.create_topics(new).values():
        future.result(30)
    group = f"eos-{run}"
    opened_at_kill = 0
    for round_ in range(RESTARTS):
        _produce(bootstrap, topics["input"], round_ * PER_ROUND, PER_ROUND)
        processor = Processor(bootstrap, topics, group, tmp_path / f"processor-{round_}.log")
        # Killed as its second transaction opens: the first was committed, the second is most often still open.
        processor.wait("a second transaction", lambda p=processor: sum(e["event"] == "open" for e in p.events) >= 2)
        processor.kill()
        opened_at_kill += sum(e["event"] == "open" for e in processor.events) > sum(
            e["event"] == "committed" for e in processor.events)
    total = (RESTARTS + 1) * PER_ROUND
    _produce(bootstrap, topics["input"], RESTARTS * PER_ROUND, PER_ROUND)
    processor = Processor(bootstrap, topics, group, tmp_path / "processor-last.log")
    try:
        out = _committed_output(bootstrap, topics["output"], total)
    finally:
        processor.kill()
    print(f"{RESTARTS} kills, {opened_at_kill} of them with a transaction open")
    inputs = sorted(int(value.split(":")[0]) for _, value in out)
    assert inputs == list(range(total)), f"{len(out)} outputs for {total} inputs (duplicates or gaps)"
    by_key: dict[str, list[int]] = {}
    for key, value in out:
        by_key.setdefault(key, []).append(int(value.split(":")[1]))
    for key, counts in by_key.items():
        assert sorted(counts) == list(range(1, len(counts) + 1)), (key, counts)  # each count once: state kept
