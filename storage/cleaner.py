"""Log compaction: which offsets are cleanable, the offset map, and writing cleaned segments (Kafka's LogCleaner).

Everything here reads inactive segments and writes new ``.cleaned`` files; nothing touches the
live segment tuple, so it runs in a worker thread while the event loop keeps appending and
reading. `storage.compaction_swap.CompactionSwap` runs it for one log and swaps the result in
(see its ``compact`` and ``finish``).

The rules are Kafka's (seed 000, LogCleaner / LogCleanerManager / MemoryRecords.filterTo):

- The log is a clean head ``[log start, first dirty)`` (already compacted, the offset in the
  ``cleaner-offset-checkpoint`` file) and a dirty tail. The dirty part that may be cleaned ends
  at the active segment, or earlier at the first segment holding a record newer than
  ``min.compaction.lag.ms``. A log is due when cleanable bytes / (clean + cleanable bytes)
  exceeds ``min.cleanable.dirty.ratio``, or when a dirty segment's first batch is older than
  ``max.compaction.lag.ms``.
- The offset map holds key hash -> latest offset over the cleanable dirty range; then every
  inactive segment up to the map's last offset is copied, keeping a record if it is past the
  map, or is the latest for its key and either has a value or is a tombstone still inside its
  delete horizon. Records without a key are dropped (they cannot be compacted).
- Tombstones (KIP-534): the first clean that keeps a tombstone stamps its batch with a delete
  horizon (now + ``delete.retention.ms``, kept in baseTimestamp with attribute bit 0x40); a later
  clean after the horizon removes it.
- A batch left with no records is dropped, except the last batch of an active idempotent
  producer, which stays as an empty batch so its last sequence survives. Batches that lose
  nothing are copied byte for byte; others are rebuilt with their own codec, baseOffset and
  lastOffsetDelta, so offsets never change.
- Segments are merged into groups up to ``segment.bytes``; each group becomes one segment.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logway.storage.config import LogConfig
from logway.storage.errors import InvalidConfig
from logway.storage.offset_map import OffsetMap
from logway.storage.progress import Progress
from logway.storage.segment import CLEANED_SUFFIX, LogSegment
from logway.wire import compression as codecs
from logway.wire.batch import (
    ATTRIBUTES_POS,
    CRC_POS,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    BatchHeader,
    CorruptBatch,
    compute_crc,
    parse_header,
)
from logway.wire.records import Record, decode_batch, rebuild_batch

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"  # Kafka's LogCleanerManager.offsetCheckpointFile
INT32_MAX = 2**31 - 1
_READ_CHUNK = 1 << 20
_WRITE_CHUNK = 1 << 20
_H = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Broker-level cleaner settings with Kafka's ``log.cleaner.*`` names and defaults (Kafka's CleanerConfig)."""

    enable: bool = True  # log.cleaner.enable
    threads: int = 1  # log.cleaner.threads: how many logs may be compacted at once
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size, shared by the threads
    io_buffer_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor
    backoff_ms: int = 15000  # log.cleaner.backoff.ms: sleep when no log was due

    @property
    def map_memory_per_thread(self) -> int:
        """Offset map memory of one compaction (Kafka divides the dedupe buffer among the threads)."""
        return self.dedupe_buffer_size // self.threads

    @classmethod
    def from_broker_properties(cls, props: Mapping[str, str]) -> CleanerConfig:
        """Read the ``log.cleaner.*`` keys of a server.properties mapping (others are ignored)."""
        values = {}
        for name, (attr, parse) in CLEANER_KEYS.items():
            if name in props:
                try:
                    values[attr] = parse(str(props[name]).strip())
                except ValueError:
                    raise InvalidConfig(f"Invalid value {props[name]} for configuration {name}") from None
        config = cls(**values)
        if config.threads < 1 or config.dedupe_buffer_size < 1 or not 0 < config.io_buffer_load_factor <= 1:
            raise InvalidConfig("log.cleaner.threads, .dedupe.buffer.size and .io.buffer.load.factor must be positive")
        return config


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(text)
    return text.lower() == "true"


