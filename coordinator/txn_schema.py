"""Kafka's key/value record schemas for ``__transaction_state``, so Kafka's tools can read what we write.

Key (TransactionLogKey.json, version 0): int16 version | TransactionalId string.
Value (TransactionLogValue.json, versions 0-1, v1 flexible): int16 version | ProducerId int64 |
ProducerEpoch int16 | TransactionTimeoutMs int32 | TransactionStatus int8 |
TransactionPartitions nullable [Topic string, PartitionIds [int32]] | TransactionLastUpdateTimestampMs int64 |
TransactionStartTimestampMs int64; v1 is flexible and adds tagged fields (PreviousProducerId tag 0, NextProducerId
tag 1, ClientTransactionVersion tag 2, NextProducerEpoch tag 3), each written only when not its default. Kafka
4 writes v1 once the cluster's transaction.version is 1 or more (TransactionLog.valueToBytes), v0 below; both
are read. A tombstone (null value) removes the transactional id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

__all__ = ["SchemaError", "TxnLogValue", "decode_key", "decode_value", "encode_key", "encode_value"]

KEY_VERSION = 0
VALUE_VERSION = 1

_H = struct.Struct(">h")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")


class SchemaError(ValueError):
    """Bytes that do not follow the schema they claim."""


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """One persisted TransactionMetadata (state is Kafka's TransactionState id byte)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: dict[str, tuple[int, ...]] = field(default_factory=dict)
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_version: int = 0  # ClientTransactionVersion: 2 for a transaction-version-2 client's transaction


def _string(s: str) -> bytes:
    raw = s.encode()
    return _H.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _H.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    reader = _Reader(data)
    version = reader.int16()
    if version != KEY_VERSION:
        raise SchemaError(f"unknown transaction log key version {version}")
    return reader.string()


def encode_value(value: TxnLogValue, *, null_partitions: bool = False, version: int = 1) -> bytes:
    """Value ``version`` 0 or 1 (flexible, with the tagged fields); partitions null for an Empty transaction, as
    Kafka writes it."""
    out = bytearray(_VALUE_HEAD.pack(version, value.producer_id, value.producer_epoch, value.timeout_ms, value.state))
    flexible = version >= 1
    if null_partitions:
        out += b"\x00" if flexible else b"\xff\xff\xff\xff"
    elif flexible:
        out += _uvarint(len(value.partitions) + 1)
        for topic, ids in sorted(value.partitions.items()):
            raw = topic.encode()
            out += _uvarint(len(raw) + 1) + raw + _uvarint(len(ids) + 1) + struct.pack(f">{len(ids)}i", *ids) + b"\x00"
    else:
        out += struct.pack(">i", len(value.partitions))
        for topic, ids in sorted(value.partitions.items()):
            out += _string(topic) + struct.pack(f">i{len(ids)}i", len(ids), *ids)
    out += _TIMES.pack(value.last_update_ms, value.start_ms)
    if flexible:
        tags = [(tag, data) for tag, data, default in (
            (0, struct.pack(">q", value.previous_producer_id), value.previous_producer_id == -1),
            (1, struct.pack(">q", value.next_producer_id), value.next_producer_id == -1),
            (2, struct.pack(">h", value.client_version), value.client_version == 0)) if not default]
        out += _uvarint(len(tags))
        for tag, data in tags:
            out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_value(data: bytes) -> TxnLogValue:
    reader = _Reader(data)
    version = reader.int16()
    if version not in (0, 1):
        raise SchemaError(f"unknown transaction log value version {version}")
    flexible = version == 1
    producer_id, epoch, timeout, state = reader.unpack(">qhib")
    partitions: dict[str, tuple[int, ...]] = {}
    count = reader.array_length(flexible)
    for _ in range(max(count, 0)):
        topic = reader.string(flexible)
        n = reader.array_length(flexible)
        partitions[topic] = tuple(reader.unpack(f">{max(n, 0)}i")) if n > 0 else ()
        if flexible:
            reader.skip_tags()
    last_update, start = reader.unpack(">qq")
    previous = next_ = -1
    client_version = 0
    if flexible:
        tags = reader.tags()
        try:
            previous = struct.unpack(">q", tags[0])[0] if 0 in tags else -1
            next_ = struct.unpack(">q", tags[1])[0] if 1 in tags else -1
            client_version = struct.unpack(">h", tags[2])[0] if 2 in tags else 0
        except struct.error as exc:
            raise SchemaError(f"bad tagged field in transaction log record: {exc}") from None
    return TxnLogValue(producer_id, epoch, timeout, state, partitions, last_update, start, previous, next_,
                       client_version)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def unpack(self, fmt: str) -> tuple:
        s = struct.Struct(fmt)
        if self.pos + s.size > len(self.data):
            raise SchemaError("truncated transaction log record")
        out = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return out

    def int16(self) -> int:
        return self.unpack(">h")[0]

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= len(self.data) or shift > 28:
                raise SchemaError("bad varint in transaction log record")
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def string(self, flexible: bool = False) -> str:
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0 or self.pos + n > len(self.data):
            raise SchemaError("bad string length in transaction log record")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw.decode()

    def array_length(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.unpack(">i")[0]

    def tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            out[tag] = self.data[self.pos : self.pos + size]
            self.pos += size
        return out

    def skip_tags(self) -> None:
        self.tags()
