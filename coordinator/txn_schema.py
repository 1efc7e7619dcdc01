"""Kafka's key/value record schemas for ``__transaction_state``, so Kafka's tools can read what we write.

Key (TransactionLogKey.json, version 0): int16 version | TransactionalId string.
Value (TransactionLogValue.json, versions 0-1, v1 flexible): int16 version | ProducerId int64 |
ProducerEpoch int16 | TransactionTimeoutMs int32 | TransactionStatus int8 |
TransactionPartitions nullable [Topic string, PartitionIds [int32]] | TransactionLastUpdateTimestampMs int64 |
TransactionStartTimestampMs int64; v1 adds tagged fields (PreviousProducerId tag 0, NextProducerId tag 1,
ClientTransactionVersion tag 2). We write v0, as Kafka does for transaction version 1 (TransactionLog.valueToBytes),
and read both. A tombstone (null value) removes the transactional id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

__all__ = ["SchemaError", "TxnLogValue", "decode_key", "decode_value", "encode_key", "encode_value"]

KEY_VERSION = 0
VALUE_VERSION = 0

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


def encode_value(value: TxnLogValue, *, null_partitions: bool = False) -> bytes:
    """Value version 0; partitions null for an Empty transaction, as Kafka writes it."""
    out = bytearray(_VALUE_HEAD.pack(VALUE_VERSION, value.producer_id, value.producer_epoch, value.timeout_ms, value.state))
    if null_partitions:
        out += b"\xff\xff\xff\xff"
    else:
        out += struct.pack(">i", len(value.partitions))
        for topic, ids in sorted(value.partitions.items()):
            out += _string(topic) + struct.pack(f">i{len(ids)}i", len(ids), *ids)
    out += _TIMES.pack(value.last_update_ms, value.start_ms)
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
    if flexible:
        tags = reader.tags()
        previous = struct.unpack(">q", tags[0])[0] if 0 in tags else -1
        next_ = struct.unpack(">q", tags[1])[0] if 1 in tags else -1
    return TxnLogValue(producer_id, epoch, timeout, state, partitions, last_update, start, previous, next_)


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