# The broker's log.cleaner.* keys: CleanerConfig field and parser of each.
CLEANER_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "log.cleaner.enable": ("enable", _boolean),
    "log.cleaner.threads": ("threads", int),
    "log.cleaner.dedupe.buffer.size": ("dedupe_buffer_size", int),
    "log.cleaner.io.buffer.load.factor": ("io_buffer_load_factor", float),
    "log.cleaner.backoff.ms": ("backoff_ms", int),
}


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """Where a log's dirty section starts and where cleaning must stop (Kafka's LogToClean)."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    must_clean: bool  # a dirty segment is older than max.compaction.lag.ms (Kafka's needCompactionNow)

    @property
    def total_bytes(self) -> int:
        """Clean plus cleanable bytes."""
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        """Cleanable bytes over clean + cleanable bytes, the number min.cleanable.dirty.ratio is compared with."""
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    def is_due(self, config: LogConfig) -> bool:
        """Kafka's grabFilthiestCompactedLog filter: forced by max lag, or dirtier than the ratio."""
        if self.total_bytes <= 0:
            return False
        return (self.must_clean and self.cleanable_bytes > 0) or self.cleanable_ratio > config.min_cleanable_dirty_ratio


@dataclass(slots=True)
class CompactionStats:
    """What one compaction did (Kafka's CleanerStats, the numbers its cleaner logs after a run)."""

    first_dirty_offset: int = 0
    end_offset: int = 0  # first offset past the offset map: the next first dirty offset
    segments_cleaned: int = 0
    segments_written: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    map_records_read: int = 0
    records_read: int = 0
    records_removed: int = 0
    keyless_records_removed: int = 0
    tombstones_removed: int = 0
    empty_batches_kept: int = 0
    duration_ms: float = 0.0

    @property
    def bytes_removed(self) -> int:
        """How much smaller the cleaned segments are."""
        return self.bytes_before - self.bytes_after


@dataclass(slots=True)
class CleanedGroup:
    """One group of source segments and the ``.cleaned`` segment written to replace it."""

    sources: tuple[LogSegment, ...]
    cleaned: LogSegment


@dataclass(slots=True)
class CompactionResult:
    """The output of `clean_log`: cleaned groups waiting for the swap, and the stats."""

    stats: CompactionStats
    groups: list[CleanedGroup] = field(default_factory=list)


def _segments_between(segments: Sequence[LogSegment], lo: int, hi: int) -> Sequence[LogSegment]:
    """Segments holding offsets in [lo, hi): from the one containing ``lo`` to the last based below ``hi`` (Kafka's logSegments)."""
    if lo >= hi:
        return ()
    bases = [s.base_offset for s in segments]
    first = max(0, bisect_right(bases, lo) - 1)
    last = bisect_right(bases, hi - 1)
    return segments[first:last]


def cleanable_range(
    segments: Sequence[LogSegment],
    log_start_offset: int,
    log_end_offset: int,
    checkpoint: int | None,
    config: LogConfig,
    now_ms: int,
    first_unstable_offset: int | None = None,
) -> CleanableRange:
    """Kafka's LogCleanerManager.cleanableOffsets + LogToClean over a snapshot of the segment tuple.

    Nothing at or past ``first_unstable_offset`` (the first offset of an open transaction) is cleaned, as Kafka
    stops at log.firstUnstableOffset: whether those records count is not decided yet.
    """
    # A checkpoint outside the log (truncation, retention) is reset to the log start, as Kafka does.
    first_dirty = checkpoint if checkpoint is not None and log_start_offset <= checkpoint <= log_end_offset else log_start_offset
    active = segments[-1]
    dirty = _segments_between(segments[:-1], first_dirty, active.base_offset)
    first_uncleanable = active.base_offset
    if first_unstable_offset is not None:
        first_uncleanable = min(first_uncleanable, first_unstable_offset)
    if config.min_compaction_lag_ms > 0:
        for seg in dirty:
            if seg.max_timestamp > now_ms - config.min_compaction_lag_ms:
                first_uncleanable = min(first_uncleanable, seg.base_offset)
                break
    first_uncleanable = max(first_dirty, first_uncleanable)
    # calculateCleanableBytes: cleaning stops at the base of the segment holding the uncleanable offset.
    if first_uncleanable >= active.base_offset:
        stop = active.base_offset
    else:
        stop = _segments_between(segments, first_uncleanable, first_uncleanable + 1)[0].base_offset
    cleanable = sum(s.size for s in _segments_between(segments, min(first_dirty, stop), stop))
    clean = sum(s.size for s in _segments_between(segments, -1, first_dirty))
    # maxCompactionDelay: the first batch timestamp of each dirty segment against max.compaction.lag.ms.
    first_batch_times = [s.rolling_timestamp for s in dirty if s.rolling_timestamp > 0]
    must = bool(first_batch_times) and min(first_batch_times) < now_ms - config.max_compaction_lag_ms
    return CleanableRange(first_dirty, stop, clean, cleanable, must)


