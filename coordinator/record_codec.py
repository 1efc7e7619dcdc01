"""Kafka's generated-message encoding for coordinator records, driven by dataclass fields, sans-IO.

Kafka's coordinators (group, share) write their state as key/value records whose schemas are the JSON files
of ``group-coordinator/src/main/resources/common/message`` and ``share-coordinator/...``; Kafka's
CoordinatorRecordSerde frames a key as an int16 record type (the schema's "apiKey") followed by the key
message (version 0, never flexible), and a value as an int16 version followed by the value message (flexible
from version 0 for every schema here). A schema is written here as a frozen dataclass whose fields carry their
Kafka type in ``spec(...)``; ``encode``/``decode`` walk the fields in order, exactly as Kafka's generated
``write``/``read`` do: compact lengths and tagged fields in flexible messages, int16/int32 lengths otherwise,
unknown tags skipped (a newer Kafka's fields), a tagged nullable struct behind its varint presence marker.

Every length is checked against the bytes left before anything is allocated: records come from a log a
hostile or damaged disk may have changed; anything malformed raises ``SchemaError``.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from logway.coordinator.offsets_schema import SchemaError
from logway.wire.protocol import write_uvarint

__all__ = ["Array", "Record", "SchemaError", "Struct", "decode", "decode_key", "decode_value", "encode", "encode_key",
           "encode_value", "record_type", "spec"]

Record = tuple[bytes, bytes | None]
T = TypeVar("T")

_INTS = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
         "int64": struct.Struct(">q")}


@dataclass(frozen=True, slots=True)
class Struct:
    """A nested struct field of dataclass type ``cls``; ``nullable`` for Kafka's nullableVersions structs."""

    cls: type
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class Array:
    """An array field of ``element`` (a primitive type name or a ``Struct``)."""

    element: str | Struct
    nullable: bool = False


Kind = str | Struct | Array


