"""One log segment: ``<baseOffset %020d>.log`` plus its ``.index`` and ``.timeindex`` (Kafka's LogSegment).

The log file holds v2 record batches exactly as produced (baseOffset and leader epoch patched).
All navigation reads batch headers with small ``os.pread`` calls; only recovery reads whole
batches (in large chunks) to check their CRC-32C.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Iterator
from pathlib import Path

from logway.storage.config import LogConfig
from logway.storage.errors import KafkaStorageError
from logway.storage.offset_index import OffsetIndex
from logway.storage.time_index import TimeIndex
from logway.wire.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_POS,
    MAGIC_V2,
    BatchHeader,
    CorruptBatch,
    parse_header,
    validate_batch,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"  # Kafka's LogFileUtils.DELETED_FILE_SUFFIX
CLEANED_SUFFIX = ".cleaned"  # Kafka's CLEANED_FILE_SUFFIX: a compaction output not yet committed
SWAP_SUFFIX = ".swap"  # Kafka's SWAP_FILE_SUFFIX: a committed compaction output not yet renamed into place
INT32_MAX = 2**31 - 1
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

_NAV = struct.Struct(">qiibIhi")  # baseOffset .. lastOffsetDelta: enough to know a batch's offsets and size
_PEEK = struct.Struct(">qi")  # baseOffset, batchLength
_RECOVERY_CHUNK = 1 << 20
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class UndoFailed(OSError):
    """A failed write could not be taken back: the files hold bytes the segment does not account for."""


# One appended batch as the segment needs it: (position in the appended buffer, size, last offset, max timestamp).
BatchEntry = tuple[int, int, int, int]


def segment_name(base_offset: int) -> str:
    """Kafka's file name stem for a segment: the base offset, zero-padded to 20 digits."""
    return f"{base_offset:020d}"


