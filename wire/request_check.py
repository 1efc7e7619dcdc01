"""Check a request body's declared lengths against the bytes present, before kio's native reader sees it.

kio's reader reserves memory for a declared array length before it reads an element, so one frame
declaring 2^35 elements aborts the process (a Rust allocation failure, which no ``except`` catches). This
module walks the same schema kio reads (the kio dataclass of the API key and version: field order,
``kafka_type``, nullability, tags, flexible or not) over the frame, checking every string, bytes and array
length and every tagged-field size against the bytes left, without allocating anything per declared
length, and raises MalformedRequest on the first one that does not fit.

It also rejects what Kafka's generated readers reject while reading lengths: a null (-1) for a field that
is not nullable in that version ("non-nullable field X was serialized as null"), a negative length other
than -1, a varint longer than 5 bytes, and a tagged field whose content is not exactly its declared size.
Values themselves (UTF-8, booleans, error codes) are left to kio, which raises ordinary exceptions on them.

The walk is compiled once per (api_key, version) into nested closures ``(buf, pos, end) -> new pos``; runs
of fixed-size fields collapse into one step, and an array of fixed-size elements is checked in O(1).
"""

from __future__ import annotations

import dataclasses
import struct
import typing
from collections.abc import Callable
from functools import cache
from types import NoneType, UnionType

from logway.wire.errors import MalformedRequest

Step = Callable[[bytes, int, int], int]
"""Check one field (or entity) at ``pos`` of ``buf`` (valid up to ``end``); return where it ends."""

_I8 = struct.Struct(">b").unpack_from
_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from

# Bytes on the wire of each fixed-size kafka_type.
_FIXED_SIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
    "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE = ("string", "bytes", "records")


def check_body(cls: type, buf: bytes, pos: int) -> int:
    """Raise MalformedRequest unless the body of kio type ``cls`` at ``pos`` is safe for kio to read.

    Returns where the body ends (kio ignores trailing bytes, and so does Kafka).
    """
    return _entity_plan(cls, nullable=False).step(buf, pos, len(buf))


# --- reading lengths --------------------------------------------------------------------------


