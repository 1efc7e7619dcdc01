"""librdkafka through confluent-kafka against the broker: admin, codecs, idempotence, groups, offsets."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from records import Got, Rec, assert_exact, expected_offsets, make_records, unique

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
WAIT = 30


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    a = admin(bootstrap)  # keep the handle alive until the future resolves
    fs = a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs or {})])
    fs[topic].result(WAIT)


def produce(bootstrap: str, topic: str, recs: list[Rec], **config) -> list[tuple[int, int]]:
    """Send in order, one producer per codec run; returns (partition, offset) of every delivery report."""
    acks: list[tuple[int, int] | None] = [None] * len(recs)
    errors: list[str] = []

    def report(index: int):
        def cb(err, msg) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acks[index] = (msg.partition(), msg.offset())
        return cb

    i = 0
    while i < len(recs):
        codec = recs[i].codec
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, **config})
        while i < len(recs) and recs[i].codec == codec:
            r = recs[i]
            kwargs = {"timestamp": r.timestamp} if r.timestamp >= 0 else {}
            producer.produce(topic, value=r.value, key=r.key, partition=r.partition, headers=list(r.headers),
                             on_delivery=report(i), **kwargs)
            producer.poll(0)
            i += 1
        assert producer.flush(WAIT) == 0, "messages still undelivered after flush"
    assert not errors, f"delivery errors: {errors[:3]}"
    return acks  # type: ignore[return-value]


def _got(msg, tag: str = "") -> Got:
    if msg.error():
        raise KafkaException(msg.error())
    return Got(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()), tag, msg.timestamp()[1])


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Got]:
    """Read every partition from the beginning (assign, no commits) until `expected` records or 30 s."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("rdk-reader"), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[Got] = []
        deadline = time.monotonic() + WAIT
        while len(out) < expected and time.monotonic() < deadline:
            out += [_got(m) for m in consumer.consume(500, 0.2)]
        out += [_got(m) for m in consumer.consume(500, 0.5)]
        return out
    finally:
        consumer.close()


def test_admin(bootstrap: str) -> None:
    topic = unique("rdk-admin")
    a = admin(bootstrap)
    create(bootstrap, topic, 3, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    assert topic in a.list_topics(timeout=WAIT).topics
    desc = a.describe_topics(TopicCollection([topic]))[topic].result(WAIT)
    assert [p.id for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader is not None for p in desc.partitions)
    res = ConfigResource(ResourceType.TOPIC, topic)
    configs = a.describe_configs([res])[res].result(WAIT)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "compact"
    cluster = a.describe_cluster().result(WAIT)
    assert cluster.cluster_id and len(cluster.nodes) == 1 and cluster.controller is not None
    a.create_partitions([NewPartitions(topic, 5)])[topic].result(WAIT)
    desc = a.describe_topics(TopicCollection([topic]))[topic].result(WAIT)
    assert len(desc.partitions) == 5
    a.delete_topics([topic])[topic].result(WAIT)
    deadline = time.monotonic() + 15
    while topic in a.list_topics(timeout=WAIT).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert topic not in a.list_topics(timeout=WAIT).topics


def test_roundtrip(bootstrap: str) -> None:
    topic, partitions = unique("rdk-rt"), 6
    recs = make_records(250, partitions, CODECS)
    create(bootstrap, topic, partitions)
    assert produce(bootstrap, topic, recs) == expected_offsets(recs)
    assert_exact(recs, consume_all(bootstrap, topic, partitions, len(recs)))


def test_idempotent(bootstrap: str) -> None:
    topic, partitions = unique("rdk-idem"), 3
    recs = make_records(300, partitions, ("zstd",))
    create(bootstrap, topic, partitions)
    assert produce(bootstrap, topic, recs, **{"enable.idempotence": True}) == expected_offsets(recs)
    assert_exact(recs, consume_all(bootstrap, topic, partitions, len(recs)))


def test_idempotent_restart(restartable) -> None:
    """Kill -9 the broker while an idempotent producer has messages in flight; its retries must not duplicate."""
    topic, partitions = unique("rdk-restart"), 3
    recs = make_records(600, partitions, ("none",))
    create(restartable.bootstrap, topic, partitions)
    acks: list[tuple[int, int] | None] = [None] * len(recs)
    errors: list[str] = []

    def report(index: int):
        def cb(err, msg) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acks[index] = (msg.partition(), msg.offset())
        return cb

    producer = Producer({"bootstrap.servers": restartable.bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 500})
    restarted = False
    for i, r in enumerate(recs):
        producer.produce(topic, value=r.value, key=r.key, partition=r.partition, headers=list(r.headers),
                         on_delivery=report(i))
        producer.poll(0.005)
        if not restarted and sum(a is not None for a in acks) >= len(recs) // 3:
            restartable.stop("KILL")
            time.sleep(0.5)
            restartable.start()
            restarted = True
    assert producer.flush(150) == 0, "messages still undelivered after the restart"
    assert restarted and not errors, f"restarted={restarted} delivery errors: {errors[:3]}"
    assert acks == expected_offsets(recs)
    assert_exact(recs, consume_all(restartable.bootstrap, topic, partitions, len(recs)))


def test_group(bootstrap: str) -> None:
    topic, group, partitions = unique("rdk-group"), unique("rdk-g"), 4
    create(bootstrap, topic, partitions)
    first, second = make_records(40, partitions), make_records(20, partitions, start=40)
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10000}
    a, b = Consumer(conf), Consumer(conf)
    got: dict[str, list[Got]] = {"a": [], "b": []}
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got["a"] += [_got(m, "a") for m in a.consume(100, 0.1)]
            got["b"] += [_got(m, "b") for m in b.consume(100, 0.1)]
            if a.assignment() and b.assignment() and len(a.assignment()) + len(b.assignment()) == partitions:
                break
        assert a.assignment() and b.assignment(), f"both members own partitions: {a.assignment()} {b.assignment()}"
        produce(bootstrap, topic, first)
        deadline = time.monotonic() + WAIT
        while len(got["a"]) + len(got["b"]) < len(first) and time.monotonic() < deadline:
            got["a"] += [_got(m, "a") for m in a.consume(100, 0.1)]
            got["b"] += [_got(m, "b") for m in b.consume(100, 0.1)]
        a.commit(asynchronous=False)
        b.commit(asynchronous=False)
    finally:
        a.close()
        b.close()
    assert_exact(first, got["a"] + got["b"])
    assert {g.partition for g in got["a"]}.isdisjoint({g.partition for g in got["b"]})
    produce(bootstrap, topic, second)
    c = Consumer(conf)
    resumed: list[Got] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(resumed) < len(second) and time.monotonic() < deadline:
            resumed += [_got(m, "c") for m in c.consume(100, 0.2)]
        resumed += [_got(m, "c") for m in c.consume(100, 0.3)]
    finally:
        c.close()
    counts = {p: sum(1 for r in first if r.partition == p) for p in range(partitions)}
    assert_exact(second, resumed, counts)