def clean_log(
    directory: Path,
    segments: Sequence[LogSegment],
    cleanable: CleanableRange,
    config: LogConfig,
    cleaner: CleanerConfig,
    last_data_offsets: Mapping[int, int],
    now_ms: int,
    aborted: Mapping[int, Sequence[tuple[int, int]]] | None = None,
) -> CompactionResult:
    """Build the offset map over the cleanable dirty range and write one ``.cleaned`` segment per group.

    ``segments`` is a snapshot of the live tuple (the last one is active and never read);
    ``last_data_offsets`` maps each active producer id to the last offset of its last data
    batch; ``aborted`` maps producer ids to the (first, last) offsets of their aborted transactions, whose
    records neither shadow older records of their keys nor survive cleaning (Kafka's cleaner discards them;
    the markers stay). On error every ``.cleaned`` file written so far is removed before re-raising.
    """
    aborted = aborted or {}
    started = time.monotonic()
    stats = CompactionStats(first_dirty_offset=cleanable.first_dirty_offset)
    result = CompactionResult(stats)
    omap = OffsetMap(cleaner.map_memory_per_thread, cleaner.io_buffer_load_factor)
    dirty = _segments_between(segments[:-1], cleanable.first_dirty_offset, cleanable.first_uncleanable_offset)
    progress = Progress(log, f"compacting {directory.name}: %s, %d records read so far")
    _build_offset_map(dirty, cleanable.first_dirty_offset, omap, stats, progress, aborted)
    stats.end_offset = omap.latest_offset + 1 if omap.latest_offset >= 0 else cleanable.first_dirty_offset
    if omap.latest_offset < 0:
        stats.duration_ms = (time.monotonic() - started) * 1000
        return result
    to_clean = [s for s in segments[:-1] if s.base_offset < stats.end_offset]
    try:
        for group in group_segments(to_clean, config.segment_bytes, config.segment_index_bytes, cleanable.first_uncleanable_offset):
            cleaned = _clean_group(directory, group, omap, config, last_data_offsets, now_ms, stats, progress,
                                   aborted)
            result.groups.append(CleanedGroup(tuple(group), cleaned))
    except BaseException:
        discard(result)
        raise
    stats.segments_written = len(result.groups)
    stats.duration_ms = (time.monotonic() - started) * 1000
    return result


def discard(result: CompactionResult) -> None:
    """Close and remove the cleaned segments of a compaction that will not be swapped in."""
    for group in result.groups:
        group.cleaned.delete_files()
    result.groups.clear()


