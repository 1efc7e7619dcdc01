"""kafka-python against the broker: admin, codecs round trip, idempotence, groups, offsets."""

from __future__ import annotations

import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic, OffsetSpec
from records import Got, Rec, assert_exact, expected_offsets, make_records, unique

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def create(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    a = admin(bootstrap)
    try:
        a.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})], timeout_ms=15000)
    finally:
        a.close()


def produce(bootstrap: str, topic: str, recs: list[Rec], **config) -> list[tuple[int, int]]:
    """Send in order, one producer per codec run; returns (partition, offset) of every ack."""
    acks: list[tuple[int, int]] = []
    i = 0
    while i < len(recs):
        codec = recs[i].codec
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_block_ms=30000,
                                 compression_type=None if codec == "none" else codec, **config)
        futures = []
        while i < len(recs) and recs[i].codec == codec:
            r = recs[i]
            futures.append(producer.send(topic, value=r.value, key=r.key, headers=list(r.headers),
                                         partition=r.partition, timestamp_ms=r.timestamp if r.timestamp >= 0 else None))
            i += 1
        producer.flush(timeout=30)
        acks += [(md.partition, md.offset) for md in (f.get(timeout=30) for f in futures)]
        producer.close(timeout=10)
    return acks


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Got]:
    """Read every partition from the beginning (assign, no group) until `expected` records or 30 s."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[Got] = []
        deadline = time.monotonic() + 30
        while len(out) < expected and time.monotonic() < deadline:
            out += _gots(consumer.poll(timeout_ms=200))
        out += _gots(consumer.poll(timeout_ms=500))  # duplicates past the expected count show up too
        return out
    finally:
        consumer.close()


def _gots(batch: dict, tag: str = "") -> list[Got]:
    return [Got(m.partition, m.offset, m.key, m.value, tuple(m.headers or ()), tag, m.timestamp)
            for msgs in batch.values() for m in msgs]


def test_admin(bootstrap: str) -> None:
    topic = unique("kp-admin")
    a = admin(bootstrap)
    try:
        res = a.create_topics([NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000", "cleanup.policy": "compact"})])
        assert [t["error_code"] for t in res["topics"]] == [0]
        assert topic in a.list_topics()
        (desc,) = a.describe_topics([topic])
        assert sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1, 2]
        assert all(p["leader_id"] >= 0 for p in desc["partitions"])
        configs = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        values = {name: entry["value"] if isinstance(entry, dict) else entry
                  for name, entry in configs["topic"][topic].items()}
        assert values.get("retention.ms") == "3600000"
        assert values.get("cleanup.policy") == "compact"
        cluster = a.describe_cluster()
        assert cluster["cluster_id"] and len(cluster["brokers"]) >= 1
        a.create_partitions({topic: NewPartitions(5)})
        (desc,) = a.describe_topics([topic])
        assert len(desc["partitions"]) == 5
        a.delete_topics([topic])
        deadline = time.monotonic() + 15
        while topic in a.list_topics() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert topic not in a.list_topics()
    finally:
        a.close()


def test_roundtrip(bootstrap: str) -> None:
    topic, partitions = unique("kp-rt"), 6
    recs = make_records(250, partitions, CODECS)
    create(bootstrap, topic, partitions)
    assert produce(bootstrap, topic, recs) == expected_offsets(recs)
    assert_exact(recs, consume_all(bootstrap, topic, partitions, len(recs)))


def test_idempotent(bootstrap: str) -> None:
    topic, partitions = unique("kp-idem"), 3
    recs = make_records(300, partitions, ("lz4",))
    create(bootstrap, topic, partitions)
    acks = produce(bootstrap, topic, recs, enable_idempotence=True, acks="all", max_in_flight_requests_per_connection=5)
    assert acks == expected_offsets(recs)
    assert_exact(recs, consume_all(bootstrap, topic, partitions, len(recs)))


def test_group(bootstrap: str) -> None:
    topic, group, partitions = unique("kp-group"), unique("kp-g"), 4
    create(bootstrap, topic, partitions)
    first, second = make_records(40, partitions), make_records(20, partitions, start=40)

    def member() -> KafkaConsumer:
        # kafka-python 3.0.12 re-sends JoinGroup when its JoinGroup answer arrives while the application is not
        # polling; from the leader that starts a new rebalance (as it does on Kafka). Two members polled in turn
        # from one thread kept the group rebalancing for 30 s and more on a loaded machine, so each member polls in
        # its own thread, as two applications would. A JoinGroup still parked when polling stops waits for the
        # rebalance timeout (max.poll.interval.ms, 300 s by default) and close()'s LeaveGroup waits behind it on
        # the same connection (Kafka too answers one request per connection at a time): a short
        # max.poll.interval.ms bounds that wait, as it would for a user of this client.
        return KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=10000, heartbeat_interval_ms=1000,
                             max_poll_interval_ms=10000)

    a, b = member(), member()
    got: dict[str, list[Got]] = {"a": [], "b": []}
    try:
        owned = _poll_apart({"a": a, "b": b}, got, lambda owned: all(owned.values())
                            and sum(len(o) for o in owned.values()) == partitions)
        assert owned["a"] and owned["b"], f"both members own partitions: {owned}"
        assert not owned["a"] & owned["b"]
        produce(bootstrap, topic, first)
        _poll_apart({"a": a, "b": b}, got, lambda _: len(got["a"]) + len(got["b"]) >= len(first))
        a.commit()
        b.commit()
    finally:
        a.close()
        b.close()
    assert_exact(first, got["a"] + got["b"])
    assert {g.partition for g in got["a"]}.isdisjoint({g.partition for g in got["b"]})
    produce(bootstrap, topic, second)
    c = member()
    try:
        resumed: list[Got] = []
        deadline = time.monotonic() + 30
        while len(resumed) < len(second) and time.monotonic() < deadline:
            resumed += _gots(c.poll(timeout_ms=200), "c")
        resumed += _gots(c.poll(timeout_ms=300), "c")
    finally:
        c.close()
    base = {p: n for p, n in _counts(first).items()}
    assert_exact(second, resumed, base)


def _poll_apart(members: dict[str, KafkaConsumer], got: dict[str, list[Got]], done, seconds: float = 30.0):
    """Poll each member in a thread of its own until ``done(assignments)`` holds or ``seconds`` pass; the records
    go to ``got[tag]``. Returns each member's assignment after its last poll."""
    owned: dict[str, set[TopicPartition]] = {tag: set() for tag in members}
    stop = threading.Event()

    def loop(tag: str, consumer: KafkaConsumer) -> None:
        while not stop.is_set():
            got[tag] += _gots(consumer.poll(timeout_ms=100), tag)
            owned[tag] = set(consumer.assignment())

    threads = [threading.Thread(target=loop, args=item, daemon=True) for item in members.items()]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    while not done(dict(owned)) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join(30)
    return owned


