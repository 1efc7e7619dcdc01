"""Structured Streaming: rate limits, both trigger kinds, restart from checkpoint.

Each test runs with Spark's own connector ("kafka") and with "logway-kafka": the same job, the same rows.
"""

import time
import uuid

import pytest

from logway.spark.source import FORMAT

FORMATS = pytest.mark.parametrize("fmt", ["kafka", FORMAT])


def _stream(spark, bootstrap: str, topic: str, fmt: str = FORMAT, **options):
    reader = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load().selectExpr("partition", "offset", "CAST(value AS STRING) AS value")


def _start(df, out: str, checkpoint: str, **trigger):
    return (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
            .trigger(**trigger).start())


def _output(spark, out: str) -> list[tuple]:
    return sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(out).collect())


def _values(acked: list[dict]) -> list[tuple]:
    return sorted((r["partition"], r["offset"], r["value"].decode()) for r in acked)


def _batch(n0: int, n: int) -> list[dict]:
    return [{"partition": i % 2, "key": b"k", "value": f"v{i}".encode()} for i in range(n0, n0 + n)]


@FORMATS
def test_available_now_honours_max_offsets_and_resumes_exactly(spark_session, broker_bootstrap, new_topic,
                                                             produce, tmp_path, fmt):
    topic = new_topic(2)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    acked = produce(topic, _batch(0, 100))

    query = _start(_stream(spark_session, broker_bootstrap, topic, fmt, maxOffsetsPerTrigger="30"), out, checkpoint,
                   availableNow=True)
    query.awaitTermination(120)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [30, 30, 30, 10]  # maxOffsetsPerTrigger split the backlog; AvailableNow read all of it
    assert _output(spark_session, out) == _values(acked)

    acked += produce(topic, _batch(100, 50))
    query = _start(_stream(spark_session, broker_bootstrap, topic, fmt, maxOffsetsPerTrigger="30"), out, checkpoint,
                   availableNow=True)
    query.awaitTermination(120)
    assert sum(p["numInputRows"] for p in query.recentProgress) == 50  # only the new records
    assert _output(spark_session, out) == _values(acked)  # no gap, no duplicate


def _wait_for_rows(spark, out: str, want: int, query, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert query.exception() is None, query.exception()
        try:
            if spark.read.parquet(out).count() >= want:
                return
        except Exception:  # noqa: BLE001 - no output file yet
            pass
        time.sleep(0.5)
    raise AssertionError(f"fewer than {want} rows after {timeout}s")


@FORMATS
def test_processing_time_trigger_reads_new_data_and_restarts(spark_session, broker_bootstrap, new_topic, produce,
                                                             tmp_path, fmt):
    topic = new_topic(2)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    acked = produce(topic, _batch(0, 40))
    query = _start(_stream(spark_session, broker_bootstrap, topic, fmt), out, checkpoint, processingTime="500 milliseconds")
    try:
        _wait_for_rows(spark_session, out, 40, query)
        acked += produce(topic, _batch(40, 40))  # arrives while the query runs
        _wait_for_rows(spark_session, out, 80, query)
    finally:
        query.stop()

    acked += produce(topic, _batch(80, 40))  # arrives while the query is stopped
    query = _start(_stream(spark_session, broker_bootstrap, topic, fmt), out, checkpoint, processingTime="500 milliseconds")
    try:
        _wait_for_rows(spark_session, out, 120, query)
        time.sleep(1.5)  # a few more triggers: nothing may be read twice
    finally:
        query.stop()
    assert _output(spark_session, out) == _values(acked)


@FORMATS
def test_subscribe_pattern_picks_up_a_new_topic_from_its_beginning(spark_session, broker_bootstrap, new_topic,
                                                                  produce, tmp_path, fmt):
    prefix = f"pattern-{uuid.uuid4().hex[:8]}-"
    first = new_topic(2, name=prefix + "a")
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    acked = produce(first, _batch(0, 10))
    df = (spark_session.readStream.format(fmt).option("kafka.bootstrap.servers", broker_bootstrap)
          .option("subscribePattern", f"{prefix}.*").option("startingOffsets", "earliest").load()
          .selectExpr("topic", "offset"))
    _start(df, out, checkpoint, availableNow=True).awaitTermination(120)

    second = new_topic(2, name=prefix + "b")  # appears between runs: read from its beginning, like Spark
    acked += produce(second, _batch(0, 6)) + produce(first, _batch(10, 5))
    _start(df, out, checkpoint, availableNow=True).awaitTermination(120)
    got = sorted((r.topic, r.offset) for r in spark_session.read.parquet(out).collect())
    assert got == sorted([(first, r["offset"]) for r in acked[:10]] + [(second, r["offset"]) for r in acked[10:16]]
                         + [(first, r["offset"]) for r in acked[16:]])


@FORMATS
def test_min_offsets_per_trigger_waits_for_enough_records(spark_session, broker_bootstrap, new_topic, produce,
                                                          tmp_path, fmt):
    topic = new_topic(2)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    acked = produce(topic, _batch(0, 10))
    df = _stream(spark_session, broker_bootstrap, topic, fmt, minOffsetsPerTrigger="25", maxTriggerDelay="1h")
    query = _start(df, out, checkpoint, processingTime="300 milliseconds")
    try:
        _wait_for_rows(spark_session, out, 10, query)  # the first trigger never waits (Spark's lastTriggerMillis = 0)
        acked += produce(topic, _batch(10, 15))  # 15 < 25: held back
        time.sleep(3)
        assert spark_session.read.parquet(out).count() == 10
        acked += produce(topic, _batch(25, 10))  # 25 waiting now: one batch takes all of them
        _wait_for_rows(spark_session, out, 35, query)
        assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [10, 25]
    finally:
        query.stop()
    assert _output(spark_session, out) == _values(acked)
