"""The file side shared by the offset and time indexes: an append-only file of fixed-size entries.

Kafka preallocates index files to segment.index.bytes and mmaps them (an entry costs no syscall),
trimming them when the segment rolls. Logway instead keeps the entries in memory (compact `array`s),
which is what lookups read, and appends them to the file in runs of WRITE_EVERY entries, when the
segment rolls, at a clean shutdown and every few seconds (log maintenance), so an index file is
always a prefix of its entries and never needs trimming. Entries not yet written are lost with the
process, like the log bytes after the recovery point: loading after a crash rebuilds the indexes of
every segment from the one holding the recovery point (the active one included) from the log itself,
and the segments before it were fsynced whole after they rolled, which wrote and synced their entries.
So the flush a durable append waits for syncs the active segment's log alone, never its indexes. `max_entries` still comes from segment.index.bytes / entry size,
and a full index rolls the segment as in Kafka.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sized
from pathlib import Path

from logway.storage import fs
from logway.storage.open_files import OPEN_FLAGS, LazyFile

# Entries held in memory before one write of them (2 KB of offset index, 3 KB of time index: one
# syscall per ~1 MB of log at the default index.interval.bytes, instead of one per entry).
WRITE_EVERY = 256


class IndexFile(LazyFile):
    """An index file opened for appending, with the entry size and capacity of its kind."""

    entry_size = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__()  # created now, opened on first use (see LogSegment: idle partitions hold no descriptors)
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        # Entries [0, _written) are in the file; the rest are held in memory (see WRITE_EVERY). The loop appends
        # and truncates, the flush thread writes held entries: both under _write_lock.
        self._written = 0
        self._write_lock = threading.Lock()
        # The file may hold bytes past _written entries (an existing file not loaded yet, or a failed write):
        # it is cut back to _written entries before the next write or truncation.
        self._torn = path.exists()
        if not self._torn:
            os.close(fs.open(path, OPEN_FLAGS, 0o644))

    # Called after the descriptor is (re)opened: the segment registers with the open-files bound.
    on_open: Callable[[], None] | None = None

    @property
    def fd(self) -> int:
        """The descriptor, opened on first use (-1 once closed)."""
        fd = self._fd
        if fd >= 0 or self._closed:
            return fd
        fd, opened = self._open_fd(self.path)
        if opened and self.on_open is not None:
            self.on_open()
        return fd

    def take_fd(self) -> int:
        """Give up the descriptor without closing it (the open-files bound closes it later); -1 if none."""
        with self._open_lock:
            fd, self._fd = self._fd, -1
            return fd

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is held now."""
        return self._fd >= 0

    def release(self) -> None:
        """Close the descriptor until the next use (see LogSegment.release_files)."""
        self._close_fd()

    _offsets: Sized  # relative offsets of the entries, kept by each kind

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        """Whether segment.index.bytes worth of entries exist (the segment must roll)."""
        return len(self._offsets) >= self.max_entries

    def read_all(self) -> bytes:
        """The whole file (used once, when a segment is loaded)."""
        with open(self.path, "rb") as f:
            return f.read()

    def _loaded(self) -> None:
        """The file was read and its entries taken as they are: all of them are written."""
        self._written = len(self._offsets)
        self._torn = False

    def _added(self) -> None:
        """An entry was appended in memory: write the held ones once there are WRITE_EVERY."""
        if len(self._offsets) - self._written >= WRITE_EVERY:
            self.write_held()

    def write_held(self) -> None:
        """Append the entries held in memory to the file (one write); on an OSError they stay held, and
        the file is cut back to the written entries before anything else touches it."""
        with self._write_lock:
            count = len(self._offsets)
            if count <= self._written and not self._torn:
                return
            fd = self.fd
            if self._torn:
                fs.ftruncate(fd, self._written * self.entry_size)
                self._torn = False
            data = self._pack(self._written, count)
            self._torn = True
            written = 0
            while written < len(data):  # a short write is followed by the call that reports ENOSPC
                written += os.write(fd, data[written:])
            self._torn = False
            self._written = count

    def _pack(self, start: int, stop: int) -> bytes:
        """The file bytes of entries [start, stop)."""
        raise NotImplementedError

    def truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries, in memory and in the file (the undo of a failed append)."""
        self._truncate(count)

    def _truncate_file(self, count: int) -> None:
        """Cut the file to ``count`` entries if it holds more (held entries past ``count`` just go)."""
        if count < self._written or self._torn:
            self._written = min(count, self._written)
            fs.ftruncate(self.fd, self._written * self.entry_size)
            self._torn = False

    def flush(self) -> None:
        """Write the held entries and fsync the file if it is open (called from the flush thread)."""
        self.write_held()
        fd = self._fd
        if fd >= 0:
            fs.fdatasync(fd)

    def rename(self, path: Path) -> None:
        """Rename the file; the open descriptor keeps working."""
        fs.replace(self.path, path)
        self.path = path

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        self._close_fd(final=True)
