"""Power losses under load: a real broker loses nothing it acknowledged, with acks=all made durable.

A `logway serve` process (broker_child.py: storage.fs recorded by crash_fs) runs with
log.flush.acks.all.enable=true and takes: an idempotent acks=all librdkafka producer writing numbered records
to a topic whose segments roll and go by retention, and keyed records to a compacted topic the cleaner
compacts; a transactional producer committing transactions of three records; a group committing its offsets.
In each cycle the test first reads back everything and checks it, commits the group's offsets, then arms the
crash point (the power goes out before a seeded random file operation, or at a random moment if the load
ends first: SIGKILL), rebuilds the log dir from what was fsynced (crash_fs.power_loss) and starts the broker
again on it. After each power loss:

- the cluster id is the one of the first start (meta.properties survived);
- every acknowledged record is there once, at its acknowledged offset, in produced order (those older than
  the log start offset may have gone by retention), and offsets are contiguous;
- each key of the compacted topic has its last acknowledged value or a later one;
- every acknowledged transaction is visible to a read_committed consumer, and no transaction partly;
- the group's committed offsets are the last ones committed.

LOGWAY_POWER_LOSS_CYCLES sets the number of power losses (2 in `make test`, 30 in `make soak`);
LOGWAY_POWER_LOSS_SEED replays a run (printed, with each crash point).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from crash_fs import power_loss, replace_tree

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
SEED = int(os.environ.get("LOGWAY_POWER_LOSS_SEED", random.randrange(2**32)))
CYCLES = int(os.environ.get("LOGWAY_POWER_LOSS_CYCLES", "2"))
DURABLE, COMPACTED, TXN, GROUP = "durable", "compacted", "txn", "power-loss-group"
PARTITIONS = 3
RATE = 3000  # records offered per second
WAIT = 30.0
BROKER = {"log.flush.acks.all.enable": "true", "group.initial.rebalance.delay.ms": "0",
          "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3",
          "log.retention.check.interval.ms": "200", "log.cleaner.backoff.ms": "200", "log.segment.bytes": "32768"}
TOPICS = {DURABLE: {"segment.bytes": "16384", "retention.bytes": "65536", "file.delete.delay.ms": "0"},
          COMPACTED: {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
                      "file.delete.delay.ms": "0"},
          TXN: {"segment.bytes": "8192"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RecordedBroker:
    """The broker_child.py process, restarted on the same data dir and port."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.data = tmp / "data"
        self.data.mkdir()
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = tmp / "broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, work: Path, crash_after: int) -> None:
        listener = f"PLAINTEXT://127.0.0.1:{self.port}"
        cmd = [sys.executable, str(HERE / "broker_child.py"), "serve", "--listeners", listener,
               "--advertised-listeners", listener, "--log-dirs", str(self.data)]
        for key, value in BROKER.items():
            cmd += ["--override", f"{key}={value}"]
        env = {**os.environ, "LOGWAY_CRASH_WORK": str(work), "LOGWAY_CRASH_AFTER": str(crash_after)}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the broker exited with {self.proc.returncode}: {self.log_tail()}"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"the broker does not listen: {self.log_tail()}")

    def arm(self) -> None:
        self.proc.send_signal(signal.SIGUSR1)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> str:
        """SIGKILL unless the crash point killed it already; which of the two."""
        how = "at its crash point"
        if self.alive:
            self.proc.kill()
            how = "by SIGKILL"
        self.proc.wait(10)
        return how

    def stop(self) -> None:
        if self.alive:
            self.proc.terminate()
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


