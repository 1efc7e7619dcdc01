"""Records inside v2 record batches: decode a batch to records and build a batch from records.

For tools, tests, ``__consumer_offsets``, compaction and ListOffsets-by-time; the produce and
fetch hot paths never come here (they only touch batch headers, see ``wire.batch``).

Record layout (Kafka's DefaultRecord; varints are zig-zag, see ``wire.varint``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint |
    [headerKeyLength varint | headerKey utf-8 | headerValueLength varint | headerValue]

A negative key, value or header value length means null. ``build_batch`` lays a batch out the
way the Java client's MemoryRecordsBuilder does, so its bytes equal a Java producer's;
``build_end_txn_marker`` writes transaction markers. ``decode_legacy`` reads the magic 0/1
message sets of old producers. Malformed bytes raise ``wire.batch.CorruptBatch`` (or a subclass),
never an IndexError or struct.error, so the broker can answer CORRUPT_MESSAGE.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import crc32c

from logway.wire import compression as codecs
from logway.wire.batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_POS,
    LENGTH_POS,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CorruptBatch,
    validate_batch,
)
from logway.wire.varint import INT32_MAX, INT64_MAX, INT64_MIN, encode_varint, read_varint, read_varlong

NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP

_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")
_NULL = encode_varint(-1)


class ControlType(IntEnum):
    """Control record types in a control batch's record key (Kafka's ControlRecordType)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: a UTF-8 key and a nullable byte value."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record with its absolute offset and timestamp (ms)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to write; ``timestamp`` and ``offset_delta`` default as MemoryRecordsBuilder.append does.

    ``timestamp`` None means the batch's ``base_timestamp`` (or NO_TIMESTAMP when that is None too);
    ``offset_delta`` None means one past the previous record's (0 for the first).
    """

    key: bytes | None
    value: bytes | None
    headers: Sequence[Header | tuple[str, bytes | None]] = field(default=())
    timestamp: int | None = None
    offset_delta: int | None = None


@dataclass(slots=True)
class DecodedBatch:
    """A v2 batch's header and its records, offsets and timestamps made absolute."""

    header: BatchHeader
    records: list[Record]


RecordInput = NewRecord | Record | tuple[bytes | None, bytes | None, Sequence[Header | tuple[str, bytes | None]]]

# A frozen dataclass's __init__ sets each field through object.__setattr__; filling the slots
# directly makes the same Record about three times faster, which the record decoder relies on.
_RECORD_MAKER = (object.__new__,) + tuple(
    getattr(Record, name).__set__ for name in ("offset", "timestamp", "key", "value", "headers")
)


def decode_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    max_size: int = codecs.DEFAULT_MAX_SIZE,
) -> DecodedBatch:
    """Validate and decode the v2 batch at ``pos``, decompressing its records when needed.

    Raises CorruptBatch (or a subclass) for anything malformed; ``max_size`` bounds the
    decompressed size. In a LogAppendTime batch every record gets the batch's maxTimestamp,
    as Kafka's DefaultRecordBatch does.
    """
    header = validate_batch(buf, pos, check_crc=verify_crc)
    view = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size]
    codec = header.attributes & COMPRESSION_MASK
    if codec == codecs.NONE:
        data = bytes(view)
    elif codec in codecs.CODEC_BY_CODE:
        data = codecs.decompress(codec, view, max_size)
    else:
        # CompressionType.forId rejects codes 5-7; the broker answers CORRUPT_MESSAGE.
        raise CorruptBatch(f"unknown compression codec {codec} in batch attributes")
    append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    records = _decode_records(data, header.records_count, header.base_offset, header.base_timestamp, append_time)
    return DecodedBatch(header, records)


def decode_batches(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True, max_size: int = codecs.DEFAULT_MAX_SIZE
) -> Iterator[DecodedBatch]:
    """Decode every whole batch in ``buf``, stopping quietly at a trailing partial batch.

    A Fetch response cut at max_bytes ends in a partial batch; consumers skip it, as Kafka's
    ByteBufferLogInputStream does. A whole batch that is malformed raises CorruptBatch.
    """
    pos = 0
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        (length,) = struct.unpack_from(">i", buf, pos + LENGTH_POS)
        if length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptBatch(f"batch length {length} shorter than a batch header")
        if length + LOG_OVERHEAD > end - pos:
            return
        yield decode_batch(buf, pos, verify_crc=verify_crc, max_size=max_size)
        pos += length + LOG_OVERHEAD


