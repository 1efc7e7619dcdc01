"""The compaction offset map: MD5 of a record key -> the latest offset seen for it (Kafka's SkimpyOffsetMap).

Kafka sizes the map in bytes: each slot is a 16-byte MD5 hash plus an 8-byte offset (24 bytes,
seed 000), the dedupe buffer (``log.cleaner.dedupe.buffer.size``, shared by the cleaner threads)
gives the slot count, and only ``log.cleaner.io.buffer.load.factor`` of the slots are filled.
Logway keeps the same capacity rule (so a config behaves as in Kafka) over a Python dict.
"""

from __future__ import annotations

import hashlib

BYTES_PER_ENTRY = 24  # 16-byte MD5 hash + 8-byte offset


class OffsetMap:
    """Key hash -> latest offset for the dirty section of one log, plus the last offset mapped."""

    def __init__(self, memory_bytes: int, load_factor: float) -> None:
        slots = max(1, memory_bytes // BYTES_PER_ENTRY)
        self.capacity = max(1, int(slots * load_factor))
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1  # the last offset whose batch is fully in the map

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        """Whether the map holds its load-factor share of slots (Kafka then stops mapping)."""
        return len(self._offsets) >= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        """Remember ``offset`` as the newest for ``key`` (callers go through the log in offset order)."""
        self._offsets[_digest(key)] = offset

    def get(self, key: bytes) -> int:
        """The newest offset mapped for ``key``, or -1."""
        return self._offsets.get(_digest(key), -1)


def _digest(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()