class Load:
    """The idempotent producer and what it was told was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
            "message.timeout.ms": 300000, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 20, "retry.backoff.max.ms": 200, "metadata.recovery.strategy": "none",
            "log_level": 2, "error_cb": self._on_error,
        })
        self.sent = [0] * PARTITIONS
        self.acked: list[dict[int, bytes]] = [{} for _ in range(PARTITIONS)]  # partition -> offset -> value
        self.keys: dict[bytes, int] = {}  # compacted key -> number of its last acknowledged value
        self.keyed = 0
        self.failures: list[str] = []

    def _on_error(self, err) -> None:
        if err.fatal():
            self.failures.append(f"fatal producer error: {err}")

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failures.append(f"delivery failed: {err}")
        elif msg.topic() == DURABLE:
            self.acked[msg.partition()][msg.offset()] = msg.value()
        else:
            n = int(msg.value())
            self.keys[msg.key()] = max(self.keys.get(msg.key(), -1), n)

    def run_for(self, seconds: float, broker: RecordedBroker) -> None:
        start = time.monotonic()
        first = sum(self.sent)
        while (elapsed := time.monotonic() - start) < seconds and broker.alive:
            while sum(self.sent) - first < elapsed * RATE:
                p = sum(self.sent) % PARTITIONS
                self.producer.produce(DURABLE, b"%d-%09d" % (p, self.sent[p]), partition=p,
                                      on_delivery=self._on_delivery)
                self.sent[p] += 1
                if self.sent[p] % 10 == 0:
                    self.keyed += 1
                    self.producer.produce(COMPACTED, b"%d" % self.keyed, key=b"k%d" % (self.keyed % 7),
                                          on_delivery=self._on_delivery)
            self.producer.poll(0.005)


class Transactions(threading.Thread):
    """A transactional producer committing transactions of three records until its broker goes away."""

    def __init__(self, bootstrap: str, first: int, committed: list[int]) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.n = first
        self.committed = committed
        self.stop = threading.Event()

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "power-loss-txn",
                             "transaction.timeout.ms": 10000, "log_level": 2, "message.timeout.ms": 2000,
                             "metadata.recovery.strategy": "none"})
        try:
            producer.init_transactions(5)
            while not self.stop.is_set():
                producer.begin_transaction()
                for i in range(3):
                    producer.produce(TXN, b"%d-%d" % (self.n, i), partition=self.n % PARTITIONS)
                producer.commit_transaction(2)
                self.committed.append(self.n)
                self.n += 1
        except KafkaException:
            self.n += 1  # this one may or may not have committed: never acknowledged
        finally:
            producer.purge()


def read_all(bootstrap: str) -> dict[str, list[list[tuple[int, bytes, bytes]]]]:
    """(offset, key, value) of every record of each partition of each topic from the log start, as a
    read_committed consumer reads them to the end (the last stable offset)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "power-loss-reader", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in TOPICS for p in range(PARTITIONS)])
        records = {t: [[] for _ in range(PARTITIONS)] for t in TOPICS}
        at_end: set[tuple[str, int]] = set()
        deadline = time.monotonic() + WAIT
        while len(at_end) < len(TOPICS) * PARTITIONS:
            assert time.monotonic() < deadline, f"the end of {at_end ^ set(records)} not reached"
            for m in consumer.consume(10000, 0.2):
                if m.error() is None:
                    records[m.topic()][m.partition()].append((m.offset(), m.key(), m.value()))
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add((m.topic(), m.partition()))
        return records
    finally:
        consumer.close()


