"""Hand-written Fetch response encoder (v4-v17) that leaves record data in the segment files.

The generic kio writer needs the records as bytes in memory. This encoder instead emits a list of
chunks: encoded bytes interleaved with ``FileSlice``s (fd, position, size) that the gateway sends with
``os.sendfile``. tests/wire/test_fetch_encoder.py proves it byte-equal to kio's writer for every version.

Per version (Kafka's FetchResponse.json):
- v4: last_stable_offset + aborted_transactions; v5: log_start_offset; v7: top-level error_code + session_id
- v11: preferred_read_replica; v12: flexible (compact strings/arrays, tagged fields; the per-partition
  tagged fields diverging_epoch / current_leader / snapshot_id are omitted at their defaults, as Kafka's
  generated code does); v13+: topic_id replaces the topic name; v16+: node_endpoints (tag 0, omitted empty).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from logway.wire.protocol import write_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PARTITION_HEAD = struct.Struct(">ihq")  # partition_index, error_code, high_watermark
_Q2 = struct.Struct(">qq")
# A partition with no records, a null aborted-transactions list and no preferred replica (an empty fetch's every
# partition) is one pack of partition_index, error_code, high_watermark, last_stable_offset (and log_start_offset
# from v5) followed by constant bytes: the null array, preferred_read_replica -1 (v11+) and the records length 0
# (in flexible versions the compact null 0, compact length 1 and the empty tagged fields).
_EMPTY_HEAD_V4 = struct.Struct(">ihqq")
_EMPTY_HEAD_V5 = struct.Struct(">ihqqq")


@dataclass(slots=True, frozen=True)
class FileSlice:
    """``size`` bytes of an open file at ``position``: record data sent without copying."""

    fd: int
    position: int
    size: int


Chunk = bytes | FileSlice


@dataclass(slots=True)
class FetchPartitionResult:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | FileSlice | None = b""
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1


@dataclass(slots=True)
class FetchTopicResult:
    name: str
    topic_id: uuid.UUID
    partitions: list[FetchPartitionResult]


def _array_len(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        out += write_uvarint(n + 1)
    else:
        out += _I32.pack(n)


def _empty_tail(version: int) -> bytes:
    """The bytes after log_start_offset of a partition without records, aborted list or preferred replica."""
    if version >= 12:
        return b"\x00" + _I32.pack(-1) + b"\x01\x00"
    return _I32.pack(-1) + (_I32.pack(-1) if version >= 11 else b"") + _I32.pack(0)


_EMPTY_TAILS = {version: _empty_tail(version) for version in range(4, 18)}


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: list[FetchTopicResult],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> list[Chunk]:
    """A whole Fetch response frame (size prefix and header included) as chunks."""
    flexible = version >= 12
    chunks: list[Chunk] = []
    out = bytearray(_I32.pack(correlation_id))
    if flexible:
        out.append(0)  # response header v1 tagged fields
    out += _I32.pack(throttle_time_ms)
    if version >= 7:
        out += _I16.pack(error_code)
        out += _I32.pack(session_id)
    _array_len(out, len(topics), flexible)
    total = 0
    empty_head = _EMPTY_HEAD_V5 if version >= 5 else _EMPTY_HEAD_V4
    empty_tail = _EMPTY_TAILS[version]
    for topic in topics:
        if version >= 13:
            out += topic.topic_id.bytes
        else:
            name = topic.name.encode()
            if flexible:
                out += write_uvarint(len(name) + 1)
            else:
                out += _I16.pack(len(name))
            out += name
        _array_len(out, len(topic.partitions), flexible)
        for p in topic.partitions:
            if p.aborted_transactions is None and p.records == b"" and p.preferred_read_replica == -1:
                if version >= 5:
                    out += empty_head.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                           p.log_start_offset)
                else:
                    out += empty_head.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
                out += empty_tail
                continue
            out += _PARTITION_HEAD.pack(p.partition_index, p.error_code, p.high_watermark)
            out += _I64.pack(p.last_stable_offset)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                _array_len(out, len(aborted), flexible)
                for producer_id, first_offset in aborted:
                    out += _Q2.pack(producer_id, first_offset)
                    if flexible:
                        out.append(0)
            if version >= 11:
                out += _I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                size = records.size if isinstance(records, FileSlice) else len(records)
                if flexible:
                    out += write_uvarint(size + 1)
                else:
                    out += _I32.pack(size)
                if isinstance(records, FileSlice):
                    if size:
                        total += len(out)
                        chunks.append(bytes(out))
                        chunks.append(records)
                        total += size
                        out = bytearray()
                else:
                    out += records
            if flexible:
                out.append(0)  # partition tagged fields
        if flexible:
            out.append(0)  # topic tagged fields
    if flexible:
        out.append(0)  # response tagged fields
    total += len(out)
    chunks.append(bytes(out))
    first = chunks[0]
    assert isinstance(first, bytes)
    chunks[0] = _I32.pack(total) + first
    return chunks