def _decode_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int, append_time: int | None
) -> list[Record]:
    """Parse ``count`` records filling ``data`` exactly (DefaultRecord.readFrom's checks).

    Most varints here are one byte, so each read tries that inline before calling the general
    reader; this loop is the cost of compaction and offset loading. The key, value and headers are read by
    calls (about 8% per record against one inlined loop, measured side by side) so that it reads as steps.
    """
    end = len(data)
    if count > end:  # every record takes at least one byte: refuse before looping
        raise CorruptBatch(f"{count} records cannot fit in {end} bytes")
    records: list[Record] = []
    append = records.append
    new, set_offset, set_timestamp, set_key, set_value, set_headers = _RECORD_MAKER
    pos = 0
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, pos = read_varint(data, pos)
            rec_end = pos + length
            if length < 0 or rec_end > end:
                raise CorruptBatch(f"record length {length} runs past the batch's {end - pos} remaining bytes")
            # data[pos] is the record's attributes byte, unused.
            b = data[pos + 1]
            if b < 0x80:
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                ts_delta, pos = read_varlong(data, pos + 1)
            b = data[pos]
            if b < 0x80:
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                offset_delta, pos = read_varint(data, pos)
            key, value, headers, pos = _record_payload(data, pos, rec_end)
            if pos != rec_end:
                raise CorruptBatch(f"record declared {length} bytes but its fields take {length + pos - rec_end}")
            timestamp = base_timestamp + ts_delta if append_time is None else append_time
            if not INT64_MIN <= timestamp <= INT64_MAX:  # Java long arithmetic wraps
                timestamp = _wrap64(timestamp)
            record = new(Record)
            set_offset(record, base_offset + offset_delta)
            set_timestamp(record, timestamp)
            set_key(record, key)
            set_value(record, value)
            set_headers(record, headers)
            append(record)
    except IndexError:
        raise CorruptBatch("record data ends inside a record") from None
    if pos != end:
        # DefaultRecordBatch: "Incorrect declared batch size, records still remaining in file".
        raise CorruptBatch(f"{end - pos} bytes left after the batch's {count} records")
    return records


def _record_payload(data: bytes, pos: int, rec_end: int) -> tuple[bytes | None, bytes | None, tuple[Header, ...], int]:
    """A record's key, value and headers from ``pos`` (its key length), each checked against ``rec_end``."""
    key, pos = _nullable_bytes(data, pos, rec_end, "key")
    value, pos = _nullable_bytes(data, pos, rec_end, "value")
    if data[pos] == 0:
        return key, value, (), pos + 1
    header_count, pos = read_varint(data, pos)
    headers, pos = _decode_headers(data, pos, rec_end, header_count)
    return key, value, headers, pos


def _nullable_bytes(data: bytes, pos: int, rec_end: int, field: str) -> tuple[bytes | None, int]:
    """A varint length (-1: null) and that many bytes, which must end within the record."""
    b = data[pos]
    if b < 0x80:
        size, pos = (b >> 1) ^ -(b & 1), pos + 1
    else:
        size, pos = read_varint(data, pos)
    if size < 0:
        return None, pos
    end = pos + size
    if end > rec_end:
        raise CorruptBatch(f"record {field} runs past the record")
    return data[pos:end], end


def _decode_headers(data: bytes, pos: int, rec_end: int, count: int) -> tuple[tuple[Header, ...], int]:
    if count < 0 or count > rec_end - pos:
        raise CorruptBatch(f"invalid record header count {count}")
    headers = []
    for _ in range(count):
        key_len, pos = read_varint(data, pos)
        if key_len < 0:
            raise CorruptBatch(f"invalid negative header key size {key_len}")
        key_end = pos + key_len
        if key_end > rec_end:
            raise CorruptBatch("header key runs past the record")
        # Java decodes header keys with new String(bytes, UTF_8): malformed bytes become U+FFFD.
        key = data[pos:key_end].decode("utf-8", "replace")
        value_len, pos = read_varint(data, key_end)
        if value_len >= 0:
            value = data[pos : pos + value_len]
            pos += value_len
            if pos > rec_end:
                raise CorruptBatch("header value runs past the record")
        else:
            value = None
        headers.append(Header(key, value))
    return tuple(headers), pos


