"""librdkafka (confluent-kafka) load: throughput producer/consumer, paced e2e pair, fetch-latency probe."""

from __future__ import annotations

import json
import os
import random
import struct
import time

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition

from bench.loadgen import payloads, ready

STAMP = struct.Struct(">q")


def _producer(spec: dict, errors: list[int]) -> Producer:
    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors[0] += 1

    producer = Producer({
        "bootstrap.servers": spec["bootstrap"],
        "acks": spec.get("acks", "all"),
        "compression.type": spec.get("compression", "none"),
        "linger.ms": spec.get("linger_ms", 5),
        "batch.size": spec.get("batch_size", 1 << 20),
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1 << 20,
        "message.timeout.ms": int(spec.get("timeout", 300) * 1000),
        "delivery.report.only.error": True,
        "on_delivery": on_delivery,
        **spec.get("config", {}),  # e.g. enable.idempotence, transactional.id
    })
    producer.list_topics(spec["topic"], timeout=30)  # connect and load metadata before the clock starts
    return producer


def _consumer(spec: dict) -> Consumer:
    consumer = Consumer({
        "bootstrap.servers": spec["bootstrap"],
        "group.id": f"bench-{os.getpid()}",  # required by the client; offsets are never committed (assign only)
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.wait.max.ms": spec.get("fetch_wait_ms", 500),
        # librdkafka's default is read_committed; the transactions section sets each level explicitly.
        **({"isolation.level": spec["isolation"]} if "isolation" in spec else {}),
        **spec.get("config", {}),
    })
    consumer.list_topics(spec["topic"], timeout=30)
    return consumer


def produce(spec: dict) -> dict:
    """Send `count` messages of `size` bytes round-robin over `producers` client instances, as fast as possible."""
    errors = [0]
    producers = [_producer(spec, errors) for _ in range(spec.get("producers", 1))]
    topic, count, k = spec["topic"], spec["count"], len(producers)
    values = payloads(spec["size"])
    nvalues = len(values)
    # round_robin: record i goes to partition i % round_robin, so each partition's count is known exactly;
    # otherwise librdkafka's default partitioner (sticky for null keys) chooses.
    spread = spec.get("round_robin", 0)
    ready()
    start = time.monotonic()
    deadline = start + spec.get("timeout", 300)
    for i in range(count):
        producer = producers[i % k]
        while True:
            try:
                if spread:
                    producer.produce(topic, values[i % nvalues], partition=i % spread)
                else:
                    producer.produce(topic, values[i % nvalues])
                break
            except BufferError:
                producer.poll(0.005)
                if time.monotonic() > deadline:
                    raise TimeoutError("produce queue did not drain before the deadline") from None
        if i & 1023 == 0:
            producer.poll(0)
    undelivered = sum(p.flush(max(1.0, deadline - time.monotonic())) for p in producers)
    end = time.monotonic()
    failed = errors[0] + undelivered
    return {"start": start, "end": end, "messages": count - failed, "bytes": (count - failed) * spec["size"],
            "errors": failed}


def consume(spec: dict) -> dict:
    """Read the `assign` partitions from earliest up to their `ends` offsets (no group) as fast as possible.

    No per-message Python work: the client, not the broker, would be the limit. Messages are counted per
    batch and completion is checked with position() once the count is reached (error events do not move it).
    """
    consumer = _consumer(spec)
    topic, ends = spec["topic"], spec["ends"]
    partitions = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in spec["assign"]]
    # A transactional backlog: `ends` are log end offsets (markers included), `count` the records to read.
    count = spec.get("count", sum(ends))
    ready()
    start = time.monotonic()
    deadline = start + spec.get("timeout", 300)
    consumer.assign(partitions)
    got = 0
    while time.monotonic() < deadline:
        got += len(consumer.consume(10000, 0.5))
        if got >= count and all(tp.offset >= end for tp, end in zip(consumer.position(partitions), ends, strict=True)):
            break
    end = time.monotonic()
    done = sum(min(max(tp.offset, 0), e) for tp, e in zip(consumer.position(partitions), ends, strict=True))
    if "count" in spec:  # positions count the markers too: count the records read
        done = min(got, count)
    consumer.close()
    return {"start": start, "end": end, "messages": done, "bytes": done * spec["size"], "errors": count - done}


def txn_produce(spec: dict) -> dict:
    """Send `count` messages of `size` bytes round-robin over the partitions in transactions of `txn_records`."""
    errors = [0]
    producer = _producer({**spec, "timeout": 60, "config": {"transactional.id": f"bench-{os.getpid()}"}}, errors)
    producer.init_transactions(30)
    topic, count, per_txn, spread = spec["topic"], spec["count"], spec["txn_records"], spec["round_robin"]
    values = payloads(spec["size"])
    nvalues = len(values)
    ready()
    start = time.monotonic()
    deadline = start + spec.get("timeout", 300)
    for first in range(0, count, per_txn):
        producer.begin_transaction()
        for i in range(first, min(count, first + per_txn)):
            while True:
                try:
                    producer.produce(topic, values[i % nvalues], partition=i % spread)
                    break
                except BufferError:
                    producer.poll(0.005)
        producer.commit_transaction(max(1.0, deadline - time.monotonic()))
    end = time.monotonic()
    return {"start": start, "end": end, "messages": count - errors[0], "bytes": (count - errors[0]) * spec["size"],
            "errors": errors[0]}