class LogSegment:
    """A segment's files, its size and offsets, and the running state its indexes need."""

    def __init__(
        self, directory: Path, base_offset: int, config: LogConfig, *, created_ms: int, suffix: str = ""
    ) -> None:
        self.base_offset = base_offset
        self.suffix = suffix  # "" for a live segment; CLEANED_SUFFIX / SWAP_SUFFIX while compaction writes it
        stem = directory / segment_name(base_offset)
        self.log_path = stem.with_suffix(LOG_SUFFIX + suffix)
        index_path, time_index_path = stem.with_suffix(INDEX_SUFFIX + suffix), stem.with_suffix(TIME_INDEX_SUFFIX + suffix)
        # Kafka rebuilds the indexes of a segment whose index files are missing (LogLoader.loadSegmentFiles).
        self._indexes_existed = index_path.exists() and time_index_path.exists()
        self.fd = os.open(self.log_path, _FLAGS, 0o644)
        try:
            self.offset_index = OffsetIndex(index_path, base_offset, config.segment_index_bytes)
            self.time_index = TimeIndex(time_index_path, base_offset, config.segment_index_bytes)
        except OSError:
            os.close(self.fd)
            raise
        self.size = os.fstat(self.fd).st_size
        self.end_offset = base_offset  # one past the last offset of the last batch
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.created_ms = created_ms
        self.rolling_timestamp = -1  # max timestamp of the first append (Kafka's rollingBasedTimestamp)
        self.roll_jitter_ms = random.randrange(config.segment_jitter_ms) if config.segment_jitter_ms > 0 else 0
        self.index_interval_bytes = config.index_interval_bytes
        self._bytes_since_index = 0

    # -- loading and recovery ----------------------------------------------------------------------

    def load_indexes(self) -> bool:
        """Load both index files; False if either was missing or failed its sanity check and must be rebuilt."""
        ok = self.offset_index.load(self.size)
        ok = self.time_index.load() and ok
        return ok and self._indexes_existed

    def load_tail(self) -> bool:
        """Derive end offset and max timestamp from the indexes plus the batches after the last index entry.

        The cheap check used for flushed segments and after a clean shutdown: the header chain
        from the last indexed batch must stop exactly at the end of the file, the indexed batch
        must end at the indexed offset, and the time index must not point past the log.
        """
        pos = self.offset_index.last_position
        expect_last = self.offset_index.last_offset if len(self.offset_index) else None
        entry = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = entry if entry else (-1, -1)
        self.end_offset = self.base_offset
        previous_last = self.base_offset - 1
        try:
            while pos < self.size:
                header = self._read_header(pos)
                if (
                    header.magic != MAGIC_V2
                    or header.batch_length < MIN_BATCH_LENGTH
                    or pos + header.size > self.size
                    or header.base_offset <= previous_last
                    or header.last_offset - self.base_offset > INT32_MAX
                    or (expect_last is not None and header.last_offset != expect_last)
                ):
                    return False
                expect_last = None
                self._note_timestamp(header.max_timestamp, header.last_offset)
                previous_last = header.last_offset
                pos += header.size
        except (CorruptBatch, OSError):
            return False
        if expect_last is not None:
            return False
        self.end_offset = previous_last + 1
        if entry is not None and entry[1] > previous_last:
            return False
        self._bytes_since_index = self.size - self.offset_index.last_position
        self._load_rolling_timestamp()
        return True

    def recover(self) -> int:
        """Rebuild both indexes from the log, checking every batch; truncate at the first invalid byte.

        A batch is valid when its length is sane and inside the file, its magic is 2, its CRC-32C
        matches and its offsets follow the previous batch (Kafka's LogSegment.recover; seed 003:
        both a truncated tail and an appended garbage tail end the valid prefix). Returns the
        number of bytes removed.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0
        file_size = os.fstat(self.fd).st_size
        valid = 0
        previous_last = self.base_offset - 1
        for pos, header in _scan_valid(self.fd, file_size):
            if header.base_offset <= previous_last or header.last_offset - self.base_offset > INT32_MAX:
                break
            self._account(pos, header.size, header.last_offset, header.max_timestamp)
            previous_last = header.last_offset
            valid = pos + header.size
        if valid < file_size:
            os.ftruncate(self.fd, valid)
        self.size = valid
        self.end_offset = previous_last + 1
        self._load_rolling_timestamp()
        return file_size - valid

    def _load_rolling_timestamp(self) -> None:
        self.rolling_timestamp = self._read_header(0).max_timestamp if self.size else -1

    # -- appending -----------------------------------------------------------------------------------

    def should_roll(self, append_size: int, max_timestamp: int, last_offset: int, now_ms: int, config: LogConfig) -> bool:
        """Kafka's LogSegment.shouldRoll: size, segment.ms (by record time, KIP-33), full index, offset overflow."""
        if self.size + append_size > config.segment_bytes:
            return True
        if self.size > 0:
            waited = max_timestamp - self.rolling_timestamp if self.rolling_timestamp >= 0 else now_ms - self.created_ms
            if waited > config.segment_ms - self.roll_jitter_ms:
                return True
        return (
            self.offset_index.is_full
            or self.time_index.is_full
            or last_offset - self.base_offset > INT32_MAX
        )

    def append(self, buf: memoryview, entries: list[BatchEntry]) -> None:
        """Write whole batches with as few syscalls as possible, then update the indexes per batch.

        All or nothing: on an OSError anywhere (the log write, an index or time index entry) the
        files and the in-memory state go back to where they were, and the error is raised. If
        going back fails too, `UndoFailed` is raised: the files then hold bytes the segment does
        not account for, and the log must take no more appends.
        """
        saved = self._state()
        position = self.size
        total = len(buf)
        try:
            written = 0
            while written < total:
                written += os.write(self.fd, buf[written:])
            if position == 0:
                self.rolling_timestamp = max(e[3] for e in entries)
            for pos, size, last_offset, max_timestamp in entries:
                self._account(position + pos, size, last_offset, max_timestamp)
        except OSError as e:
            try:
                self._restore(saved)
            except OSError as undo:
                raise UndoFailed(undo.errno, f"could not undo a failed append to {self.log_path}: {undo}") from e
            raise
        self.size = position + total
        self.end_offset = entries[-1][2] + 1

    def _state(self) -> tuple[int, int, int, int, int, int, int, int]:
        return (
            self.size, self.end_offset, self.max_timestamp, self.offset_of_max_timestamp, self.rolling_timestamp,
            self._bytes_since_index, len(self.offset_index), len(self.time_index),
        )

    def _restore(self, saved: tuple[int, int, int, int, int, int, int, int]) -> None:
        """Put files and state back as `_state` saw them: truncate the log and both indexes."""
        (self.size, self.end_offset, self.max_timestamp, self.offset_of_max_timestamp, self.rolling_timestamp,
         self._bytes_since_index, index_entries, time_entries) = saved
        self.offset_index.truncate_entries(index_entries)
        self.time_index.truncate_entries(time_entries)
        os.ftruncate(self.fd, self.size)

    def _account(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        """Index bookkeeping for one batch at ``position`` (Kafka's LogSegment.append loop)."""
        self._note_timestamp(max_timestamp, last_offset)
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def _note_timestamp(self, timestamp: int, last_offset: int) -> None:
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
            self.offset_of_max_timestamp = last_offset

    def on_become_inactive(self) -> None:
        """Record the final max timestamp in the time index (Kafka's onBecomeInactiveSegment); all or nothing."""
        if self.max_timestamp >= 0:
            entries = len(self.time_index)
            try:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            except OSError as e:
                try:
                    self.time_index.truncate_entries(entries)
                except OSError as undo:
                    raise UndoFailed(undo.errno, f"could not undo a failed write to {self.time_index.path}: {undo}") from e
                raise

    # -- reading -------------------------------------------------------------------------------------

    def _read_header(self, pos: int) -> BatchHeader:
        return parse_header(os.pread(self.fd, BATCH_HEADER_SIZE, pos))

    def iter_headers(self, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each batch from ``position`` to the end (one pread per batch)."""
        end = self.size
        while position < end:
            header = self._read_header(position)
            if header.batch_length < MIN_BATCH_LENGTH:
                raise KafkaStorageError(f"corrupt batch length at {position} in {self.log_path}")
            yield position, header
            position += header.size

    def find_batch(self, offset: int) -> tuple[int, int] | None:
        """(position, size) of the first batch whose last offset is >= ``offset``, or None."""
        pos = self.offset_index.lookup(offset)
        end = self.size
        while pos < end:
            base, length, _, _, _, _, delta = _NAV.unpack(os.pread(self.fd, _NAV.size, pos))
            if length < MIN_BATCH_LENGTH:
                raise KafkaStorageError(f"corrupt batch length at {pos} in {self.log_path}")
            if base + delta >= offset:
                return pos, length + LOG_OVERHEAD
            pos += length + LOG_OVERHEAD
        return None

    def read(self, offset: int, max_bytes: int, min_one: bool) -> tuple[int, int] | None:
        """(position, size) of whole batches from the one containing ``offset`` up to ``max_bytes``.

        At least the first batch when ``min_one`` even if larger (KIP-74); None if no batch of
        this segment reaches ``offset``. The slice never crosses the end of the segment.
        """
        found = self.find_batch(offset)
        if found is None:
            return None
        start, first = found
        if first > max_bytes:
            return start, first if min_one else 0
        limit = start + max_bytes
        end = max(start + first, self.offset_index.floor_position(limit))
        seg_end = self.size
        while end < seg_end:
            _, length = _PEEK.unpack(os.pread(self.fd, _PEEK.size, end))
            if length < MIN_BATCH_LENGTH:
                raise KafkaStorageError(f"corrupt batch length at {end} in {self.log_path}")
            if end + LOG_OVERHEAD + length > limit:
                break
            end += LOG_OVERHEAD + length
        return start, end - start

    def read_bytes(self, position: int, size: int) -> bytes:
        """The raw bytes of a slice of the log file."""
        return os.pread(self.fd, size, position)

    # -- truncation, flushing, deletion ----------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= ``offset`` (Kafka's LogSegment.truncateTo)."""
        found = self.find_batch(offset)
        if found is None:
            return
        position = found[0]
        removed_base = self._read_header(position).base_offset
        self.time_index.truncate_to(removed_base)
        self.offset_index.truncate_to_position(position)
        os.ftruncate(self.fd, position)
        self.size = position
        if not self.load_tail():
            self.recover()

    def flush(self) -> None:
        """fsync the log and both indexes."""
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()

    def rename_for_delete(self) -> None:
        """Append ``.deleted`` to every file name; descriptors stay open for in-flight sendfile reads."""
        deleted = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        os.replace(self.log_path, deleted)
        self.log_path = deleted
        for index in (self.offset_index, self.time_index):
            index.rename(index.path.with_name(index.path.name + DELETED_SUFFIX))

    def change_suffix(self, suffix: str) -> None:
        """Rename the files from ``<name><old suffix>`` to ``<name><suffix>``: indexes first, the log last.

        The log file's name is what recovery looks at (a ``.log.swap`` commits a compaction), so
        renaming it last makes the log rename the single step that moves the segment's state.
        """
        for index in (self.offset_index, self.time_index):
            index.rename(index.path.with_name(_strip(index.path.name, self.suffix) + suffix))
        target = self.log_path.with_name(_strip(self.log_path.name, self.suffix) + suffix)
        os.replace(self.log_path, target)
        self.log_path = target
        self.suffix = suffix

    def reset(self) -> None:
        """Empty the segment and its indexes (a stray file left where a new segment must start)."""
        self.offset_index.reset()
        self.time_index.reset()
        os.ftruncate(self.fd, 0)
        self.size = 0
        self.end_offset = self.base_offset
        self.max_timestamp = self.offset_of_max_timestamp = self.rolling_timestamp = -1
        self._bytes_since_index = 0

    def delete_files(self) -> None:
        """Close and unlink the files."""
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            path.unlink(missing_ok=True)

    def close(self) -> None:
        """Close all descriptors (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.offset_index.close()
        self.time_index.close()


def _strip(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if suffix else name


def _scan_valid(fd: int, file_size: int) -> Iterator[tuple[int, BatchHeader]]:
    """Yield valid batches from the start of a log file, stopping silently at the first invalid one."""
    buf = b""
    buf_start = 0
    pos = 0
    while pos + LOG_OVERHEAD <= file_size:
        if not (buf_start <= pos and pos + BATCH_HEADER_SIZE <= buf_start + len(buf)):
            buf, buf_start = os.pread(fd, _RECOVERY_CHUNK, pos), pos
        rel = pos - buf_start
        if len(buf) - rel < LOG_OVERHEAD + 5 or buf[rel + MAGIC_POS] != MAGIC_V2:
            return
        _, length = _PEEK.unpack_from(buf, rel)
        size = length + LOG_OVERHEAD
        if length < MIN_BATCH_LENGTH or pos + size > file_size:
            return
        if pos + size > buf_start + len(buf):
            buf, buf_start = os.pread(fd, max(size, _RECOVERY_CHUNK), pos), pos
            rel = 0
        try:
            header = validate_batch(memoryview(buf)[: rel + size], rel)
        except CorruptBatch:
            return
        yield pos, header
        pos += size
