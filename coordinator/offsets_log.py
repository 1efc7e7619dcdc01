"""The coordinator's only view of storage: append to and read back a partition of ``__consumer_offsets``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

__all__ = ["OffsetsLog"]


class OffsetsLog(Protocol):
    """Persistence for the compacted ``__consumer_offsets`` topic (the gateway implements it over storage).

    ``append`` must be durable under the broker's flush policy when it returns; it raises
    ``wire.errors.KafkaError`` (or ``OSError``) when the write failed, and the coordinator turns that
    into the error code Kafka's GroupMetadataManager would answer.
    """

    def append(
        self, partition: int, records: list[tuple[bytes, bytes | None]], now_ms: int,
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Append (key, value) records to one partition; value None is a tombstone.

        With ``producer`` (producer id, epoch) the batch is transactional (TxnOffsetCommit): its records count
        only once a COMMIT marker follows.
        """
        ...

    def append_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool, now_ms: int) -> None:
        """Append a transaction's COMMIT or ABORT marker."""
        ...

    def read(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        """Every (key, value) record of one partition, in offset order."""
        ...