def group_segments(
    segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[LogSegment]]:
    """Kafka's Cleaner.groupSegmentsBySize: consecutive segments whose total log and index sizes fit one segment."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = len(segments[i].offset_index) * segments[i].offset_index.entry_size
        time_size = len(segments[i].time_index) * segments[i].time_index.entry_size
        i += 1
        while i < len(segments):
            seg = segments[i]
            # The group's offsets must fit relative int32 offsets; bound them by the next base (or the uncleanable offset).
            last_offset = segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable - 1
            if not (
                log_size + seg.size <= max_size
                and index_size + len(seg.offset_index) * seg.offset_index.entry_size <= max_index_size
                and time_size + len(seg.time_index) * seg.time_index.entry_size <= max_index_size
                and (seg.size == 0 or last_offset - group[0].base_offset <= INT32_MAX)
            ):
                break
            group.append(seg)
            log_size += seg.size
            index_size += len(seg.offset_index) * seg.offset_index.entry_size
            time_size += len(seg.time_index) * seg.time_index.entry_size
            i += 1
        groups.append(group)
    return groups


def iter_batches(seg: LogSegment, position: int = 0) -> Iterator[tuple[BatchHeader, memoryview]]:
    """``(header, bytes)`` of each batch of an inactive segment from ``position``, read in large chunks."""
    end = seg.size
    while position < end:
        buf = os.pread(seg.fd, min(_READ_CHUNK, end - position), position)
        offset = 0
        while len(buf) - offset >= LOG_OVERHEAD:
            (length,) = struct.unpack_from(">i", buf, offset + 8)
            size = length + LOG_OVERHEAD
            if length <= 0:
                raise CorruptBatch(f"batch length {length} at {position + offset} in {seg.log_path}")
            if offset + size > len(buf):
                if offset == 0:  # one batch larger than a chunk
                    buf = os.pread(seg.fd, size, position)
                    if len(buf) < size:
                        raise CorruptBatch(f"batch at {position} runs past the end of {seg.log_path}")
                    continue
                break
            yield parse_header(buf, offset), memoryview(buf)[offset : offset + size]
            offset += size
        if offset == 0:
            raise CorruptBatch(f"unreadable batch at {position} in {seg.log_path}")
        position += offset


def _is_aborted(header: BatchHeader, aborted: Mapping[int, Sequence[tuple[int, int]]]) -> bool:
    """Whether a transactional data batch belongs to an aborted transaction of its producer."""
    if not header.is_transactional or header.is_control:
        return False
    return any(first <= header.base_offset <= last for first, last in aborted.get(header.producer_id, ()))


def _build_offset_map(
    dirty: Sequence[LogSegment], start: int, omap: OffsetMap, stats: CompactionStats, progress: Progress,
    aborted: Mapping[int, Sequence[tuple[int, int]]] | None = None,
) -> None:
    """Kafka's buildOffsetMap: key -> latest offset from ``start`` on, whole batches, until the map is full."""
    for seg in dirty:
        for header, raw in iter_batches(seg, seg.offset_index.lookup(start)):
            progress.update("building the offset map", stats.map_records_read)
            if header.last_offset < start:
                continue
            if not header.is_control and header.records_count and not (aborted and _is_aborted(header, aborted)):
                records = decode_batch(raw).records
                stats.map_records_read += len(records)
                for record in records:
                    if record.key is not None and record.offset >= start:
                        if omap.full:
                            return  # the map ends with the last whole batch; the rest stays dirty
                        omap.put(record.key, record.offset)
            omap.latest_offset = header.last_offset


