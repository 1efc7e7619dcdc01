"""Hand-written Fetch request reader (v4-v17) for the common shape: partitions as compact tuples, no kio objects.

A consumer's Fetch names hundreds of partitions; kio's reader makes an object of each (and the length check
before it walks them in Python). This reader takes the request apart with ``struct`` instead: the partitions of
a topic are fixed-size records, read in one ``iter_unpack`` after their count is checked against the bytes
present. It reads only what it can read exactly as kio would, and answers None for anything else (a tagged
field, a forgotten topic, a negative or oversized length, bytes that are not UTF-8): the caller then decodes the
request with kio, so unusual and hostile requests get exactly the kio path's answer or closed connection.

Per version (Kafka's FetchRequest.json): v4 replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level;
v5 log_start_offset per partition; v7 session_id, session_epoch, forgotten_topics_data; v9 current_leader_epoch;
v11 rack_id; v12 flexible, last_fetched_epoch; v13 topic_id replaces the topic name; v15 replica_id moves into
the replica_state tagged field; v17 replica_directory_id (a tagged field of a partition).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MIN_VERSION = 4
MAX_VERSION = 17

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
# The fields before the topics: (max_wait_ms, min_bytes, max_bytes, isolation_level[, session_id, session_epoch]).
_HEAD_V4 = struct.Struct(">4xiiib")
_HEAD_V7 = struct.Struct(">4xiiibii")
_HEAD_V15 = struct.Struct(">iiibii")
# A partition's fields as (partition, fetch_offset, partition_max_bytes): the others are pad bytes ("x"), skipped.
_PARTITION_V4 = struct.Struct(">iqi")
_PARTITION_V5 = struct.Struct(">iq8xi")  # + log_start_offset
_PARTITION_V9 = struct.Struct(">i4xq8xi")  # + current_leader_epoch
_PARTITION_V12 = struct.Struct(">i4xq4x8xix")  # + last_fetched_epoch, the tagged field count (checked apart)


@dataclass(slots=True)
class FetchRequestTopic:
    """A topic of the request: its name (v4-v12) or id bytes (v13+), and its partitions as
    (partition, fetch_offset, partition_max_bytes) tuples."""

    key: str | bytes
    partitions: list[tuple[int, int, int]]


@dataclass(slots=True)
class FastFetchRequest:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchRequestTopic]


def read_fetch_request(version: int, buf: bytes | bytearray | memoryview, pos: int) -> FastFetchRequest | None:
    """The Fetch request body at ``pos``, or None if it is not of the common shape (then decode it with kio).

    Every declared length is checked against the bytes present before anything is read for it. Trailing bytes
    after the body are ignored, as kio and Kafka ignore them.
    """
    if not MIN_VERSION <= version <= MAX_VERSION:
        return None
    try:
        return _Reader(version, buf, pos).request()
    except _Unusual:
        return None


class _Unusual(Exception):
    """Not of the common shape: leave the request to kio."""


class _Reader:
    """One pass over a request body; every step raises _Unusual on what it does not read itself."""

    def __init__(self, version: int, buf: bytes | bytearray | memoryview, pos: int) -> None:
        self.version = version
        self.flexible = version >= 12
        self.buf = buf
        self.pos = pos
        self.end = len(buf)

    def request(self) -> FastFetchRequest:
        head = self.head()
        topics = [self.topic() for _ in range(self.count(1 + 1 if self.flexible else 2 + 4))]
        if self.version >= 7 and self.count(1) != 0:  # forgotten_topics_data: only incremental sessions send it
            raise _Unusual
        if self.version >= 11:
            self.string()  # rack_id
        if self.flexible:
            self.no_tagged_fields()
        return FastFetchRequest(*head, topics)

    def head(self) -> tuple[int, int, int, int, int, int]:
        """max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch (0, -1 before v7)."""
        version = self.version
        layout = _HEAD_V15 if version >= 15 else _HEAD_V7 if version >= 7 else _HEAD_V4
        self.need(layout.size)
        fields = layout.unpack_from(self.buf, self.pos)
        self.pos += layout.size
        return fields if version >= 7 else (*fields, 0, -1)

    def topic(self) -> FetchRequestTopic:
        if self.version >= 13:
            self.need(16)
            key: str | bytes = bytes(self.buf[self.pos : self.pos + 16])
            self.pos += 16
        else:
            key = self.string()
        layout = _PARTITION_V12 if self.flexible else _PARTITION_V9 if self.version >= 9 else (
            _PARTITION_V5 if self.version >= 5 else _PARTITION_V4)
        n = self.count(layout.size)
        start, stop = self.pos, self.pos + n * layout.size
        self.pos = stop
        partitions = list(layout.iter_unpack(self.buf[start:stop]))
        if self.flexible:
            # Each partition ends with its tagged-field count: all zero, else some partition has tagged fields.
            if any(self.buf[start + layout.size - 1 : stop : layout.size]):
                raise _Unusual
            self.no_tagged_fields()
        return FetchRequestTopic(key, partitions)

    def need(self, size: int) -> None:
        if self.pos + size > self.end:
            raise _Unusual

    def uvarint(self) -> int:
        value = shift = 0
        for i in range(self.pos, min(self.pos + 5, self.end)):
            b = self.buf[i]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = i + 1
                return value
            shift += 7
        raise _Unusual

    def count(self, item_size: int) -> int:
        """An array's length, checked: not null or negative, and its items (``item_size`` bytes at least) fit."""
        if self.flexible:
            n = self.uvarint() - 1
        else:
            self.need(4)
            (n,) = _I32(self.buf, self.pos)
            self.pos += 4
        if n < 0 or n * item_size > self.end - self.pos:
            raise _Unusual
        return n

    def string(self) -> str:
        """A non-nullable string, which must be UTF-8 (kio refuses it otherwise)."""
        if self.flexible:
            n = self.uvarint() - 1
        else:
            self.need(2)
            (n,) = _I16(self.buf, self.pos)
            self.pos += 2
        if n < 0:
            raise _Unusual
        self.need(n)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise _Unusual from None

    def no_tagged_fields(self) -> None:
        self.need(1)
        if self.buf[self.pos]:
            raise _Unusual
        self.pos += 1
