"""Random well-formed instances of any kio request type, and request frames built from them.

Used by the request-check property test (tests/wire) and the request fuzz test against a gateway
(tests/gateway): every field gets a value of its kafka_type, arrays 0-3 items, nullable fields sometimes
null, so every (api_key, version) Logway serves can be exercised without a hand-written example each.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
import typing
import uuid
from types import NoneType, UnionType
from typing import Any

from kio.schema.errors import ErrorCode

from logway.wire.protocol import encode_body, is_flexible, request_type

_INT_RANGES = {
    "int8": (-128, 127), "int16": (-32768, 32767), "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 255), "uint16": (0, 65535), "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1),
}
_ERROR_CODES = list(ErrorCode)


def _small_int(rng: random.Random, lo: int, hi: int) -> int:
    """Mostly small values (ids, counts), sometimes the extremes."""
    return rng.choice([max(lo, min(hi, rng.randint(-1, 100))), lo, hi, rng.randint(lo, hi)])


def _text(rng: random.Random) -> str:
    """Often "fuzz" (the topic and group the fuzz test creates, so requests reach real partitions)."""
    if rng.random() < 0.3:
        return "fuzz"
    return "".join(rng.choice("abcxyz-_.é0") for _ in range(rng.randint(0, 8)))


def primitive(rng: random.Random, kafka_type: str) -> Any:
    if kafka_type in _INT_RANGES:
        return _small_int(rng, *_INT_RANGES[kafka_type])
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "float64":
        return rng.uniform(-1e6, 1e6)
    if kafka_type == "string":
        return _text(rng)
    if kafka_type in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 24))
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128) | 1)
    if kafka_type == "error_code":
        return rng.choice(_ERROR_CODES)
    if kafka_type.startswith("timedelta"):  # short waits mostly, so Fetch long polls end soon
        return datetime.timedelta(milliseconds=rng.choice([0, 100, 1000, 10_000, rng.randint(0, 60_000)]))
    if kafka_type.startswith("datetime"):
        return datetime.datetime.fromtimestamp(rng.randint(0, 2**40) / 1000, datetime.UTC)
    raise TypeError(kafka_type)


def _optional_inner(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (UnionType, typing.Union):
        args = [a for a in typing.get_args(hint) if a is not NoneType]
        if len(args) == 1:
            return args[0], True
    return hint, False


def instance(rng: random.Random, cls: type, depth: int = 0) -> Any:
    """A random instance of the kio entity ``cls``."""
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        inner, optional = _optional_inner(hints[field.name])
        if optional and rng.random() < 0.2:
            values[field.name] = None
            continue
        kafka_type = field.metadata.get("kafka_type")
        if typing.get_origin(inner) is tuple:
            item = typing.get_args(inner)[0]
            count = rng.randint(0, 3 if depth < 2 else 1)
            if dataclasses.is_dataclass(item):
                values[field.name] = tuple(instance(rng, item, depth + 1) for _ in range(count))
            else:
                values[field.name] = tuple(primitive(rng, kafka_type) for _ in range(count))
        elif dataclasses.is_dataclass(inner):
            values[field.name] = instance(rng, inner, depth + 1)
        else:
            values[field.name] = primitive(rng, kafka_type)
    return cls(**values)


def request_body(rng: random.Random, api_key: int, version: int) -> bytes:
    return encode_body(instance(rng, request_type(api_key, version)))


def request_frame(api_key: int, version: int, body: bytes, correlation_id: int = 1,
                  client_id: str = "fuzz") -> bytes:
    """A whole size-prefixed request frame: header v1 (v2 with empty tagged fields when flexible), body."""
    cid = client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid
    if is_flexible(api_key, version):
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload
