"""Batch and streaming readers: plan offset ranges on the driver, read them in executors.

Behaviour follows Spark's KafkaBatch and KafkaMicroBatchStream: one input partition per Kafka
partition (split by minPartitions / maxRecordsPerPartition), maxOffsetsPerTrigger shared in
proportion to backlog, Trigger.AvailableNow bounded by the offsets seen when the query started.
Streaming offsets are Spark's KafkaSourceOffset JSON ({"topic": {"0": 42}}), checkpointed by Spark.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from logway.spark.client import OffsetReader, consumer_config
from logway.spark.options import PartitionOffsets, SourceOptions, TopicPartition, offsets_from_json, offsets_to_json
from logway.spark.partition_reader import KafkaInputPartition, read_partition
from logway.spark.ranges import OffsetRange, rate_limit, resolve_ranges, split_ranges

log = logging.getLogger(__name__)


def _data_loss_reporter(fail: bool):
    """Spark's reportDataLoss: raise when failOnDataLoss is true, else log and carry on."""

    def report(message: str) -> None:
        if fail:
            raise ValueError(message + '. Set the source option "failOnDataLoss" to "false" if this is expected.')
        log.warning("%s. Continuing because failOnDataLoss is false.", message)

    return report


class _Planner:
    """Shared by both readers: driver-side client and the ranges -> input partitions step."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._client: OffsetReader | None = None

    def __getstate__(self) -> dict:
        # The reader is pickled to executors; the live librdkafka handle must not travel.
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> OffsetReader:
        if self._client is None:
            self._client = OffsetReader(self.options.kafka_params, self.options.group_id_prefix + "-driver")
        return self._client

    def close_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def topic_partitions(self, report_missing: bool = False) -> list[TopicPartition]:
        """The partitions to read; a subscribed topic the broker lacks is data loss in a batch read."""
        tps, missing = self.client.subscription(self.options.strategy)
        if missing and report_missing:
            _data_loss_reporter(self.options.fail_on_data_loss)(f"Subscribed topic(s) {', '.join(missing)} do not exist")
        for limit in (self.options.starting, self.options.ending):
            if limit.kind in ("offsets", "timestamps") and set(limit.offsets) != set(tps):
                # KafkaOffsetReader.fetchSpecificOffsets asserts the same.
                raise ValueError(f"If startingOffsets/endingOffsets contain specific offsets, you must specify all "
                                 f"TopicPartitions. Use -1 for latest, -2 for earliest. Specified: "
                                 f"{sorted(limit.offsets)} Assigned: {tps}")
        return tps

    def input_partitions(self, ranges: list[OffsetRange]) -> list[KafkaInputPartition]:
        o = self.options
        config = consumer_config(o.kafka_params, o.group_id_prefix + "-executor")
        pieces = split_ranges(ranges, o.min_partitions, o.max_records_per_partition)
        return [KafkaInputPartition(r, config, o.poll_timeout_ms, o.fail_on_data_loss, o.include_headers)
                for r in pieces]


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Read one planned range; PySpark hands a plain InputPartition(None) when the plan has none (empty topic)."""
    if not isinstance(partition, KafkaInputPartition):
        return iter(())
    return read_partition(partition)


class KafkaBatchReader(DataSourceReader):
    """spark.read: the records between startingOffsets (default earliest) and endingOffsets (default latest)."""

    def __init__(self, options: SourceOptions) -> None:
        self.planner = _Planner(options)

    def partitions(self) -> list[InputPartition]:
        """Resolve the offsets now (Spark resolves "latest" when the query is planned)."""
        o = self.planner.options
        try:
            tps = self.planner.topic_partitions(report_missing=True)
            start = self.planner.client.resolve(o.starting, tps, is_start=True)
            end = self.planner.client.resolve(o.ending, tps, is_start=False)
            ranges = resolve_ranges(start, end, {}, _data_loss_reporter(o.fail_on_data_loss))
            return list(self.planner.input_partitions(ranges))
        finally:
            self.planner.close_client()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor side; depends only on the partition."""
        return _read(partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """spark.readStream: micro-batches of new records; Spark checkpoints the offsets it gets from here."""

    def __init__(self, options: SourceOptions) -> None:
        self.planner = _Planner(options)
        self._available_now = False
        self._available_now_target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None
        self._last_trigger_ms = 0.0  # Spark's lastTriggerMillis: the first trigger never waits

    def initialOffset(self) -> dict:
        """Where a query without a checkpoint starts: startingOffsets, default latest."""
        tps = self.planner.topic_partitions()
        return offsets_to_json(self.planner.client.resolve(self.planner.options.starting, tps, is_start=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxOffsetsPerTrigger becomes ReadMaxRows, which Spark hands back to latestOffset."""
        limit = self.planner.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: later latestOffset calls stop at the offsets seen by the first one."""
        self._available_now = True

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next micro-batch: the log end, capped by the read limit."""
        # {} is a real start (nothing matched the subscription yet); only a missing start means "begin".
        start_map = offsets_from_json(start if start is not None else self.initialOffset())
        if self._available_now and self._available_now_target is not None:
            latest = self._available_now_target
        else:
            latest = self.planner.client.latest(self.planner.client.partitions(self.planner.options.strategy))
            if self._available_now:
                self._available_now_target = latest
        self._latest = latest
        if self._delay_batch(start_map, latest):
            return offsets_to_json(start_map)  # same as start: Spark plans no batch this trigger
        if isinstance(limit, ReadMaxRows):
            new = self.planner.client.earliest([tp for tp in latest if tp not in start_map])
            end = rate_limit(limit.max_rows, start_map, latest, new)
        else:
            end = dict(latest)
        # A partition that vanished is absent from `end`; partitions() reports that as data loss.
        return offsets_to_json(end)

    def _delay_batch(self, start: PartitionOffsets, latest: PartitionOffsets) -> bool:
        """minOffsetsPerTrigger: skip this trigger while fewer records wait and maxTriggerDelay has not passed.

        KafkaMicroBatchStream.delayBatch; ignored under Trigger.AvailableNow, which must reach its end.
        The Python API has no composite read limit, so the source applies it itself whatever limit Spark passes.
        """
        minimum = self.planner.options.min_offsets_per_trigger
        if minimum is None or self._available_now:
            return False
        now_ms = time.time() * 1000
        if now_ms - self._last_trigger_ms >= self.planner.options.max_trigger_delay_ms:
            self._last_trigger_ms = now_ms
            return False
        waiting = sum(end - start.get(tp, 0) for tp, end in latest.items())
        if waiting < minimum:
            return True
        self._last_trigger_ms = now_ms
        return False

    def reportLatestOffset(self) -> dict | None:
        """The log end seen by the last latestOffset call (Spark shows it in query progress)."""
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """Ranges (start, end] of this micro-batch; partitions new since `start` are read from their beginning."""
        start_map, end_map = offsets_from_json(start), offsets_from_json(end)
        new = self.planner.client.earliest([tp for tp in end_map if tp not in start_map])
        ranges = resolve_ranges(start_map, end_map, new, _data_loss_reporter(self.planner.options.fail_on_data_loss))
        return list(self.planner.input_partitions(ranges))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor side; depends only on the partition."""
        return _read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the checkpoint is the record of progress; no group offsets are committed."""

    def stop(self) -> None:
        """Release the driver-side client."""
        self.planner.close_client()
