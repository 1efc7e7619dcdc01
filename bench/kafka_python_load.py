"""kafka-python load: the same throughput producer and from-earliest consumer, for Python users' expectations."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from bench.loadgen import payloads, ready


def produce(spec: dict) -> dict:
    """Send `count` messages of `size` bytes with one KafkaProducer (linger 5 ms, 1 MiB batches)."""
    producer = KafkaProducer(
        bootstrap_servers=spec["bootstrap"], acks=1 if spec.get("acks", "1") == "1" else "all",
        linger_ms=5, batch_size=1 << 20, max_request_size=1 << 21,
        compression_type=None if spec.get("compression", "none") == "none" else spec["compression"],
    )
    producer.partitions_for(spec["topic"])  # connect and load metadata before the clock starts
    topic, count = spec["topic"], spec["count"]
    values = payloads(spec["size"])
    nvalues = len(values)
    ready()
    start = time.monotonic()
    futures = [producer.send(topic, values[i % nvalues]) for i in range(count)]
    producer.flush(timeout=spec.get("timeout", 300))
    end = time.monotonic()
    failed = sum(1 for f in futures if not f.succeeded())
    producer.close(timeout=10)
    return {"start": start, "end": end, "messages": count - failed, "bytes": (count - failed) * spec["size"],
            "errors": failed}


def consume(spec: dict) -> dict:
    """Read the `assign` partitions from earliest up to their `ends` offsets with assign() and poll()."""
    consumer = KafkaConsumer(bootstrap_servers=spec["bootstrap"], enable_auto_commit=False, fetch_max_wait_ms=500,
                             max_partition_fetch_bytes=1 << 20)
    topic, count = spec["topic"], sum(spec["ends"])
    partitions = [TopicPartition(topic, p) for p in spec["assign"]]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    consumer.beginning_offsets(partitions)  # connect and load metadata before the clock starts
    ready()
    start = time.monotonic()
    deadline = start + spec.get("timeout", 300)
    got = 0
    while got < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500, max_records=10000).values():
            got += len(records)
    end = time.monotonic()
    consumer.close()
    return {"start": start, "end": end, "messages": got, "bytes": got * spec["size"], "errors": 0}
