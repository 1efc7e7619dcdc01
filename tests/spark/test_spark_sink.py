"""The sink writes key, value, headers, topic, partition; a plain Kafka consumer reads back what Spark wrote."""

import uuid

import confluent_kafka as ck
import pytest
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from logway.spark.schema import HEADERS_TYPE
from logway.spark.source import FORMAT

# Spark's own sink ("kafka") and this package's: the same job writes the same records.
FORMATS = pytest.mark.parametrize("fmt", ["kafka", FORMAT])


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[ck.Message]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"sink-check-{uuid.uuid4()}",
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    got: list[ck.Message] = []
    try:
        for _ in range(60):
            got += [m for m in consumer.consume(1000, 0.5) if m.error() is None]
            if len(got) >= expected:
                break
    finally:
        consumer.close()
    return got


SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("key", StringType()),
    StructField("value", BinaryType()),
    StructField("headers", HEADERS_TYPE),
    StructField("ignored", StringType()),
])


@FORMATS
def test_batch_write_then_read_back_with_a_kafka_client(spark_session, broker_bootstrap, new_topic, fmt):
    topic = new_topic(3)
    rows = [(topic, i % 3, None if i % 4 == 0 else f"k{i}", f"v{i}".encode(),
             [("trace", f"t{i}".encode())] if i % 2 else None, "x") for i in range(90)]
    df = spark_session.createDataFrame(rows, SCHEMA).repartition(2)
    df.write.format(fmt).option("kafka.bootstrap.servers", broker_bootstrap).mode("append").save()

    got = _consume_all(broker_bootstrap, topic, 3, len(rows))
    seen = sorted(((m.partition(), m.key(), m.value(), m.headers()) for m in got), key=repr)
    want = sorted(((p, None if k is None else k.encode(), v, h) for _, p, k, v, h, _ in rows), key=repr)
    assert seen == want


@FORMATS
def test_topic_option_overrides_the_column_and_keys_hash_like_java(spark_session, broker_bootstrap, new_topic, fmt):
    topic = new_topic(4)
    rows = [("not-this-topic", None, f"user-{i % 5}", f"v{i}".encode(), None, "") for i in range(50)]
    df = spark_session.createDataFrame(rows, SCHEMA).drop("partition", "headers")
    (df.write.format(fmt).option("kafka.bootstrap.servers", broker_bootstrap).option("topic", topic)
     .mode("append").save())
    got = _consume_all(broker_bootstrap, topic, 4, len(rows))
    assert len(got) == 50
    # Same key, same partition: the Java client's murmur2 partitioner, not librdkafka's CRC32 default.
    by_key: dict[bytes, set[int]] = {}
    for m in got:
        by_key.setdefault(m.key(), set()).add(m.partition())
    assert all(len(parts) == 1 for parts in by_key.values())
    assert by_key[b"user-0"] == {_java_partition(b"user-0", 4)}


def _java_partition(key: bytes, partitions: int) -> int:
    """Kafka's BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % partitions."""
    m, r, h = 0x5BD1E995, 24, 0x9747B28C ^ len(key)
    mask = 0xFFFFFFFF
    n4 = len(key) // 4
    for i in range(n4):
        k = int.from_bytes(key[i * 4:i * 4 + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = key[n4 * 4:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if len(tail) >= 1:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


@FORMATS
def test_streaming_write_copies_a_topic(spark_session, broker_bootstrap, new_topic, produce, tmp_path, fmt):
    source, target = new_topic(2), new_topic(2)
    acked = produce(source, [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                              "headers": [("n", b"%d" % i)] if i % 3 else None} for i in range(60)])
    query = (spark_session.readStream.format(fmt).option("kafka.bootstrap.servers", broker_bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").option("includeHeaders", "true")
             .load().selectExpr("key", "value", "partition", "headers")
             .writeStream.format(fmt).option("kafka.bootstrap.servers", broker_bootstrap).option("topic", target)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    got = _consume_all(broker_bootstrap, target, 2, len(acked))
    assert sorted((m.partition(), m.key(), m.value(), m.headers()) for m in got) == sorted(
        (r["partition"], r["key"], r["value"], r["headers"]) for r in acked)


def test_invalid_input_is_refused_like_sparks_kafka_sink(spark_session, broker_bootstrap):
    df = spark_session.createDataFrame([("k",)], StructType([StructField("key", StringType())]))
    with pytest.raises(Exception, match="topic option required"):
        df.write.format(FORMAT).option("kafka.bootstrap.servers", broker_bootstrap).mode("append").save()
    df = spark_session.createDataFrame([([1],)], StructType([StructField("value", ArrayType(IntegerType()))]))
    with pytest.raises(Exception, match="value attribute type must be a string or binary"):
        (df.write.format(FORMAT).option("kafka.bootstrap.servers", broker_bootstrap).option("topic", "t")
         .mode("append").save())
