"""The sink: write a DataFrame's key, value, headers, topic, partition columns to Kafka (batch and streaming).

Same contract as Spark's KafkaWriter: `value` is required; `key` and `value` may be string or binary;
the `topic` option, when set, overrides any `topic` column; a `timestamp` column (timestamp type) sets
each record's CreateTime, as newer Spark does; other columns are ignored. Types are compared ignoring
nullability, as Spark does. Delivery is at-least-once: each task flushes its producer before reporting success.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import confluent_kafka as ck
import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from logway.spark.options import SinkOptions
from logway.spark.schema import HEADERS_TYPE

# librdkafka's default partitioner hashes keys with CRC32; Java clients (and so Spark's Kafka sink)
# use murmur2, so records with the same key land in the same partition whichever client wrote them.
_PRODUCER_DEFAULTS = {"partitioner": "murmur2_random"}


TIMESTAMP_TYPES = (TimestampType(), TimestampNTZType())


def _same_type(a: DataType, b: DataType) -> bool:
    """Equal ignoring nullability (Spark's DataType.sameType), so a hand-built headers column is accepted."""
    return a.simpleString() == b.simpleString()


def validate_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """Reject input Spark's KafkaWriter.validateQuery would reject, with the same messages."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if topic_option is None and "topic" not in types:
        raise ValueError("topic option required when no 'topic' attribute is present. "
                         "Use the topic option for setting a topic.")
    if topic_option is None and not _same_type(types["topic"], StringType()):
        raise ValueError(f"Topic type must be a string, got {types['topic'].simpleString()}")
    if "value" not in types:
        raise ValueError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in types and not any(_same_type(types[name], t) for t in (StringType(), BinaryType())):
            raise ValueError(f"{name} attribute type must be a string or binary")
    if "headers" in types and not _same_type(types["headers"], HEADERS_TYPE):
        raise ValueError("headers attribute type must be an array of struct<key: string, value: binary>")
    if "partition" in types and not _same_type(types["partition"], IntegerType()):
        raise ValueError("partition attribute type must be an int")


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What a write task reports back: how many records it acknowledged."""

    records: int


class _Producing:
    """One task's producer; raises the first delivery error, as Spark's KafkaWriteTask.checkForErrors does."""

    def __init__(self, options: SinkOptions) -> None:
        config = {**_PRODUCER_DEFAULTS, **options.kafka_params, "delivery.report.only.error": True}
        self.topic = options.topic
        self.failure: ck.KafkaError | None = None
        self.producer = ck.Producer(config)

    def _on_error(self, err: ck.KafkaError | None, _msg: object) -> None:
        if err is not None and self.failure is None:
            self.failure = err

    def send_batches(self, batches: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        """Produce every row of every batch, then flush; the task fails if any record was not acknowledged."""
        total = 0
        for batch in batches:
            total += self._send(batch)
            self._check()
        self.producer.flush()
        self._check()
        return KafkaCommitMessage(total)

    def _check(self) -> None:
        if self.failure is not None:
            raise RuntimeError(f"Kafka producer failed to write a record: {self.failure}")

    def _send(self, batch: pa.RecordBatch) -> int:
        names = {n.lower(): i for i, n in enumerate(batch.schema.names)}
        n = batch.num_rows

        def column(name: str) -> list:
            return batch.column(names[name]).to_pylist() if name in names else [None] * n

        topics = [self.topic] * n if self.topic is not None else column("topic")
        keys, values, partitions = column("key"), column("value"), column("partition")
        stamps = _timestamps_ms(batch, names.get("timestamp"))
        headers = column("headers")
        if "headers" in names:
            headers = [None if h is None else [(e["key"], e["value"]) for e in h] for h in headers]
        produce, poll = self.producer.produce, self.producer.poll
        for i in range(n):
            if topics[i] is None:
                raise ValueError("Null topic present in the data. Use the topic option for setting a topic.")
            kwargs = {"key": keys[i], "value": values[i], "on_delivery": self._on_error}
            if partitions[i] is not None:
                kwargs["partition"] = partitions[i]
            if headers[i]:
                kwargs["headers"] = headers[i]
            if stamps[i] is not None:
                kwargs["timestamp"] = stamps[i]
            while True:
                try:
                    produce(topics[i], **kwargs)
                    break
                except BufferError:  # local queue full: serve delivery reports until there is room
                    poll(0.1)
        poll(0)
        return n


def _timestamps_ms(batch: pa.RecordBatch, index: int | None) -> list[int | None]:
    """Record CreateTime (epoch ms) from a timestamp column; None (the producer's clock) without one."""
    column = batch.column(index) if index is not None else None
    if column is None or not pa.types.is_timestamp(column.type):
        return [None] * batch.num_rows  # no timestamp column, or one of another type: ignored like unknown columns
    per_ms = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}[column.type.unit]
    return [None if t is None else int(t // per_ms) for t in column.cast(pa.int64()).to_pylist()]


class KafkaBatchWriter(DataSourceArrowWriter):
    """df.write sink, mode Append only.

    Spark's Kafka sink also accepts ErrorIfExists (the default mode), but Spark refuses that mode for
    every Python data source before calling it (UNSUPPORTED_DATA_SOURCE_SAVE_MODE), so a job needs
    .mode("append"). Overwrite is refused, as by Spark's Kafka sink.
    """

    def __init__(self, options: SinkOptions, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise ValueError('Save mode Overwrite not allowed for Kafka: records cannot be replaced. '
                             'Use .mode("append").')
        validate_sink_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        """Runs in each task on an executor."""
        return _Producing(self.options).send_batches(iterator)


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """df.writeStream sink: every micro-batch's rows are flushed before Spark commits the batch."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        """Runs in each task on an executor."""
        return _Producing(self.options).send_batches(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to do: records were acknowledged by the brokers before the tasks reported success."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Kafka has no undo for acknowledged records (Spark's Kafka sink is at-least-once too)."""
