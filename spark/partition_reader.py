"""Executor side: read one offset range of one partition into Arrow record batches.

Spark pickles the InputPartition to an executor's Python worker; everything the read needs travels
in it (the reader object itself is not used there). Records are fetched by librdkafka in C; Python
only moves each poll's messages into Arrow columns, one column at a time.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator

import confluent_kafka as ck
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from logway.spark.ranges import OffsetRange
from logway.spark.schema import kafka_arrow_schema

# Records per consume() call and so per Arrow batch: large enough to amortise the Python work.
MAX_RECORDS_PER_POLL = 20_000
_POLL_S = 0.2


class KafkaInputPartition(InputPartition):
    """One Spark task: an offset range plus the consumer settings needed to read it."""

    def __init__(self, offset_range: OffsetRange, consumer_config: dict[str, str], poll_timeout_ms: int,
                 fail_on_data_loss: bool, include_headers: bool) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range
        self.consumer_config = consumer_config
        self.poll_timeout_ms = poll_timeout_ms
        self.fail_on_data_loss = fail_on_data_loss
        self.include_headers = include_headers


class DataLossError(RuntimeError):
    """Records the query asked for are no longer in Kafka (retention) and failOnDataLoss is true."""


def read_partition(part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """Yield the records of part.offset_range in offset order, as batches in Spark's Kafka schema."""
    r = part.offset_range
    if r.size <= 0:
        return
    schema = kafka_arrow_schema(part.include_headers)
    consumer = ck.Consumer(part.consumer_config)
    try:
        consumer.assign([ck.TopicPartition(r.topic, r.partition, r.from_offset)])
        next_offset = r.from_offset
        last_progress = time.monotonic()
        while next_offset < r.until_offset:
            msgs = consumer.consume(min(MAX_RECORDS_PER_POLL, r.until_offset - next_offset), _POLL_S)
            if msgs and any(m.error() is not None for m in msgs):
                next_offset = _handle_errors(consumer, part, msgs, next_offset)
                msgs = [m for m in msgs if m.error() is None and m.offset() >= next_offset]
                if next_offset >= r.until_offset:
                    return
            if not msgs:
                if _caught_up(consumer, r):
                    return
                if (time.monotonic() - last_progress) * 1000 > part.poll_timeout_ms:
                    if part.fail_on_data_loss:
                        raise TimeoutError(f"Cannot fetch record for offset {next_offset} of {r.topic}-{r.partition} "
                                           f"in {part.poll_timeout_ms} milliseconds")
                    return
                continue
            last_progress = time.monotonic()
            if msgs[-1].offset() >= r.until_offset:
                msgs = msgs[:bisect.bisect_left(msgs, r.until_offset, key=lambda m: m.offset())]
            if msgs:
                next_offset = msgs[-1].offset() + 1
                yield _to_arrow(msgs, r, schema, part.include_headers)
            else:
                return
    finally:
        consumer.close()


def _caught_up(consumer: ck.Consumer, r: OffsetRange) -> bool:
    """True when the consumer's position passed the range end (the tail was compacted away or control records)."""
    (pos,) = consumer.position([ck.TopicPartition(r.topic, r.partition)])
    return pos.offset >= r.until_offset


def _handle_errors(consumer: ck.Consumer, part: KafkaInputPartition, msgs: list, next_offset: int) -> int:
    """Offset out of range means the records were deleted: fail, or skip to the log start (failOnDataLoss=false)."""
    r = part.offset_range
    for m in msgs:
        err = m.error()
        if err is None or err.code() == ck.KafkaError._PARTITION_EOF:
            continue
        if err.code() in (ck.KafkaError.OFFSET_OUT_OF_RANGE, ck.KafkaError._AUTO_OFFSET_RESET):
            low, _ = consumer.get_watermark_offsets(ck.TopicPartition(r.topic, r.partition), cached=False)
            message = (f"Cannot fetch offset {next_offset} of {r.topic}-{r.partition} (earliest available is "
                       f"{low}). Some data may have been lost because they are not available in Kafka any more")
            if part.fail_on_data_loss:
                raise DataLossError(message + '; set the source option "failOnDataLoss" to "false" to skip them')
            if low <= next_offset:  # the range lies beyond the log end (truncated): nothing left to read
                return r.until_offset
            consumer.assign([ck.TopicPartition(r.topic, r.partition, low)])
            return low
        if not err.retriable():
            raise RuntimeError(f"Kafka error reading {r.topic}-{r.partition}: {err}")
    return next_offset


def _to_arrow(msgs: list, r: OffsetRange, schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
    """Columns from librdkafka messages; librdkafka timestamp types 0/1/2 become Kafka's -1/0/1."""
    n = len(msgs)
    stamps = [m.timestamp() for m in msgs]
    ts_type = pc.subtract(pa.array([s[0] for s in stamps], pa.int32()), pa.scalar(1, pa.int32()))
    ts_ms = pa.array([s[1] for s in stamps], pa.int64())
    columns = [
        pa.array([m.key() for m in msgs], pa.binary()),
        pa.array([m.value() for m in msgs], pa.binary()),
        pa.repeat(pa.scalar(r.topic, pa.string()), n),
        pa.repeat(pa.scalar(r.partition, pa.int32()), n),
        pa.array([m.offset() for m in msgs], pa.int64()),
        pc.multiply(ts_ms, 1000).cast(schema.field("timestamp").type),
        ts_type,
    ]
    if include_headers:
        columns.append(pa.array([m.headers() for m in msgs], schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
