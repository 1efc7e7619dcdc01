"""`python -m logway.spark.latency [--bootstrap HOST:PORT] --rate 5000 --seconds 60`: Structured Streaming latency.

The main thread produces `rate` records a second (the send wall-clock time is the record's CreateTime)
for a bounded time while a local[2] streaming query reads the topic with each format; its foreachBatch
notes, per micro-batch, the rows and the end-to-end latency (wall clock when the batch's rows reached
the driver minus the oldest record's produce time), and the query's progress gives each batch's
duration (`durationMs.triggerExecution`). Prints one row per format and trigger. Without --bootstrap
it starts a throw-away Logway gateway with its data in a temporary directory.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from logway.spark.local_gateway import run_against_broker

REPO = Path(__file__).resolve().parents[1]
WARM_UP_RECORDS = 20


@dataclass
class BatchSeen:
    """What foreachBatch saw of one micro-batch: per-partition offset ranges and produce times."""

    batch_id: int
    rows: int
    ranges: dict[int, tuple[int, int, int]]  # partition -> (first offset, last offset, rows)
    max_latency_ms: float  # now - oldest record's produce time
    min_latency_ms: float  # now - newest record's produce time


@dataclass
class Produced:
    """The producer thread's result: acknowledged records per partition and the rate it achieved."""

    acked: dict[int, int] = field(default_factory=dict)
    failed: int = 0
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.acked.values())


@dataclass
class LatencyResult:
    """One streaming run's figures, over the timed micro-batches (warm-up batches left out)."""

    fmt: str
    trigger_ms: int
    produced: int
    produce_rate: float
    seen: int
    exactly_once: bool
    batches: int
    rows_per_batch_p50: float
    duration_ms_p50: float
    duration_ms_p99: float
    latency_ms_p50: float
    latency_ms_p99: float

    def row(self) -> str:
        trigger = f"{self.trigger_ms} ms" if self.trigger_ms else "default"
        return (f"| {self.fmt} | {trigger} | {self.produced:,} at {self.produce_rate:,.0f}/s | "
                f"{'yes' if self.exactly_once else 'NO'} | {self.batches} | {self.rows_per_batch_p50:,.0f} | "
                f"{self.duration_ms_p50:,.0f} / {self.duration_ms_p99:,.0f} | "
                f"{self.latency_ms_p50:,.0f} / {self.latency_ms_p99:,.0f} |")


HEADER = ("| format | trigger | records produced | each seen once | micro-batches | rows/batch p50 | "
          "batch duration ms p50 / p99 | end-to-end latency ms p50 / p99 (max per batch) |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def create_topic(bootstrap: str, partitions: int) -> str:
    """A fresh topic for one run."""
    name = f"spark-latency-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer: its futures need it
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=15)[name].result(30)
    return name


def produce(bootstrap: str, topic: str, partitions: int, rate: float, seconds: float, value_bytes: int,
            first_key: int = 0) -> Produced:
    """Produce `rate` records a second for `seconds`, round-robin over partitions, CreateTime = send time."""
    out = Produced()
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": "5", "acks": "all"})
    payload = b"x" * value_bytes

    def on_delivery(err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is not None:
            out.failed += 1
        else:
            out.acked[msg.partition()] = out.acked.get(msg.partition(), 0) + 1

    started = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - started) < seconds:
        for _ in range(min(int(elapsed * rate) + 1, math.ceil(seconds * rate)) - sent):
            i = first_key + sent
            while True:
                try:
                    producer.produce(topic, value=payload, key=b"%d" % i, partition=i % partitions,
                                     timestamp=int(time.time() * 1000), on_delivery=on_delivery)
                    break
                except BufferError:  # librdkafka's queue is full: the broker is behind
                    producer.poll(0.01)
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    out.seconds = time.monotonic() - started
    if producer.flush(60) != 0:
        raise RuntimeError("producer did not drain in 60s")
    return out


def exactly_once(batches: list[BatchSeen], acked: dict[int, int]) -> bool:
    """True when the batches' offset ranges tile every partition from 0 to its acknowledged end, no gap, no overlap."""
    for partition in set(acked) | {p for b in batches for p in b.ranges}:
        ranges = sorted(b.ranges[partition] for b in batches if partition in b.ranges)
        expected_first = 0
        for first, last, rows in ranges:
            if first != expected_first or rows != last - first + 1:
                return False
            expected_first = last + 1
        if expected_first != acked.get(partition, 0):
            return False
    return True


