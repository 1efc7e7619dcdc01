"""What a Prometheus scrape costs with many partitions: `python -m bench.metrics_scrape --partitions 1000`.

Starts a gateway process with metrics.port, creates the partitions (topics of 100), writes a few records to
each, commits a consumer group's offsets for all of them (so lag is reported per partition too), then scrapes
/metrics repeatedly and reports the wall time per scrape (p50 / max), the gateway's CPU time per scrape, and
the size and series count of the answer. Also: what counting one request costs as a plain int increment (how
Logway counts) against a prometheus_client Counter with labels (the alternative it avoids on the hot path).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import timeit
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import CollectorRegistry, Counter

from bench.procs import Logway, free_port

TOPIC_PARTITIONS = 100


def setup(bootstrap: str, partitions: int) -> list[tuple[str, int]]:
    """Topics of TOPIC_PARTITIONS partitions, two records in each, and a group committed to all of them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"scrape-{i}" for i in range(max(1, partitions // TOPIC_PARTITIONS))]
    for future in admin.create_topics([NewTopic(t, TOPIC_PARTITIONS, 1) for t in topics]).values():
        future.result(60)
    tps = [(t, p) for t in topics for p in range(TOPIC_PARTITIONS)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for topic, p in tps:
        for _ in range(2):
            producer.produce(topic, b"x" * 100, partition=p)
    producer.flush(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scrape-group", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(t, p, 1) for t, p in tps], asynchronous=False)
    consumer.close()
    return tps


def scrape(port: int) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        return response.read()


def counter_costs(n: int = 200_000) -> dict[str, float]:
    """ns per increment: a plain int attribute vs prometheus_client's Counter.labels(topic).inc(n)."""

    class Counters:
        __slots__ = ("bytes_in",)

        def __init__(self) -> None:
            self.bytes_in = 0

    plain = Counters()
    counter = Counter("bench_bytes_in", "bench", ["topic"], registry=CollectorRegistry())
    return {
        "plain int attribute += n": timeit.timeit(lambda: setattr(plain, "bytes_in", plain.bytes_in + 100), number=n)
        / n * 1e9,
        "Counter.labels(topic).inc(n)": timeit.timeit(lambda: counter.labels("topic-1").inc(100), number=n) / n * 1e9,
        "(empty lambda call, overhead)": timeit.timeit(lambda: None, number=n) / n * 1e9,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--scrapes", type=int, default=20)
    args = parser.parse_args()
    metrics_port = free_port()
    with tempfile.TemporaryDirectory(prefix="logway-metrics-bench-") as tmp:
        broker = Logway(Path(tmp), {"metrics.port": str(metrics_port), "offsets.topic.num.partitions": "1",
                                    "group.initial.rebalance.delay.ms": "0"})
        broker.start()
        try:
            tps = setup(broker.bootstrap, args.partitions)
            body = scrape(metrics_port)  # warm-up
            walls = []
            cpu_before = broker.cpu_seconds()
            for _ in range(args.scrapes):
                t0 = time.perf_counter()
                body = scrape(metrics_port)
                walls.append((time.perf_counter() - t0) * 1000)
            cpu_ms = (broker.cpu_seconds() - cpu_before) * 1000 / args.scrapes
        finally:
            broker.stop()
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    print(f"{len(tps)} partitions (+1 __consumer_offsets), one group committed on all of them:")
    print(f"  scrape wall time: p50 {statistics.median(walls):.1f} ms, max {max(walls):.1f} ms "
          f"over {args.scrapes} scrapes")
    print(f"  gateway CPU per scrape: {cpu_ms:.1f} ms; answer {len(body) / 1024:.0f} KiB, {series} series")
    print("hot-path counting, ns per increment:")
    for name, ns in counter_costs().items():
        print(f"  {name}: {ns:.0f} ns")


if __name__ == "__main__":
    main()
