"""The standing fault test: SIGKILL the gateway at random moments under an idempotent acks=all load.

A real `logway serve` process takes a librdkafka producer (enable.idempotence, acks=all; its delivery
reports say what was acknowledged) while a group's offsets are committed. At seeded random moments the
gateway is killed with SIGKILL (now and then killed again while it restarts and recovers) and restarted on
the same data dir; after every restart the whole log is read
back and checked: every acknowledged record is present exactly once, at its acknowledged offset, in the
order it was produced, offsets are contiguous, and the last committed group offsets are intact.

LOGWAY_KILLS sets the number of kills (10 in `make test`, 100 in `make soak`); LOGWAY_KILL_SEED replays a run
(the seed is printed, and each kill is logged with its moment).
"""

from __future__ import annotations

import os
import random
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TOPIC = "killed"
PARTITIONS = 3
GROUP = "killed-group"
KILLS = int(os.environ.get("LOGWAY_KILLS", "10"))
RATE = 4000  # records per second offered, spread over the partitions
WAIT = 30.0


class Load:
    """An idempotent producer writing ``<partition>-<seq>`` values and remembering what was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
            "message.timeout.ms": 300000, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 20, "retry.backoff.max.ms": 200, "log.connection.close": False,
            # One broker that comes back at the same address: no re-bootstrap (KIP-899), whose new broker handle
            # would make librdkafka drain the partitions until the old handle's requests time out.
            "metadata.recovery.strategy": "none", "log_level": 2,
            "error_cb": self._on_error,
        })
        self.sent = [0] * PARTITIONS  # next sequence number per partition
        self.acked: list[dict[int, bytes]] = [{} for _ in range(PARTITIONS)]  # partition -> offset -> value
        self.failures: list[str] = []

    def _on_error(self, err) -> None:
        if err.fatal():
            self.failures.append(f"fatal producer error: {err}")

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failures.append(f"delivery failed: {err}")
        else:
            self.acked[msg.partition()][msg.offset()] = msg.value()

    def run_for(self, seconds: float) -> None:
        """Offer records at RATE for ``seconds``, serving delivery reports meanwhile."""
        start = time.monotonic()
        first = sum(self.sent)
        while (elapsed := time.monotonic() - start) < seconds:
            while sum(self.sent) - first < elapsed * RATE:
                p = sum(self.sent) % PARTITIONS
                self.producer.produce(TOPIC, f"{p}-{self.sent[p]:09d}".encode(), partition=p,
                                      on_delivery=self._on_delivery)
                self.sent[p] += 1
            self.producer.poll(0.005)

    @property
    def acked_count(self) -> int:
        return sum(len(a) for a in self.acked)


def read_log(bootstrap: str) -> list[list[tuple[int, bytes]]]:
    """Every (offset, value) of each partition, from the start to the high watermark at the time of the call."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "killed-reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=WAIT)[1] for p in range(PARTITIONS)]
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS) if ends[p] > 0])
        log: list[list[tuple[int, bytes]]] = [[] for _ in range(PARTITIONS)]
        deadline = time.monotonic() + WAIT
        while any(len(log[p]) < ends[p] for p in range(PARTITIONS)) and time.monotonic() < deadline:
            for m in consumer.consume(10000, 0.2):
                if m.error() is None and m.offset() < ends[m.partition()]:
                    log[m.partition()].append((m.offset(), m.value()))
        return log
    finally:
        consumer.close()


def commit(bootstrap: str, offsets: list[int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in enumerate(offsets)],
                                asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()


def committed(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                                       timeout=WAIT)]
    finally:
        consumer.close()


def check_log(log: list[list[tuple[int, bytes]]], load: Load, *, complete: bool) -> None:
    """Contiguous offsets, each value once and in produced order, every acknowledged record where it was acked."""
    for p in range(PARTITIONS):
        offsets = [o for o, _ in log[p]]
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets not contiguous from 0"
        values = [v for _, v in log[p]]
        seqs = [int(v.split(b"-")[1]) for v in values]
        assert all(v.startswith(f"{p}-".encode()) for v in values), f"partition {p}: a record of another partition"
        assert seqs == sorted(set(seqs)), f"partition {p}: duplicates or reordering"
        stored = dict(log[p])
        missing = {o: v for o, v in load.acked[p].items() if stored.get(o) != v}
        assert not missing, f"partition {p}: {len(missing)} acknowledged records missing or moved, e.g. {min(missing)}"
        if complete:
            assert seqs == list(range(load.sent[p])), f"partition {p}: not every produced record is in the log"


def test_sigkill_under_idempotent_load(gateway_process):
    seed = int(os.environ.get("LOGWAY_KILL_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    print(f"kill test: {KILLS} kills, LOGWAY_KILL_SEED={seed}")
    gw = gateway_process
    gw.extra_args = ("--override", "log.segment.bytes=131072")  # segments roll between kills too
    gw.start()
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(WAIT)
    del admin
    load = Load(gw.bootstrap)
    last_commit = [0] * PARTITIONS
    restart_kills = 0
    started = time.monotonic()
    try:
        for kill in range(1, KILLS + 1):
            # Commit where the acknowledged records end now: a group's progress the kill must not undo.
            last_commit = [len(a) for a in load.acked]
            commit(gw.bootstrap, last_commit)
            moment = rng.uniform(0.0, 2.0)
            load.run_for(moment)
            gw.stop("KILL")
            in_flight = len(load.producer)
            print(f"kill {kill}: {moment:.3f}s into the load, {load.acked_count} acked, {in_flight} in flight")
            if rng.random() < 0.25:
                # Sometimes a second kill while the restarted process loads and recovers the log.
                early = rng.uniform(0.2, 1.5)  # from interpreter start-up through loading to listening
                gw.start(wait=False)
                time.sleep(early)
                gw.stop("KILL")
                restart_kills += 1
                print(f"kill {kill}b: {early:.3f}s into the restart")
            gw.start()
            check_log(read_log(gw.bootstrap), load, complete=False)
            assert committed(gw.bootstrap) == last_commit, f"kill {kill}: committed offsets changed"
            assert not load.failures, load.failures[:3]
        assert load.producer.flush(WAIT) == 0, "records still undelivered after the last restart"
        load.producer.poll(0)
        assert not load.failures, load.failures[:3]
        check_log(read_log(gw.bootstrap), load, complete=True)
        assert load.acked_count == sum(load.sent)
        print(f"kill test: {KILLS} kills under load and {restart_kills} during restarts survived, "
              f"{load.acked_count} records acknowledged, "
              f"{time.monotonic() - started:.1f}s, LOGWAY_KILL_SEED={seed}")
    except BaseException:
        print(f"gateway log: {gw.log_path}\n" + gw.log_path.read_text(errors="replace")[-4000:])
        raise
    finally:
        del load  # the producer goes while its broker still runs
