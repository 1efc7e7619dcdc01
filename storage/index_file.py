"""The file side shared by the offset and time indexes: an append-only file of fixed-size entries.

Kafka preallocates index files to segment.index.bytes and mmaps them, trimming them when the
segment rolls. Logway instead keeps the entries in memory (compact `array`s) and appends each
new entry to the file with one write, so an index file is always exactly its entries and never
needs trimming; `max_entries` still comes from segment.index.bytes / entry size, and a full
index rolls the segment as in Kafka.
"""

from __future__ import annotations

import os
from collections.abc import Sized
from pathlib import Path

_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class IndexFile:
    """An index file opened for appending, with the entry size and capacity of its kind."""

    entry_size = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self.fd = os.open(path, _FLAGS, 0o644)

    _offsets: Sized  # relative offsets of the entries, kept by each kind

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        """Whether segment.index.bytes worth of entries exist (the segment must roll)."""
        return len(self._offsets) >= self.max_entries

    def read_all(self) -> bytes:
        """The whole file (used once, when a segment is loaded)."""
        size = os.fstat(self.fd).st_size
        return os.pread(self.fd, size, 0)

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
        """fsync the file (called from the flush thread)."""
        os.fsync(self.fd)

    def rename(self, path: Path) -> None:
        """Rename the file; the open descriptor keeps working."""
        os.replace(self.path, path)
        self.path = path

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
