"""Zig-zag varints as Kafka's ByteUtils writes them (protobuf encoding) for record fields.

Kafka bounds a varint (int32) to 5 bytes and a varlong (int64) to 10 and rejects longer
encodings; values wrap to the field's width the way Java's arithmetic does.
"""

from __future__ import annotations

from logway.wire.batch import CorruptBatch

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1



def _encode(value: int) -> bytes:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varint value {value} outside int64")
    zz = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


# Zig-zag bytes of the one- and two-byte values that make up most record fields (lengths of values up to 8 KiB,
# timestamp and offset deltas, -1 for null): a lookup instead of a loop (record building, encryption at the proxy).
_SMALL = {n: _encode(n) for n in range(-8192, 8192)}


def encode_varint(value: int) -> bytes:
    """Zig-zag varint bytes of a signed 64-bit ``value`` (ByteUtils.writeVarlong; same bytes as writeVarint)."""
    small = _SMALL.get(value)
    return small if small is not None else _encode(value)


def size_of_varint(value: int) -> int:
    """Bytes ``encode_varint(value)`` takes."""
    zz = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (zz.bit_length() + 6) // 7)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a zig-zag int32 varint at ``pos``; return (value, next position) (ByteUtils.readVarint)."""
    try:
        byte = buf[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        second = buf[pos + 1]
        if second < 0x80:  # two bytes: lengths up to 8 KiB, the other common case
            raw = (byte & 0x7F) | (second << 7)
            return (raw >> 1) ^ -(raw & 1), pos + 2
        raw = byte & 0x7F
        for shift in (7, 14, 21, 28):
            pos += 1
            byte = buf[pos]
            raw |= (byte & 0x7F) << shift
            if byte < 0x80:
                raw &= 0xFFFFFFFF  # Java's int shift drops bits past 32
                value = (raw >> 1) ^ -(raw & 1)
                return value, pos + 1
    except IndexError:
        raise CorruptBatch("record data ends inside a varint") from None
    raise CorruptBatch("varint longer than 5 bytes")


def read_varlong(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a zig-zag int64 varint at ``pos``; return (value, next position) (ByteUtils.readVarlong)."""
    try:
        byte = buf[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        raw = byte & 0x7F
        for shift in range(7, 70, 7):
            pos += 1
            byte = buf[pos]
            raw |= (byte & 0x7F) << shift
            if byte < 0x80:
                raw &= 0xFFFFFFFFFFFFFFFF
                return (raw >> 1) ^ -(raw & 1), pos + 1
    except IndexError:
        raise CorruptBatch("record data ends inside a varlong") from None
    raise CorruptBatch("varlong longer than 10 bytes")
