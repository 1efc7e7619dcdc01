"""`python -m logway.spark.pipeline [--bootstrap HOST:PORT]`: generate page views, run the job, print and check results.

Without --bootstrap it starts a throw-away Logway gateway (`python -m logway.cli serve`) on a free port.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from logway.spark.local_gateway import local_gateway
from logway.spark.pipeline import events as ev
from logway.spark.pipeline.job import (
    WATERMARK_DELAY_MS,
    Topics,
    read_parquet_counts,
    read_topic_counts,
    run_available_now,
)

REPO = Path(__file__).resolve().parents[2]


def _create_topics(bootstrap: str, topics: Topics, partitions: int) -> None:
    """Events topic with `partitions` partitions; counts topic compacted (cleanup.policy=compact)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [NewTopic(topics.events, partitions, 1),
              NewTopic(topics.counts, partitions, 1, config={"cleanup.policy": "compact"})]
    for name, future in admin.create_topics(wanted, operation_timeout=15).items():
        try:
            future.result(30)
        except Exception as e:  # noqa: BLE001 - an existing topic is fine, anything else is not
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise RuntimeError(f"creating topic {name} failed: {e}") from e


def _session(fmt: str, packages: str | None, master: str = "local[2]", conf: dict[str, str] | None = None):
    """A session on `master` (local[2] unless told, e.g. spark://host:7077 for a standalone cluster) with `conf`;
    for format "kafka", Spark's connector from spark.jars (Maven, see kafka_jars) or spark.jars.packages.

    The jars are local paths: on a cluster the driver serves them and every executor fetches its copy.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName("logway-pipeline")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if packages:
        builder = builder.config("spark.jars.packages", packages)
    elif fmt == "kafka":
        from logway.spark.kafka_jars import connector_jars

        builder = builder.config("spark.jars", ",".join(connector_jars()))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _setting(text: str) -> tuple[str, str]:
    """A --conf KEY=VALUE argument."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _print_table(title: str, counts: dict) -> None:
    print(f"\n{title} ({len(counts)} rows)")
    print(f"  {'minute (UTC)':<17} {'page':<10} {'views':>5}")
    for (page, minute), views in sorted(counts.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"  {minute:%Y-%m-%d %H:%M} {page:<10} {views:>5}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m logway.spark.pipeline", description=__doc__)
    parser.add_argument("--bootstrap", help="HOST:PORT of a Kafka-protocol broker (default: start a Logway gateway)")
    parser.add_argument("--events", type=int, default=2000, help="page views to generate (default 2000)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--events-topic", help="default: page-views-<random>")
    parser.add_argument("--counts-topic", help="default: page-view-counts-<random> (compacted)")
    parser.add_argument("--work-dir", help="checkpoints and Parquet output, kept (default: a temp dir, removed)")
    parser.add_argument("--format", default="logway-kafka", choices=["logway-kafka", "kafka"],
                        help='"logway-kafka" (this package) or "kafka" (Spark\'s own connector, jars fetched with Maven)')
    parser.add_argument("--packages", help="instead of Maven: spark.jars.packages, e.g. "
                        "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 (Spark resolves it with Ivy)")
    parser.add_argument("--producer-config", default="", help="extra librdkafka producer settings k=v,k=v")
    parser.add_argument("--master", default="local[2]", help="Spark master URL, e.g. spark://HOST:7077 for a "
                        "standalone cluster (default local[2])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", type=_setting,
                        help="a Spark setting, as spark-submit's --conf (repeatable), e.g. spark.executor.memory=512m")
    args = parser.parse_args(argv)

    with contextlib.ExitStack() as stack:
        work_dir = args.work_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="logway-pipeline-"))
        bootstrap = args.bootstrap or stack.enter_context(local_gateway(f"{work_dir}/broker-data"))
        return _run(args, bootstrap, work_dir)


def _run(args: argparse.Namespace, bootstrap: str, work_dir: str) -> int:
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(bootstrap, args.events_topic or f"page-views-{suffix}",
                    args.counts_topic or f"page-view-counts-{suffix}")
    extra = dict(kv.split("=", 1) for kv in args.producer_config.split(",") if "=" in kv)

    _create_topics(bootstrap, topics, args.partitions)
    generated = ev.generate(args.events)
    ev.produce(bootstrap, topics.events, generated, extra)
    print(f"produced {len(generated)} page views to {topics.events}")

    spark = _session(args.format, args.packages, args.master, dict(args.conf))
    try:
        if args.format == "logway-kafka":
            from logway.spark.source import register

            register(spark)
        started = time.monotonic()
        run_available_now(spark, args.format, topics, work_dir)
        kept = "" if args.work_dir else " (a temp dir, removed at exit; --work-dir keeps it)"
        print(f"job finished in {time.monotonic() - started:.1f}s; Parquet under {work_dir}/parquet{kept}")

        expected = ev.expected_counts(generated)
        closed = ev.closed_windows(expected, generated, WATERMARK_DELAY_MS)
        from_topic = read_topic_counts(spark, args.format, topics)
        from_parquet = read_parquet_counts(spark, f"{work_dir}/parquet")
    finally:
        spark.stop()
    _print_table(f"counts in compacted topic {topics.counts}", from_topic)
    _print_table("closed windows in Parquet", from_parquet)
    ok_topic, ok_parquet = from_topic == expected, from_parquet == closed
    print(f"\ncompacted topic equals plain-Python counts: {ok_topic}")
    print(f"Parquet equals plain-Python counts of windows closed by the watermark: {ok_parquet}")
    return 0 if ok_topic and ok_parquet else 1

if __name__ == "__main__":
    sys.exit(main())
