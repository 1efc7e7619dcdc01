"""What is counted of a partition: its traffic, for the metrics (PartitionCounters), and the changes of what a
Fetch answers of it without reading records (Changes)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(slots=True)
class PartitionCounters:
    """Counts since the broker started, for its metrics: traffic the server counts (bytes and messages in
    through Produce, bytes out through Fetch), and what retention removed, counted here."""

    bytes_in: int = 0
    messages_in: int = 0
    bytes_out: int = 0
    produce_requests: int = 0
    fetch_requests: int = 0
    segments_deleted: int = 0  # by retention, DeleteRecords or the log start offset
    bytes_deleted: int = 0

    def add(self, other: PartitionCounters) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class Changes:
    """What marks the changes to what a Fetch answers of a topic's partitions without reading records: their high
    watermarks, last stable offsets and log start offsets. Every change sets ``count`` anew, after the change, on
    whichever thread makes it; so heads made from those offsets after reading ``count`` stay right while it is the
    same (gateway/fetch_heads.py). One per topic: its partitions share it.

    Each bump takes a value never used before from one broker-wide tally (not ``count + 1``: a bump read on a
    flush thread and written after the loop's own bumps would bring back a value seen before)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def bump(self) -> None:
        self.count = next(_TALLY)


_TALLY = itertools.count(1)  # next() on it is one C call: no two bumps get the same value, on any thread