def measure_latency(spark, bootstrap: str, fmt: str, *, rate: float = 5000, seconds: float = 60,
                    trigger_ms: int = 1000, value_bytes: int = 1024, partitions: int = 2,
                    drain_timeout: float = 60) -> LatencyResult:
    """One timed streaming run on a fresh topic: warm-up records first (starts the workers), then the load."""
    import pyspark.sql.functions as F

    topic = create_topic(bootstrap, partitions)
    seen: list[BatchSeen] = []

    def on_batch(df, batch_id: int) -> None:
        rows = (df.groupBy("partition")
                .agg(F.count("*").alias("n"), F.min("offset").alias("first"), F.max("offset").alias("last"),
                     F.min(F.unix_millis("timestamp")).alias("oldest"),
                     F.max(F.unix_millis("timestamp")).alias("newest"))
                .collect())
        now_ms = time.time() * 1000
        if rows:
            seen.append(BatchSeen(batch_id, sum(r.n for r in rows), {r.partition: (r.first, r.last, r.n) for r in rows},
                                  now_ms - min(r.oldest for r in rows), now_ms - max(r.newest for r in rows)))

    retention_key = "spark.sql.streaming.numRecentProgressUpdates"  # recentProgress keeps 100 by default
    retention = spark.conf.get(retention_key, None)
    spark.conf.set(retention_key, "100000")
    stream = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
              .option("startingOffsets", "earliest").load())
    with tempfile.TemporaryDirectory(prefix="logway-latency-") as checkpoint:
        writer = stream.writeStream.foreachBatch(on_batch).option("checkpointLocation", checkpoint)
        if trigger_ms:
            writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds")
        try:
            query = writer.start()  # the query runs on a clone of the session's conf, taken here
        finally:
            if retention is None:
                spark.conf.unset(retention_key)
            else:
                spark.conf.set(retention_key, retention)
        try:
            warm = produce(bootstrap, topic, partitions, WARM_UP_RECORDS / 0.2, 0.2, value_bytes)
            _wait_until(lambda: sum(b.rows for b in seen) >= warm.total, query, drain_timeout)
            warm_batches = len(seen)
            timed = produce(bootstrap, topic, partitions, rate, seconds, value_bytes, first_key=warm.total)
            acked = {p: warm.acked.get(p, 0) + timed.acked.get(p, 0) for p in set(warm.acked) | set(timed.acked)}
            _wait_until(lambda: sum(b.rows for b in seen) >= sum(acked.values()), query, drain_timeout)
            # The last batch's progress is posted just after its foreachBatch returns.
            _wait_until(lambda: any(p["batchId"] >= seen[-1].batch_id for p in query.recentProgress), query, 30)
            progress = {p["batchId"]: p["durationMs"]["triggerExecution"] for p in query.recentProgress}
        finally:
            query.stop()
    timed_batches = seen[warm_batches:]
    durations = [progress[b.batch_id] for b in timed_batches if b.batch_id in progress]
    latencies = [b.max_latency_ms for b in timed_batches]
    return LatencyResult(
        fmt=fmt, trigger_ms=trigger_ms, produced=timed.total, produce_rate=timed.total / timed.seconds,
        seen=sum(b.rows for b in timed_batches), exactly_once=exactly_once(seen, acked) and not timed.failed,
        batches=len(timed_batches), rows_per_batch_p50=percentile([b.rows for b in timed_batches], 50),
        duration_ms_p50=percentile(durations, 50), duration_ms_p99=percentile(durations, 99),
        latency_ms_p50=percentile(latencies, 50), latency_ms_p99=percentile(latencies, 99))


def _wait_until(done, query, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the query did not catch up within {timeout}s")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m logway.spark.latency", description=__doc__)
    parser.add_argument("--bootstrap", help="HOST:PORT of a broker (default: start a Logway gateway)")
    parser.add_argument("--rate", type=float, default=5000, help="records per second (default 5000)")
    parser.add_argument("--seconds", type=float, default=60, help="how long to produce (default 60)")
    parser.add_argument("--record-bytes", type=int, default=1024, help="value size (default 1024)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--format", default="logway-kafka,kafka",
                        help="comma-separated: logway-kafka and/or kafka (Spark's own connector, jars from Maven)")
    parser.add_argument("--trigger-ms", default="1000",
                        help="comma-separated processingTime triggers in ms; 0 = default trigger (as fast as possible)")
    args = parser.parse_args(argv)
    return run_against_broker(args.bootstrap, "logway-latency-", lambda bootstrap: _measure(args, bootstrap))


def _measure(args: argparse.Namespace, bootstrap: str) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    from logway.spark.kafka_jars import connector_jars
    from logway.spark.source import register

    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    triggers = [int(t) for t in args.trigger_ms.split(",") if t.strip()]
    started = time.monotonic()
    builder = (SparkSession.builder.master("local[2]").appName("logway-spark-latency")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    if "kafka" in formats:
        builder = builder.config("spark.jars", ",".join(connector_jars()))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    print(f"SparkSession local[2] started in {time.monotonic() - started:.1f}s; "
          f"{args.rate:,.0f} records/s of {args.record_bytes} B for {args.seconds:.0f}s per run")
    results = []
    try:
        for fmt in formats:
            for trigger_ms in triggers:
                result = measure_latency(spark, bootstrap, fmt, rate=args.rate, seconds=args.seconds,
                                         trigger_ms=trigger_ms, value_bytes=args.record_bytes,
                                         partitions=args.partitions)
                print(result.row(), flush=True)
                results.append(result)
    finally:
        spark.stop()
    print()
    print(HEADER)
    for result in results:
        print(result.row())
    return 0 if all(r.exactly_once for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
