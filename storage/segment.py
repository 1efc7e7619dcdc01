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

from logway.storage import fs
from logway.storage.config import LogConfig
from logway.storage.errors import CorruptRecord, KafkaStorageError
from logway.storage.offset_index import OffsetIndex
from logway.storage.open_files import OPEN_FLAGS, OPEN_SEGMENTS, LazyFile
from logway.storage.time_index import TimeIndex
from logway.storage.txn_index import TXN_INDEX_SUFFIX
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
_PEEK = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_RECOVERY_CHUNK = 1 << 20


class UndoFailed(OSError):
    """A failed write could not be taken back: the files hold bytes the segment does not account for."""


# One appended batch as the segment needs it: (position in the appended buffer, size, last offset, max timestamp).
BatchEntry = tuple[int, int, int, int]


def segment_name(base_offset: int) -> str:
    """Kafka's file name stem for a segment: the base offset, zero-padded to 20 digits."""
    return f"{base_offset:020d}"


class LogSegment(LazyFile):
    """A segment's files, its size and offsets, and the running state its indexes need (the log file's
    descriptor is the LazyFile part)."""

    def __init__(
        self, directory: Path, base_offset: int, config: LogConfig, *, created_ms: int, suffix: str = ""
    ) -> None:
        super().__init__()
        self.base_offset = base_offset
        self.suffix = suffix  # "" for a live segment; CLEANED_SUFFIX / SWAP_SUFFIX while compaction writes it
        stem = directory / segment_name(base_offset)
        self.log_path = stem.with_suffix(LOG_SUFFIX + suffix)
        self.txn_index_path = stem.with_suffix(TXN_INDEX_SUFFIX + suffix)  # aborted transactions (storage.txn_index)
        index_path, time_index_path = stem.with_suffix(INDEX_SUFFIX + suffix), stem.with_suffix(TIME_INDEX_SUFFIX + suffix)
        # Kafka rebuilds the indexes of a segment whose index files are missing (LogLoader.loadSegmentFiles).
        self._indexes_existed = index_path.exists() and time_index_path.exists()
        # The files are created at once (the base offset lives in the name) but opened only when first used,
        # so idle partitions hold no descriptors (DESIGN.md principle 4); `release_files` closes them again.
        self.recently_used = False  # for the open-files bound (storage/open_files.py)
        self._evicted = False  # descriptors were taken by the bound: writes made through them may need an fsync
        self.size = _create(self.log_path)
        self.offset_index = OffsetIndex(index_path, base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(time_index_path, base_offset, config.segment_index_bytes)
        self.offset_index.on_open = self.time_index.on_open = self._files_opened
        self.end_offset = base_offset  # one past the last offset of the last batch
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.created_ms = created_ms
        self.rolling_timestamp = -1  # max timestamp of the first append (Kafka's rollingBasedTimestamp)
        self.roll_jitter_ms = random.randrange(config.segment_jitter_ms) if config.segment_jitter_ms > 0 else 0
        self.index_interval_bytes = config.index_interval_bytes
        self._bytes_since_index = 0
        self.scanned_bytes = 0  # what the last `recover` read whole (CRC-checked)
        # Inactive and fsynced whole, indexes and txnindex included (PartitionLog.flush syncs a rolled segment once).
        self.synced_whole = False

    @property
    def fd(self) -> int:
        """The log file's descriptor, opened on first use (-1 once the segment is closed)."""
        fd = self._fd
        if fd >= 0:
            self.recently_used = True
            return fd
        if self._closed:
            return fd
        fd, opened = self._open_fd(self.log_path)  # the loop and a flush or compaction thread may both get here
        if opened:
            self._files_opened()
        return fd

    def _files_opened(self) -> None:
        OPEN_SEGMENTS.opened(self)

    def evict_files(self) -> list[int]:
        """Give up every descriptor (reopened on next use); the open-files bound closes them after a grace period."""
        with self._open_lock:
            fds = [self._fd, self.offset_index.take_fd(), self.time_index.take_fd()]
            self._fd = -1
            self._evicted = True
        return [fd for fd in fds if fd >= 0]

    @property
    def closed(self) -> bool:
        """Whether `close` was called (the descriptors are gone for good)."""
        return self._closed

    @property
    def open_files(self) -> int:
        """How many descriptors the segment holds now (log and indexes)."""
        return (self._fd >= 0) + self.offset_index.is_open + self.time_index.is_open

    def release_files(self) -> None:
        """Close the descriptors until the next use. Only when no reader, writer or flush can hold them (loading)."""
        self._close_fd()
        self.offset_index.release()
        self.time_index.release()
        OPEN_SEGMENTS.forget(self)

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
        except (CorruptBatch, CorruptRecord, KafkaStorageError):
            return False
        if expect_last is not None:
            return False
        self.end_offset = previous_last + 1
        if entry is not None and entry[1] > previous_last:
            return False
        self._bytes_since_index = self.size - self.offset_index.last_position
        self._load_rolling_timestamp()
        return True

    def recover(self, durable_below: int = -1) -> int:
        """Rebuild both indexes from the log, checking every batch; truncate at the first invalid byte.

        A batch is valid when its length is sane and inside the file, its magic is 2, its CRC-32C
        matches and its offsets follow the previous batch (Kafka's LogSegment.recover; seed 003:
        both a truncated tail and an appended garbage tail end the valid prefix). The batches below
        ``durable_below`` (the recovery point: fsynced before the crash) are walked by their headers
        and not read whole. Returns the number of bytes removed; `scanned_bytes` is what was read whole.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0
        file_size = os.fstat(self.fd).st_size
        valid = durable = 0
        previous_last = self.base_offset - 1
        for pos, header in _scan_valid(self.fd, file_size, durable_below):
            if header.base_offset <= previous_last or header.last_offset - self.base_offset > INT32_MAX:
                break
            self._account(pos, header.size, header.last_offset, header.max_timestamp)
            previous_last = header.last_offset
            valid = pos + header.size
            if header.last_offset < durable_below:
                durable = valid
        if valid < file_size:
            fs.ftruncate(self.fd, valid)
        self.size = valid
        self.scanned_bytes = file_size - durable
        self.end_offset = previous_last + 1
        self._load_rolling_timestamp()
        # The rebuilt entries go to the files now, as Kafka's recovery rewrites them: a later clean start loads them.
        self.offset_index.write_held()
        self.time_index.write_held()
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
        fs.ftruncate(self.fd, self.size)

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
        """Record the final max timestamp in the time index (Kafka's onBecomeInactiveSegment) and write both
        indexes' entries held in memory (storage.index_file), so the files are whole; all or nothing."""
        entries = len(self.time_index)
        try:
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.offset_index.write_held()
            self.time_index.write_held()
        except OSError as e:
            try:
                self.time_index.truncate_entries(entries)
                # The held offset index entries stay held; its file is cut back to the entries written before.
                self.offset_index.truncate_entries(len(self.offset_index))
            except OSError as undo:
                raise UndoFailed(undo.errno, f"could not undo a failed index write of {self.log_path}: {undo}") from e
            raise

    def write_held_indexes(self) -> None:
        """Write both indexes' entries held in memory (a live segment's files catch up for tools that read them);
        on an OSError the files are cut back to what was written before, or UndoFailed if they cannot be."""
        try:
            self.offset_index.write_held()
            self.time_index.write_held()
        except OSError as e:
            try:
                self.offset_index.truncate_entries(len(self.offset_index))
                self.time_index.truncate_entries(len(self.time_index))
            except OSError as undo:
                raise UndoFailed(undo.errno, f"could not undo a failed index write of {self.log_path}: {undo}") from e
            raise

    # -- reading -------------------------------------------------------------------------------------

    # Stored bytes are checked before they are trusted: a batch whose length, magic or offsets cannot be
    # right raises CorruptRecord (Kafka's FileLogInputStream throws CorruptRecordException, which a Fetch
    # answers as CORRUPT_MESSAGE for that partition) and an I/O error raises KafkaStorageError (Kafka's
    # KAFKA_STORAGE_ERROR). Nothing here may send a slice that runs past the segment or a struct.error.

    def _read_header(self, pos: int) -> BatchHeader:
        try:
            raw = os.pread(self.fd, BATCH_HEADER_SIZE, pos)
        except OSError as e:
            raise KafkaStorageError(f"reading {self.log_path} at byte {pos} failed: {e}") from e
        if len(raw) < BATCH_HEADER_SIZE:
            raise self._corrupt(pos, f"a batch header needs {BATCH_HEADER_SIZE} bytes, {len(raw)} present")
        return parse_header(raw)

    def _pread(self, size: int, pos: int) -> bytes:
        try:
            return os.pread(self.fd, size, pos)
        except OSError as e:
            raise KafkaStorageError(f"reading {self.log_path} at byte {pos} failed: {e}") from e

    def _corrupt(self, pos: int, why: str) -> CorruptRecord:
        return CorruptRecord(f"corrupt record batch at byte {pos} of {self.log_path}: {why}")

    def _check_frame(self, pos: int, length: int, magic: int, end: int) -> None:
        """Raise CorruptRecord unless a batch of ``length`` with ``magic`` fits between ``pos`` and ``end``."""
        if length < MIN_BATCH_LENGTH:
            raise self._corrupt(pos, f"batch length {length} is shorter than a batch header")
        if pos + LOG_OVERHEAD + length > end:
            raise self._corrupt(pos, f"batch length {length} runs past the segment end at byte {end}")
        if magic != MAGIC_V2:
            raise self._corrupt(pos, f"magic {magic}, expected {MAGIC_V2}")

    def iter_headers(self, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each batch from ``position`` to the end (one pread per batch).

        Each header is yielded only once the next one has been read, so a caller that goes on to read the
        whole batch never reads a length that leads nowhere (it could be up to a segment of garbage).
        """
        end = self.size
        if position >= end:
            return
        header = self._read_header(position)
        previous_last = -1
        while True:
            self._check_frame(position, header.batch_length, header.magic, end)
            if header.base_offset <= previous_last or header.last_offset_delta < 0:
                raise self._corrupt(position, f"offsets {header.base_offset}..{header.last_offset} do not follow {previous_last}")
            following = position + header.size
            if following >= end:
                yield position, header
                return
            try:
                next_header = self._read_header(following)
            except CorruptRecord:
                raise self._corrupt(position, f"batch length {header.batch_length} leads to no batch header") from None
            if next_header.magic != MAGIC_V2:
                raise self._corrupt(position, f"batch length {header.batch_length} leads to no batch header")
            yield position, header
            previous_last = header.last_offset
            position, header = following, next_header

    def find_batch(self, offset: int) -> tuple[int, int] | None:
        """(position, size) of the first batch whose last offset is >= ``offset``, or None."""
        pos = self.offset_index.lookup(offset)
        end = self.size
        previous_last = -1
        while pos < end:
            raw = self._pread(_NAV.size, pos)
            if len(raw) < _NAV.size:
                raise self._corrupt(pos, f"only {len(raw)} bytes where a batch header starts")
            base, length, _, magic, _, _, delta = _NAV.unpack(raw)
            self._check_frame(pos, length, magic, end)
            if base <= previous_last or delta < 0:
                raise self._corrupt(pos, f"offsets {base}..{base + delta} do not follow {previous_last}")
            if base + delta >= offset:
                return pos, length + LOG_OVERHEAD
            previous_last = base + delta
            pos += length + LOG_OVERHEAD
        return None

    def read(self, offset: int, max_bytes: int, min_one: bool) -> tuple[int, int] | None:
        """(position, size) of whole batches from the one containing ``offset`` up to ``max_bytes``.

        At least the first batch when ``min_one`` even if larger (KIP-74); None if no batch of
        this segment reaches ``offset``. The slice never crosses the end of the segment. It stops
        before stored data that cannot be right: at a batch whose length is impossible, and before
        a batch whose length leads to no batch header (that length is wrong); a read starting at
        such a batch raises CorruptRecord.
        """
        found = self.find_batch(offset)
        if found is None:
            return None
        start, first = found
        seg_end = self.size
        if first > max_bytes:
            if not min_one:
                return start, 0
            self._check_followed(start, first, seg_end)
            return start, first
        limit = start + max_bytes
        end = start + first
        indexed = self.offset_index.floor_position(limit)
        previous = start  # the last boundary we stepped from; an index entry counts as a known boundary
        if indexed > end:
            self._check_followed(start, first, seg_end)  # the jump must not carry a bad first length along
            previous = end = indexed
        while end < seg_end:
            raw = self._pread(_PEEK.size, end)
            if len(raw) < _PEEK.size or raw[_PEEK.size - 1] != MAGIC_V2:
                # No batch starts here, so the length of the batch at `previous` is wrong.
                if previous == start:
                    raise self._corrupt(start, f"batch length {first - LOG_OVERHEAD} leads to no batch header")
                end = previous
                break
            _, length, _, _ = _PEEK.unpack(raw)
            if length < MIN_BATCH_LENGTH or end + LOG_OVERHEAD + length > min(limit, seg_end):
                break  # the batch at `end` is cut by max_bytes, or its own length is impossible
            previous, end = end, end + LOG_OVERHEAD + length
        return start, end - start

    def _check_followed(self, start: int, size: int, seg_end: int) -> None:
        """Raise CorruptRecord unless the batch at ``start`` ends at the segment end or at another batch header."""
        end = start + size
        if end < seg_end:
            raw = self._pread(_PEEK.size, end)
            if len(raw) < _PEEK.size or raw[_PEEK.size - 1] != MAGIC_V2:
                raise self._corrupt(start, f"batch length {size - LOG_OVERHEAD} leads to no batch header")

    def read_bytes(self, position: int, size: int) -> bytes:
        """The raw bytes of a slice of the log file (KafkaStorageError on an I/O error)."""
        return self._pread(size, position)

    def read_batch(self, position: int, size: int) -> bytes:
        """The bytes of the batch at ``position``, once its length is seen to lead to the next batch or the end."""
        self._check_followed(position, size, self.size)
        return self._pread(size, position)

    def find_offset_by_timestamp(self, timestamp_ms: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``start_offset`` with timestamp >= ``timestamp_ms``.

        Kafka's LogSegment.findOffsetByTimestamp: the time index to skip ahead, batch headers
        (maxTimestamp) to find the batch, and only that batch's records are decoded. None if none qualifies.
        """
        begin = max(self.time_index.offset_before(timestamp_ms), start_offset)
        for pos, header in self.iter_headers(self.offset_index.lookup(begin)):
            if header.max_timestamp >= timestamp_ms and header.last_offset >= start_offset:
                found = self.first_record_at_or_after(pos, header.size, timestamp_ms, start_offset)
                if found is not None:
                    return found
        return None

    def first_record_at_or_after(
        self, position: int, size: int, timestamp_ms: int, min_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record of the batch at ``position`` with both at least the given ones."""
        from logway.wire.records import decode_batch  # the record codec; only this cold path decodes records

        try:
            batch = decode_batch(self.read_batch(position, size))
        except CorruptBatch as e:
            raise self._corrupt(position, str(e)) from None
        for record in batch.records:
            if record.timestamp >= timestamp_ms and record.offset >= min_offset:
                return record.offset, record.timestamp
        return None

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
        fs.ftruncate(self.fd, position)
        self.size = position
        if not self.load_tail():
            self.recover()

    def flush(self, *, indexes: bool = True) -> None:
        """fsync the log file and, with ``indexes``, both indexes and the txnindex (Kafka's LogSegment.flush).

        The log is appended to, so fdatasync(2) is enough: it writes the new size with the data, and only
        mtime stays behind. A file not opened since loading has nothing unsynced from this process.
        """
        fd = self._fd
        if self._evicted and not self._closed:
            # Data written through descriptors the open-files bound took: fsync the files through new ones (the
            # indexes' when they are synced; until then the segment stays marked).
            try:
                fd = self.fd
                if indexes:
                    self.offset_index.fd, self.time_index.fd  # noqa: B018 - reopen so their flush syncs them too
                    self._evicted = False
            except FileNotFoundError:  # renamed meanwhile: deleted, or replaced by an fsynced compaction output
                return
        if fd >= 0:
            fs.fdatasync(fd)
        if indexes:
            self.offset_index.flush()
            self.time_index.flush()
            _sync_if_present(self.txn_index_path)

    def rename_for_delete(self) -> None:
        """Append ``.deleted`` to every file name; descriptors stay open for in-flight sendfile reads."""
        deleted = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        fs.replace(self.log_path, deleted)
        self.log_path = deleted
        for index in (self.offset_index, self.time_index):
            index.rename(index.path.with_name(index.path.name + DELETED_SUFFIX))
        self.txn_index_path = _rename_if_present(self.txn_index_path, self.txn_index_path.name + DELETED_SUFFIX)

    def change_suffix(self, suffix: str) -> None:
        """Rename the files from ``<name><old suffix>`` to ``<name><suffix>``: indexes first, the log last.

        The log file's name is what recovery looks at (a ``.log.swap`` commits a compaction), so
        renaming it last makes the log rename the single step that moves the segment's state.
        """
        for index in (self.offset_index, self.time_index):
            index.rename(index.path.with_name(_strip(index.path.name, self.suffix) + suffix))
        self.txn_index_path = _rename_if_present(self.txn_index_path, _strip(self.txn_index_path.name, self.suffix) + suffix)
        target = self.log_path.with_name(_strip(self.log_path.name, self.suffix) + suffix)
        fs.replace(self.log_path, target)
        self.log_path = target
        self.suffix = suffix

    def reset(self) -> None:
        """Empty the segment and its indexes (a stray file left where a new segment must start)."""
        self.offset_index.reset()
        self.time_index.reset()
        fs.ftruncate(self.fd, 0)
        self.size = 0
        self.end_offset = self.base_offset
        self.max_timestamp = self.offset_of_max_timestamp = self.rolling_timestamp = -1
        self._bytes_since_index = 0

    def delete_files(self) -> None:
        """Close and unlink the files."""
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index_path):
            fs.unlink(path, missing_ok=True)

    def close(self) -> None:
        """Close all descriptors (idempotent)."""
        self._close_fd(final=True)
        self.offset_index.close()
        self.time_index.close()
        OPEN_SEGMENTS.forget(self)


def _sync_if_present(path: Path) -> None:
    """fsync a file that may not exist (a segment's txnindex, written only once a transaction aborted in it)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return
    try:
        fs.fdatasync(fd)
    finally:
        os.close(fd)


def _rename_if_present(path: Path, name: str) -> Path:
    """Rename a file that may not exist (a segment has a txnindex only once a transaction aborted in it)."""
    target = path.with_name(name)
    if path.exists():
        fs.replace(path, target)
    return target


def _create(path: Path) -> int:
    """Create the file if it is missing (without keeping it open); its size."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        os.close(fs.open(path, OPEN_FLAGS, 0o644))
        return 0


def _strip(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if suffix else name


def _scan_valid(fd: int, file_size: int, durable_below: int = -1) -> Iterator[tuple[int, BatchHeader]]:
    """Yield valid batches from the start of a log file, stopping silently at the first invalid one.

    A batch whose last offset is below ``durable_below`` was fsynced before the crash: its header is read
    and its records are not (no CRC-32C), as for a segment below the recovery point.
    """
    buf = b""
    buf_start = 0
    pos = 0
    while pos + LOG_OVERHEAD <= file_size:
        if not (buf_start <= pos and pos + BATCH_HEADER_SIZE <= buf_start + len(buf)):
            buf, buf_start = os.pread(fd, _RECOVERY_CHUNK, pos), pos
        rel = pos - buf_start
        if len(buf) - rel < BATCH_HEADER_SIZE or buf[rel + MAGIC_POS] != MAGIC_V2:
            return
        header = parse_header(buf, rel)
        size = header.size
        if header.batch_length < MIN_BATCH_LENGTH or pos + size > file_size:
            return
        if header.last_offset < durable_below and header.last_offset_delta >= 0:
            yield pos, header
            pos += size
            continue
        if pos + size > buf_start + len(buf):
            buf, buf_start = os.pread(fd, max(size, _RECOVERY_CHUNK), pos), pos
            rel = 0
        try:
            header = validate_batch(memoryview(buf)[: rel + size], rel)
        except CorruptBatch:
            return
        yield pos, header
        pos += size
