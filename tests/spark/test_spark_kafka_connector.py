"""Spark's own Kafka connector (format "kafka", unchanged) against Logway, row for row beside "logway-kafka".

Written as a Spark user writes jobs; every read is done with both formats on the same topic and the
rows must be equal, and equal to what was produced.
"""

import time
import uuid
from datetime import UTC, datetime

import confluent_kafka as ck
import pyspark.sql.functions as F
import pytest
from pyspark.errors import StreamingQueryException

from logway.spark.source import FORMAT

FORMATS = ["kafka", FORMAT]
COLUMNS = ["key", "value", "topic", "partition", "offset", "ts_ms", "timestampType", "headers"]


def _read(spark, fmt: str, bootstrap: str, **options):
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _rows(df) -> list[tuple]:
    out = []
    for r in df.withColumn("ts_ms", F.unix_millis("timestamp")).select(*COLUMNS).collect():
        headers = None if r.headers is None else [(h.key, h.value) for h in r.headers]
        out.append((r.key, r.value, r.topic, r.partition, r.offset, r.ts_ms, r.timestampType, headers))
    return sorted(out, key=lambda t: (t[2], t[3], t[4]))


def _both(spark, bootstrap: str, **options) -> list[tuple]:
    """Rows of the same read through both formats; they must agree."""
    theirs, ours = (_rows(_read(spark, fmt, bootstrap, includeHeaders="true", **options)) for fmt in FORMATS)
    assert ours == theirs
    return ours


def _records(n: int, partitions: int) -> list[dict]:
    return [{"partition": i % partitions, "key": None if i % 5 == 0 else f"k{i}".encode(),
             "value": None if i == 7 else f"value-{i}".encode(),
             "headers": [("h1", f"x{i}".encode()), ("h2", None)] if i % 2 else None,
             "timestamp": 1_700_000_000_000 + i} for i in range(n)]


def _expected(topic: str, acked: list[dict]) -> list[tuple]:
    return [(r["key"], r["value"], topic, r["partition"], r["offset"], r["timestamp"], 0, r["headers"])
            for r in acked]


def test_batch_reads_agree_for_subscribe_pattern_and_assign(spark_session, broker_bootstrap, new_topic, produce):
    prefix = f"both-{uuid.uuid4().hex[:8]}-"
    topic, other = new_topic(3, name=prefix + "a"), new_topic(1, name=prefix + "b")
    acked = produce(topic, _records(120, 3))
    other_acked = produce(other, _records(10, 1))

    assert _both(spark_session, broker_bootstrap, subscribe=topic) == _expected(topic, acked)
    assert _both(spark_session, broker_bootstrap, subscribePattern=prefix + ".*") == sorted(
        _expected(topic, acked) + _expected(other, other_acked), key=lambda t: (t[2], t[3], t[4]))
    ranged = _both(spark_session, broker_bootstrap, assign=f'{{"{topic}":[0,2]}}',
                   startingOffsets=f'{{"{topic}":{{"0":5,"2":-2}}}}',
                   endingOffsets=f'{{"{topic}":{{"0":-1,"2":12}}}}')
    assert ranged == [t for t in _expected(topic, acked)
                      if (t[3] == 0 and t[4] >= 5) or (t[3] == 2 and t[4] < 12)]


def test_empty_topic_reads_as_an_empty_dataframe(spark_session, broker_bootstrap, new_topic):
    topic = new_topic(2)
    for fmt in FORMATS:
        assert _read(spark_session, fmt, broker_bootstrap, subscribe=topic).count() == 0


def test_missing_topic_is_a_clear_error(spark_session, broker_bootstrap):
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(Exception, match="UnknownTopicOrPartition"):
        _read(spark_session, "kafka", broker_bootstrap, subscribe=missing).count()
    with pytest.raises(Exception, match=f"Subscribed topic.*{missing} do not exist.*failOnDataLoss"):
        _read(spark_session, FORMAT, broker_bootstrap, subscribe=missing).count()
    assert _read(spark_session, FORMAT, broker_bootstrap, subscribe=missing, failOnDataLoss="false").count() == 0


def test_format_is_found_without_register(spark_session):
    # The session fixture never calls register(spark): PySpark found `pyspark_logway` on the workers' path.
    sources = spark_session._jsparkSession.sessionState().dataSourceManager()
    assert sources.dataSourceExists(FORMAT)


def _sink_frame(spark, topic: str):
    rows = [(topic, i % 2, f"k{i}", f"v{i}".encode(), datetime(2024, 3, 1, 12, 0, i, tzinfo=UTC)) for i in range(20)]
    df = spark.createDataFrame(rows, "topic string, partition int, key string, value binary, timestamp timestamp")
    # A headers column built by hand: non-nullable fields, unlike the source schema's nullable ones.
    return df.withColumn("headers", F.array(F.struct(F.lit("trace").alias("key"), F.col("value").alias("value"))))


