"""Offset ranges: which records each Spark task reads, and how much a micro-batch admits.

Pure functions, no clients: the same arithmetic as Spark's KafkaOffsetRangeCalculator,
KafkaOffsetReader.getOffsetRangesFromResolvedOffsets and KafkaMicroBatchStream.rateLimit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from logway.spark.options import PartitionOffsets, TopicPartition


@dataclass(frozen=True)
class OffsetRange:
    """Records [from_offset, until_offset) of one topic partition (until is exclusive, like Kafka's position)."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        """Estimated record count: compaction and transaction markers can make the real count smaller."""
        return self.until_offset - self.from_offset


def resolve_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    new_partition_start: Mapping[TopicPartition, int],
    report_data_loss: Callable[[str], None],
) -> list[OffsetRange]:
    """Ranges from resolved start/end offsets; partitions only in `end` start at `new_partition_start`.

    As in Spark's getOffsetRangesFromResolvedOffsets: a new partition that does not start at 0, a
    partition that vanished, or an end before its start means records were lost, which is reported
    (and raised when failOnDataLoss is true).
    """
    for tp in sorted(set(end) - set(start)):
        first = new_partition_start.get(tp, 0)
        if first != 0:
            report_data_loss(f"Added partition {tp[0]}-{tp[1]} starts from {first} instead of 0. "
                             "Some data may have been missed")
    for tp in sorted(set(start) - set(end)):
        report_data_loss(f"{tp[0]}-{tp[1]} is gone. Some data may have been missed")
    ranges = []
    for tp in sorted(end):
        from_offset = start[tp] if tp in start else new_partition_start.get(tp, 0)
        until_offset = end[tp]
        if until_offset < from_offset:
            report_data_loss(f"Partition {tp[0]}-{tp[1]}'s offset was changed from {from_offset} to "
                             f"{until_offset}, some data may have been missed")
        ranges.append(OffsetRange(tp[0], tp[1], from_offset, until_offset))
    return ranges


def split_ranges(
    ranges: list[OffsetRange], min_partitions: int | None, max_records_per_partition: int | None
) -> list[OffsetRange]:
    """One Spark input partition per Kafka partition, split when large (KafkaOffsetRangeCalculator.getRanges).

    `maxRecordsPerPartition` caps every piece; `minPartitions` then splits the largest ranges in
    proportion to their size until about that many pieces exist. Empty ranges are dropped.
    """
    pieces = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        pieces = [p for r in pieces for p in _split(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions is None or len(pieces) >= min_partitions:
        return pieces
    total = sum(r.size for r in pieces)

    def part_count(size: int, of_total: int, min_parts: int) -> int:
        # Scala's math.round rounds half up, unlike Python's round.
        return max(math.floor(size / of_total * min_parts + 0.5), 1)

    unsplit = {i for i, r in enumerate(pieces) if part_count(r.size, total, min_partitions) == 1}
    split_total = total - sum(pieces[i].size for i in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for i, r in enumerate(pieces):
        parts = 1 if i in unsplit else part_count(r.size, split_total, split_min)
        out.extend(_split(r, parts))
    return [r for r in out if r.size > 0]


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """Cut a range into `parts` nearly equal pieces; the last one takes the rounding remainder."""
    out, remaining, start = [], r.size, r.from_offset
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.until_offset)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def rate_limit(
    limit: int, start: Mapping[TopicPartition, int], latest: PartitionOffsets,
    new_partition_start: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """Admit at most about `limit` records, shared by partitions in proportion to their backlog.

    KafkaMicroBatchStream.rateLimit: a partition with a backlog below one record's share still gets
    one record, so small partitions are never starved.
    """
    sizes = {}
    for tp, end in latest.items():
        begin = start.get(tp, new_partition_start.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        begin = start.get(tp, new_partition_start.get(tp, 0))
        prorate = limit * (sizes[tp] / total)
        admitted = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin + admitted)
    return out
