"""Check a request body's declared lengths against the bytes present, before kio's native reader sees it.

kio's reader reserves memory for a declared array length before it reads an element, so one frame
declaring 2^35 elements aborts the process (a Rust allocation failure, which no ``except`` catches). This
module walks the same schema kio reads (the kio dataclass of the API key and version: field order,
``kafka_type``, nullability, tags, flexible or not) over the frame, checking every string, bytes and array
length and every tagged-field size against the bytes left, without allocating anything per declared
length, and raises MalformedRequest on the first one that does not fit.

It also refuses what Kafka's generated readers refuse while reading lengths: a null (-1) for a field that
is not nullable in that version ("non-nullable field X was serialized as null"), a varint longer than 5
bytes, and a tagged field whose content is not exactly its declared size; and a negative length other than
-1, which kio's reader refuses too (Kafka reads any negative length of a nullable field as null; no client
sends one).
Values themselves (UTF-8, booleans, error codes) are left to kio, which raises ordinary exceptions on them.

It runs on every request but Produce, so each kio type is compiled once into one Python function of
straight-line code (the way dataclasses and attrs generate ``__init__``): runs of fixed-size fields become
one addition, an array of fixed-size items one multiplication, and nested entities are inlined as loops.
``source(cls)`` shows the generated code.
"""

from __future__ import annotations

import dataclasses
import struct
import typing
from collections.abc import Callable
from functools import cache
from types import NoneType, UnionType

from logway.wire.errors import MalformedRequest

Check = Callable[[bytes, int, int], int]
"""Check the body at ``pos`` of ``buf`` (valid up to ``end``); return where it ends."""

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
    return _compiled(cls)(buf, pos, len(buf))


def source(cls: type) -> str:
    """The generated checking code of the kio type ``cls`` (for reading and debugging)."""
    return _Compiler().function(cls)[0]


# --- helpers the generated code calls -------------------------------------------------------------