def _fail(what: str) -> MalformedRequest:
    return MalformedRequest(f"request body: {what}")


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's and kio's limit), decoded as kio does."""
    if pos >= end:
        raise _fail("truncated varint")
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    for i in range(pos + 1, min(pos + 5, end)):
        b = buf[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i + 1
        shift += 7
    raise _fail("truncated varint" if end < pos + 5 else "varint longer than 5 bytes")


def _length(buf: bytes, pos: int, end: int, width: int) -> tuple[int, int]:
    """A length prefix: compact (width 0, uvarint of length + 1), int16 or int32; -1 means null."""
    if width == 0:
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    if pos + width > end:
        raise _fail("truncated length")
    (n,) = _I16(buf, pos) if width == 2 else _I32(buf, pos)
    return n, pos + width


# --- steps ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """How to check one field or entity: ``step``, and its size when every instance has the same size."""

    step: Step
    fixed: int | None
    min_size: int


def _fixed(n: int) -> _Plan:
    def step(buf: bytes, pos: int, end: int) -> int:
        pos += n
        if pos > end:
            raise _fail(f"truncated: {n} more bytes expected")
        return pos

    return _Plan(step, n, n)


def _sized(width: int, nullable: bool, name: str) -> _Plan:
    """A string or bytes field: a length prefix, then that many bytes."""

    def step(buf: bytes, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, width)
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise _fail(f"{name}: length {n}")
        pos += n
        if pos > end:
            raise _fail(f"{name}: length {n} runs past the request")
        return pos

    return _Plan(step, None, 1 if width == 0 else width)


def _array(width: int, nullable: bool, item: _Plan, name: str) -> _Plan:
    """An array: a count prefix (compact or int32), then that many items, each checked in turn."""
    item_step, item_fixed = item.step, item.fixed
    item_min = max(item.min_size, 1)

    def step(buf: bytes, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, width)
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise _fail(f"{name}: array length {n}")
        if n * item_min > end - pos:
            raise _fail(f"{name}: {n} items cannot fit in the {end - pos} bytes left")
        if item_fixed is not None:
            return pos + n * item_fixed
        for _ in range(n):
            pos = item_step(buf, pos, end)
        return pos

    return _Plan(step, None, 1 if width == 0 else width)


def _sequence(plans: list[_Plan]) -> _Plan:
    """Plans one after the other, consecutive fixed-size ones merged into one step."""
    merged: list[_Plan] = []
    for plan in plans:
        if plan.fixed is not None and merged and merged[-1].fixed is not None:
            merged[-1] = _fixed(merged[-1].fixed + plan.fixed)
        else:
            merged.append(plan)
    min_size = sum(p.min_size for p in merged)
    if all(p.fixed is not None for p in merged):
        return _fixed(min_size)
    if len(merged) == 1:
        return merged[0]
    steps = tuple(p.step for p in merged)

    def step(buf: bytes, pos: int, end: int) -> int:
        for s in steps:
            pos = s(buf, pos, end)
        return pos

    return _Plan(step, None, min_size)


def _tagged_fields(tags: dict[int, _Plan]) -> _Plan:
    """A flexible entity's tagged-field section: count, then (tag, size, value) each.

    kio reads a known tag's value by its schema and ignores the size, so the value must fill exactly the
    declared size (it does in every well-formed request); an unknown tag is skipped by its size, as Kafka
    does (kio then refuses it with an ordinary error).
    """

    def step(buf: bytes, pos: int, end: int) -> int:
        if pos < end and buf[pos] == 0:  # the common case: no tagged fields
            return pos + 1
        count, pos = _uvarint(buf, pos, end)
        if count * 2 > end - pos:
            raise _fail(f"{count} tagged fields cannot fit in the {end - pos} bytes left")
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise _fail(f"tagged field {tag} of {size} bytes runs past the request")
            plan = tags.get(tag)
            if plan is not None and plan.step(buf, pos, stop) != stop:
                raise _fail(f"tagged field {tag} is shorter than its declared {size} bytes")
            pos = stop
        return pos

    return _Plan(step, None, 1)


def _nullable_entity(inner: _Plan) -> _Plan:
    """A nullable struct, as kio reads it: an int8 marker (-1 for null), then the struct."""
    inner_step = inner.step

    def step(buf: bytes, pos: int, end: int) -> int:
        if pos >= end:
            raise _fail("truncated struct marker")
        if buf[pos] == 0xFF:
            return pos + 1
        return inner_step(buf, pos + 1, end)

    return _Plan(step, None, 1)


# --- compiling a kio type into a plan -----------------------------------------------------------


@cache
def _entity_plan(cls: type, nullable: bool) -> _Plan:
    """The plan of a kio entity: its untagged fields in order, then (flexible versions) the tag section."""
    flexible = bool(cls.__flexible__)
    hints = typing.get_type_hints(cls)
    plans: list[_Plan] = []
    tags: dict[int, _Plan] = {}
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        plan = _field_plan(field, hints[field.name], flexible, tagged=tag is not None)
        if tag is None:
            plans.append(plan)
        else:
            tags[tag] = plan
    if flexible:
        plans.append(_tagged_fields(tags))
    body = _sequence(plans)
    return _nullable_entity(body) if nullable else body


def _optional_inner(hint: typing.Any) -> tuple[typing.Any, bool]:
    """``X | None`` -> (X, True); anything else -> (hint, False)."""
    if typing.get_origin(hint) in (UnionType, typing.Union):
        args = [a for a in typing.get_args(hint) if a is not NoneType]
        if len(args) == 1:
            return args[0], True
    return hint, False


def _field_plan(field: dataclasses.Field, hint: typing.Any, flexible: bool, tagged: bool) -> _Plan:
    """Mirror of kio's field classification (kio.serial._introspect.classify_field and the native schema)."""
    inner, optional = _optional_inner(hint)
    width = 0 if flexible else 4
    if typing.get_origin(inner) is tuple:
        item_hint = typing.get_args(inner)[0]
        if dataclasses.is_dataclass(item_hint):
            item = _entity_plan(item_hint, nullable=False)
        else:
            item = _primitive_plan(field, flexible, nullable=False)
        return _array(width, optional, item, field.name)
    if dataclasses.is_dataclass(inner):
        return _entity_plan(inner, nullable=optional)
    return _primitive_plan(field, flexible, nullable=optional and not tagged)


def _primitive_plan(field: dataclasses.Field, flexible: bool, nullable: bool) -> _Plan:
    kafka_type = field.metadata["kafka_type"]
    if kafka_type in _FIXED_SIZE:
        return _fixed(_FIXED_SIZE[kafka_type])
    if kafka_type in _VARIABLE:
        width = 0 if flexible else (2 if kafka_type == "string" else 4)
        return _sized(width, nullable, field.name)
    raise TypeError(f"no length rule for kafka_type {kafka_type!r} of field {field.name}")
