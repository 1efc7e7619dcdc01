"""aiokafka against the broker: admin, codecs round trip, idempotence, groups, offsets (each test runs its own asyncio loop)."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from records import Got, Rec, assert_exact, expected_offsets, make_records, unique

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
WAIT = 30


def run(coro_fn, *args, timeout: float = 120):
    """Run one scenario coroutine on a fresh asyncio loop, bounded in time."""
    return asyncio.run(asyncio.wait_for(coro_fn(*args), timeout))


async def create(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})])
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, recs: list[Rec], **config) -> list[tuple[int, int]]:
    """Send in order, one producer per codec run; returns (partition, offset) of every ack."""
    acks: list[tuple[int, int]] = []
    i = 0
    while i < len(recs):
        codec = recs[i].codec
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5,
                                    compression_type=None if codec == "none" else codec, **config)
        await producer.start()
        try:
            futures = []
            while i < len(recs) and recs[i].codec == codec:
                r = recs[i]
                futures.append(await producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                                   headers=list(r.headers),
                                                   timestamp_ms=r.timestamp if r.timestamp >= 0 else None))
                i += 1
            await producer.flush()
            acks += [(md.partition, md.offset) for md in await asyncio.gather(*futures)]
        finally:
            await producer.stop()
    return acks


def _gots(batch: dict, tag: str = "") -> list[Got]:
    return [Got(m.partition, m.offset, m.key, m.value, tuple(m.headers or ()), tag, m.timestamp)
            for msgs in batch.values() for m in msgs]


async def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Got]:
    """Read every partition from the beginning (assign, no group) until `expected` records or 30 s."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[Got] = []
        deadline = time.monotonic() + WAIT
        while len(out) < expected and time.monotonic() < deadline:
            out += _gots(await consumer.getmany(timeout_ms=200))
        out += _gots(await consumer.getmany(timeout_ms=500))
        return out
    finally:
        await consumer.stop()


async def _admin(bootstrap: str) -> None:
    topic = unique("aio-admin")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000", "cleanup.policy": "compact"})])
        assert topic in await admin.list_topics()
        (desc,) = await admin.describe_topics([topic])
        assert sorted(p["partition"] for p in desc["partitions"]) == [0, 1, 2]
        (resp,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        (resource,) = resp.resources
        entries = {e[0]: e[1] for e in resource[4]}  # (name, value, read_only, ...)
        assert entries.get("retention.ms") == "3600000"
        assert entries.get("cleanup.policy") == "compact"
        cluster = await admin.describe_cluster()
        assert cluster["cluster_id"] and len(cluster["brokers"]) == 1
        await admin.create_partitions({topic: NewPartitions(5)})
        # Kafka (KRaft) answers CreatePartitions before its metadata cache has the new partitions; a user asks
        # again, and so does this test, for up to 15 s.
        deadline = time.monotonic() + 15
        (desc,) = await admin.describe_topics([topic])
        while len(desc["partitions"]) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            (desc,) = await admin.describe_topics([topic])
        assert len(desc["partitions"]) == 5
        await admin.delete_topics([topic])
        deadline = time.monotonic() + 15
        while topic in await admin.list_topics() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert topic not in await admin.list_topics()
    finally:
        await admin.close()


def test_admin(bootstrap: str) -> None:
    run(_admin, bootstrap)


async def _roundtrip(bootstrap: str, codecs: tuple[str, ...], partitions: int, **config) -> None:
    topic = unique("aio-rt")
    recs = make_records(250, partitions, codecs)
    await create(bootstrap, topic, partitions)
    assert await produce(bootstrap, topic, recs, **config) == expected_offsets(recs)
    assert_exact(recs, await consume_all(bootstrap, topic, partitions, len(recs)))


def test_roundtrip(bootstrap: str) -> None:
    run(_roundtrip, bootstrap, CODECS, 6)


def test_idempotent(bootstrap: str) -> None:
    async def scenario() -> None:
        await _roundtrip(bootstrap, ("gzip",), 3, enable_idempotence=True, acks="all")

    run(scenario)


async def _group(bootstrap: str) -> None:
    topic, group, partitions = unique("aio-group"), unique("aio-g"), 4
    await create(bootstrap, topic, partitions)
    first, second = make_records(40, partitions), make_records(20, partitions, start=40)

    def member() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest", session_timeout_ms=10000, heartbeat_interval_ms=1000)

    a, b = member(), member()
    await a.start()
    await b.start()
    got: dict[str, list[Got]] = {"a": [], "b": []}
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got["a"] += _gots(await a.getmany(timeout_ms=100), "a")
            got["b"] += _gots(await b.getmany(timeout_ms=100), "b")
            if a.assignment() and b.assignment() and len(a.assignment()) + len(b.assignment()) == partitions:
                break
        assert a.assignment() and b.assignment(), f"both members own partitions: {a.assignment()} {b.assignment()}"
        await produce(bootstrap, topic, first)
        deadline = time.monotonic() + WAIT
        while len(got["a"]) + len(got["b"]) < len(first) and time.monotonic() < deadline:
            got["a"] += _gots(await a.getmany(timeout_ms=100), "a")
            got["b"] += _gots(await b.getmany(timeout_ms=100), "b")
        await a.commit()
        await b.commit()
    finally:
        await a.stop()
        await b.stop()
    assert_exact(first, got["a"] + got["b"])
    assert {g.partition for g in got["a"]}.isdisjoint({g.partition for g in got["b"]})
    await produce(bootstrap, topic, second)
    c = member()
    await c.start()
    resumed: list[Got] = []
    try:
        deadline = time.monotonic() + 30
        while len(resumed) < len(second) and time.monotonic() < deadline:
            resumed += _gots(await c.getmany(timeout_ms=200), "c")
        resumed += _gots(await c.getmany(timeout_ms=300), "c")
    finally:
        await c.stop()
    counts = {p: sum(1 for r in first if r.partition == p) for p in range(partitions)}
    assert_exact(second, resumed, counts)


def test_group(bootstrap: str) -> None:
    run(_group, bootstrap, timeout=150)


async def _offsets(bootstrap: str) -> None:
    topic = unique("aio-offsets")
    base_ts = (int(time.time()) - 3600) * 1000
    recs = [Rec(0, None, f"v{i}".encode(), timestamp=base_ts + i * 1000) for i in range(10)]
    await create(bootstrap, topic, 2)
    await produce(bootstrap, topic, recs)
    tp, empty = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        assert await consumer.beginning_offsets([tp, empty]) == {tp: 0, empty: 0}
        assert await consumer.end_offsets([tp, empty]) == {tp: 10, empty: 0}
        found = (await consumer.offsets_for_times({tp: base_ts + 4500}))[tp]
        assert (found.offset, found.timestamp) == (5, base_ts + 5000)
        assert (await consumer.offsets_for_times({tp: base_ts + 1_000_000}))[tp] is None
        consumer.assign([tp])
        consumer.seek(tp, 3)
        seen: list[Got] = []
        deadline = time.monotonic() + WAIT
        while len(seen) < 7 and time.monotonic() < deadline:
            seen += _gots(await consumer.getmany(timeout_ms=200))
        assert [(g.offset, g.value, g.timestamp) for g in seen] == [(i, f"v{i}".encode(), base_ts + i * 1000) for i in range(3, 10)]
    finally:
        await consumer.stop()


def test_offsets(bootstrap: str) -> None:
    run(_offsets, bootstrap)