@pytest.mark.parametrize("fmt", FORMATS)
def test_batch_write_with_hand_built_headers_and_partition(spark_session, broker_bootstrap, new_topic, fmt):
    topic = new_topic(2)
    _sink_frame(spark_session, topic).write.format(fmt).option("kafka.bootstrap.servers", broker_bootstrap) \
        .mode("append").save()
    got = _read(spark_session, FORMAT, broker_bootstrap, subscribe=topic, includeHeaders="true").collect()
    assert sorted((r.partition, r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in got) == sorted(
        (i % 2, f"k{i}".encode(), f"v{i}".encode(), [("trace", f"v{i}".encode())]) for i in range(20))


def test_timestamp_column_sets_create_time(spark_session, broker_bootstrap, new_topic):
    # Spark 4.2's own sink ignores a timestamp column; newer Spark and logway-kafka write it as CreateTime.
    topic = new_topic(2)
    _sink_frame(spark_session, topic).write.format(FORMAT).option("kafka.bootstrap.servers", broker_bootstrap) \
        .mode("append").save()
    got = _read(spark_session, "kafka", broker_bootstrap, subscribe=topic).select("key", "timestamp", "timestampType")
    assert sorted((r.key, r.timestamp, r.timestampType) for r in got.collect()) == sorted(
        (f"k{i}".encode(), datetime(2024, 3, 1, 12, 0, i), 0) for i in range(20))


def test_default_save_mode(spark_session, broker_bootstrap, new_topic):
    topic = new_topic(1)
    df = spark_session.createDataFrame([("k", "v")], "key string, value string")
    df.write.format("kafka").option("kafka.bootstrap.servers", broker_bootstrap).option("topic", topic).save()
    # Spark refuses ErrorIfExists for every Python data source before calling it; its message names Append.
    with pytest.raises(Exception, match='UNSUPPORTED_DATA_SOURCE_SAVE_MODE.*"Append"'):
        df.write.format(FORMAT).option("kafka.bootstrap.servers", broker_bootstrap).option("topic", topic).save()
    with pytest.raises(Exception, match=r'Overwrite not allowed.*\.mode\("append"\)'):
        (df.write.format(FORMAT).option("kafka.bootstrap.servers", broker_bootstrap).option("topic", topic)
         .mode("overwrite").save())


@pytest.fixture
def retention_gateway(gateway_process):
    """A private broker that applies retention every 200 ms."""
    gateway_process.extra_args = ("--override", "log.retention.check.interval.ms=200")
    gateway_process.start()
    yield gateway_process.bootstrap


def test_fail_on_data_loss_after_retention_deletes_records(spark_session, retention_gateway, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap, topic = retention_gateway, "retained"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"segment.bytes": "1024", "retention.ms": "60000"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(15)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": "0", "batch.num.messages": "1"})
    old = int(time.time() * 1000) - 3_600_000  # an hour old: past retention.ms once its segment is closed
    for i in range(60):
        producer.produce(topic, value=b"old-%03d" % i + b"." * 100, timestamp=old + i)
        producer.flush(10)
    producer.produce(topic, value=b"new")
    assert producer.flush(10) == 0
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    deadline = time.monotonic() + 30
    while (low := consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), cached=False)[0]) == 0:
        assert time.monotonic() < deadline, "retention deleted nothing"
        time.sleep(0.2)
    consumer.close()

    everything = {"subscribe": topic, "startingOffsets": f'{{"{topic}":{{"0":0}}}}', "kafkaConsumer.pollTimeoutMs": "5000"}
    for fmt in FORMATS:
        with pytest.raises(Exception, match="(?i)data may have been lost|out of range"):
            _read(spark_session, fmt, bootstrap, **everything).count()
    rows = _both(spark_session, bootstrap, failOnDataLoss="false", **everything)
    offsets = [r[4] for r in rows]  # retention may have moved on since `low`: from the log start, no gaps
    assert offsets[0] >= low and offsets == list(range(offsets[0], 61)) and rows[-1][1] == b"new"


@pytest.mark.parametrize("fmt", FORMATS)
def test_streaming_restart_after_retention_deleted_unread_records(spark_session, retention_gateway, tmp_path, fmt):
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap, topic = retention_gateway, f"retained-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"segment.bytes": "1024", "retention.bytes": "2048"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(15)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": "0", "batch.num.messages": "1"})

    def send(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce(topic, value=b"%03d" % i + b"." * 100)
            assert producer.flush(10) == 0

    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run(fail_on_data_loss: str) -> str | None:
        """Resume the query from its checkpoint; its failure, if any."""
        query = (spark_session.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest")
                 .option("failOnDataLoss", fail_on_data_loss).option("kafkaConsumer.pollTimeoutMs", "5000").load()
                 .selectExpr("offset").writeStream.format("parquet").option("path", out)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(120), "query did not finish"
        except StreamingQueryException as e:
            return str(e)
        return None

    send(0, 5)
    assert run("true") is None
    send(5, 60)  # retention.bytes now deletes the oldest segments, records 5.. among them, before they are read
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    deadline = time.monotonic() + 30
    while (low := consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), cached=False)[0]) <= 5:
        assert time.monotonic() < deadline, "retention deleted nothing"
        time.sleep(0.2)
    consumer.close()

    failed = run("true")
    assert failed is not None and "data may have been lost" in failed
    assert run("false") is None
    offsets = sorted(r.offset for r in spark_session.read.parquet(out).collect())
    assert offsets[:5] == list(range(5)) and offsets[5] >= low and offsets[5:] == list(range(offsets[5], 65))