def build_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: int = codecs.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Build one v2 batch laid out as the Java client's MemoryRecordsBuilder lays it out.

    ``records`` items may be ``(key, value, headers)`` tuples (headers as ``(str, bytes | None)``
    pairs or Header), NewRecord (own timestamp / offset delta) or decoded Records (their absolute
    offset and timestamp are kept relative to ``base_offset``, as compaction needs).

    baseTimestamp is ``base_timestamp`` or else the first record's timestamp; maxTimestamp is
    ``max_timestamp`` or else the largest record timestamp (at least NO_TIMESTAMP, as Java's
    builder starts from it). For a LogAppendTime batch pass the append time as ``max_timestamp``,
    as Kafka's LogValidator does. ``last_offset_delta`` keeps a batch's original last offset when
    compaction removed its tail records (MemoryRecordsBuilder.overrideLastOffset). With no
    records the result is the empty batch Kafka keeps after compaction (DefaultRecordBatch.writeEmptyHeader:
    baseTimestamp NO_TIMESTAMP unless given, maxTimestamp ``max_timestamp``).
    Bad arguments raise ValueError (or TypeError for wrongly typed keys and values).
    """
    codec = compression
    if codec not in codecs.CODEC_BY_CODE:
        raise ValueError(f"unknown compression codec {codec}")
    _check_producer_fields(producer_id, producer_epoch, base_sequence, is_transactional, is_control)
    body, first_timestamp, newest, previous_delta = _encode_records(records, base_offset, base_timestamp)
    if body:
        if last_offset_delta is None:
            last_offset_delta = previous_delta
        elif last_offset_delta < previous_delta:
            raise ValueError(f"last_offset_delta {last_offset_delta} before the last record's {previous_delta}")
        payload = b"".join(body)
        if codec != codecs.NONE:
            payload = codecs.compress(codec, payload)
    else:
        # writeEmptyHeader: never compressed; Kafka passes the timestamp to keep as maxTimestamp.
        codec = codecs.NONE
        last_offset_delta = last_offset_delta or 0
        payload = b""
    if first_timestamp is None:
        first_timestamp = NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = newest if body else first_timestamp
    attributes = _attributes(codec, log_append_time, is_transactional, is_control)
    try:
        header = _BATCH_HEADER.pack(
            base_offset,
            BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            last_offset_delta,
            first_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(body),
        )
    except struct.error as exc:
        raise ValueError(f"batch field out of range: {exc}") from None
    crc = crc32c.crc32c(payload, crc32c.crc32c(header[ATTRIBUTES_POS:]))
    return header[:CRC_POS] + crc.to_bytes(4, "big") + header[ATTRIBUTES_POS:] + payload


def _check_producer_fields(
    producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool, is_control: bool
) -> None:
    """MemoryRecordsBuilder's constructor checks."""
    if is_transactional and producer_id == NO_PRODUCER_ID:
        raise ValueError("cannot write transactional records without a producer id")
    if producer_id != NO_PRODUCER_ID:
        if producer_epoch < 0:
            raise ValueError("invalid negative producer epoch")
        if base_sequence < 0 and not is_control:
            raise ValueError("invalid negative sequence number")


def _encode_records(
    records: Sequence[RecordInput], base_offset: int, base_timestamp: int | None
) -> tuple[list[bytes], int | None, int, int]:
    """Each record's bytes, the batch's first and newest timestamps and the last offset delta."""
    body: list[bytes] = []
    first_timestamp: int | None = base_timestamp
    newest = NO_TIMESTAMP
    previous_delta = -1
    for item in records:
        key, value, headers, timestamp, offset_delta = _normalize(item, base_offset)
        if timestamp is None:
            timestamp = NO_TIMESTAMP if base_timestamp is None else base_timestamp
        if offset_delta is None:
            offset_delta = previous_delta + 1
        elif offset_delta <= previous_delta:
            raise ValueError(f"offset delta {offset_delta} after {previous_delta}: offsets must increase")
        if offset_delta > INT32_MAX:
            raise ValueError(f"offset delta {offset_delta} does not fit an int32")
        if first_timestamp is None:
            first_timestamp = timestamp
        newest = max(newest, timestamp)
        body.append(_encode_record(offset_delta, _wrap64(timestamp - first_timestamp), key, value, headers))
        previous_delta = offset_delta
    return body, first_timestamp, newest, previous_delta


