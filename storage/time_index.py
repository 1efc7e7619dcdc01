"""Sparse time index of a segment: timestamp int64 + relative offset int32 (Kafka's TimeIndex).

An entry (t, o) says that the largest timestamp in the segment up to and including offset o is
t (o is the last offset of the batch that brought it). Entries are added only when the segment's max
timestamp grows, so timestamps strictly increase (Kafka's TimeIndex.maybeAppend).
"""

from __future__ import annotations

import operator
import struct
from array import array
from bisect import bisect_left
from pathlib import Path

from logway.storage.index_file import IndexFile

_ENTRY = struct.Struct(">qi")


class TimeIndex(IndexFile):
    """In-memory entries backed by an append-only file of big-endian (timestamp, relOffset) pairs."""

    entry_size = 12

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._timestamps = array("q")
        self._offsets = array("i")

    def load(self) -> bool:
        """Read the file and sanity-check it; False (and empty) when it is unusable."""
        data = self.read_all()
        ok = len(data) % self.entry_size == 0
        if ok:
            pairs = list(_ENTRY.iter_unpack(data))
            timestamps = array("q", (p[0] for p in pairs))
            offsets = array("i", (p[1] for p in pairs))
            ok = (
                (not offsets or offsets[0] >= 0)
                and all(map(operator.lt, timestamps, timestamps[1:]))
                and all(map(operator.le, offsets, offsets[1:]))
            )
        if ok:
            self._timestamps, self._offsets = timestamps, offsets
            self._loaded()
        else:
            self.reset()
        return ok

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry."""
        if not self._offsets:
            return None
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's (Kafka's maybeAppend)."""
        rel = offset - self.base_offset
        if self._timestamps and (timestamp <= self._timestamps[-1] or rel < self._offsets[-1]):
            return
        self._timestamps.append(timestamp)
        self._offsets.append(rel)
        self._added()

    def _pack(self, start: int, stop: int) -> bytes:
        pack = _ENTRY.pack
        return b"".join(map(pack, self._timestamps[start:stop], self._offsets[start:stop]))

    def offset_before(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp is < ``timestamp`` (the base offset when none).

        Every record up to that offset has a smaller timestamp, so a search for the first record
        with timestamp >= ``timestamp`` may start at the batch containing it. (Kafka's lookup uses
        <=, which can skip earlier records with an equal timestamp; strict < keeps the answer exact.)
        """
        i = bisect_left(self._timestamps, timestamp) - 1
        return self.base_offset + self._offsets[i] if i >= 0 else self.base_offset

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset`` (Kafka's TimeIndex.truncateTo)."""
        rel = offset - self.base_offset
        keep = len(self._offsets)
        while keep and self._offsets[keep - 1] >= rel:
            keep -= 1
        self._truncate(keep)

    def reset(self) -> None:
        """Remove all entries (before a rebuild)."""
        self._truncate(0)

    def _truncate(self, keep: int) -> None:
        with self._write_lock:
            del self._timestamps[keep:]
            del self._offsets[keep:]
            self._truncate_file(keep)
