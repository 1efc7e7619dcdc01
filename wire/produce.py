"""Hand-written Produce codecs: the request decoder (v3-v13) leaves record data in the request buffer,
and the response encoder (v3-v11) skips the generic writer's per-field reflection on the hot path.

kio's reader copies every partition's records into a new ``bytes``; on the produce hot path we want the
records as ``memoryview`` slices of the frame we received, so the log can patch offsets in place and
write them out without another copy. tests/wire/test_produce_decoder.py checks it against kio.

Per version (Kafka's ProduceRequest.json): v3+ transactional_id; v9+ flexible (compact strings/arrays,
tagged fields); v13 topic_id (uuid) replaces the topic name.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from logway.wire.protocol import MalformedRequest, read_uvarint, skip_tagged_fields, write_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time
_PARTITION_V5 = struct.Struct(">ihqqq")  # the same and log_start_offset (v5+)


@dataclass(slots=True)
class ProducePartition:
    index: int
    records: memoryview | None


@dataclass(slots=True)
class ProduceTopic:
    name: str | None
    topic_id: uuid.UUID | None
    partitions: list[ProducePartition]


@dataclass(slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopic]


def _length(buf: memoryview, pos: int, flexible: bool, wide: bool, nullable: bool, what: str) -> tuple[int, int]:
    """Length of a string/bytes/array (int16 or int32 wide, or compact) and the position after it; -1 for null.

    Like Kafka's generated reader, a null for a field that is not nullable, or any other negative
    length, makes the request malformed.
    """
    if flexible:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        width = 4 if wide else 2
        if pos + width > len(buf):
            raise MalformedRequest("produce request truncated")
        n = (_I32 if wide else _I16).unpack_from(buf, pos)[0]
        pos += width
    if n < 0 and (n != -1 or not nullable):
        raise MalformedRequest(f"produce request: {what} has length {n}")
    return n, pos


def _read_string(buf: memoryview, pos: int, flexible: bool, nullable: bool, what: str) -> tuple[str | None, int]:
    n, pos = _length(buf, pos, flexible, False, nullable, what)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise MalformedRequest("produce request truncated")
    return str(buf[pos : pos + n], "utf-8", "replace"), pos + n


def decode_produce_request(frame: bytearray | memoryview, pos: int, version: int) -> ProduceRequest:
    """Decode the body at ``pos``; each partition's records is a view into ``frame``.

    Straight-line reads with the position in a local (the produce hot path: a method call per field cost
    about a tenth of a small request's handling). In flexible versions a one-byte length or count and an empty
    tagged-field section, what every client sends, are read in place; anything else goes through `_length` and
    `skip_tagged_fields`, which check it as Kafka's generated reader does.
    """
    buf = memoryview(frame)
    end = len(buf)
    flexible = version >= 9
    if flexible and pos < end and buf[pos] == 0:  # a null transactional id, in one byte
        transactional_id = None
        pos += 1
    else:
        transactional_id, pos = _read_string(buf, pos, flexible, True, "transactional_id")
    if pos + 6 > end:
        raise MalformedRequest("produce request truncated")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    n_topics, pos = _count(buf, pos + 6, end, flexible, "topic_data")
    topics = []
    for _ in range(n_topics):
        topic, pos = _read_topic(buf, pos, end, version)
        topics.append(topic)
    if flexible:
        skip_tagged_fields(buf, pos)
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


def _count(buf: memoryview, pos: int, end: int, flexible: bool, what: str) -> tuple[int, int]:
    """An array's element count (not nullable); a flexible version's one-byte count read in place."""
    if flexible and pos < end and 0 < buf[pos] < 0x80:
        return buf[pos] - 1, pos + 1
    return _length(buf, pos, flexible, True, False, what)


def _read_topic(buf: memoryview, pos: int, end: int, version: int) -> tuple[ProduceTopic, int]:
    """One topic_data entry: the topic's name (or id, v13+) and its partitions' records as views into ``buf``."""
    flexible = version >= 9
    name: str | None = None
    topic_id = None
    if version >= 13:
        if pos + 16 > end:
            raise MalformedRequest("produce request truncated")
        topic_id = uuid.UUID(bytes=bytes(buf[pos : pos + 16]))
        pos += 16
    elif flexible and pos < end and 1 < buf[pos] < 0x80:  # a short topic name, in a one-byte length
        n = buf[pos] - 1
        if pos + 1 + n > end:
            raise MalformedRequest("produce request truncated")
        name = str(buf[pos + 1 : pos + 1 + n], "utf-8", "replace")
        pos += 1 + n
    else:
        name, pos = _read_string(buf, pos, flexible, False, "topic name")
    partitions = []
    n_parts, pos = _count(buf, pos, end, flexible, "partition_data")
    for _ in range(n_parts):
        if pos + 4 > end:
            raise MalformedRequest("produce request truncated")
        index = _I32.unpack_from(buf, pos)[0]
        if flexible:  # a compact nullable length: never below -1
            size, pos = read_uvarint(buf, pos + 4)
            size -= 1
        else:
            size, pos = _length(buf, pos + 4, flexible, True, True, "records")
        records = None
        if size >= 0:
            if pos + size > end:
                raise MalformedRequest("produce request truncated")
            records = buf[pos : pos + size]
            pos += size
        if flexible:
            pos = pos + 1 if pos < end and buf[pos] == 0 else skip_tagged_fields(buf, pos)
        partitions.append(ProducePartition(index, records))
    if flexible:
        pos = pos + 1 if pos < end and buf[pos] == 0 else skip_tagged_fields(buf, pos)
    return ProduceTopic(name, topic_id, partitions), pos


@dataclass(slots=True)
class ProducePartitionResult:
    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[tuple[int, str | None], ...] = ()  # v8+: (index in the batch, message) of refused records


def _string(out: bytearray, value: str | None, flexible: bool) -> None:
    if value is None:
        out += b"\x00" if flexible else b"\xff\xff"
        return
    data = value.encode()
    out += write_uvarint(len(data) + 1) if flexible else _I16.pack(len(data))
    out += data


def encode_produce_response(
    version: int, correlation_id: int, topics: list[tuple[str, list[ProducePartitionResult]]], throttle_time_ms: int = 0
) -> bytes:
    """A whole Produce response frame (v3-v11), byte-equal to kio's writer (tests/wire/test_produce_decoder.py).

    Per version: v5 log_start_offset; v8 record_errors (the refused records' indexes and messages) and error_message; v9 flexible;
    v10+ current_leader / node_endpoints tagged fields (only for NOT_LEADER errors: never sent).
    """
    flexible = version >= 9
    out = bytearray(_I32.pack(correlation_id))
    if flexible:
        out.append(0)
    out += write_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for name, partitions in topics:
        _string(out, name, flexible)
        out += write_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            if version >= 5:
                out += _PARTITION_V5.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset)
            else:
                out += _PARTITION_HEAD.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            if version >= 8:
                if not p.record_errors and p.error_message is None:
                    # No record errors, no message (every accepted batch): an empty array and a null string.
                    out += b"\x01\x00\x00" if flexible else b"\x00\x00\x00\x00\xff\xff"
                    continue
                count = len(p.record_errors)
                out += write_uvarint(count + 1) if flexible else _I32.pack(count)
                for index, message in p.record_errors:
                    out += _I32.pack(index)
                    _string(out, message, flexible)
                    if flexible:
                        out.append(0)
                _string(out, p.error_message, flexible)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    out += _I32.pack(throttle_time_ms)
    if flexible:
        out.append(0)
    return _I32.pack(len(out)) + bytes(out)
