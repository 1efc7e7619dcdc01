"""The file side shared by the offset and time indexes: an append-only file of fixed-size entries.

Kafka preallocates index files to segment.index.bytes and mmaps them, trimming them when the
segment rolls. Logway instead keeps the entries in memory (compact `array`s) and appends each
new entry to the file with one write, so an index file is always exactly its entries and never
needs trimming; `max_entries` still comes from segment.index.bytes / entry size, and a full
index rolls the segment as in Kafka.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sized
from pathlib import Path

_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class IndexFile:
    """An index file opened for appending, with the entry size and capacity of its kind."""

    entry_size = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        # Created now, opened on first use (see LogSegment: idle partitions hold no descriptors).
        self._fd = -1
        self._closed = False
        self._open_lock = threading.Lock()
        if not path.exists():
            os.close(os.open(path, _FLAGS, 0o644))

    # Called after the descriptor is (re)opened: the segment registers with the open-files bound.
    on_open: Callable[[], None] | None = None

    @property
    def fd(self) -> int:
        """The descriptor, opened on first use (-1 once closed)."""
        fd = self._fd
        if fd >= 0 or self._closed:
            return fd
        with self._open_lock:
            opened = self._fd < 0 and not self._closed
            if opened:
                self._fd = os.open(self.path, _FLAGS, 0o644)
            fd = self._fd
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
        with self._open_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

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

    def _write(self, data: bytes) -> None:
        written = 0
        while written < len(data):  # a short write is followed by the call that reports ENOSPC
            written += os.write(self.fd, data[written:])

    def truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries, in memory and in the file (the undo of a failed append)."""
        self._truncate(count)

    def _truncate_entries(self, count: int) -> None:
        os.ftruncate(self.fd, count * self.entry_size)

    def flush(self) -> None:
        """fsync the file if it is open (called from the flush thread)."""
        fd = self._fd
        if fd >= 0:
            os.fsync(fd)

    def rename(self, path: Path) -> None:
        """Rename the file; the open descriptor keeps working."""
        os.replace(self.path, path)
        self.path = path

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        with self._open_lock:
            self._closed = True
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
