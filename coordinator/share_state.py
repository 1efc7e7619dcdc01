"""The share partitions of every share group and their state in ``__share_group_state``, sans-IO.

Kafka's share coordinator (ShareCoordinatorShard) and the share-partition leader's cache (SharePartitionManager)
in one: this broker leads every partition, so the state is kept in memory and written straight to the
compacted ``__share_group_state`` topic (Kafka's ShareSnapshot and ShareUpdate records, keyed by group, topic id
and partition; ``share.coordinator.state.topic.num.partitions`` partitions). A change is written as a
ShareUpdate of the offsets it touched; every ``share.coordinator.snapshot.update.records.per.snapshot`` updates a
ShareSnapshot of the whole state replaces them. ``persist`` returns only once the write is as durable as the
flush policy makes it: an acknowledgement answered is an acknowledgement kept.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from logway.coordinator.record_codec import Record, SchemaError, decode_key, decode_value, record_type
from logway.coordinator.share_partition import ShareLimits, SharePartition
from logway.coordinator.share_state_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    snapshot_record,
    state_partition_for,
    update_record,
)
from logway.wire.errors import ErrorCode, KafkaError

__all__ = ["ShareStateLog", "ShareStateStore", "SharePartitionKey"]

log = logging.getLogger(__name__)
E = ErrorCode
SharePartitionKey = tuple[str, uuid.UUID, int]
"""(group id, topic id, partition)."""


class ShareStateLog(Protocol):
    """Persistence for ``__share_group_state`` (the gateway implements it over storage, as OffsetsLog)."""

    def append(self, partition: int, records: list[Record], now_ms: int) -> None: ...

    def read(self, partition: int) -> Iterable[Record]: ...


@dataclass(slots=True)
class _Entry:
    partition: SharePartition
    snapshot_epoch: int = 0
    updates: int = 0
    created: int = 0


class ShareStateStore:
    """Every share partition of this broker, by (group, topic id, partition)."""

    def __init__(self, state_log: ShareStateLog, num_partitions: int = 50, updates_per_snapshot: int = 500,
                 limits: Callable[[str], ShareLimits] | None = None) -> None:
        self._log = state_log
        self.num_partitions = num_partitions
        self._updates_per_snapshot = updates_per_snapshot
        self._limits = limits or (lambda group_id: ShareLimits())
        self._entries: dict[SharePartitionKey, _Entry] = {}

    # --- access -------------------------------------------------------------------------------------------

    def get(self, key: SharePartitionKey) -> SharePartition | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.partition

    def keys_of(self, group_id: str) -> list[SharePartitionKey]:
        return [k for k in self._entries if k[0] == group_id]

    def open(self, key: SharePartitionKey, initial_offset: Callable[[], int], now_ms: int) -> tuple[SharePartition,
                                                                                                        ErrorCode]:
        """The share partition, created at ``initial_offset()`` (share.auto.offset.reset) the first time; its
        start is written at once so a restart does not move it (Kafka's InitializeShareGroupState)."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(SharePartition(initial_offset(), self._limits(key[0])), created=now_ms)
            return entry.partition, self._write_snapshot(key, entry, now_ms)
        entry.partition.limits = self._limits(key[0])
        return entry.partition, E.none

    # --- persisting changes -------------------------------------------------------------------------------

    def persist(self, key: SharePartitionKey, changed: Iterable[int], now_ms: int) -> ErrorCode:
        """Write what changed (a ShareUpdate, or a ShareSnapshot every so many updates)."""
        entry = self._entries.get(key)
        if entry is None:
            return E.none
        if entry.updates + 1 >= self._updates_per_snapshot:
            return self._write_snapshot(key, entry, now_ms)
        part = entry.partition
        value = ShareUpdateValue(snapshot_epoch=entry.snapshot_epoch, leader_epoch=0, start_offset=part.start,
                                 state_batches=part.state_batches(changed))
        error = self._append(key, [update_record(_key(key), value)], now_ms)
        if error == E.none:
            entry.updates += 1
        return error

    def _write_snapshot(self, key: SharePartitionKey, entry: _Entry, now_ms: int) -> ErrorCode:
        part = entry.partition
        value = ShareSnapshotValue(snapshot_epoch=entry.snapshot_epoch + 1, state_epoch=0, leader_epoch=0,
                                   start_offset=part.start, create_timestamp=entry.created, write_timestamp=now_ms,
                                   state_batches=part.state_batches())
        error = self._append(key, [snapshot_record(_key(key), value)], now_ms)
        if error == E.none:
            entry.snapshot_epoch += 1
            entry.updates = 0
        return error

    def _append(self, key: SharePartitionKey, records: list[Record], now_ms: int) -> ErrorCode:
        partition = state_partition_for(*key, self.num_partitions)
        try:
            self._log.append(partition, records, now_ms)
        except KafkaError as exc:
            log.warning("append to __share_group_state-%d failed: %s", partition, exc)
            return E.unknown_server_error if exc.error_code == E.none else exc.error_code
        except OSError as exc:
            log.warning("append to __share_group_state-%d failed: %s", partition, exc)
            return E.kafka_storage_error
        return E.none

    # --- members, locks, admin ----------------------------------------------------------------------------

    def release_member(self, group_id: str, member_id: str, now_ms: int) -> list[SharePartitionKey]:
        """A member left its group or closed its share session: its acquired records are given back."""
        released = []
        for key in self.keys_of(group_id):
            changed = self._entries[key].partition.release_member(member_id)
            if changed:
                self.persist(key, changed, now_ms)
                released.append(key)
        return released

    def expire_locks(self, now_ms: int) -> list[SharePartitionKey]:
        """Acquisition locks past their deadline: those records become available again (and are written)."""
        released = []
        for key, entry in self._entries.items():
            deadline = entry.partition.next_deadline()
            if deadline is not None and deadline <= now_ms:
                changed = entry.partition.expire_locks(now_ms)
                if changed:
                    self.persist(key, changed, now_ms)
                    released.append(key)
        return released

    def next_deadline(self) -> int | None:
        deadlines = [d for e in self._entries.values() if (d := e.partition.next_deadline()) is not None]
        return min(deadlines) if deadlines else None

    def reset(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> ErrorCode:
        """AlterShareGroupOffsets: the partition starts over at ``start_offset``."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(SharePartition(start_offset, self._limits(key[0])), created=now_ms)
        entry.partition.reset(start_offset)
        return self._write_snapshot(key, entry, now_ms)

    def delete(self, keys: Sequence[SharePartitionKey], now_ms: int) -> ErrorCode:
        """DeleteShareGroupOffsets / DeleteGroups: the partitions' state is tombstoned and forgotten."""
        error = E.none
        for key in keys:
            if key not in self._entries:
                continue
            tombstones = [snapshot_record(_key(key), None), (update_record(_key(key), _EMPTY_UPDATE)[0], None)]
            error = self._append(key, tombstones, now_ms)
            if error != E.none:
                return error
            del self._entries[key]
        return error

    # --- loading ------------------------------------------------------------------------------------------

    def load(self, records: Iterable[Record]) -> int:
        """Rebuild state from one ``__share_group_state`` partition's records, in log order (a snapshot replaces,
        an update of the same snapshot epoch is laid over it, a tombstone forgets). Returns the partitions known."""
        loaded = 0
        for key_bytes, value_bytes in records:
            try:
                kind = record_type(key_bytes)
                if kind not in (SHARE_SNAPSHOT, SHARE_UPDATE):
                    continue
                key = decode_key(ShareKey, key_bytes)
                self._replay(kind, (key.group_id, key.topic_id, key.partition), value_bytes)
                loaded += 1
            except SchemaError as exc:
                log.warning("skipping an unreadable __share_group_state record: %s", exc)
        return loaded

    def _replay(self, kind: int, key: SharePartitionKey, value_bytes: bytes | None) -> None:
        if value_bytes is None:
            if kind == SHARE_SNAPSHOT:
                self._entries.pop(key, None)
            return
        if kind == SHARE_SNAPSHOT:
            snapshot = decode_value(ShareSnapshotValue, value_bytes)
            entry = _Entry(SharePartition(snapshot.start_offset, self._limits(key[0])), snapshot.snapshot_epoch,
                           created=snapshot.create_timestamp)
            entry.partition.apply_state(snapshot.start_offset, snapshot.state_batches, replace_all=True)
            self._entries[key] = entry
            return
        update = decode_value(ShareUpdateValue, value_bytes)
        entry = self._entries.get(key)
        if entry is None or update.snapshot_epoch != entry.snapshot_epoch:
            return  # an update of a snapshot that was replaced (Kafka drops those too)
        entry.partition.apply_state(update.start_offset, update.state_batches, replace_all=False)
        entry.updates += 1


_EMPTY_UPDATE = ShareUpdateValue(snapshot_epoch=0, leader_epoch=0, start_offset=-1, state_batches=())


def _key(key: SharePartitionKey) -> ShareKey:
    return ShareKey(group_id=key[0], topic_id=key[1], partition=key[2])
