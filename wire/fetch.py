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
from collections.abc import Callable
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


def _empty_tail(version: int, read_committed: bool = False) -> bytes:
    """The bytes after log_start_offset of a partition without records or preferred replica, with a null
    aborted-transactions list (an empty one for READ_COMMITTED)."""
    if version >= 12:
        return (b"\x01" if read_committed else b"\x00") + _I32.pack(-1) + b"\x01\x00"
    aborted = _I32.pack(0 if read_committed else -1)
    return aborted + (_I32.pack(-1) if version >= 11 else b"") + _I32.pack(0)


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
    """A whole Fetch response frame (size prefix and header included) as chunks: bytes, with each partition's
    file records as a FileSlice of its own between them (sent with sendfile)."""
    flexible = version >= 12
    chunks: list[Chunk] = []
    out = _response_head(version, correlation_id, throttle_time_ms, error_code, session_id, len(topics))
    total = 0
    empty_partition = _empty_partition_encoder(version)
    for topic in topics:
        _topic_key(out, topic, version, flexible)
        _array_len(out, len(topic.partitions), flexible)
        for p in topic.partitions:
            if p.aborted_transactions is None and p.records == b"" and p.preferred_read_replica == -1:
                out += empty_partition(p)  # an empty fetch's every partition: one pack
                continue
            _partition_fields(out, p, version, flexible)
            out, sliced = _records_field(out, p.records, flexible, chunks)
            total += sliced
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


def _response_head(version: int, correlation_id: int, throttle_time_ms: int, error_code: int, session_id: int,
                   topic_count: int) -> bytearray:
    """Correlation id, header tagged fields (v12+), throttle time, error code and session id (v7+), the topic
    array's length."""
    flexible = version >= 12
    out = bytearray(_I32.pack(correlation_id))
    if flexible:
        out.append(0)  # response header v1 tagged fields
    out += _I32.pack(throttle_time_ms)
    if version >= 7:
        out += _I16.pack(error_code)
        out += _I32.pack(session_id)
    _array_len(out, topic_count, flexible)
    return out


def _topic_key(out: bytearray, topic: FetchTopicResult, version: int, flexible: bool) -> None:
    """The topic's id (v13+) or name."""
    if version >= 13:
        out += topic.topic_id.bytes
        return
    name = topic.name.encode()
    out += write_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
    out += name


def _empty_partition_encoder(version: int) -> Callable[[FetchPartitionResult], bytes]:
    """The whole encoding of a partition without records, aborted list or preferred replica, for ``version``."""
    tail = _EMPTY_TAILS[version]
    if version >= 5:
        head = _EMPTY_HEAD_V5.pack
        return lambda p: head(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                              p.log_start_offset) + tail
    head = _EMPTY_HEAD_V4.pack
    return lambda p: head(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset) + tail


def _partition_fields(out: bytearray, p: FetchPartitionResult, version: int, flexible: bool) -> None:
    """A partition's fields before its records: offsets, aborted transactions, preferred read replica."""
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


def _records_field(out: bytearray, records: bytes | FileSlice | None, flexible: bool,
                   chunks: list[Chunk]) -> tuple[bytearray, int]:
    """Append the records' length and bytes. File records close the current chunk and follow it as a FileSlice:
    returns the buffer to go on with and how many bytes moved into ``chunks``."""
    if records is None:
        out += b"\x00" if flexible else b"\xff\xff\xff\xff"
        return out, 0
    is_slice = isinstance(records, FileSlice)
    size = records.size if is_slice else len(records)
    out += write_uvarint(size + 1) if flexible else _I32.pack(size)
    if not is_slice:
        out += records
        return out, 0
    if not size:
        return out, 0
    chunks.append(bytes(out))
    chunks.append(records)
    return bytearray(), len(out) + size


def empty_partition_packer(version: int) -> Callable[[int, int, int, int], bytes]:
    """pack(partition_index, high_watermark, last_stable_offset, log_start_offset): the head of a partition
    without records or error for encode_empty_fetch_response (error_code 0 is two pad bytes)."""
    if version >= 5:
        return _EMPTY_HEAD_V5_OK.pack
    pack = _EMPTY_HEAD_V4_OK.pack
    return lambda index, high, lso, _start: pack(index, high, lso)


def encode_empty_fetch_response(version: int, correlation_id: int,
                                topics: list[tuple[str, uuid.UUID, list[bytes]]], read_committed: bool) -> bytes:
    """The whole frame of a sessionless Fetch answer in which no partition has records or an error: each
    partition given as its head from empty_partition_packer.

    Byte-equal to encode_fetch_response of FetchPartitionResults with no records, error 0, no preferred replica
    and aborted transactions [] (READ_COMMITTED) or None. What follows a head is the same for every partition
    (aborted transactions, preferred_read_replica from v11, records length 0, tagged fields): it is the
    separator of one join.
    """
    flexible = version >= 12
    tail = _empty_tail(version, read_committed)
    out = _response_head(version, correlation_id, 0, 0, 0, len(topics))
    for name, topic_id, heads in topics:
        _topic_key(out, FetchTopicResult(name, topic_id, []), version, flexible)
        _array_len(out, len(heads), flexible)
        if heads:
            out += tail.join(heads)
            out += tail
        if flexible:
            out.append(0)  # topic tagged fields
    if flexible:
        out.append(0)  # response tagged fields
    return _I32.pack(len(out)) + out


_EMPTY_HEAD_V4_OK = struct.Struct(">i2xqq")  # partition_index, error_code 0, high_watermark, last_stable_offset
_EMPTY_HEAD_V5_OK = struct.Struct(">i2xqqq")  # + log_start_offset
