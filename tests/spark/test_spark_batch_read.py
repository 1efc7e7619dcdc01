"""Batch reads through the data source on a real local Spark session equal what was produced."""

import pyspark.sql.functions as F

from logway.spark.source import FORMAT

COLUMNS = ["key", "value", "topic", "partition", "offset", "ts_ms", "timestampType", "headers"]


def _records(n: int) -> list[dict]:
    out = []
    for i in range(n):
        out.append({
            "partition": i % 3,
            "key": None if i % 5 == 0 else f"k{i}".encode(),
            "value": None if i == 7 else f"value-{i}".encode() * (1 + i % 4),
            "headers": [("h1", f"x{i}".encode()), ("h2", None)] if i % 2 else None,
            "timestamp": 1_700_000_000_000 + i * 1000,
        })
    return out


def _read(spark, bootstrap: str, **options):
    reader = spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _rows(df) -> list[tuple]:
    rows = df.withColumn("ts_ms", F.unix_millis("timestamp")).select(*COLUMNS).collect()
    out = []
    for r in rows:
        headers = None if r.headers is None else [(h.key, h.value) for h in r.headers]
        out.append((r.key, r.value, r.topic, r.partition, r.offset, r.ts_ms, r.timestampType, headers))
    return sorted(out, key=lambda t: (t[3], t[4]))


def _expected(topic: str, acked: list[dict]) -> list[tuple]:
    return [(r["key"], r["value"], topic, r["partition"], r["offset"], r["timestamp"], 0, r["headers"])
            for r in acked]


def test_batch_read_returns_every_column_as_produced(spark_session, broker_bootstrap, new_topic, produce):
    topic = new_topic(3)
    acked = produce(topic, _records(300))
    df = _read(spark_session, broker_bootstrap, subscribe=topic, includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert df.rdd.getNumPartitions() == 3  # one Spark partition per Kafka partition
    assert _rows(df) == _expected(topic, acked)


def test_offset_json_ranges_and_split_partitions(spark_session, broker_bootstrap, new_topic, produce):
    topic = new_topic(2)
    acked = produce(topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(400)])
    df = _read(spark_session, broker_bootstrap, assign=f'{{"{topic}":[0,1]}}',
               startingOffsets=f'{{"{topic}":{{"0":10,"1":-2}}}}', endingOffsets=f'{{"{topic}":{{"0":-1,"1":50}}}}')
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    want = sorted((r["partition"], r["offset"]) for r in acked
                  if (r["partition"] == 0 and r["offset"] >= 10) or (r["partition"] == 1 and r["offset"] < 50))
    assert got == want

    split = _read(spark_session, broker_bootstrap, subscribe=topic, minPartitions="6")
    assert split.rdd.getNumPartitions() >= 6
    assert sorted(split.select("partition", "offset").collect()) == sorted((r["partition"], r["offset"]) for r in acked)


def test_starting_timestamp_skips_older_records(spark_session, broker_bootstrap, new_topic, produce):
    topic = new_topic(1)
    acked = produce(topic, [{"value": b"x", "timestamp": 1_700_000_000_000 + i * 1000} for i in range(20)])
    df = _read(spark_session, broker_bootstrap, subscribe=topic, startingTimestamp=str(1_700_000_000_000 + 12_000))
    assert sorted(r.offset for r in df.select("offset").collect()) == [r["offset"] for r in acked[12:]]
