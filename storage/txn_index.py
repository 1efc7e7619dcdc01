"""Aborted transactions of a segment: Kafka's ``<base>.txnindex`` file (TransactionIndex / AbortedTxn).

Each entry is 34 bytes: version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
lastStableOffset int64. lastOffset is the offset of the ABORT marker; firstOffset the first offset the
producer wrote in that transaction. A fetch with isolation_level READ_COMMITTED gets the (producerId,
firstOffset) of every aborted transaction overlapping the offsets it reads, so the consumer can drop
their records. A torn tail entry (a crash mid-write) is ignored when read.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

__all__ = ["AbortedTxn", "TXN_INDEX_SUFFIX", "append_entry", "read_entries", "write_entries"]

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def _pack(entry: AbortedTxn) -> bytes:
    return _ENTRY.pack(_VERSION, *entry)


def read_entries(path: Path) -> list[AbortedTxn]:
    """The whole entries of a txnindex file (none if it is missing); entries of an unknown version are skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for pos in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
        version, *fields = _ENTRY.unpack_from(data, pos)
        if version == _VERSION:
            out.append(AbortedTxn(*fields))
    return out


def append_entry(path: Path, entry: AbortedTxn) -> None:
    """Append one entry (Kafka appends on the ABORT marker's append; flushed with the segment's log)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, _pack(entry))
    finally:
        os.close(fd)


def write_entries(path: Path, entries: list[AbortedTxn]) -> None:
    """Replace the file's entries (after a truncation or compaction); no file when there are none."""
    if not entries:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(b"".join(_pack(e) for e in entries))
    os.replace(tmp, path)