def _clean_group(
    directory: Path,
    group: Sequence[LogSegment],
    omap: OffsetMap,
    config: LogConfig,
    last_data_offsets: Mapping[int, int],
    now_ms: int,
    stats: CompactionStats,
    progress: Progress,
    aborted: Mapping[int, Sequence[tuple[int, int]]] | None = None,
) -> LogSegment:
    """Copy the retained batches of ``group`` into ``<first base>.log.cleaned`` and fsync it (Kafka's cleanSegments)."""
    cleaned = LogSegment(directory, group[0].base_offset, config, created_ms=now_ms, suffix=CLEANED_SUFFIX)
    try:
        cleaned.reset()  # a leftover of an earlier attempt is never reused
        buf = bytearray()
        entries: list[tuple[int, int, int, int]] = []
        for seg in group:
            stats.segments_cleaned += 1
            stats.bytes_before += seg.size
            for header, raw in iter_batches(seg):
                progress.update("writing cleaned segments", stats.map_records_read + stats.records_read)
                out = _filter_batch(header, raw, omap, config, last_data_offsets, now_ms, stats,
                                    bool(aborted) and _is_aborted(header, aborted))
                if out is None:
                    continue
                max_ts = header.max_timestamp if out is raw else parse_header(out).max_timestamp
                entries.append((len(buf), len(out), header.last_offset, max_ts))
                buf += out
                if len(buf) >= _WRITE_CHUNK:
                    cleaned.append(memoryview(buf), entries)
                    buf, entries = bytearray(), []
        if entries:
            cleaned.append(memoryview(buf), entries)
        cleaned.on_become_inactive()
        cleaned.flush()  # durable before the swap may make it the only copy (Kafka flushes before replaceSegments)
        cleaned.synced_whole = True
        # Keep the sources' modification time: retention falls back to it for segments without timestamps.
        st = os.fstat(group[-1].fd)
        os.utime(cleaned.log_path, ns=(st.st_atime_ns, st.st_mtime_ns))
        stats.bytes_after += cleaned.size
        return cleaned
    except BaseException:
        cleaned.delete_files()
        raise


def _filter_batch(
    header: BatchHeader,
    raw: memoryview,
    omap: OffsetMap,
    config: LogConfig,
    last_data_offsets: Mapping[int, int],
    now_ms: int,
    stats: CompactionStats,
    aborted: bool = False,
) -> bytes | memoryview | None:
    """The batch as it survives cleaning: ``raw`` untouched, rebuilt bytes, an empty batch, or None (dropped)."""
    if header.is_control:
        # Transaction markers stay (Kafka removes one only once its transaction's records are gone and its
        # delete horizon passed; not done here).
        return raw
    records = decode_batch(raw).records  # CRC checked: cleaning must not re-sign a corrupted batch
    horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
    retain_deletes = horizon is None or now_ms < horizon
    kept: list[Record] = []
    has_tombstone = False
    latest = omap.latest_offset
    for record in records:
        if aborted:
            keep = False  # an aborted transaction's records go (Kafka's cleaner discards the whole batch)
        elif record.offset > latest:
            keep = True
        elif record.key is None:
            stats.keyless_records_removed += 1
            keep = False
        else:
            latest_for_key = record.offset >= omap.get(record.key)
            keep = latest_for_key and (record.value is not None or retain_deletes)
            if latest_for_key and not keep:
                stats.tombstones_removed += 1
        if keep:
            kept.append(record)
            has_tombstone = has_tombstone or record.value is None
    stats.records_read += len(records)
    stats.records_removed += len(records) - len(kept)
    if kept:
        set_horizon = has_tombstone and horizon is None
        if len(kept) == len(records) and not set_horizon:
            return raw
        return _rebuild(header, kept, now_ms + config.delete_retention_ms if set_horizon else horizon)
    if header.producer_id != NO_PRODUCER_ID and last_data_offsets.get(header.producer_id) == header.last_offset:
        # BatchRetention.RETAIN_EMPTY: the producer's last sequence lives in this batch's header.
        stats.empty_batches_kept += 1
        return rebuild_batch(header, [], compression=codecs.NONE, base_timestamp=header.max_timestamp,
                             max_timestamp=header.max_timestamp)
    return None


def _rebuild(header: BatchHeader, kept: list[Record], delete_horizon: int | None) -> bytes:
    """MemoryRecords.buildRetainedRecordsInto: same codec, producer fields, baseOffset and last offset."""
    data = rebuild_batch(header, kept, base_timestamp=delete_horizon)
    if delete_horizon is None:
        return data
    # KIP-534: baseTimestamp carries the delete horizon, flagged by attribute bit 0x40.
    out = bytearray(data)
    (attributes,) = _H.unpack_from(out, ATTRIBUTES_POS)
    _H.pack_into(out, ATTRIBUTES_POS, attributes | DELETE_HORIZON_MASK)
    out[CRC_POS : CRC_POS + 4] = compute_crc(out, 0, len(out)).to_bytes(4, "big")
    return bytes(out)