def e2e_produce(spec: dict) -> dict:
    """Send at a paced `rate` msg/s for `duration` s, each value starting with the monotonic send time in ns."""
    errors = [0]
    producer = _producer({**spec, "linger_ms": spec.get("linger_ms", 0)}, errors)
    topic, rate = spec["topic"], spec["rate"]
    total = int(rate * spec["duration"])
    pad = bytes(spec["size"] - STAMP.size)
    ready()
    start = time.monotonic()
    deadline = start + spec["duration"] * 2 + 10
    sent = 0
    while sent < total and time.monotonic() < deadline:
        due = min(total, int((time.monotonic() - start) * rate) + 1)
        while sent < due:
            producer.produce(topic, STAMP.pack(time.monotonic_ns()) + pad)
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    undelivered = producer.flush(30)
    return {"start": start, "end": time.monotonic(), "sent": sent, "errors": errors[0] + undelivered}


def e2e_consume(spec: dict) -> dict:
    """Tail the topic and record, per message, receive time minus the send time stamped in its value."""
    consumer = _consumer({**spec, "fetch_wait_ms": 500})
    consumer.assign([TopicPartition(spec["topic"], p, OFFSET_BEGINNING) for p in range(spec["partitions"])])
    for _ in range(4):  # let the fetch loop start before the producer does
        consumer.consume(100, 0.25)
    ready()
    expected = spec["count"]
    deadline = time.monotonic() + spec["timeout"]
    latencies: list[int] = []
    worst: dict[int, int] = {}  # second since the first send -> worst latency of messages sent in it
    first_sent = None
    while len(latencies) < expected and time.monotonic() < deadline:
        # poll(), not consume(n): consume waits for n messages or the timeout, which would add to the latency.
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            sent_ns = STAMP.unpack_from(message.value())[0]
            latency = time.monotonic_ns() - sent_ns
            latencies.append(latency)
            first_sent = sent_ns if first_sent is None else first_sent
            second = (sent_ns - first_sent) // 1_000_000_000
            worst[second] = max(worst.get(second, 0), latency)
    consumer.close()
    latencies.sort()
    n = len(latencies)
    if n == 0:
        return {"received": 0}
    return {"received": n, "p50_ms": latencies[(n - 1) // 2] / 1e6,
            "p99_ms": latencies[min(n - 1, int(n * 0.99))] / 1e6, "max_ms": latencies[-1] / 1e6,
            "worst_ms_by_second": [round(worst[k] / 1e6, 1) for k in sorted(worst)]}


def fetch_probe(spec: dict) -> dict:
    """Time from assign() at a random old offset to receiving that record, `probes` times."""
    consumer = _consumer(spec)
    topic, high = spec["topic"], spec["high"]
    rng = random.Random(spec.get("seed", 1))
    region = max(1, int(high * spec.get("region", 0.1)))
    ready()

    def first_at(offset: int) -> float:
        t0 = time.monotonic()
        consumer.assign([TopicPartition(topic, 0, offset)])
        deadline = t0 + 30
        while time.monotonic() < deadline:
            for message in consumer.consume(1, 0.05):
                if message.error() is None and message.offset() >= offset:
                    elapsed = time.monotonic() - t0
                    consumer.unassign()
                    return elapsed
        raise TimeoutError(f"no record at offset {offset} within 30 s")

    # Warm the connection on old data, not the tail: a fetch parked at the tail is a long poll that the next
    # assign() would wait out (fetch.wait.max.ms), which measures the client, not the broker.
    first_at(0)
    latencies = [first_at(rng.randrange(region)) * 1000 for _ in range(spec["probes"])]
    consumer.close()
    return {"latencies_ms": latencies}


def tail_idle(spec: dict) -> dict:
    """Tail `partitions` partitions that get no records, with a long poll of `fetch_wait_ms`, for `duration` s.

    The Fetch requests sent are counted by librdkafka itself (its statistics' per-broker request counts), so the
    figure is the same for every broker: Fetch requests per second over the statistics between the release and
    the end, which the driver sets beside the broker's CPU over the same window.
    """
    stats: list[tuple[float, int]] = []

    def on_stats(raw: str) -> None:
        fetches = sum(b.get("req", {}).get("Fetch", 0) for b in json.loads(raw)["brokers"].values())
        stats.append((time.monotonic(), fetches))

    consumer = _consumer({**spec, "config": {"statistics.interval.ms": 1000, "stats_cb": on_stats}})
    consumer.assign([TopicPartition(spec["topic"], p, OFFSET_END) for p in range(spec["partitions"])])
    deadline = time.monotonic() + 60
    while (len(stats) < 2 or stats[-1][1] - stats[0][1] < 5) and time.monotonic() < deadline:
        consumer.poll(0.2)  # until its fetch loop runs: the first long polls and offset lookups are set-up
    ready()
    start = time.monotonic()
    first = len(stats)
    while time.monotonic() < start + spec["duration"]:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            raise RuntimeError("a record arrived on a partition that was to stay idle")
    window = stats[first:]
    consumer.close()
    if len(window) < 2:
        return {"start": start, "end": time.monotonic(), "fetches_per_s": 0.0}
    (t0, n0), (t1, n1) = window[0], window[-1]
    return {"start": start, "end": time.monotonic(), "fetches_per_s": (n1 - n0) / (t1 - t0)}
