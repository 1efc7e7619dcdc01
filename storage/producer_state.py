"""Idempotent-producer state of one partition (Kafka's ProducerStateManager and ProducerAppendInfo).

For every producer id it keeps the epoch and the metadata of its last five batches, which is
what Kafka needs to answer a retried batch with its original offsets (duplicate) and to reject
gaps (OutOfOrderSequence) and zombies (InvalidProducerEpoch). Work is per batch, never per
record. Snapshots are written at every segment roll and at clean close so a restart only scans
the batch headers after the newest snapshot.

It also tracks each producer's ongoing transaction (the first offset it wrote in it, Kafka's
currentTxnFirstOffset): the earliest one is the partition's last stable offset, and the ABORT marker
that ends one becomes an entry of the transaction index (storage.txn_index).

Snapshot file ``<offset %020d>.snapshot``: Kafka's layout idea (version int16, CRC-32C uint32 of
the rest, then the entries) extended to keep all five cached batches per producer, so a retried
batch is still recognised as a duplicate after a restart. Version 2 adds the ongoing transaction's first
offset (-1: none), as Kafka's snapshot carries currentTxnFirstOffset; version 1 files are still read:

    version int16 = 2 | crc uint32 | count int32 |
    count x (producerId int64 | epoch int16 | lastTimestamp int64 | currentTxnFirstOffset int64 | nBatches int8 |
             nBatches x (firstSeq int32 | lastSeq int32 | firstOffset int64 | lastOffset int64 | timestamp int64))
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from logway.storage import fs
from logway.storage.checkpoints import write_atomically
from logway.storage.errors import InvalidProducerEpoch, OutOfOrderSequence

NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
PRODUCER_ID_EXPIRATION_MS = 86400000  # Kafka's producer.id.expiration.ms default
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"

_VERSION = 2
_HEAD = struct.Struct(">hIi")
_PRODUCER = struct.Struct(">qhqqb")
_PRODUCER_V1 = struct.Struct(">qhqb")
_BATCH = struct.Struct(">iiqqq")


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    """What is remembered of one appended batch of an idempotent producer."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    """A producer's epoch and its last batches, oldest first."""

    producer_id: int
    epoch: int
    last_timestamp: int = -1
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    current_txn_first_offset: int = -1  # first offset of its ongoing transaction in this partition, -1: none

    @property
    def last_seq(self) -> int:
        """Last sequence of the newest cached batch (-1 when none)."""
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this epoch and sequence range (Kafka's findDuplicateBatch)."""
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether ``next_seq`` directly follows ``last_seq``, sequences wrapping at Int32.MAX_VALUE."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """Per-partition producer entries plus their snapshot files in the partition directory."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its ongoing transaction
        self._unsynced: list[Path] = []  # snapshots written without an fsync (see write_snapshot)

    def check(self, batches: list[tuple[int, int, int, int]]) -> BatchMetadata | None:
        """Validate an append's idempotent batches ``(producerId, epoch, firstSeq, lastSeq)`` in order.

        Returns the original metadata if one of them is a duplicate (Kafka then answers the
        whole append with it and writes nothing); raises InvalidProducerEpoch or
        OutOfOrderSequence with Kafka's rules (ProducerAppendInfo.checkProducerEpoch/checkSequence).
        Batches of the same producer later in the same append see the earlier ones.
        """
        pending: dict[int, tuple[int, int]] = {}
        for pid, epoch, first_seq, last_seq in batches:
            entry = self.producers.get(pid)
            if entry is not None and pid not in pending:
                duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
                if duplicate is not None:
                    return duplicate
            known = pending.get(pid) or ((entry.epoch, entry.last_seq) if entry is not None else None)
            if known is not None:
                known_epoch, known_last = known
                if epoch < known_epoch:
                    raise InvalidProducerEpoch(
                        f"Epoch of producer {pid} is {epoch}, which is smaller than the last seen epoch {known_epoch}"
                    )
                if epoch != known_epoch:
                    if first_seq != 0:
                        raise OutOfOrderSequence(
                            f"Invalid sequence number for new epoch of producer {pid}: {epoch} (request epoch), "
                            f"{first_seq} (seq. number), {known_epoch} (current producer epoch)"
                        )
                elif not in_sequence(known_last, first_seq):
                    raise OutOfOrderSequence(
                        f"Out of order sequence number for producer {pid}: {first_seq} (incoming seq. number), "
                        f"{known_last} (current end sequence number)"
                    )
            # An unknown producer (e.g. its entries expired or were removed with old segments) may
            # start at any sequence, as in Kafka.
            pending[pid] = (epoch, last_seq)
        return None

    def update(self, pid: int, epoch: int, meta: BatchMetadata | None) -> None:
        """Record an appended batch (or just an epoch, for a control batch without sequences)."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, epoch)
        elif epoch != entry.epoch:
            # Kafka's maybeUpdateProducerEpoch: a new epoch forgets the old epoch's batches.
            entry.epoch = epoch
            entry.batches.clear()
        if meta is not None:
            entry.batches.append(meta)
            entry.last_timestamp = max(entry.last_timestamp, meta.timestamp)

    def begin_transaction(self, pid: int, first_offset: int) -> None:
        """A transactional batch: the producer's transaction starts here unless it already did."""
        entry = self.producers.get(pid)
        if entry is not None and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[pid] = first_offset

    def end_transaction(self, pid: int, epoch: int) -> int:
        """A COMMIT/ABORT marker: the producer's transaction ends; returns its first offset (-1 if none was open)."""
        self.update(pid, epoch, None)
        entry = self.producers[pid]
        first, entry.current_txn_first_offset = entry.current_txn_first_offset, -1
        self.ongoing.pop(pid, None)
        return first

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest ongoing transaction (what bounds the last stable offset)."""
        if not self.ongoing:  # the common case, asked per partition of every Fetch: no copy
            return None
        firsts = list(self.ongoing.values())  # a copy: a compaction thread may ask while the loop appends
        return min(firsts) if firsts else None

    def last_data_offsets(self) -> dict[int, int]:
        """Producer id -> last offset of its newest data batch (what compaction must keep, Kafka's lastRecordsOfActiveProducers).

        Safe to call from a worker thread while the loop thread appends: it copies the entries in
        one step and tolerates a batch deque being cleared under it.
        """
        result = {}
        for pid, entry in list(self.producers.items()):
            try:
                result[pid] = entry.batches[-1].last_offset
            except IndexError:
                continue
        return result

    def expire(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        """Forget producers silent for producer.id.expiration.ms (by their last batch timestamp, as Kafka)."""
        # Kafka never expires a producer with an ongoing transaction (isProducerExpired).
        expired = [pid for pid, e in self.producers.items()
                   if now_ms - e.last_timestamp >= expiration_ms and e.current_txn_first_offset < 0]
        for pid in expired:
            del self.producers[pid]

    # -- snapshots -----------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        offsets = []
        for name in os.listdir(self.dir):
            if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit():
                offsets.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
        return sorted(offsets)

    def snapshot_path(self, offset: int) -> Path:
        """``<offset %020d>.snapshot`` in the partition directory."""
        return self.dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def write_snapshot(self, offset: int, *, sync: bool) -> None:
        """Write the state as of ``offset`` (the log end offset) atomically: temp file, then rename.

        ``sync``: the file fsynced at once (a clean shutdown; its name needs no fsync of the directory: a start
        that does not find it replays the log from an older snapshot). Otherwise (a segment roll, on the event
        loop) the file is fsynced by the log's next flush (`sync_snapshots`), as Kafka flushes the snapshot of
        a roll asynchronously; until then a crash may leave it empty or torn, and loading skips it (its CRC).
        """
        parts = []
        for e in self.producers.values():
            parts.append(_PRODUCER.pack(e.producer_id, e.epoch, e.last_timestamp, e.current_txn_first_offset, len(e.batches)))
            parts.extend(_BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp) for b in e.batches)
        body = struct.pack(">i", len(self.producers)) + b"".join(parts)
        data = struct.pack(">hI", _VERSION, crc32c.crc32c(body)) + body
        path = self.snapshot_path(offset)
        if sync:
            write_atomically(path, data, sync_dir=False)
            return
        tmp = path.with_name(path.name + ".tmp")
        fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        fs.replace(tmp, path)
        self._unsynced.append(path)

    def sync_snapshots(self) -> None:
        """fsync the snapshots written since the last call without ``sync`` (a flush thread; the caller then
        fsyncs the directory, for their names)."""
        pending, self._unsynced = self._unsynced, []
        for path in pending:
            try:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                continue  # deleted meanwhile (retention, truncation)
            try:
                fs.fdatasync(fd)
            finally:
                os.close(fd)

    def load_snapshot(self, log_end_offset: int) -> int | None:
        """Load the newest valid snapshot at or below ``log_end_offset``; return its offset.

        Snapshots above the log end (taken before a crash lost their tail) and unreadable ones
        are deleted, as Kafka's loadProducerState does.
        """
        self.producers = {}
        self.ongoing = {}
        for offset in reversed(self.snapshot_offsets()):
            path = self.snapshot_path(offset)
            if offset <= log_end_offset:
                producers = _parse_snapshot(path.read_bytes())
                if producers is not None:
                    self.producers = producers
                    self.ongoing = {pid: e.current_txn_first_offset for pid, e in producers.items()
                                    if e.current_txn_first_offset >= 0}
                    return offset
            fs.unlink(path, missing_ok=True)
        return None

    def delete_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        """Remove snapshot files with offset < ``below`` (keeping the newest) or > ``above``."""
        offsets = self.snapshot_offsets()
        for offset in offsets:
            if (below is not None and offset < below and offset != offsets[-1]) or (above is not None and offset > above):
                fs.unlink(self.snapshot_path(offset), missing_ok=True)


def _parse_snapshot(data: bytes) -> dict[int, ProducerEntry] | None:
    """Decode a snapshot file; None if its version, CRC or layout is wrong."""
    try:
        version, crc, count = _HEAD.unpack_from(data, 0)
        if version not in (1, _VERSION) or crc32c.crc32c(memoryview(data)[6:]) != crc:
            return None
        pos = _HEAD.size
        producers: dict[int, ProducerEntry] = {}
        for _ in range(count):
            if version == 1:
                pid, epoch, last_ts, n = _PRODUCER_V1.unpack_from(data, pos)
                txn_first = -1
                pos += _PRODUCER_V1.size
            else:
                pid, epoch, last_ts, txn_first, n = _PRODUCER.unpack_from(data, pos)
                pos += _PRODUCER.size
            entry = ProducerEntry(pid, epoch, last_ts, current_txn_first_offset=txn_first)
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
                pos += _BATCH.size
            producers[pid] = entry
        return producers if pos == len(data) else None
    except struct.error:
        return None
