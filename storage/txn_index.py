"""Aborted transactions of a segment: Kafka's ``<base>.txnindex`` file (TransactionIndex / AbortedTxn).

Each entry is 34 bytes: version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
lastStableOffset int64. lastOffset is the offset of the ABORT marker; firstOffset the first offset the
producer wrote in that transaction. A fetch with isolation_level READ_COMMITTED gets the (producerId,
firstOffset) of every aborted transaction overlapping the offsets it reads, so the consumer can drop
their records. A torn tail entry (a crash mid-write) is ignored when read.

`AbortedTxns` holds the entries of every live segment of a partition in memory, in marker order: what
Kafka's collectAbortedTransactions gathers segment by segment, and what compaction and truncation change.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from logway.storage import fs
from logway.storage.checkpoints import write_atomically

if TYPE_CHECKING:
    from logway.storage.producer_state import ProducerStateManager

__all__ = ["AbortedTxn", "AbortedTxns", "TXN_INDEX_SUFFIX", "append_entry", "read_entries", "write_entries"]

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
    """Append one entry (Kafka appends on the ABORT marker's append; fsynced with its segment once it rolled)."""
    fd = fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        os.write(fd, _pack(entry))
    finally:
        os.close(fd)


def write_entries(path: Path, entries: list[AbortedTxn]) -> None:
    """Replace the file's entries durably (after a truncation or compaction); no file when there are none."""
    if not entries:
        fs.unlink(path, missing_ok=True)
        return
    write_atomically(path, b"".join(_pack(e) for e in entries))


def _marker_offset(entry: AbortedTxn) -> int:
    return entry.last_offset


class AbortedTxns:
    """A partition's aborted transactions, ordered by the offset of their ABORT marker (lastOffset)."""

    def __init__(self, entries: list[AbortedTxn] | None = None) -> None:
        self._entries = entries or []

    @classmethod
    def load(cls, paths: Iterable[Path], log_end_offset: int) -> AbortedTxns:
        """Read the segments' txnindex files, dropping entries past the log end (a truncated tail)."""
        aborted = []
        for path in paths:
            entries = read_entries(path)
            kept = [e for e in entries if e.last_offset < log_end_offset]
            if len(kept) != len(entries):
                write_entries(path, kept)
            aborted.extend(kept)
        return cls(sorted(aborted, key=_marker_offset))

    def end_transaction(
        self, producers: ProducerStateManager, path: Path, producer_id: int, epoch: int, commit: bool,
        marker_offset: int, *, replay: bool,
    ) -> None:
        """Close the producer's transaction; an aborted one becomes an entry of the marker segment's txnindex
        (``path``). ``replay``: the marker is read again at load, and may be in the txnindex already."""
        first = producers.end_transaction(producer_id, epoch)
        if commit or first < 0:
            return
        at = bisect_left(self._entries, marker_offset, key=_marker_offset)
        if replay and at < len(self._entries) and self._entries[at].last_offset == marker_offset:
            return  # already in the txnindex read at load
        unstable = producers.first_unstable_offset()
        entry = AbortedTxn(producer_id, first, marker_offset, marker_offset + 1 if unstable is None else unstable)
        append_entry(path, entry)
        self._entries.insert(at, entry)

    def collect(self, fetch_offset: int, upper_offset: int) -> list[tuple[int, int]]:
        """(producerId, firstOffset) of the aborted transactions overlapping [fetch_offset, upper_offset).

        Kafka's collectAbortedTransactions: lastOffset >= fetchOffset and firstOffset < upperBoundOffset.
        """
        entries = self._entries
        start = bisect_left(entries, fetch_offset, key=_marker_offset)
        return [(e.producer_id, e.first_offset) for e in entries[start:] if e.first_offset < upper_offset]

    def with_markers_in(self, low: int, high: int) -> list[AbortedTxn]:
        """The entries whose ABORT marker lies in [low, high): a segment's txnindex."""
        return [e for e in list(self._entries) if low <= e.last_offset < high]  # a copy: also read by the cleaner

    def by_producer(self) -> dict[int, list[tuple[int, int]]]:
        """Producer id -> (first, last) offsets of its aborted transactions (safe from a worker thread)."""
        aborted: dict[int, list[tuple[int, int]]] = {}
        for entry in list(self._entries):
            aborted.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))
        return aborted

    def truncate(self, log_end_offset: int, last_base_offset: int, last_path: Path) -> None:
        """Drop the entries at or past the new log end and rewrite the txnindex of the last segment (``last_path``)."""
        kept = [e for e in self._entries if e.last_offset < log_end_offset]
        if len(kept) != len(self._entries):
            write_entries(last_path, [e for e in kept if e.last_offset >= last_base_offset])
            self._entries = kept

    def drop_before(self, offset: int) -> None:
        """Forget the entries whose marker went with segments deleted below ``offset`` (they concern no readable offset)."""
        self._entries = [e for e in self._entries if e.last_offset >= offset]
