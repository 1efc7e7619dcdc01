"""One topic-partition's log: appends, reads, offsets, producer state, flush, retention (Kafka's UnifiedLog).

Threading: every method runs on the event-loop thread except `flush` and `compact`, which a
worker thread may run concurrently. The segment list is an immutable tuple replaced on roll,
delete and compaction swap (copy-on-write, seed 001), so `flush`, `compact` and reads work on a
consistent snapshot without locks; `flush` only fsyncs descriptors of that snapshot and then
sets one int (the recovery point).

Opening the log (recovery included) is storage.log_loader's LogLoader; compaction and the swap of
its output into the segment tuple are storage.compaction_swap's CompactionSwap, which the
compaction methods here delegate to.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from logway.storage import fs
from logway.storage.cleaner import CleanableRange, CleanerConfig, CompactionStats
from logway.storage.compaction_swap import CompactionSwap
from logway.storage.config import LogConfig
from logway.storage.errors import (
    InvalidProducerEpoch,
    InvalidRecord,
    KafkaStorageError,
    OffsetOutOfRange,
    RecordBatchTooLarge,
)
from logway.storage.log_loader import LogLoader, rebuild_producer_state
from logway.storage.log_validator import ValidBatch, convert_batches, validate_batches
from logway.storage.partition_counts import Changes, PartitionCounters
from logway.storage.producer_state import BatchMetadata, ProducerStateManager
from logway.storage.retention import expired_segments
from logway.storage.segment import BatchEntry, LogSegment, UndoFailed
from logway.wire.batch import (
    NO_PRODUCER_ID,
    patch_base_offset,
    patch_leader_epoch,
    patch_log_append_time,
    patch_max_timestamp,
)
from logway.wire.compression import codec_for_compression_type
from logway.wire.records import ControlType, build_end_txn_marker

NO_TIMESTAMP = -1
# read_extent's margin past max_bytes: the batch header `LogSegment.read` peeks at beyond the slice, page-aligned.
_EXTENT_SLACK = 4096

log = logging.getLogger(__name__)


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where an append landed: what a ProduceResponse partition entry reports."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False
    # flush.messages reached: the caller must run `flush` (in a worker thread) before acknowledging.
    flush_needed: bool = False


@dataclass(frozen=True, slots=True)
class ReadResult:
    """A contiguous slice of one segment file holding whole batches, ready for os.sendfile."""

    fd: int
    position: int
    size: int
    high_watermark: int
    log_start_offset: int


class PartitionLog:
    """The log of one topic-partition in its own directory ``<topic>-<partition>``."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        clock_ms: Callable[[], int] | None = None,
        cleaner_offset: int | None = None,
        cleaner_config: CleanerConfig | None = None,
        on_offline: Callable[[PartitionLog], None] | None = None,
        on_recovered: Callable[[int], None] | None = None,
        on_flushed: Callable[[], None] | None = None,
        changes: Changes | None = None,
    ) -> None:
        self.dir = Path(directory)
        # Bumped after each change of fetch_offsets() (the topic's, shared by its partitions; see Changes).
        self.changes = changes if changes is not None else Changes()
        self._on_offline = on_offline  # the log manager takes the whole log dir offline
        self._on_flushed = on_flushed  # the log manager writes the recovery-point checkpoint soon after
        self._flush_lock = threading.Lock()  # one flush of this log at a time (see `flush`)
        self.topic = topic
        self.partition = partition
        self.config = config
        self._clock = clock_ms or _wall_clock_ms
        self._producers = ProducerStateManager(self.dir)
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        # Names created, renamed or removed in the directory since its last fsync (by the next flush). Recovery
        # changes names (leftovers, truncated segments, txnindex files) and does not sync them.
        self._dir_dirty = not clean_shutdown
        self._closed = False
        self._offline = False  # an I/O error that could not be undone: no more appends (Kafka's offline log dir)
        self.cleaner_config = cleaner_config or CleanerConfig()
        self.counters = PartitionCounters()
        now = self._clock()
        loaded = LogLoader(self.dir, topic, partition, config, self._producers, on_recovered=on_recovered).load(
            recovery_point, log_start_offset, clean_shutdown, now)
        self._set_segments(loaded.segments)
        self._log_start_offset = loaded.log_start_offset
        self._log_end_offset = loaded.log_end_offset
        self._recovery_point = loaded.recovery_point
        # The high watermark waits for appends whose producer waits for their fsync (see `high_watermark`):
        # the log end after the last such append, and the high watermark before it.
        self._durable_mark = 0
        self._visible = 0
        self._last_flush_ms = now
        self._aborted = loaded.aborted  # every segment's txnindex entries, by last offset (the ABORT marker)
        self.recovery_loss = loaded.loss  # what loading had to remove
        self.recovered_bytes = loaded.recovered_bytes  # bytes of the segments loading had to scan batch by batch
        self._compaction = CompactionSwap(self, self._producers, self._aborted, cleaner_offset, self._clock)

    # -- offsets ---------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """The first offset a fetch may ask for."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        """What consumers may read: every appended offset but the appends waiting for the fsync their producer
        waits for (and those after them), as Kafka's append fsyncs before it moves the high watermark."""
        end = self._log_end_offset
        recovery_point = self._recovery_point
        if recovery_point >= self._durable_mark:
            return end
        return max(min(recovery_point, end), self._visible)

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest ongoing transaction, else the high watermark (Kafka's LSO)."""
        first = self._producers.first_unstable_offset()
        high = self.high_watermark
        return high if first is None else min(first, high)

    def fetch_offsets(self) -> tuple[int, int, int]:
        """(high watermark, last stable offset, log start offset) in one call: a Fetch answers them for each of
        its partitions, hundreds per request, so this saves three property calls per partition."""
        end = self._log_end_offset
        if self._recovery_point < self._durable_mark:
            end = self.high_watermark
        first = self._producers.first_unstable_offset() if self._producers.ongoing else None
        return end, end if first is None else min(first, end), self._log_start_offset

    @property
    def recovery_point(self) -> int:
        """Every offset below this is fsynced (clamped: a concurrent flush may race a truncation)."""
        return min(self._recovery_point, self._log_end_offset)

    @property
    def last_flush_ms(self) -> int:
        """Wall-clock ms of the last flush (or of loading), for flush.ms scheduling."""
        return self._last_flush_ms

    @property
    def size_bytes(self) -> int:
        """Total bytes of all live segments."""
        return sum(s.size for s in self._segments)

    @property
    def segment_base_offsets(self) -> tuple[int, ...]:
        """Base offsets of the live segments, oldest first."""
        return self._bases

    def _set_segments(self, segments: tuple[LogSegment, ...]) -> None:
        """Replace the segment tuple (copy-on-write: another thread may be reading the old one)."""
        self._segments = segments
        self._bases = tuple(s.base_offset for s in segments)

    # -- appending -----------------------------------------------------------------------------------

    def append(
        self, buf: bytearray | memoryview, *, now_ms: int, leader_epoch: int = 0, coordinator: bool = False,
        acks_all: bool = False,
    ) -> AppendResult:
        """Validate, convert, deduplicate, assign offsets in place and write the batches a producer sent.

        All or nothing: one batch failing validation (storage.log_validator: Kafka's LogValidator,
        every record read) rejects the append, and an I/O error while writing leaves the files as
        they were (KAFKA_STORAGE_ERROR). A duplicate (an idempotent retry) writes nothing and
        returns the original offsets. ``coordinator``: a group coordinator's own write (Kafka's
        AppendOrigin.COORDINATOR): a transactional batch without sequence numbers, not checked against them.
        ``acks_all``: the producer asked for acks=all, so with flush.acks.all.enable the append must be fsynced
        before it is acknowledged (AppendResult.flush_needed).
        """
        view = self._append_buffer(buf)
        topic_partition = f"{self.topic}-{self.partition}"
        batches = validate_batches(view, self.config, now_ms, topic_partition, coordinator=coordinator)
        view, batches = self._convert(view, batches, topic_partition)
        duplicate = None if coordinator else self._find_duplicate(batches)
        if duplicate is not None:
            return duplicate
        first_offset = self._log_end_offset
        entries = self._assign_offsets(view, batches, now_ms, leader_epoch)
        try:
            self._write(view, entries, now_ms)
            self._update_producers(batches, entries)
            return AppendResult(
                first_offset,
                self._log_end_offset - 1,
                now_ms if self.config.log_append_time else NO_TIMESTAMP,
                self._log_start_offset,
                flush_needed=self._flush_needed(first_offset, acks_all),
            )
        finally:
            self.changes.bump()

    def _flush_needed(self, first_offset: int, acks_all: bool) -> bool:
        """Whether the append ending the log must be fsynced before it is acknowledged (by the caller, off the
        event loop): flush.messages reached (Kafka's UnifiedLog.append flushes then) or flush.acks.all.enable
        with acks=all. Until then the high watermark stays below the append."""
        config = self.config
        if self._log_end_offset - self._recovery_point < config.flush_messages and not (
                acks_all and config.flush_acks_all):
            return False
        if self._recovery_point >= self._durable_mark:
            self._visible = first_offset  # everything before this append was visible
        self._durable_mark = self._log_end_offset
        return True

    def _append_buffer(self, buf: bytearray | memoryview) -> memoryview:
        """The produced bytes as a writable byte view, if this log takes appends and they can fit a segment."""
        if self._closed:
            raise KafkaStorageError(f"log {self.topic}-{self.partition} is closed")
        if self._offline:
            raise KafkaStorageError(f"log {self.topic}-{self.partition} is offline after an I/O error it could not undo")
        view = memoryview(buf).cast("B")
        if view.readonly:
            raise TypeError("append patches offsets in place: pass a bytearray or writable memoryview")
        if len(view) == 0:
            raise InvalidRecord("Produce request contained no record batch")
        self._check_fits_segment(len(view))
        return view

    def _check_fits_segment(self, total: int) -> None:
        if total > self.config.segment_bytes:
            raise RecordBatchTooLarge(
                f"Message batch size is {total} bytes in append to partition {self.topic}-{self.partition} "
                f"which exceeds the maximum configured segment size of {self.config.segment_bytes}."
            )

    def _convert(
        self, view: memoryview, batches: list[ValidBatch], topic_partition: str
    ) -> tuple[memoryview, list[ValidBatch]]:
        """Key checks of a compacted topic and recompression to the topic's compression.type (LogValidator)."""
        cfg = self.config
        if cfg.compression_type == "producer" and not cfg.compact_enabled:  # the default: bytes kept as sent
            return view, batches
        codec = codec_for_compression_type(cfg.compression_type)
        if not cfg.compact_enabled and codec is None:
            return view, batches
        converted, batches = convert_batches(
            view, batches, topic_partition=topic_partition, compacted=cfg.compact_enabled, codec=codec,
            max_message_bytes=cfg.max_message_bytes,
        )
        if converted is not view:
            self._check_fits_segment(len(converted))
        return converted, batches

    def _find_duplicate(self, batches: list[ValidBatch]) -> AppendResult | None:
        """An idempotent producer's retry of batches already in the log: their original offsets."""
        idempotent = []
        for batch in batches:
            h = batch.header
            if h.producer_id != NO_PRODUCER_ID:
                idempotent.append((h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence))
        if not idempotent:
            return None
        duplicate = self._producers.check(idempotent)
        if duplicate is None:
            return None
        # Kafka answers a retried batch with its original offsets and writes nothing. (Kafka also reports the
        # cached batch timestamp as logAppendTime on CreateTime topics; we report -1 there, like every other
        # CreateTime append.)
        return AppendResult(
            duplicate.first_offset,
            duplicate.last_offset,
            duplicate.timestamp if self.config.log_append_time else NO_TIMESTAMP,
            self._log_start_offset,
            duplicate=True,
        )

    def _assign_offsets(
        self, view: memoryview, batches: list[ValidBatch], now_ms: int, leader_epoch: int
    ) -> list[BatchEntry]:
        """Patch offsets, leader epoch and timestamps into the batches; one index entry per batch."""
        append_time = self.config.log_append_time
        entries: list[BatchEntry] = []
        next_offset = self._log_end_offset
        for batch in batches:
            pos, header = batch.pos, batch.header
            patch_base_offset(view, pos, next_offset)
            patch_leader_epoch(view, pos, leader_epoch)
            if append_time:
                patch_log_append_time(view, pos, header.size, now_ms)
                max_ts = now_ms
            else:
                max_ts = batch.records.max_timestamp
                if max_ts != header.max_timestamp or header.log_append_time:
                    # Kafka stores the records' largest timestamp as a CreateTime batch's maxTimestamp
                    # (LogValidator: batch.setMaxTimestamp(CREATE_TIME, maxBatchTimestamp)).
                    patch_max_timestamp(view, pos, header.size, max_ts, log_append_time=False)
            last_offset = next_offset + header.last_offset_delta
            entries.append((pos, header.size, last_offset, max_ts))
            next_offset = last_offset + 1
        return entries

    def _write(self, view: memoryview, entries: list[BatchEntry], now_ms: int) -> None:
        """Write to the active segment (rolling first if due), all or nothing; then advance the log end."""
        last_offset = entries[-1][2]
        try:
            segment = self._segments[-1]
            if segment.should_roll(len(view), max(e[3] for e in entries), last_offset, now_ms, self.config):
                segment = self._roll(now_ms)
            segment.append(view, entries)
        except UndoFailed as e:
            self._take_offline(e)
            raise KafkaStorageError(f"append to {self.topic}-{self.partition} failed and could not be undone: {e}") from e
        except OSError as e:
            # Kafka logs every append IOException at ERROR; here nothing was written, so the log stays online.
            log.error("append to %s-%d in %s failed, nothing written: %s", self.topic, self.partition, self.dir, e)
            raise KafkaStorageError(f"append to {self.topic}-{self.partition} failed: {e}") from e
        self._log_end_offset = last_offset + 1

    def _update_producers(self, batches: list[ValidBatch], entries: list[BatchEntry]) -> None:
        for batch, (_, _, batch_last, batch_max_ts) in zip(batches, entries, strict=True):
            header = batch.header
            if header.producer_id != NO_PRODUCER_ID:
                first = batch_last - header.last_offset_delta
                meta = None if header.base_sequence < 0 else BatchMetadata(
                    header.base_sequence, header.last_sequence, first, batch_last, batch_max_ts)
                self._producers.update(header.producer_id, header.producer_epoch, meta)
                if header.is_transactional:
                    self._producers.begin_transaction(header.producer_id, first)

    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, *, coordinator_epoch: int = 0, now_ms: int
    ) -> AppendResult:
        """Append a COMMIT or ABORT control batch for a producer (the transaction coordinator's WriteTxnMarkers).

        It ends the producer's transaction here: the last stable offset moves on, and an ABORT goes into
        the txnindex. A marker with an epoch older than the producer's is refused (InvalidProducerEpoch),
        as Kafka's ProducerAppendInfo.appendEndTxnMarker does.
        """
        entry = self._producers.producers.get(producer_id)
        if entry is not None and producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"Epoch of producer {producer_id} is {producer_epoch}, which is smaller than the last seen epoch {entry.epoch}"
            )
        view = self._append_buffer(bytearray(build_end_txn_marker(
            ControlType.COMMIT if commit else ControlType.ABORT, producer_id=producer_id,
            producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch, timestamp=now_ms,
            base_offset=self._log_end_offset, partition_leader_epoch=0,
        )))
        offset = self._log_end_offset
        try:
            self._write(view, [(0, len(view), offset, now_ms)], now_ms)
            self._aborted.end_transaction(self._producers, self._segments[-1].txn_index_path, producer_id,
                                          producer_epoch, commit, offset, replay=False)
            if not commit:
                self._dir_dirty = True  # the segment's txnindex may be new: its name is synced with the segment
            return AppendResult(  # flush_needed: the coordinator's write is acks=all in Kafka (WriteTxnMarkers)
                offset, offset, now_ms if self.config.log_append_time else NO_TIMESTAMP, self._log_start_offset,
                flush_needed=self._flush_needed(offset, True))
        finally:
            self.changes.bump()

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[tuple[int, int]]:
        """(producerId, firstOffset) of the aborted transactions overlapping [fetch_offset, upper_offset).

        Kafka's collectAbortedTransactions: lastOffset >= fetchOffset and firstOffset < upperBoundOffset.
        """
        return self._aborted.collect(fetch_offset, upper_offset)

    def _take_offline(self, error: OSError) -> None:
        """An I/O error that could not be undone (Kafka's LogDirFailureChannel): no more appends until a restart."""
        log.error(
            "log %s-%d in %s is offline: %s. It takes no appends until the broker restarts and recovers it; "
            "reads still serve the acknowledged records.", self.topic, self.partition, self.dir, error,
        )
        self.take_offline()
        if self._on_offline is not None:
            self._on_offline(self)

    def take_offline(self) -> None:
        """Refuse appends and flushes from now on (its log dir failed); reads go on."""
        self._offline = True

    @property
    def offline(self) -> bool:
        """Whether an I/O error that could not be undone stopped appends to this log."""
        return self._offline

    def _roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at the log end offset and snapshot producer state there (all or nothing)."""
        segment = LogSegment(self.dir, self._log_end_offset, self.config, created_ms=now_ms)
        try:
            if segment.size:
                # A stray file with this name cannot hold live data (its offsets are not in the log).
                segment.reset()
            self._producers.write_snapshot(self._log_end_offset, sync=False)
            self._segments[-1].on_become_inactive()
        except BaseException:
            try:
                segment.delete_files()
            except OSError:
                pass  # an empty segment at the log end offset is harmless: loading keeps it as the active one
            raise
        self._set_segments(self._segments + (segment,))
        self._dir_dirty = True
        return segment

    # -- reading -------------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True, max_offset: int | None = None) -> ReadResult:
        """Whole batches from the one containing ``offset``, at most ``max_bytes`` (at least one if ``min_one``).

        The slice lies in one segment; a read that reaches a segment's end stops there and the
        client fetches again from the next offset. Nothing is read at or past the high watermark.
        ``max_offset`` (the last stable offset, for READ_COMMITTED) is a batch boundary the slice stops at.
        """
        segments, bases = self._segments, self._bases
        end_offset, start_offset = self._log_end_offset, self._log_start_offset
        if offset < start_offset or offset > end_offset:
            raise OffsetOutOfRange(
                f"Offset {offset} is out of range for partition {self.topic}-{self.partition}: "
                f"log start offset {start_offset}, log end offset {end_offset}"
            )
        high = end_offset if self._recovery_point >= self._durable_mark else self.high_watermark
        limit = high if max_offset is None else min(max_offset, high)
        if offset < limit:
            for seg in segments[max(0, bisect_right(bases, offset) - 1) :]:
                found = seg.read(offset, max_bytes, min_one)
                if found is not None:
                    position, size = found
                    if limit < seg.end_offset:
                        size = self._cut_at(seg, limit, position, size)
                    return ReadResult(seg.fd, position, size, high, start_offset)
        active = segments[-1]
        return ReadResult(active.fd, active.size, 0, high, start_offset)

    def read_extent(self, offset: int, max_bytes: int) -> tuple[int, int, int] | None:
        """(fd, position, size): the file bytes `read` from ``offset`` will look at and send (within a page or
        two), from the in-memory index alone (no I/O); None when nothing is to be read there. The fetch path
        probes them for page-cache residency before reading on the event loop (storage/residency.py)."""
        if not self._log_start_offset <= offset < self._log_end_offset:
            return None
        seg = self._segments[max(0, bisect_right(self._bases, offset) - 1)]
        start = seg.offset_index.lookup(offset)
        # From the indexed boundary (at most index.interval.bytes plus a batch before the one holding
        # ``offset``) to max_bytes past it, and the header peeked beyond; cut at the segment's end.
        size = min(seg.size - start, seg.index_interval_bytes + max_bytes + _EXTENT_SLACK)
        if size <= 0:
            return None
        try:
            fd = seg.fd
        except OSError:
            return None  # `read` meets the same error and answers it (KAFKA_STORAGE_ERROR)
        return (fd, start, size) if fd >= 0 else None

    @staticmethod
    def _cut_at(seg: LogSegment, limit: int, position: int, size: int) -> int:
        """``size`` cut so the slice ends before the batch holding offset ``limit`` (a batch boundary)."""
        found = seg.find_batch(limit)
        if found is None:
            return size
        return max(0, min(size, found[0] - position))

    def read_bytes(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes:
        """The bytes `read` would send (os.pread of the same slice)."""
        result = self.read(offset, max_bytes, min_one=min_one)
        return os.pread(result.fd, result.size, result.position) if result.size else b""

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp_ms`` (ListOffsets by time).

        Like Kafka's UnifiedLog.fetchOffsetByTimestamp: the first segment whose largest timestamp
        reaches the target and holds such a record (LogSegment.find_offset_by_timestamp). None if no
        record qualifies.
        """
        start_offset = self._log_start_offset
        for seg in self._segments:
            if seg.max_timestamp >= timestamp_ms:
                found = seg.find_offset_by_timestamp(timestamp_ms, start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp (ListOffsets MAX_TIMESTAMP, KIP-734)."""
        best = None
        for seg in self._segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        found = best.find_batch(best.offset_of_max_timestamp)
        if found is not None:
            result = best.first_record_at_or_after(found[0], found[1], best.max_timestamp, self._log_start_offset)
            if result is not None:
                return result
        return best.offset_of_max_timestamp, best.max_timestamp

    # -- durability ----------------------------------------------------------------------------------

    def flush(self, *, full: bool = False) -> None:
        """fsync what was appended so far and advance the recovery point (Kafka's UnifiedLog.flush); one flush of
        a log at a time, from any thread, and one that finds its data synced by another makes no syscall.

        The active segment's log is fsynced, its indexes are not (``full``: those too, at a clean shutdown):
        recovery rebuilds them (storage.log_loader). A segment rolled since the last flush is fsynced whole
        (log, indexes, txnindex), as loading trusts it; then the rolls' producer snapshots and the directory.
        """
        with self._flush_lock:
            target = self._log_end_offset  # read first: the segments read next hold every offset below it
            if self._offline:
                raise KafkaStorageError(f"log {self.topic}-{self.partition} is offline")
            segments = self._segments
            try:
                for seg in reversed(segments[:-1]):  # the segments rolled since the last flush end the tuple
                    if seg.synced_whole:
                        break
                    if not seg.closed:  # a deleted segment's files are gone
                        seg.flush()
                    seg.synced_whole = True
                active = segments[-1]
                if (target > self._recovery_point or full) and not active.closed:
                    active.flush(indexes=full)
                self._producers.sync_snapshots()
                if self._dir_dirty:
                    self._dir_dirty = False
                    fs.sync_dir(self.dir)
            except OSError as e:
                # A failed fsync cannot be undone or retried (the kernel may have dropped the dirty pages): Kafka
                # takes the log dir offline.
                self._take_offline(e)
                raise KafkaStorageError(f"flush of {self.topic}-{self.partition} failed: {e}") from e
            self._last_flush_ms = self._clock()
            if target > self._recovery_point:
                self._recovery_point = target
                self.changes.bump()  # the high watermark may move past appends that waited for this fsync
                if self._on_flushed is not None:
                    self._on_flushed()

    def has_unflushed(self) -> bool:
        """Whether appended data is not fsynced yet."""
        return self._log_end_offset > self._recovery_point

    @property
    def rolled_since_flush(self) -> bool:
        """Whether a segment rolled since the last flush (Kafka flushes the log up to the new segment then)."""
        segments = self._segments
        return len(segments) > 1 and not segments[-2].synced_whole

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= ``offset`` (whole batches, as Kafka's truncateTo)."""
        if offset >= self._log_end_offset:
            return
        try:
            self._truncate_to(offset)
        finally:
            self.changes.bump()

    def _truncate_to(self, offset: int) -> None:
        now = self._clock()
        if offset <= self._segments[0].base_offset or offset < self._log_start_offset:
            # Kafka's truncateFullyAndStartAt: nothing below the target survives.
            for seg in self._segments:
                self._schedule_delete(seg, now)
            self._set_segments((LogSegment(self.dir, offset, self.config, created_ms=now),))
            self._log_start_offset = offset
            self._log_end_offset = offset
        else:
            keep = bisect_right(self._bases, offset - 1)
            for seg in self._segments[keep:]:
                self._schedule_delete(seg, now)
            self._set_segments(self._segments[:keep])
            self._segments[-1].truncate_to(offset)
            self._log_end_offset = self._segments[-1].end_offset
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self._durable_mark = min(self._durable_mark, self._log_end_offset)
        self._visible = min(self._visible, self._log_end_offset)
        self._compaction.truncated(self._log_end_offset)
        self._producers.delete_snapshots(above=self._log_end_offset)
        last = self._segments[-1]
        self._aborted.truncate(self._log_end_offset, last.base_offset, last.txn_index_path)
        rebuild_producer_state(self._producers, self._aborted, self._segments, self._log_start_offset,
                               self._log_end_offset, f"{self.topic}-{self.partition}")

    # -- retention and deletion ---------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention by the log start offset, time then size (storage.retention), whole segments only, never
        the active one; returns how many went."""
        doomed, kept, reasons = expired_segments(self._segments, self._log_start_offset, self.config, now_ms,
                                                 self.high_watermark)
        return self._drop_segments(doomed, kept, now_ms, reasons)

    def _drop_segments(self, doomed: list[LogSegment], segments: list[LogSegment], now_ms: int,
                       reasons: list[str]) -> int:
        """Keep ``segments``, schedule ``doomed`` (the oldest ones) for deletion; returns how many went."""
        if doomed:
            removed = sum(seg.size for seg in doomed)
            self.counters.segments_deleted += len(doomed)
            self.counters.bytes_deleted += removed
            self._set_segments(tuple(segments))
            self._log_start_offset = max(self._log_start_offset, segments[0].base_offset)
            self.changes.bump()
            for seg in doomed:
                self._schedule_delete(seg, now_ms)
            self._producers.delete_snapshots(below=segments[0].base_offset)
            # Kafka logs each deleted segment and "Incremented log start offset to ..."; one line per run here.
            log.info("%s-%d: deleted %d segments (%d bytes) past %s; log start offset %d", self.topic, self.partition,
                     len(doomed), removed, " and ".join(reasons), self._log_start_offset)
            # Aborted transactions whose marker went with the deleted segments concern no readable offset.
            self._aborted.drop_before(segments[0].base_offset)
        return len(doomed)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` and drop the whole segments below it.

        Kafka's maybeIncrementLogStartOffset: an offset above the high watermark is OFFSET_OUT_OF_RANGE, a
        lower one than the current start changes nothing. Returns the new log start offset (low watermark).
        """
        if offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"Cannot increment the log start offset to {offset} of partition {self.topic}-{self.partition} "
                f"since it is larger than the high watermark {self.high_watermark}"
            )
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.changes.bump()
            self.delete_old_segments(self._clock())
        return self._log_start_offset

    def _schedule_delete(self, seg: LogSegment, now_ms: int) -> None:
        """Rename to ``.deleted`` now, unlink after file.delete.delay.ms (reads may still be sending it)."""
        seg.rename_for_delete()
        self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, seg))

    def delete_pending_segments(self, now_ms: int) -> None:
        """Unlink segments whose delete delay has passed (later, while a compaction may still read them)."""
        if self._compaction.compacting:
            return
        keep = []
        for deadline, seg in self._pending_deletes:
            if deadline <= now_ms:
                seg.delete_files()
            else:
                keep.append((deadline, seg))
        self._pending_deletes = keep

    # -- compaction (storage.compaction_swap) ------------------------------------------------------

    @property
    def cleaner_offset(self) -> int | None:
        """The first dirty offset recorded by the last compaction (None before the first)."""
        return self._compaction.cleaner_offset

    @property
    def compacting(self) -> bool:
        """Whether `compact` has started and `finish_compaction` has not run yet."""
        return self._compaction.compacting

    @property
    def compaction_failed(self) -> bool:
        """Whether the last compaction raised (Kafka then marks the partition uncleanable)."""
        return self._compaction.failed

    def cleanable_range(self, now_ms: int) -> CleanableRange:
        """Dirty section, cleanable bytes and ratio as Kafka's LogCleanerManager computes them (loop thread)."""
        return self._compaction.cleanable_range(now_ms)

    def compact(self, now_ms: int) -> CompactionStats:
        """Compact the cleanable dirty section into ``.cleaned`` segments; safe in a worker thread.

        Nothing is visible until the loop thread calls `finish_compaction`, which must follow every
        call (also when this one raised).
        """
        return self._compaction.compact(now_ms)

    def finish_compaction(self) -> bool:
        """Swap the segments `compact` wrote into the live tuple (loop thread); whether any was swapped in."""
        return self._compaction.finish(self._closed)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The live segments, oldest first: an immutable tuple, so a consistent snapshot on any thread."""
        return self._segments

    def replace_segments(self, at: int, count: int, segment: LogSegment, now_ms: int) -> None:
        """Put ``segment`` in place of the ``count`` live segments from index ``at`` and schedule their deletion
        (the compaction swap, which renames the files around this)."""
        segments = self._segments
        self._set_segments(segments[:at] + (segment,) + segments[at + count :])
        for seg in segments[at : at + count]:
            self._schedule_delete(seg, now_ms)

    def directory_changed(self) -> None:
        """A file was created or renamed in the partition directory: the next flush fsyncs the directory."""
        self._dir_dirty = True

    def active_producers(self) -> list:
        """The producer state entries (DescribeProducers): id, epoch, last sequence and timestamp, open transaction."""
        return list(self._producers.producers.values())

    def write_held_index_entries(self) -> None:
        """Put the active segment's index entries held in memory into its files (called every few seconds by the
        log maintenance, so the files of a live log are at most that far behind: Kafka's mmapped indexes never are)."""
        if self._closed or self._offline:
            return
        segment = self._segments[-1]
        try:
            segment.write_held_indexes()
        except UndoFailed as e:
            self._take_offline(e)
        except OSError as e:
            log.error("writing the indexes of %s-%d in %s failed (they stay in memory): %s",
                      self.topic, self.partition, self.dir, e)

    def expire_producers(self, now_ms: int) -> None:
        """Drop idempotent producers idle longer than producer.id.expiration.ms."""
        self._producers.expire(now_ms)

    def close(self) -> None:
        """Flush, snapshot producer state at the log end, close every file (idempotent)."""
        if self._closed:
            return
        try:
            if not self._offline:
                self._segments[-1].on_become_inactive()
                self.flush(full=True)
                self._producers.write_snapshot(self._log_end_offset, sync=True)
        except KafkaStorageError:
            pass  # flush took the log offline and said why
        except OSError as e:
            self._take_offline(e)
        finally:
            self._close_files()

    def _close_files(self) -> None:
        self._closed = True
        self._compaction.abandon()
        for seg in self._segments:
            seg.close()
        for _, seg in self._pending_deletes:
            seg.delete_files()
        self._pending_deletes = []

    def rename_dir(self, directory: Path) -> None:
        """Move the partition directory (topic deletion); open descriptors keep working."""
        fs.replace(self.dir, directory)
        self.dir = directory
        self._producers.dir = directory
        self._closed = True  # a log being deleted takes no more appends

    def delete(self) -> None:
        """Close every file and remove the partition directory."""
        self._close_files()
        fs.rmtree(self.dir, ignore_errors=True)

