"""Opening one partition's log: its segments, recovery, the aborted-transaction index, producer state (Kafka's LogLoader).

Loading removes the leftovers of unfinished deletes, writes and compactions, and completes a
compaction swap a crash interrupted (a ``<base>.log.swap`` file: see storage.compaction_swap).
After a clean shutdown every segment is trusted once its indexes and tail pass a cheap check;
otherwise every segment from the one holding the recovery point on is recovered batch by batch
(CRC-32C). An invalid batch ends the log: its segment is truncated there and the later segments
are deleted, each loss logged as a WARN with the partition and offsets and counted (RecoveryLoss).
Then the txnindex files are read and the producer state is rebuilt from the newest snapshot and
the batch headers after it.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from logway.storage import fs
from logway.storage.config import LogConfig
from logway.storage.errors import CorruptRecord
from logway.storage.producer_state import BatchMetadata, ProducerStateManager
from logway.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_name,
)
from logway.storage.txn_index import AbortedTxns
from logway.wire.batch import NO_PRODUCER_ID, BatchHeader
from logway.wire.records import ControlType, control_type, decode_batch

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RecoveryLoss:
    """Data recovery removed at load: counted per log and per broker, for the metrics to report."""

    truncations: int = 0  # segments cut at an invalid batch
    bytes_dropped: int = 0  # bytes removed: the cut tails plus the deleted later segments
    segments_deleted: int = 0

    def add(self, other: RecoveryLoss) -> None:
        self.truncations += other.truncations
        self.bytes_dropped += other.bytes_dropped
        self.segments_deleted += other.segments_deleted


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """What loading found: the live segments (their files released), the log's offsets and transaction index,
    and what recovery had to scan and remove."""

    segments: tuple[LogSegment, ...]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    aborted: AbortedTxns
    loss: RecoveryLoss
    recovered_bytes: int  # bytes of the segments loading had to scan (recover) batch by batch


class LogLoader:
    """Loads the log of one topic-partition from its directory ``<topic>-<partition>``."""

    def __init__(self, directory: Path, topic: str, partition: int, config: LogConfig, producers: ProducerStateManager,
                 *, on_recovered: Callable[[int], None] | None = None) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._producers = producers  # rebuilt by `load`
        self._on_recovered = on_recovered  # told the bytes of each segment recovery scanned (progress lines)
        self.loss = RecoveryLoss()
        self.recovered_bytes = 0
        self._first_recovered = 0  # base offset of the first segment recovery scanned

    def load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool, now_ms: int) -> LoadedLog:
        """Open the segments, recover what may be torn, and rebuild the transaction index and producer state."""
        self.dir.mkdir(parents=True, exist_ok=True)
        segments = self._recover_segments(self._segment_bases(now_ms), recovery_point, log_start_offset,
                                          clean_shutdown, now_ms)
        log_end = segments[-1].end_offset
        log_start = min(max(log_start_offset, segments[0].base_offset), log_end)
        recovery_point = log_end if clean_shutdown else min(recovery_point, log_end)
        if not clean_shutdown:
            # A snapshot written since the last flush may hold a state whose txnindex entries were lost: the producer
            # state is replayed over every segment recovery scanned, whose ABORT markers put them back.
            self._producers.delete_snapshots(above=self._first_recovered)
        aborted = AbortedTxns.load((seg.txn_index_path for seg in segments), log_end)
        rebuild_producer_state(self._producers, aborted, segments, log_start, log_end, f"{self.topic}-{self.partition}")
        for seg in segments:
            if seg.end_offset > recovery_point:
                seg.flush()  # what recovery kept is synced before its descriptors go (flush skips closed files)
            seg.release_files()  # loading is done with them: idle partitions keep no descriptors open
        for seg in segments[:-1]:
            seg.synced_whole = True  # trusted as it was, or recovered and fsynced just now
        return LoadedLog(tuple(segments), log_start, log_end, recovery_point, aborted, self.loss, self.recovered_bytes)

    def _segment_bases(self, now_ms: int) -> list[int]:
        """The base offsets of the segment files, oldest first, after removing leftovers and finishing swaps."""
        bases = []
        swaps = []
        for name in os.listdir(self.dir):
            if name.endswith((DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX)):
                # Leftovers of an unfinished delete, write or compaction: Kafka removes them at load too.
                fs.unlink(self.dir / name, missing_ok=True)
            elif name.endswith(SWAP_SUFFIX):
                base = _log_file_base(name[: -len(SWAP_SUFFIX)])
                if base is not None:
                    swaps.append(base)
                else:
                    fs.unlink(self.dir / name, missing_ok=True)  # a swapped segment's indexes are rebuilt
            elif (base := _log_file_base(name)) is not None:
                bases.append(base)
        for base in sorted(swaps):
            self._complete_swap(base, bases, now_ms)
        bases.sort()
        return bases

    def _complete_swap(self, base: int, bases: list[int], now_ms: int) -> None:
        """Finish a compaction swap a crash interrupted (Kafka's LogLoader with ``.swap`` files).

        The ``.swap`` segment is complete (fsynced before it was renamed). Every plain segment
        whose base offset lies in its offset range is one of the segments it replaced (the first
        shares its base offset); those go, then the swap file takes its final name.
        """
        seg = LogSegment(self.dir, base, self.config, created_ms=now_ms, suffix=SWAP_SUFFIX)
        try:
            seg.recover()
            end = max(seg.end_offset, base + 1)
            for old in [b for b in bases if base <= b < end]:
                stem = segment_name(old)
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
                    fs.unlink(self.dir / (stem + suffix), missing_ok=True)
                bases.remove(old)
            fs.sync_dir(self.dir)  # the replaced segments are gone for good before the swap file takes their place
            seg.change_suffix("")
        finally:
            seg.close()
        bases.append(base)

    def _recover_segments(
        self, bases: list[int], recovery_point: int, log_start_offset: int, clean_shutdown: bool, now_ms: int,
    ) -> list[LogSegment]:
        """Open the segments; recover those that may be torn (an invalid batch ends the log).

        Without a clean shutdown, every segment from the one holding the offset before the recovery point is
        suspect (Kafka starts at the one holding the recovery point; one earlier, a segment is trusted only once
        a later one holds fsynced data, which the flush that synced it whole wrote first). In the first suspect
        segment, the batches below the recovery point were fsynced and are walked by their headers alone.
        """
        segments: list[LogSegment] = []
        try:
            for base in bases:
                segments.append(LogSegment(self.dir, base, self.config, created_ms=now_ms))
            first_unflushed = len(segments) if clean_shutdown else max(0, bisect_right(bases, recovery_point - 1) - 1)
            self._first_recovered = bases[first_unflushed] if first_unflushed < len(bases) else log_start_offset
            for i, seg in enumerate(segments):
                if i < first_unflushed and seg.load_indexes() and seg.load_tail():
                    continue
                durable = recovery_point if i == first_unflushed else -1
                if self._recover(seg, segments[i + 1 :] if i >= first_unflushed else [], durable):
                    del segments[i + 1 :]
                    break
            if not segments:
                segments.append(LogSegment(self.dir, log_start_offset, self.config, created_ms=now_ms))
        except BaseException:
            for seg in segments:
                seg.close()
            raise
        return segments

    def _recover(self, seg: LogSegment, later: list[LogSegment], durable_below: int) -> bool:
        """Recover one segment; if it had to be truncated, delete the ``later`` ones. Whether the log ends here."""
        truncated = seg.recover(durable_below)
        self.recovered_bytes += seg.scanned_bytes
        if self._on_recovered is not None:
            self._on_recovered(seg.scanned_bytes)
        if not truncated:
            return False
        # Kafka's LogLoader.recoverLog: an invalid batch ends the log; later segments go.
        self._report_loss(seg, truncated, later)
        for seg_after in later:
            seg_after.delete_files()
        if later:
            fs.sync_dir(self.dir)  # before new appends reuse their offsets, the deleted segments stay deleted
        return bool(later)

    def _report_loss(self, seg: LogSegment, truncated: int, later: list[LogSegment]) -> None:
        """WARN about data recovery removed and count it (Kafka's "Corruption found in segment ..." warning)."""
        deleted = sum(s.size for s in later)
        self.loss.add(RecoveryLoss(1, truncated + deleted, len(later)))
        log.warning(
            "%s-%d: corruption found in segment %s at byte %d; truncating to offset %d: %d bytes dropped",
            self.topic, self.partition, seg.log_path.name, seg.size, seg.end_offset, truncated,
        )
        if later:
            log.warning(
                "%s-%d: recovery deleted %d later segments (base offsets %s; offsets %d and above): %d bytes dropped",
                self.topic, self.partition, len(later), ", ".join(str(s.base_offset) for s in later),
                later[0].base_offset, deleted,
            )


def _log_file_base(name: str) -> int | None:
    """The base offset of a ``<base>.log`` file name, None for any other name."""
    if name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit():
        return int(name[: -len(LOG_SUFFIX)])
    return None


def rebuild_producer_state(
    producers: ProducerStateManager, aborted: AbortedTxns, segments: Sequence[LogSegment], log_start_offset: int,
    log_end_offset: int, topic_partition: str,
) -> None:
    """Newest snapshot at or below the log end, then the batch headers after it (only markers are read).

    Transactions are replayed too: a transactional batch opens its producer's transaction, a marker
    closes it, and an ABORT marker missing from the txnindex (a crash before it was written) is added.
    Run at load and after a truncation.
    """
    start = producers.load_snapshot(log_end_offset)
    if start is None:
        start = log_start_offset
    for seg in segments:
        if seg.end_offset <= start:
            continue
        try:
            for pos, header in seg.iter_headers(seg.offset_index.lookup(start)):
                if header.base_offset >= start and header.producer_id != NO_PRODUCER_ID:
                    _replay_batch(producers, aborted, seg, pos, header)
        except CorruptRecord as e:
            # A trusted (flushed or cleanly shut down) segment with a damaged batch: the partition still
            # loads, reads of that batch answer CORRUPT_MESSAGE, and the producer state stops before it.
            log.warning("%s: producer state not rebuilt past a corrupt batch: %s", topic_partition, e)


def _replay_batch(
    producers: ProducerStateManager, aborted: AbortedTxns, seg: LogSegment, pos: int, header: BatchHeader
) -> None:
    """What one producer's batch at ``pos`` of ``seg`` did to its producer's state, as its append did."""
    if header.is_control:
        commit = _is_commit_marker(seg.read_batch(pos, header.size))
        aborted.end_transaction(producers, seg.txn_index_path, header.producer_id, header.producer_epoch, commit,
                                header.base_offset, replay=True)
        return
    meta = None if header.base_sequence < 0 else BatchMetadata(
        header.base_sequence, header.last_sequence, header.base_offset, header.last_offset, header.max_timestamp,
    )
    producers.update(header.producer_id, header.producer_epoch, meta)
    if header.is_transactional:
        producers.begin_transaction(header.producer_id, header.base_offset)


def _is_commit_marker(raw: bytes) -> bool:
    """Whether a control batch is a COMMIT marker (else ABORT)."""
    return control_type(decode_batch(raw).records[0]) == ControlType.COMMIT