def spec(kind: Kind, *, tag: int | None = None, default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field of Kafka type ``kind`` ("int32", "string", "string?", "bytes", "uuid", "bool", a Struct
    or an Array); ``tag`` makes it a tagged field (written only when it differs from ``default``, except a
    nullable struct, which Kafka writes even when null)."""
    if default is dataclasses.MISSING and isinstance(kind, Array):
        return dataclasses.field(metadata={"kind": kind, "tag": tag}, default_factory=tuple)
    return dataclasses.field(metadata={"kind": kind, "tag": tag}, default=default)


# --- writing ------------------------------------------------------------------------------------------


def _length(n: int, flexible: bool, wide: bool) -> bytes:
    """A string/bytes/array length: compact (n + 1, 0 for null) when flexible, else int16 or int32 (-1 null)."""
    if flexible:
        return write_uvarint(n + 1)
    return struct.pack(">i" if wide else ">h", n)


def _write_value(kind: Kind, value: Any, flexible: bool, out: bytearray) -> None:
    if isinstance(kind, Struct):
        if kind.nullable:
            out += write_uvarint(0 if value is None else 1) if flexible else struct.pack(">b", -1 if value is None else 1)
            if value is None:
                return
        _write_struct(value, flexible, out)
    elif isinstance(kind, Array):
        if value is None:
            out += _length(-1, flexible, wide=True)
            return
        out += _length(len(value), flexible, wide=True)
        for item in value:
            _write_value(kind.element, item, flexible, out)
    else:
        _write_primitive(kind, value, flexible, out)


def _write_primitive(kind: str, value: Any, flexible: bool, out: bytearray) -> None:
    if kind in _INTS:
        out += _INTS[kind].pack(value)
    elif kind == "bool":
        out.append(1 if value else 0)
    elif kind == "uuid":
        out += value.bytes
    elif kind in ("string", "string?"):
        if value is None:
            out += _length(-1, flexible, wide=False)
        else:
            raw = value.encode()
            out += _length(len(raw), flexible, wide=False) + raw
    elif kind == "bytes":
        out += _length(len(value), flexible, wide=True) + bytes(value)
    else:
        raise TypeError(f"unknown field kind {kind!r}")


def _write_struct(value: Any, flexible: bool, out: bytearray) -> None:
    tagged: list[tuple[int, bytes]] = []
    for f, kind, tag in _fields(type(value)):
        item = getattr(value, f.name)
        if tag is None:
            _write_value(kind, item, flexible, out)
        elif item != _default(f) or (isinstance(kind, Struct) and kind.nullable):
            # Kafka's generated write() also writes a tagged nullable struct when it is null (its presence
            # marker alone): ConsumerGroupMemberMetadataValue.ClassicMemberMetadata of every consumer member.
            payload = bytearray()
            _write_value(kind, item, flexible, payload)
            tagged.append((tag, bytes(payload)))
    if flexible:
        out += write_uvarint(len(tagged))
        for tag, payload in tagged:
            out += write_uvarint(tag) + write_uvarint(len(payload)) + payload


def encode(value: Any, flexible: bool) -> bytes:
    """The message bytes of ``value`` (no version prefix)."""
    out = bytearray()
    _write_struct(value, flexible, out)
    return bytes(out)


def encode_key(record_type_: int, key: Any) -> bytes:
    """A coordinator record key: int16 record type, then the (non-flexible) key message."""
    return struct.pack(">h", record_type_) + encode(key, flexible=False)


def encode_value(value: Any, version: int = 0) -> bytes:
    """A coordinator record value: int16 version, then the (flexible) value message."""
    return struct.pack(">h", version) + encode(value, flexible=True)


# --- reading ------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes | memoryview, pos: int = 0) -> None:
        self.data = memoryview(data)
        self.pos = pos

    def take(self, n: int) -> memoryview:
        if n < 0 or n > len(self.data) - self.pos:
            raise SchemaError("record truncated")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def uvarint(self) -> int:
        result = 0
        for shift in range(0, 35, 7):
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
        raise SchemaError("varint longer than 5 bytes")

    def length(self, flexible: bool, wide: bool) -> int:
        if flexible:
            return self.uvarint() - 1
        return _INTS["int32" if wide else "int16"].unpack(self.take(4 if wide else 2))[0]


def _read_value(kind: Kind, r: _Reader, flexible: bool) -> Any:
    if isinstance(kind, Struct):
        if kind.nullable:
            present = r.uvarint() > 0 if flexible else _INTS["int8"].unpack(r.take(1))[0] >= 0
            if not present:
                return None
        return _read_struct(kind.cls, r, flexible)
    if isinstance(kind, Array):
        n = r.length(flexible, wide=True)
        if n < 0:
            if not kind.nullable:
                raise SchemaError("null in a non-nullable array")
            return None
        if n > len(r.data) - r.pos:  # every element takes at least one byte: refuse before allocating
            raise SchemaError(f"array of {n} elements in {len(r.data) - r.pos} bytes")
        return tuple(_read_value(kind.element, r, flexible) for _ in range(n))
    return _read_primitive(kind, r, flexible)


def _read_primitive(kind: str, r: _Reader, flexible: bool) -> Any:
    if kind in _INTS:
        fmt = _INTS[kind]
        return fmt.unpack(r.take(fmt.size))[0]
    if kind == "bool":
        return r.take(1)[0] != 0
    if kind == "uuid":
        return uuid.UUID(bytes=bytes(r.take(16)))
    if kind in ("string", "string?"):
        n = r.length(flexible, wide=False)
        if n < 0:
            if kind == "string":
                raise SchemaError("null in a non-nullable string")
            return None
        try:
            return bytes(r.take(n)).decode()
        except UnicodeDecodeError as exc:
            raise SchemaError("string is not UTF-8") from exc
    if kind == "bytes":
        n = r.length(flexible, wide=True)
        if n < 0:
            raise SchemaError("null in a non-nullable bytes field")
        return bytes(r.take(n))
    raise TypeError(f"unknown field kind {kind!r}")


def _read_struct(cls: type[T], r: _Reader, flexible: bool) -> T:
    values: dict[str, Any] = {}
    tagged: dict[int, tuple[dataclasses.Field, Kind]] = {}
    for f, kind, tag in _fields(cls):
        if tag is None:
            values[f.name] = _read_value(kind, r, flexible)
        else:
            tagged[tag] = (f, kind)
    if flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            payload = r.take(size)
            if tag in tagged:  # unknown tags are a newer Kafka's fields: skipped, as Kafka's readers do
                f, kind = tagged[tag]
                values[f.name] = _read_value(kind, _Reader(payload), flexible)
    return cls(**values)


def decode(cls: type[T], data: bytes | memoryview, pos: int, flexible: bool) -> T:
    """Read one ``cls`` message at ``pos``; trailing bytes are ignored, as Kafka's readers do."""
    try:
        return _read_struct(cls, _Reader(data, pos), flexible)
    except (ValueError, TypeError) as exc:  # a malformed value (bad UUID length, wrong type for a field)
        if isinstance(exc, SchemaError):
            raise
        raise SchemaError(str(exc)) from exc


def record_type(key: bytes) -> int:
    """The int16 record type that starts a coordinator record key."""
    if len(key) < 2:
        raise SchemaError("record key shorter than its type")
    return _INTS["int16"].unpack_from(key)[0]


def decode_key(cls: type[T], key: bytes) -> T:
    """The key message after the record type."""
    return decode(cls, key, 2, flexible=False)


def decode_value(cls: type[T], value: bytes, versions: range = range(1)) -> T:
    """The value message after its int16 version, which must be one of ``versions``."""
    if len(value) < 2:
        raise SchemaError("record value shorter than its version")
    version = _INTS["int16"].unpack_from(value)[0]
    if version not in versions:
        raise SchemaError(f"unknown {cls.__name__} version {version}")
    return decode(cls, value, 2, flexible=True)


@cache
def _fields(cls: type) -> tuple[tuple[dataclasses.Field, Kind, int | None], ...]:
    return tuple((f, f.metadata["kind"], f.metadata.get("tag")) for f in dataclasses.fields(cls))


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    factory: Callable[[], Any] = f.default_factory  # type: ignore[assignment]
    return factory()
