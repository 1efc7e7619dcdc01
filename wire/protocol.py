"""Request/response framing for every API: headers, kio message types, and a version-agnostic builder.

Kafka's request header v1 is (apiKey int16, apiVersion int16, correlationId int32, clientId nullable
string); v2 (flexible API versions) adds tagged fields. The clientId stays a classic int16-length string
even in v2. Response header v0 is the correlation id; v1 adds tagged fields. ApiVersions responses always
use header v0, whatever the version (KIP-511), so a client that does not know the broker can parse them.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import typing
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map
from kio.serial import entity_reader, entity_writer

from logway.wire.errors import ErrorCode, MalformedRequest
from logway.wire.request_check import check_body

API_VERSIONS_KEY = 18

_HEADER = struct.Struct(">hhih")
_I32 = struct.Struct(">i")


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned varint at ``pos``: (value, new position). At most 5 bytes, as Kafka's readUnsignedVarint."""
    if pos < len(buf) and buf[pos] < 0x80:  # one byte: almost every length, count and tag on the hot path
        return buf[pos], pos + 1
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedRequest("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 35:
            raise MalformedRequest("varint longer than 5 bytes")


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def write_uvarint(value: int) -> bytes:
    if 0 <= value < 0x80:  # one byte: almost every length, count and tag
        return _ONE_BYTE[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int) -> int:
    if pos < len(buf) and buf[pos] == 0:  # no tagged fields: the usual case, one byte
        return pos + 1
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedRequest("tagged field runs past the request")
    return pos


def api_name(api_key: int) -> str | None:
    return api_key_map.get(api_key)


@cache
def request_type(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@cache
def response_type(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


@cache
def reader_for(cls: type):
    """kio's reader of a message type (made once per type)."""
    return entity_reader(cls)


@cache
def writer_for(cls: type):
    """kio's writer of a message type (made once per type)."""
    return entity_writer(cls)


@cache  # asked once per request (body_offset): one dict lookup instead of a schema lookup and an attribute
def is_flexible(api_key: int, version: int) -> bool:
    return bool(request_type(api_key, version).__flexible__)


def decode_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Parse the header fields common to v1 and v2; return it and where its fixed part ends.

    The caller decides whether tagged fields follow (flexible versions) once it knows the API version.
    """
    if len(frame) < _HEADER.size:
        raise MalformedRequest(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEADER.unpack_from(frame, 0)
    pos = _HEADER.size
    client_id = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise MalformedRequest("client id runs past the request")
        client_id = str(frame[pos : pos + client_len], "utf-8", "replace")
        pos += client_len
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def body_offset(frame: bytes | bytearray | memoryview, header: RequestHeader, pos: int) -> int:
    """Where the body starts: after the tagged fields of a v2 header."""
    if is_flexible(header.api_key, header.api_version):
        return skip_tagged_fields(frame, pos)
    return pos


def decode_body(api_key: int, version: int, frame: bytes | memoryview, pos: int) -> Any:
    """Decode a request body with kio. ``frame`` must be read-only (bytes)."""
    cls = request_type(api_key, version)
    check_body(cls, frame, pos)  # every declared length fits, before kio's reader allocates for it
    try:
        body, size = reader_for(cls)(frame, pos)
    except Exception as exc:  # kio raises a variety of errors on bad bytes
        raise MalformedRequest(f"cannot decode {cls.__name__} v{version}: {exc}") from exc
    return body


def response_header_bytes(api_key: int, version: int, correlation_id: int) -> bytes:
    """Response header v0, or v1 (with an empty tagged-field section) for flexible versions."""
    if api_key != API_VERSIONS_KEY and is_flexible(api_key, version):
        return _I32.pack(correlation_id) + b"\x00"
    return _I32.pack(correlation_id)


def encode_body(body: Any) -> bytes:
    out = io.BytesIO()
    writer_for(type(body))(out, body)
    return out.getvalue()


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A whole response frame: size prefix, header, body."""
    payload = response_header_bytes(api_key, version, correlation_id) + encode_body(body)
    return _I32.pack(len(payload)) + payload


# --- version-agnostic construction of kio message types ---------------------------------------

_SCHEMA_DEFAULT = object()  # a field left out of the constructor call: the kio schema's default applies


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    hint: Any
    kafka_type: str
    entity: type | None  # the kio entity class of a nested field or array, else None
    nullable: bool
    default: Any  # what a missing field gets: _SCHEMA_DEFAULT or Kafka's error-response default


@cache
def _fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint, kafka_type = hints[f.name], f.metadata.get("kafka_type", "")
        entity = field_entity_of(hint)
        nullable = type(None) in typing.get_args(hint)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            default = _SCHEMA_DEFAULT
        else:
            default = _error_default(hint, kafka_type, entity, nullable)
        out.append(_Field(f.name, hint, kafka_type, entity, nullable, default))
    return tuple(out)


def _error_default(hint: Any, kafka_type: str, entity: type | None, nullable: bool) -> Any:
    """What a field its schema gives no default gets: what Kafka's error responses carry there (-1 for an
    offset, id, epoch or count; 0 for a duration, as its generated classes start with)."""
    if typing.get_origin(hint) is tuple:
        return ()
    if nullable:
        return None
    if entity is not None:
        return build(entity, {})
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type.startswith("int"):
        return -1
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type.startswith("datetime"):
        return datetime.datetime.fromtimestamp(0, datetime.UTC)
    return _ZERO.get(kafka_type)


_ZERO = {"uint16": 0, "float64": 0.0, "string": "", "bool": False, "bytes": b"", "records": b"",
         "uuid": uuid.UUID(int=0)}


@cache
def field_entity_of(hint: Any) -> type | None:
    """The kio entity class inside a hint like ``tuple[X, ...]``, ``X | None`` or ``X`` (None for a scalar)."""
    if dataclasses.is_dataclass(hint):
        return hint
    for arg in typing.get_args(hint):
        found = field_entity_of(arg)
        if found is not None:
            return found
    return None


@cache
def field_entity(cls: type, name: str) -> type:
    """The kio entity class of ``cls``'s nested field or array ``name`` (e.g. a response's topic entries)."""
    entity = field_entity_of(typing.get_type_hints(cls)[name])
    if entity is None:
        raise TypeError(f"{cls.__name__}.{name} holds no entities")
    return entity


def _convert(value: Any, field: _Field) -> Any:
    kafka_type = field.kafka_type
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    if kafka_type.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type.startswith("datetime") and isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
    entity = field.entity
    if entity is None:
        return value
    if isinstance(value, dict):
        return build(entity, value)
    if isinstance(value, (list, tuple)):
        return tuple(build(entity, v) if isinstance(v, dict) else v for v in value)
    return value


def build(cls: type, data: dict[str, Any]) -> Any:
    """Make ``cls`` (a kio message or entity type of some version) from a dict, nested dicts and lists included:
    the one dict-to-kio builder, so one handler (or one error answer) serves every version of its API.

    Keys the version does not have are dropped. Plain values are converted where kio wants another type: an
    int error code to ErrorCode, int milliseconds to a timedelta or (for timestamps, -1 included) a datetime.
    A field the dict lacks, or gives None when it is not nullable, takes its default: the schema's default
    where it has one, else that of Kafka's error responses: an empty array, null for a nullable field, an
    entity built from {}, ErrorCode.none, -1 for a signed integer, 0 for uint16 and float64, "", False, b"",
    the zero uuid, 0 for a duration and the epoch for a timestamp.
    """
    kwargs = {}
    for field in _fields(cls):
        value = data.get(field.name)
        if value is None and (field.name not in data or not field.nullable):
            if field.default is not _SCHEMA_DEFAULT:
                kwargs[field.name] = field.default
        elif value is not None:
            kwargs[field.name] = _convert(value, field)
        else:
            kwargs[field.name] = None
    return cls(**kwargs)
