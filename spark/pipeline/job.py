"""The streaming job: per-page, per-minute view counts with a watermark, written to Kafka and Parquet.

Two queries share the events topic, each with its own checkpoint:
- update mode -> a compacted topic keyed "page|minute": every change of a count is written, and
  compaction keeps the newest count per key, so the topic converges to the final table;
- append mode -> Parquet partitioned by date: only windows the watermark has closed, each once.
The source format is a parameter: "logway-kafka" (this package) or "kafka" (Spark's own connector).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

WATERMARK_DELAY = "30 seconds"
WATERMARK_DELAY_MS = 30_000
EVENT_SCHEMA = "page STRING, user STRING, ts BIGINT"


@dataclass(frozen=True)
class Topics:
    """Where the job reads events and writes counts."""

    bootstrap: str
    events: str
    counts: str


def page_minute_counts(spark: SparkSession, fmt: str, topics: Topics) -> DataFrame:
    """Streaming DataFrame of (page, minute, views, date) from the events topic."""
    events = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", topics.bootstrap)
              .option("subscribe", topics.events).option("startingOffsets", "earliest").load()
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.page", F.timestamp_millis("e.ts").alias("event_time")))
    return (events.withWatermark("event_time", WATERMARK_DELAY)
            .groupBy(F.window("event_time", "1 minute"), "page").count()
            .select("page", F.col("window.start").alias("minute"), F.col("count").alias("views"),
                    F.date_format("window.start", "yyyy-MM-dd").alias("date")))


def start_topic_sink(counts: DataFrame, fmt: str, topics: Topics, checkpoint: str, **trigger: object) -> StreamingQuery:
    """Counts -> compacted topic: key "page|yyyy-MM-ddTHH:mm", value JSON {page, minute, views}.

    Spark accepts only Append mode for Python streaming sinks, so the update-mode rows go through
    foreachBatch and the batch writer (at-least-once; a replayed batch rewrites the same keys).
    """
    minute = F.date_format("minute", "yyyy-MM-dd'T'HH:mm")
    out = counts.select(F.concat_ws("|", "page", minute).alias("key"),
                        F.to_json(F.struct("page", minute.alias("minute"), "views")).alias("value"))

    def write_batch(batch: DataFrame, _batch_id: int) -> None:
        (batch.write.format(fmt).option("kafka.bootstrap.servers", topics.bootstrap).option("topic", topics.counts)
         .mode("append").save())

    return (out.writeStream.outputMode("update").foreachBatch(write_batch)
            .option("checkpointLocation", checkpoint).trigger(**trigger).start())


def start_parquet_sink(counts: DataFrame, path: str, checkpoint: str, **trigger: object) -> StreamingQuery:
    """Closed windows -> Parquet under path/date=YYYY-MM-DD/ for offline analysis."""
    return (counts.writeStream.outputMode("append").format("parquet").partitionBy("date")
            .option("path", path).option("checkpointLocation", checkpoint).trigger(**trigger).start())


def read_topic_counts(spark: SparkSession, fmt: str, topics: Topics) -> dict[tuple[str, datetime], int]:
    """The table the compacted topic holds: the newest value per key (what compaction converges to)."""
    rows = (spark.read.format(fmt).option("kafka.bootstrap.servers", topics.bootstrap)
            .option("subscribe", topics.counts).load()
            .select(F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value"),
                    "partition", "offset").collect())
    newest: dict[str, str] = {}
    for r in sorted(rows, key=lambda r: (r.partition, r.offset)):  # one key always lands in one partition
        newest[r.key] = r.value
    out = {}
    for value in newest.values():
        doc = json.loads(value)
        out[(doc["page"], datetime.strptime(doc["minute"], "%Y-%m-%dT%H:%M").replace(tzinfo=UTC))] = doc["views"]
    return out


def read_parquet_counts(spark: SparkSession, path: str) -> dict[tuple[str, datetime], int]:
    """The Parquet table as (page, minute) -> views; minutes in UTC."""
    rows = spark.read.parquet(path).select("page", F.unix_millis("minute").alias("ms"), "views").collect()
    return {(r.page, datetime.fromtimestamp(r.ms / 1000, tz=UTC)): r.views for r in rows}


def run_available_now(spark: SparkSession, fmt: str, topics: Topics, work_dir: str, timeout_s: float = 300) -> None:
    """Process everything in the events topic now, into both outputs, and return when both queries finish."""
    for start in (lambda c: start_topic_sink(c, fmt, topics, f"{work_dir}/checkpoints/topic", availableNow=True),
                  lambda c: start_parquet_sink(c, f"{work_dir}/parquet", f"{work_dir}/checkpoints/parquet",
                                               availableNow=True)):
        query = start(page_minute_counts(spark, fmt, topics))
        if not query.awaitTermination(timeout_s):
            query.stop()
            raise TimeoutError(f"query {query.name or query.id} did not finish in {timeout_s}s")
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