def _fail(what: str) -> MalformedRequest:
    return MalformedRequest(f"request body: {what}")


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's and kio's limit), decoded as kio does."""
    value = 0
    shift = 0
    for i in range(pos, min(pos + 5, end)):
        b = buf[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i + 1
        shift += 7
    raise _fail("truncated varint" if end < pos + 5 else "varint longer than 5 bytes")


def _tagged_fields(tags: dict[int, Check], buf: bytes, pos: int, end: int) -> int:
    """A tagged-field section that is not empty: count, then (tag, size, value) each.

    kio reads a known tag's value by its schema and ignores the size, so the value must fill exactly the
    declared size (it does in every well-formed request); an unknown tag is skipped by its size, as Kafka
    does (kio then refuses it with an ordinary error).
    """
    count, pos = _uvarint(buf, pos, end)
    if count * 2 > end - pos:
        raise _fail(f"{count} tagged fields cannot fit in the {end - pos} bytes left")
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        stop = pos + size
        if stop > end:
            raise _fail(f"tagged field {tag} of {size} bytes runs past the request")
        check = tags.get(tag)
        if check is not None and check(buf, pos, stop) != stop:
            raise _fail(f"tagged field {tag} is shorter than its declared {size} bytes")
        pos = stop
    return pos


_GLOBALS = {"_fail": _fail, "_uvarint": _uvarint, "_tagged_fields": _tagged_fields,
            "_i16": struct.Struct(">h").unpack_from, "_i32": struct.Struct(">i").unpack_from}


# --- the compiler -------------------------------------------------------------------------------


@cache
def _compiled(cls: type) -> Check:
    code, namespace = _Compiler().function(cls)
    return _define(code, namespace, f"{cls.__module__}.{cls.__qualname__}")


def _define(code: str, namespace: dict, what: str) -> Check:
    exec(compile(code, f"<request check of {what}>", "exec"), namespace)
    return namespace["check"]


def _optional_inner(hint: typing.Any) -> tuple[typing.Any, bool]:
    """``X | None`` -> (X, True); anything else -> (hint, False)."""
    if typing.get_origin(hint) in (UnionType, typing.Union):
        args = [a for a in typing.get_args(hint) if a is not NoneType]
        if len(args) == 1:
            return args[0], True
    return hint, False


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    """One field as kio reads it (kio.serial._introspect.classify_field and kio's native schema)."""

    name: str
    kafka_type: str | None  # None for an entity or an array of entities
    entity: type | None
    array: bool
    nullable: bool  # a null (-1) is allowed: a nullable array, string or bytes, or a nullable struct

    @staticmethod
    def of(field: dataclasses.Field, hint: typing.Any, tagged: bool) -> _Field:
        inner, optional = _optional_inner(hint)
        array = typing.get_origin(inner) is tuple
        if array:
            inner = typing.get_args(inner)[0]
        entity = inner if dataclasses.is_dataclass(inner) else None
        # kio reads a tagged string or bytes field as not nullable; a tagged struct keeps its marker.
        nullable = optional and (array or entity is not None or not tagged)
        return _Field(field.name, None if entity else field.metadata["kafka_type"], entity, array, nullable)


def _fields(cls: type) -> tuple[list[_Field], dict[int, _Field]]:
    """A kio entity's untagged fields in order, and its tagged ones by tag."""
    hints = typing.get_type_hints(cls)
    untagged, tagged = [], {}
    for f in dataclasses.fields(cls):
        tag = f.metadata.get("tag")
        field = _Field.of(f, hints[f.name], tagged=tag is not None)
        if tag is None:
            untagged.append(field)
        else:
            tagged[tag] = field
    return untagged, tagged


class _Compiler:
    """Emits the body of ``check(buf, pos, end)`` for a kio type, one field at a time."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, typing.Any] = dict(_GLOBALS)
        self.pending = 0  # fixed-size bytes passed over but not yet added to pos

    def function(self, cls: type) -> tuple[str, dict]:
        """The source of ``check`` for the entity ``cls``, and the names it uses."""
        return self._function(lambda: self.entity(cls, 1))

    def field_function(self, field: _Field, flexible: bool) -> Check:
        """A separate compiled check for one field (a tagged field's value)."""
        sub = _Compiler()
        code, namespace = sub._function(lambda: sub.field(field, flexible, 1))
        return _define(code, namespace, f"tagged field {field.name}")

    def _function(self, body: Callable[[], None]) -> tuple[str, dict]:
        self.lines = ["def check(buf, pos, end):"]
        body()
        self.flush(1, last=True)
        self.lines.append("    return pos")
        return "\n".join(self.lines) + "\n", self.namespace

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def flush(self, indent: int, last: bool = False) -> None:
        """Add the fixed-size bytes passed over to pos.

        Only the last step of a function checks them against end: every other step is followed by a read
        (a length, a marker, a tag count) that refuses a pos past the end.
        """
        if self.pending:
            self.emit(indent, f"pos += {self.pending}")
            if last:
                self.emit(indent, f"if pos > end: raise _fail('truncated: {self.pending} bytes expected')")
            self.pending = 0

    def entity(self, cls: type, indent: int) -> None:
        flexible = bool(cls.__flexible__)
        untagged, tagged = _fields(cls)
        for field in untagged:
            self.field(field, flexible, indent)
        if flexible:
            self.tag_section(tagged, flexible, indent)

    def tag_section(self, tagged: dict[int, _Field], flexible: bool, indent: int) -> None:
        self.flush(indent)
        name = f"_tags{len(self.namespace)}"
        self.namespace[name] = {tag: self.field_function(f, flexible) for tag, f in tagged.items()}
        self.emit(indent, "if pos < end and buf[pos] == 0:")  # the common case: no tagged fields
        self.emit(indent + 1, "pos += 1")
        self.emit(indent, "else:")
        self.emit(indent + 1, f"pos = _tagged_fields({name}, buf, pos, end)")

    def field(self, field: _Field, flexible: bool, indent: int) -> None:
        if field.array:
            self.array(field, flexible, indent)
        elif field.entity is not None:
            if field.nullable:
                self.nullable_struct(field, indent)
            else:
                self.entity(field.entity, indent)
        elif field.kafka_type in _FIXED_SIZE:
            self.pending += _FIXED_SIZE[field.kafka_type]
        elif field.kafka_type in _VARIABLE:
            width = 0 if flexible else (2 if field.kafka_type == "string" else 4)
            self.length(width, indent)
            inner = self.null_or_negative(field, "length", indent)
            self.emit(inner, "pos += n")
            self.emit(inner, f"if pos > end: raise _fail(f'{field.name}: length {{n}} runs past the request')")
        else:
            raise TypeError(f"no length rule for kafka_type {field.kafka_type!r} of field {field.name}")

    def length(self, width: int, indent: int) -> None:
        """Read a length prefix into n: compact (width 0: uvarint of length + 1), int16 or int32."""
        self.flush(indent)
        if width == 0:
            self.emit(indent, "if pos < end and buf[pos] < 0x80:")
            self.emit(indent + 1, "n = buf[pos] - 1")
            self.emit(indent + 1, "pos += 1")
            self.emit(indent, "else:")
            self.emit(indent + 1, "n, pos = _uvarint(buf, pos, end)")
            self.emit(indent + 1, "n -= 1")
            return
        self.emit(indent, f"if pos + {width} > end: raise _fail('truncated length')")
        self.emit(indent, f"n = _i{width * 8}(buf, pos)[0]")
        self.emit(indent, f"pos += {width}")

    def null_or_negative(self, field: _Field, what: str, indent: int) -> int:
        """After length(): a null ends the field if it is nullable; any other negative length is refused.

        Returns the indent of the code that reads what the length announces.
        """
        self.emit(indent, "if n < 0:")
        refuse = f"raise _fail(f'{field.name}: {what} {{n}}')"
        if not field.nullable:
            self.emit(indent + 1, refuse)
            return indent
        self.emit(indent + 1, f"if n != -1: {refuse}")
        self.emit(indent, "else:")
        return indent + 1

    def array(self, field: _Field, flexible: bool, indent: int) -> None:
        self.length(0 if flexible else 4, indent)
        inner = self.null_or_negative(field, "array length", indent)
        min_size = max(1, _min_size(field, flexible))
        self.emit(inner, f"if n * {min_size} > end - pos:")
        self.emit(inner + 1, f"raise _fail(f'{field.name}: {{n}} items cannot fit in the {{end - pos}} bytes left')")
        item = _Compiler()
        item.namespace = self.namespace
        if field.entity is not None:
            item.entity(field.entity, inner + 1)
        else:
            item.field(dataclasses.replace(field, array=False, nullable=False), flexible, inner + 1)
        if not item.lines:  # items of a fixed size: one multiplication (they fit: min_size is their size)
            self.emit(inner, f"pos += n * {item.pending}")
            return
        item.flush(inner + 1)
        self.emit(inner, "for _ in range(n):")
        self.lines += item.lines

    def nullable_struct(self, field: _Field, indent: int) -> None:
        """A nullable struct, as kio reads it: an int8 marker (-1 for null), then the struct."""
        self.flush(indent)
        self.emit(indent, "if pos >= end: raise _fail('truncated struct marker')")
        self.emit(indent, "if buf[pos] == 0xFF:")
        self.emit(indent + 1, "pos += 1")
        self.emit(indent, "else:")
        self.pending = 1
        self.entity(field.entity, indent + 1)
        self.flush(indent + 1)


def _min_size(field: _Field, flexible: bool) -> int:
    """The fewest bytes one item of an array field can take."""
    if field.entity is None:
        if field.kafka_type in _FIXED_SIZE:
            return _FIXED_SIZE[field.kafka_type]
        return 1 if flexible else (2 if field.kafka_type == "string" else 4)
    return _entity_min_size(field.entity)


@cache
def _entity_min_size(cls: type) -> int:
    flexible = bool(cls.__flexible__)
    untagged, _ = _fields(cls)
    size = 1 if flexible else 0  # the tag section's count
    for field in untagged:
        if field.array:
            size += 1 if flexible else 4
        elif field.entity is not None:
            size += 1 if field.nullable else _entity_min_size(field.entity)
        else:
            size += _min_size(field, flexible)
    return size
