"""Sparse offset index of a segment: relative offset int32 -> file position int32 (Kafka's OffsetIndex).

One 8-byte entry is added every index.interval.bytes of log. Like Kafka's LogSegment.append, an
entry maps the LAST offset of a batch to the position where that batch starts, so the greatest
entry <= a target offset is a batch boundary at or before the batch that contains the target.
"""

from __future__ import annotations

import operator
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from logway.storage.index_file import IndexFile

_ENTRY = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    """In-memory sorted entries backed by an append-only file of big-endian (relOffset, position) pairs."""

    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._offsets = array("i")  # relative offsets, strictly increasing
        self._positions = array("i")  # batch start positions, strictly increasing

    def load(self, log_size: int) -> bool:
        """Read the file and sanity-check it as Kafka does (no checksum); False (and empty) when it is unusable."""
        data = self.read_all()
        entries = array("i")
        if len(data) % self.entry_size == 0:
            entries.frombytes(data)
            if sys.byteorder == "little":
                entries.byteswap()
        offsets, positions = entries[0::2], entries[1::2]
        ok = (
            len(data) % self.entry_size == 0
            and (not offsets or (offsets[0] >= 0 and positions[0] >= 0 and positions[-1] < log_size))
            and all(map(operator.lt, offsets, offsets[1:]))
            and all(map(operator.lt, positions, positions[1:]))
        )
        if ok:
            self._offsets, self._positions = offsets, positions
            self._loaded()
        else:
            self.reset()
        return ok

    @property
    def last_offset(self) -> int:
        """Absolute offset of the last entry (the base offset when empty)."""
        return self.base_offset + self._offsets[-1] if self._offsets else self.base_offset

    @property
    def last_position(self) -> int:
        """Position of the last indexed batch (0 when empty)."""
        return self._positions[-1] if self._positions else 0

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets and positions must grow (Kafka throws InvalidOffsetException otherwise)."""
        rel = offset - self.base_offset
        if self._offsets and (rel <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not follow the last one")
        self._offsets.append(rel)
        self._positions.append(position)
        self._added()

    def _pack(self, start: int, stop: int) -> bytes:
        entries = array("i", [0]) * (2 * (stop - start))
        entries[0::2] = self._offsets[start:stop]
        entries[1::2] = self._positions[start:stop]
        if sys.byteorder == "little":
            entries.byteswap()
        return entries.tobytes()

    def lookup(self, offset: int) -> int:
        """Position of the greatest entry with offset <= ``offset`` (0, the segment start, when none)."""
        i = bisect_right(self._offsets, offset - self.base_offset) - 1
        return self._positions[i] if i >= 0 else 0

    def floor_position(self, position: int) -> int:
        """The greatest indexed batch boundary <= ``position`` (0 when none)."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= ``offset`` (Kafka's OffsetIndex.truncateTo)."""
        keep = bisect_right(self._offsets, offset - self.base_offset - 1)
        self._truncate(keep)

    def truncate_to_position(self, position: int) -> None:
        """Drop every entry pointing at or beyond ``position`` (the log was cut there)."""
        self._truncate(bisect_right(self._positions, position - 1))

    def reset(self) -> None:
        """Remove all entries (before a rebuild)."""
        self._truncate(0)

    def _truncate(self, keep: int) -> None:
        with self._write_lock:
            del self._offsets[keep:]
            del self._positions[keep:]
            self._truncate_file(keep)
