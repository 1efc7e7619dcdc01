"""Kafka's own key/value record schemas for ``__consumer_offsets``, so Kafka's tools can read what we write.

Each key and value starts with an int16 version. Key version 0/1 is an offset commit
(``OffsetCommitKey``: group, topic, partition), key version 2 a group (``GroupMetadataKey``: group).
Values follow ``OffsetCommitValue.json`` (v0-v4) and ``GroupMetadataValue.json`` (v0-v4) from
Kafka's group-coordinator module; v4 of both is the first flexible (compact, tagged) version.
We write what Kafka 3.x writes: key version 1 / 2, OffsetCommitValue v3 (v1 when the commit
carries an explicit expire timestamp, as ``GroupMetadataManager.offsetCommitValue`` does) and
GroupMetadataValue v3.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "SchemaError",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3


class SchemaError(ValueError):
    """Bytes that do not follow the schema they claim (truncated, bad length, unknown version)."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """Key of a committed offset: which group committed for which partition."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """Key of a group's membership record."""

    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset; ``expire_timestamp`` is only set by pre-2.1 style commits (v1 value)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    """One member as stored in a GroupMetadataValue."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A group's generation, protocol, leader and members after a rebalance (or on becoming empty)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...]


class _Writer:
    """Appends Kafka primitive types (classic, non-flexible encoding) to a bytearray."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def int16(self, v: int) -> None:
        self.buf += struct.pack(">h", v)

    def int32(self, v: int) -> None:
        self.buf += struct.pack(">i", v)

    def int64(self, v: int) -> None:
        self.buf += struct.pack(">q", v)

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        raw = v.encode()
        self.int16(len(raw))
        self.buf += raw

    def bytes_(self, v: bytes) -> None:
        self.int32(len(v))
        self.buf += v


class _Reader:
    """Reads Kafka primitive types, classic or flexible (compact lengths, tagged fields)."""

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise SchemaError("record truncated")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def uvarint(self) -> int:
        result = 0
        for shift in range(0, 35, 7):
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
        raise SchemaError("varint too long")

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        n = self._length(wide=False)
        if n < 0:
            return None
        try:
            return bytes(self._take(n)).decode()
        except UnicodeDecodeError as e:
            raise SchemaError("string is not UTF-8") from e

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise SchemaError("null in a non-nullable string")
        return s

    def bytes_(self) -> bytes:
        n = self._length(wide=True)
        if n < 0:
            raise SchemaError("null in a non-nullable bytes field")
        return bytes(self._take(n))

    def array_length(self) -> int:
        n = self._length(wide=True)
        if n < 0:
            raise SchemaError("null array")
        return n

    def tagged_fields(self) -> None:
        """Skip a tagged-field section (flexible versions only); none of these schemas define tags we need."""
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def _value_reader(data: bytes, schema: str) -> tuple[int, _Reader]:
    """A value's version (0-4 for both value schemas) and a reader after it, flexible from v4."""
    version = _Reader(data).int16()
    if not 0 <= version <= 4:
        raise SchemaError(f"unknown {schema} version {version}")
    r = _Reader(data, flexible=version >= 4)
    r.pos = 2
    return version, r


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """Key for a committed offset, key version 1 as Kafka writes it."""
    w = _Writer()
    w.int16(OFFSET_COMMIT_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.int32(partition)
    return bytes(w.buf)


def encode_group_metadata_key(group: str) -> bytes:
    """Key for a group's metadata record (key version 2)."""
    w = _Writer()
    w.int16(GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return bytes(w.buf)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """Decode a ``__consumer_offsets`` key; None for key versions this coordinator does not own (KIP-848 records)."""
    r = _Reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupMetadataKey(r.string())
    return None


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Value v3 (offset, leaderEpoch, metadata, commitTimestamp), or v1 when an expire timestamp is set."""
    w = _Writer()
    if value.expire_timestamp is not None:
        w.int16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
        w.int64(value.offset)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
        w.int64(value.expire_timestamp)
    else:
        w.int16(OFFSET_COMMIT_VALUE_VERSION)
        w.int64(value.offset)
        w.int32(value.leader_epoch)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
    return bytes(w.buf)


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    """Decode any OffsetCommitValue version 0-4."""
    version, r = _value_reader(data, "OffsetCommitValue")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.tagged_fields()
    return OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        expire_timestamp=None if expire_timestamp == -1 else expire_timestamp,
    )


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """GroupMetadataValue v3, the version Kafka writes from 2.3 until flexible v4."""
    w = _Writer()
    w.int16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.buf)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    """Decode any GroupMetadataValue version 0-4 (fields missing in old versions get the schema defaults)."""
    version, r = _value_reader(data, "GroupMetadataValue")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.string()
        group_instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else None
        session_timeout = r.int32()
        if rebalance_timeout is None:
            rebalance_timeout = session_timeout  # v0 has none; Kafka's readGroupMessageValue uses the session timeout
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        members.append(
            MemberMetadataValue(
                member_id=member_id,
                group_instance_id=group_instance_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout=rebalance_timeout,
                session_timeout=session_timeout,
                subscription=subscription,
                assignment=assignment,
            )
        )
    r.tagged_fields()
    return GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=current_state_timestamp,
        members=tuple(members),
    )
