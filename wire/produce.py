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


class _Cursor:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: memoryview, pos: int, flexible: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise MalformedRequest("produce request truncated")

    def i32(self) -> int:
        self.need(4)
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def length(self, width: int, nullable: bool, what: str) -> int:
        """Length of a string/bytes/array (int16 or int32 wide, or compact); -1 for null where allowed.

        Like Kafka's generated reader, a null for a field that is not nullable, or any other negative
        length, makes the request malformed.
        """
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            n -= 1
        elif width == 2:
            self.need(2)
            (n,) = _I16.unpack_from(self.buf, self.pos)
            self.pos += 2
        else:
            n = self.i32()
        if n < 0 and (n != -1 or not nullable):
            raise MalformedRequest(f"produce request: {what} has length {n}")
        return n

    def string(self, nullable: bool, what: str) -> str | None:
        n = self.length(2, nullable, what)
        if n < 0:
            return None
        self.need(n)
        s = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8", "replace")
        self.pos += n
        return s

    def tags(self) -> None:
        if self.flexible:
            self.pos = skip_tagged_fields(self.buf, self.pos)


def decode_produce_request(frame: bytearray | memoryview, pos: int, version: int) -> ProduceRequest:
    """Decode the body at ``pos``; each partition's records is a view into ``frame``."""
    c = _Cursor(memoryview(frame), pos, version >= 9)
    transactional_id = c.string(True, "transactional_id")
    c.need(6)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(c.buf, c.pos)
    c.pos += 6
    topics = []
    n_topics = c.length(4, False, "topic_data")
    for _ in range(n_topics):
        name: str | None = None
        topic_id = None
        if version >= 13:
            c.need(16)
            topic_id = uuid.UUID(bytes=bytes(c.buf[c.pos : c.pos + 16]))
            c.pos += 16
        else:
            name = c.string(False, "topic name")
        partitions = []
        n_parts = c.length(4, False, "partition_data")
        for _ in range(n_parts):
            index = c.i32()
            size = c.length(4, True, "records")
            records = None
            if size >= 0:
                c.need(size)
                records = c.buf[c.pos : c.pos + size]
                c.pos += size
            c.tags()
            partitions.append(ProducePartition(index, records))
        c.tags()
        topics.append(ProduceTopic(name, topic_id, partitions))
    c.tags()
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


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
            out += _PARTITION_HEAD.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            if version >= 8:
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