def _counts(recs: list[Rec]) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in recs:
        out[r.partition] = out.get(r.partition, 0) + 1
    return out


def test_offsets(bootstrap: str) -> None:
    topic = unique("kp-offsets")
    base_ts = (int(time.time()) - 3600) * 1000
    recs = [Rec(0, None, f"v{i}".encode(), timestamp=base_ts + i * 1000) for i in range(10)]
    create(bootstrap, topic, 2)
    produce(bootstrap, topic, recs)
    tp, empty = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        assert consumer.beginning_offsets([tp, empty]) == {tp: 0, empty: 0}
        assert consumer.end_offsets([tp, empty]) == {tp: 10, empty: 0}
        found = consumer.offsets_for_times({tp: base_ts + 4500})[tp]
        assert (found.offset, found.timestamp) == (5, base_ts + 5000)
        assert consumer.offsets_for_times({tp: base_ts + 1_000_000})[tp] is None
        consumer.assign([tp])
        consumer.seek(tp, 3)
        seen: list[Got] = []
        deadline = time.monotonic() + 30
        while len(seen) < 7 and time.monotonic() < deadline:
            seen += _gots(consumer.poll(timeout_ms=200))
        assert [(g.offset, g.value, g.timestamp) for g in seen] == [(i, f"v{i}".encode(), base_ts + i * 1000) for i in range(3, 10)]
    finally:
        consumer.close()
    a = admin(bootstrap)
    try:
        listed = a.list_partition_offsets({tp: OffsetSpec.EARLIEST})
        assert listed[tp].offset == 0
        listed = a.list_partition_offsets({tp: OffsetSpec.LATEST})
        assert listed[tp].offset == 10
        listed = a.list_partition_offsets({tp: base_ts + 4500})
        assert (listed[tp].offset, listed[tp].timestamp) == (5, base_ts + 5000)
    finally:
        a.close()