def test_offsets(bootstrap: str) -> None:
    topic = unique("rdk-offsets")
    base_ts = (int(time.time()) - 3600) * 1000
    recs = [Rec(0, None, f"v{i}".encode(), timestamp=base_ts + i * 1000) for i in range(10)]
    create(bootstrap, topic, 2)
    produce(bootstrap, topic, recs)
    a = admin(bootstrap)
    tp = TopicPartition(topic, 0)
    for spec, want in ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 10)):
        assert a.list_offsets({tp: spec})[tp].result(WAIT).offset == want
    info = a.list_offsets({tp: OffsetSpec.for_timestamp(base_ts + 4500)})[tp].result(WAIT)
    assert (info.offset, info.timestamp) == (5, base_ts + 5000)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("rdk-o"), "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(tp, timeout=WAIT) == (0, 10)
        assert consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=WAIT) == (0, 0)
        (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, base_ts + 4500)], timeout=WAIT)
        assert found.offset == 5
        (future,) = consumer.offsets_for_times([TopicPartition(topic, 0, base_ts + 1_000_000)], timeout=WAIT)
        assert future.offset == -1  # OFFSET_END: no record at or after that time
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        seen: list = []
        deadline = time.monotonic() + WAIT
        while len(seen) < 10 and time.monotonic() < deadline:
            seen += consumer.consume(100, 0.2)
        assert [(m.offset(), m.value(), m.timestamp()[1]) for m in seen] == [
            (i, f"v{i}".encode(), base_ts + i * 1000) for i in range(10)]
        # Seeking with the record's leader epoch makes librdkafka validate the position with
        # OffsetForLeaderEpoch (KIP-320) before it fetches again.
        epoch = seen[3].leader_epoch()
        assert epoch is not None
        consumer.seek(TopicPartition(topic, 0, 3, leader_epoch=epoch))
        after: list = []
        deadline = time.monotonic() + WAIT
        while not after and time.monotonic() < deadline:
            after += consumer.consume(100, 0.2)
        assert [m.offset() for m in after][:1] == [3]
    finally:
        consumer.close()