def check(bootstrap: str, load: Load, committed_txns: list[int], last_commit: list[int], cluster_id: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert admin.list_topics(timeout=WAIT).cluster_id == cluster_id, "the cluster id changed"
    logs = read_all(bootstrap)
    for p, log in enumerate(logs[DURABLE]):
        offsets = [o for o, _, _ in log]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))) if offsets else True, f"{p}: a gap"
        seqs = [int(v.split(b"-")[1]) for _, _, v in log]
        assert all(v.startswith(b"%d-" % p) for _, _, v in log) and seqs == sorted(set(seqs)), f"{p}: duplicates"
        stored = {o: v for o, _, v in log}
        start = offsets[0] if offsets else 0
        missing = {o for o, v in load.acked[p].items() if o >= start and stored.get(o) != v}
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost, e.g. offset {min(missing)}"
        assert not load.acked[p] or max(load.acked[p]) >= start or not log, f"partition {p}: log start past the acks"
    latest: dict[bytes, int] = {}
    for log in logs[COMPACTED]:
        for _, key, value in log:
            latest[key] = int(value)
    lost = {k for k, n in load.keys.items() if latest.get(k, -1) < n}
    assert not lost, f"compacted keys lost their acknowledged value: {sorted(lost)}"
    seen: dict[int, int] = {}
    for log in logs[TXN]:
        for _, _, value in log:
            n = int(value.split(b"-")[0])
            seen[n] = seen.get(n, 0) + 1
    assert all(count == 3 for count in seen.values()), f"a transaction is visible in part: {seen}"
    assert not set(committed_txns) - set(seen), f"committed transactions lost: {set(committed_txns) - set(seen)}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(DURABLE, p) for p in range(PARTITIONS)], timeout=WAIT)
        assert [tp.offset for tp in got] == last_commit, "committed group offsets changed"
    finally:
        consumer.close()


def commit(bootstrap: str, offsets: list[int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(DURABLE, p, o) for p, o in enumerate(offsets)], asynchronous=False)
    finally:
        consumer.close()


def create_topics(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, PARTITIONS, 1, config=config) for name, config in TOPICS.items()])
    for future in futures.values():
        future.result(WAIT)
    return admin.list_topics(timeout=WAIT).cluster_id


def test_power_losses_under_load_lose_nothing_acknowledged(tmp_path):
    rng = random.Random(SEED)
    print(f"power loss test: {CYCLES} power losses, LOGWAY_POWER_LOSS_SEED={SEED}")
    broker = RecordedBroker(tmp_path)
    load = None
    committed_txns: list[int] = []
    txn_next = 0
    last_commit = [-1001] * PARTITIONS  # librdkafka's OFFSET_INVALID: nothing committed yet
    try:
        broker.start(tmp_path / "work0", crash_after=rng.randint(1, 1000))
        cluster_id = create_topics(broker.bootstrap)
        load = Load(broker.bootstrap)
        for cycle in range(1, CYCLES + 1):
            check(broker.bootstrap, load, committed_txns, last_commit, cluster_id)
            last_commit = [len(a) for a in load.acked]
            commit(broker.bootstrap, last_commit)
            txns = Transactions(broker.bootstrap, txn_next, committed_txns)
            txns.start()
            moment = rng.uniform(0.3, 2.0)
            broker.arm()
            load.run_for(moment, broker)
            how = broker.kill()
            txns.stop.set()
            txns.join(WAIT)
            txn_next = txns.n
            work = tmp_path / f"work{cycle - 1}"
            lost = power_loss(broker.data, work, tmp_path / "rebuilt", rng)
            replace_tree(broker.data, tmp_path / "rebuilt")
            print(f"power loss {cycle}: {how} after {moment:.2f}s of load, {sum(map(len, load.acked))} acked, "
                  f"{len(committed_txns)} transactions, {lost['bytes_lost']} unsynced bytes lost")
            broker.start(tmp_path / f"work{cycle}", crash_after=rng.randint(1, 1000))
            assert not load.failures, load.failures[:3]
        check(broker.bootstrap, load, committed_txns, last_commit, cluster_id)
        assert load.producer.flush(WAIT) == 0, "records still undelivered after the last restart"
        check(broker.bootstrap, load, committed_txns, last_commit, cluster_id)
        print(f"power loss test: {CYCLES} power losses, {sum(map(len, load.acked))} records and "
              f"{len(committed_txns)} transactions acknowledged, none lost, LOGWAY_POWER_LOSS_SEED={SEED}")
    except BaseException:
        print(f"broker log: {broker.log_path}\n" + broker.log_tail())
        raise
    finally:
        if load is not None:
            load.producer.purge()  # nothing left to retry against a broker that is going away
            load.producer.flush(0)
        del load
        broker.stop()