def _attributes(codec: int, log_append_time: bool, is_transactional: bool, is_control: bool) -> int:
    attributes = codec
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    return attributes


def _normalize(item: RecordInput, base_offset: int):
    """(key, value, headers, timestamp, offset_delta) of one build_batch input."""
    if isinstance(item, NewRecord):
        return item.key, item.value, item.headers, item.timestamp, item.offset_delta
    if isinstance(item, Record):
        return item.key, item.value, item.headers, item.timestamp, item.offset - base_offset
    key, value, headers = item
    return key, value, headers, None, None


def _encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header | tuple[str, bytes | None]],
) -> bytes:
    """One record's bytes, length prefix included (DefaultRecord.writeTo)."""
    parts = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta)]
    for blob in (key, value):
        if blob is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(blob)))
            parts.append(bytes(blob))
    parts.append(encode_varint(len(headers)))
    for h in headers:
        h_key, h_value = (h.key, h.value) if isinstance(h, Header) else h
        raw_key = h_key.encode("utf-8")
        parts.append(encode_varint(len(raw_key)))
        parts.append(raw_key)
        if h_value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(h_value)))
            parts.append(bytes(h_value))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _wrap64(value: int) -> int:
    """``value`` as Java's long arithmetic leaves it (two's complement wrap)."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    return ((value - INT64_MIN) & 0xFFFFFFFFFFFFFFFF) + INT64_MIN


def control_type(record: Record) -> int:
    """The type code in a control record's key (compare with ControlType); CorruptBatch if unreadable."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        raise CorruptBatch("control record key shorter than version + type")
    _version, type_code = _CONTROL_KEY.unpack_from(record.key)
    return type_code


