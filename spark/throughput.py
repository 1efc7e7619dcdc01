"""`python -m logway.spark.throughput [--bootstrap HOST:PORT] --mb 1024`: Spark batch-read throughput from a broker.

Fills a topic with fixed-size records (unless it already holds them), then times a local[2] Spark
job that reads every record through the data source and sums the value lengths, so every byte
crosses from the executors' Python workers into the JVM. Prints session start-up and read rates.
Without --bootstrap it starts a throw-away Logway gateway with its data in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from logway.spark.local_gateway import run_against_broker

REPO = Path(__file__).resolve().parents[1]


def fill_topic(bootstrap: str, topic: str, total_bytes: int, record_bytes: int, partitions: int) -> int:
    """Create `topic` and produce total_bytes of values; returns the record count (existing data is kept)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=15)
    try:
        futures[topic].result(30)
    except ck.KafkaException as e:
        if e.args[0].code() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "throughput-probe"})
    have = sum(consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    consumer.close()
    want = total_bytes // record_bytes
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": "20", "batch.size": str(1 << 20),
                            "queue.buffering.max.kbytes": str(256 * 1024)})
    payload = os.urandom(record_bytes)
    for i in range(have, want):
        while True:
            try:
                producer.produce(topic, value=payload, key=b"%d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) != 0:
        raise RuntimeError("producer did not drain in 300s")
    return max(want, have)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m logway.spark.throughput", description=__doc__)
    parser.add_argument("--bootstrap", help="HOST:PORT of a broker (default: start a Logway gateway)")
    parser.add_argument("--mb", type=int, default=1024, help="topic size in MiB of values (default 1024)")
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--topic", default=None, help="default: spark-throughput-<mb>mb")
    parser.add_argument("--formats", default="kafka,logway-kafka",
                        help="comma-separated: kafka (Spark's own connector, jars from Maven) and/or logway-kafka")
    args = parser.parse_args(argv)
    return run_against_broker(args.bootstrap, "logway-throughput-", lambda bootstrap: _measure(args, bootstrap))


def _measure(args: argparse.Namespace, bootstrap: str) -> int:
    topic = args.topic or f"spark-throughput-{args.mb}mb"

    started = time.monotonic()
    records = fill_topic(bootstrap, topic, args.mb << 20, args.record_bytes, args.partitions)
    print(f"topic {topic}: {records} records of {args.record_bytes} B ready in {time.monotonic() - started:.1f}s")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    import pyspark.sql.functions as F
    from pyspark.sql import SparkSession

    from logway.spark.kafka_jars import connector_jars
    from logway.spark.source import register

    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    started = time.monotonic()
    builder = (SparkSession.builder.master("local[2]").appName("logway-spark-throughput")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false"))
    if "kafka" in formats:
        builder = builder.config("spark.jars", ",".join(connector_jars()))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    print(f"SparkSession local[2] started in {time.monotonic() - started:.1f}s")

    for fmt in formats:
        df = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
        for attempt in (1, 2):  # the first run also pays for starting the Python workers / JVM consumers
            started = time.monotonic()
            row = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).first()
            took = time.monotonic() - started
            print(f"{fmt} run {attempt}: {row.n} rows, {row.b / 2**20:.0f} MiB of values in {took:.1f}s = "
                  f"{row.b / 2**20 / took:.1f} MiB/s, {row.n / took:,.0f} rows/s")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