def build_end_txn_marker(
    control: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch, as MemoryRecords.withEndTransactionMarker writes it.

    One control record keyed (version 0, type) with value (version 0, coordinatorEpoch) in a
    transactional control batch.
    """
    key = _CONTROL_KEY.pack(0, control)
    value = _END_TXN_VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [NewRecord(key, value, (), timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


# Legacy message sets (magic 0 and 1), Kafka's LegacyRecord and AbstractLegacyRecordBatch:
#   offset int64 | size int32 | crc uint32 (CRC32 of magic..end) | magic int8 | attributes int8 |
#   [timestamp int64, magic 1 only] | key bytes (int32 length, -1 null) | value bytes
_LEGACY_HEAD = struct.Struct(">qiIbb")
_LEGACY_TIMESTAMP = struct.Struct(">q")
_LEGACY_LENGTH = struct.Struct(">i")
_LEGACY_MIN_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0: crc, magic, attributes, key and value lengths


def decode_legacy(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True, max_size: int = codecs.DEFAULT_MAX_SIZE
) -> Iterator[Record]:
    """Yield the records of a v0/v1 message set, unwrapping compressed wrapper messages.

    Offsets are absolute (v1 inner offsets are relative to the wrapper's, which is the last inner
    record's); v0 records have NO_TIMESTAMP; under a LogAppendTime v1 wrapper every inner record
    takes the wrapper's timestamp. A trailing partial message is ignored, as Kafka does. To turn
    an old producer's message set into a v2 batch, rebuild with NewRecord (producers' v0 offsets
    are not meaningful) — for example ``build_batch([NewRecord(r.key, r.value, (), r.timestamp) ...])``.
    """
    data = bytes(buf)
    for offset, magic, attributes, timestamp, key, value in _legacy_messages(data, verify_crc):
        codec = attributes & COMPRESSION_MASK
        if codec == codecs.NONE:
            yield Record(offset, timestamp, key, value, ())
        else:
            yield from _legacy_inner(offset, magic, attributes, timestamp, value, verify_crc, max_size)


def _legacy_inner(
    wrapper_offset: int,
    magic: int,
    attributes: int,
    wrapper_timestamp: int,
    value: bytes | None,
    verify_crc: bool,
    max_size: int,
) -> list[Record]:
    """Records of one compressed wrapper message (AbstractLegacyRecordBatch.DeepRecordsIterator)."""
    codec = attributes & COMPRESSION_MASK
    if codec not in (codecs.GZIP, codecs.SNAPPY, codecs.LZ4):
        raise CorruptBatch(f"invalid compression codec {codec} in a magic {magic} message")
    if value is None:
        raise CorruptBatch("compressed message set with a null value")
    inner = list(_legacy_messages(codecs.decompress(codec, value, max_size), verify_crc))
    if not inner:
        raise CorruptBatch("compressed message set with no inner records")
    base = None
    if magic == 1:
        last_inner = inner[-1][0]
        if wrapper_offset == 0:
            base = 0
        elif wrapper_offset < last_inner:
            raise CorruptBatch(f"wrapper offset {wrapper_offset} below the last inner offset {last_inner}")
        else:
            base = wrapper_offset - last_inner
    append_time = wrapper_timestamp if magic == 1 and attributes & TIMESTAMP_TYPE_MASK else None
    records = []
    for offset, inner_magic, inner_attributes, timestamp, key, inner_value in inner:
        if inner_magic != magic:
            raise CorruptBatch(f"inner message magic {inner_magic} does not match wrapper magic {magic}")
        if inner_attributes & COMPRESSION_MASK:
            raise CorruptBatch("inner messages must not be compressed")
        records.append(
            Record(
                offset if base is None else base + offset,
                timestamp if append_time is None else append_time,
                key,
                inner_value,
                (),
            )
        )
    return records


def _legacy_messages(data: bytes, verify_crc: bool) -> Iterator[tuple[int, int, int, int, bytes | None, bytes | None]]:
    """(offset, magic, attributes, timestamp, key, value) per whole message in ``data``."""
    pos, end = 0, len(data)
    while end - pos >= LOG_OVERHEAD:
        offset, size = struct.unpack_from(">qi", data, pos)
        if size < _LEGACY_MIN_SIZE:
            raise CorruptBatch(f"message size {size} smaller than the minimum record overhead")
        if size > end - pos - LOG_OVERHEAD:
            return  # partial trailing message
        start, msg_end = pos + LOG_OVERHEAD, pos + LOG_OVERHEAD + size
        pos = msg_end
        _, _, crc, magic, attributes = _LEGACY_HEAD.unpack_from(data, start - LOG_OVERHEAD)
        if magic not in (0, 1):
            raise CorruptBatch(f"message magic {magic} in a legacy message set")
        if verify_crc and zlib.crc32(data[start + 4 : msg_end]) != crc:
            raise CorruptBatch(f"message CRC32 mismatch at offset {offset}")
        field = start + 6
        if magic == 1:
            if msg_end - field < 16:
                raise CorruptBatch("magic 1 message too short for its timestamp")
            (timestamp,) = _LEGACY_TIMESTAMP.unpack_from(data, field)
            field += 8
        else:
            timestamp = NO_TIMESTAMP
        key, field = _legacy_bytes(data, field, msg_end)
        value, field = _legacy_bytes(data, field, msg_end)
        yield offset, magic, attributes, timestamp, key, value


def _legacy_bytes(data: bytes, pos: int, msg_end: int) -> tuple[bytes | None, int]:
    if msg_end - pos < 4:
        raise CorruptBatch("message ends inside a length field")
    (length,) = _LEGACY_LENGTH.unpack_from(data, pos)
    pos += 4
    if length < 0:
        return None, pos
    if length > msg_end - pos:
        raise CorruptBatch(f"message field of {length} bytes runs past the message")
    return data[pos : pos + length], pos + length


def rebuild_batch(
    header: BatchHeader,
    records: Sequence[RecordInput],
    *,
    compression: int | None = None,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """A batch holding ``records`` with ``header``'s offsets, producer fields and timestamp type.

    What Kafka does when it rewrites a batch in place: compaction (MemoryRecords.buildRetainedRecordsInto,
    the batch's own codec) and recompression to a topic's compression.type (LogValidator). maxTimestamp is
    ``max_timestamp`` if given, else the header's for LogAppendTime, else the records' largest.
    """
    if max_timestamp is None and header.log_append_time:
        max_timestamp = header.max_timestamp
    return build_batch(
        records,
        base_offset=header.base_offset,
        base_timestamp=base_timestamp,
        compression=header.compression if compression is None else compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
        log_append_time=header.log_append_time,
        max_timestamp=max_timestamp,
        last_offset_delta=header.last_offset_delta,
    )
