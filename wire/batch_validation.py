"""Record-level validation of a v2 batch on append: one pass over every record (Kafka's LogValidator).

Kafka's broker reads every record of every batch a producer sends (DefaultRecordBatch's record
iterator, decompressing if needed) before it appends anything, so a batch that lies about its
records never reaches the log. This module does the same checks, sans-IO, on one batch:

- compression attribute: codes 5-7 name no codec, and compressed record data must decompress
  (Kafka answers both with UNKNOWN_SERVER_ERROR, an unmapped IllegalArgumentException or
  KafkaException("Failed to decompress record stream"); we answer CORRUPT_MESSAGE, the code for
  record bytes that cannot be read; it is retriable for the Java producer, as Kafka's own is not);
- every record: length varint within the data, then attributes, timestampDelta varlong,
  offsetDelta varint, key, value and headers exactly filling that length (DefaultRecord.readFrom:
  "Invalid record size", "Found invalid number of record headers", "Invalid negative header key
  size", "Found invalid record structure"), varints at most 5 / 10 bytes;
- the header's recordsCount records fill the data exactly ("Incorrect declared batch size,
  premature EOF reached" / "records still remaining in file");
- offsetDelta equals the record's index. Stricter than Kafka, which keeps an uncompressed v2 batch
  with gaps as it is and rebuilds a compressed one: every client writes consecutive deltas, and a
  gap or a delta past lastOffsetDelta makes consumers see offsets outside the batch's range.

All of these are Kafka's InvalidRecordException, INVALID_RECORD: `MalformedRecords` here. The
header-level checks (count == lastOffsetDelta + 1, CRC-32C, base offset) stay with the caller.

The scan also returns what the caller needs from the records without reading them again: the
smallest and largest record timestamp (Kafka checks every CreateTime record against
message.timestamp.before/after.max.ms and rewrites maxTimestamp to the records' largest) and the
number of null keys (a compacted topic refuses them).

The per-record loop runs in a small C helper (`logway.wire._batch_scan`, built from
``wire/_batch_scan.c``) when it is built; `scan_records_py` is the same loop in Python, used
without the helper and tested to agree with it. Measured (2 shared cores, 1 MiB batches): the C
scan takes about 10 ns a record (1 KiB or 100 B records), the Python loop about 4 us, which would
more than double the broker's produce CPU.

A compressed batch is decompressed and walked in one C call (`compression.native`,
``wire/_decompress_scan.c``: zlib, liblz4, libzstd, libsnappy when it loads) into a buffer
reused by every batch, with the library calls wire/compression.py makes through the Python
bindings, so both refuse the same bytes (tests/wire/test_decompress_scan.py). One 1 MiB lz4
batch of 1 KiB records: about 55 us of CPU against about 1 ms for python-lz4's decompress (a
fresh output per batch: page faults) and the scan (`python -m bench.validation`). Without the
module, wire/compression.py decompresses and the scan walks its bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from logway.wire import compression as codecs
from logway.wire.batch import BATCH_HEADER_SIZE, COMPRESSION_MASK, TIMESTAMP_TYPE_MASK, BatchHeader, CorruptBatch

try:
    from logway.wire._batch_scan import check_batch as _check_batch_c
    from logway.wire._batch_scan import scan_records as _scan_records_c
except ImportError:  # no compiler when the package was installed: the Python loop does the same checks
    _scan_records_c = _check_batch_c = None

NO_TIMESTAMP = -1
_INT64_MIN = -(2**63)
_UINT64 = 0xFFFFFFFFFFFFFFFF

# (error or None, timestamped records, smallest timestamp, largest timestamp, null keys); the timestamps
# skip records stamped NO_TIMESTAMP (Kafka skips them in validateTimestamp too) and are 0 when none is.
ScanResult = tuple[str | None, int, int, int, int]


class MalformedRecords(CorruptBatch):
    """Records inside a well-framed batch that do not parse as the header says (INVALID_RECORD)."""


@dataclass(frozen=True, slots=True)
class RecordsSummary:
    """What the append path needs from a batch's records once they are known to be well formed."""

    min_timestamp: int | None  # smallest record timestamp other than NO_TIMESTAMP; None if every record has none
    max_timestamp: int  # Kafka's maxBatchTimestamp: the largest record timestamp, at least NO_TIMESTAMP
    null_keys: int


def validate_records(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, *, max_size: int = codecs.DEFAULT_MAX_SIZE
) -> RecordsSummary:
    """Check every record of the batch at ``pos`` (its header already validated); one pass, no copies if uncompressed.

    Raises CorruptBatch for an unknown codec or undecodable compressed data, MalformedRecords for
    records that contradict the header or their own lengths.
    """
    data = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size]
    codec = header.attributes & COMPRESSION_MASK
    if codec == codecs.NONE:
        scanned = scan_records(data, header.records_count, header.base_timestamp)
    elif codec in codecs.CODEC_BY_CODE:
        scanned = scan_compressed(codec, data, header.records_count, header.base_timestamp, max_size)
    else:
        # CompressionType.forId: "Unknown compression type id".
        raise CorruptBatch(f"Unknown compression type id: {codec}")
    error, timestamped, low, high, null_keys = scanned
    if error is not None:
        raise MalformedRecords(error)
    return summarize(header, timestamped, low, high, null_keys)


def summarize(header: BatchHeader, timestamped: int, low: int, high: int, null_keys: int) -> RecordsSummary:
    """The summary of a batch's records from a scan that found them well formed."""
    if header.attributes & TIMESTAMP_TYPE_MASK:
        # Every record of a LogAppendTime batch reads as the batch's maxTimestamp (DefaultRecordBatch).
        stamp = header.max_timestamp
        return RecordsSummary(None if stamp == NO_TIMESTAMP else stamp, stamp, null_keys)
    if not timestamped:
        return RecordsSummary(None, NO_TIMESTAMP, null_keys)
    return RecordsSummary(low, max(high, NO_TIMESTAMP), null_keys)


def scan_records(data: bytes | bytearray | memoryview, count: int, base_timestamp: int) -> ScanResult:
    """Walk ``count`` records filling ``data``: the C helper when built, else `scan_records_py`."""
    if _scan_records_c is not None:
        return _scan_records_c(data, count, base_timestamp)
    return scan_records_py(data, count, base_timestamp)


def scan_compressed(codec: int, data: bytes | bytearray | memoryview, count: int, base_timestamp: int,
                    max_size: int = codecs.DEFAULT_MAX_SIZE) -> ScanResult:
    """Decompress ``data`` (at most ``max_size`` bytes) and walk its ``count`` records: in one C call for the codecs
    of `compression.native` when it is built, else `codecs.decompress` and `scan_records`.

    Raises DecompressionError (DecompressedTooLarge past ``max_size``) for data the codec cannot decode.
    """
    native = codecs.native
    if native is not None and codec in native.CODECS:
        return codecs.call_native(native.decompress_scan, codec, data, count, base_timestamp, max_size)
    return scan_records(codecs.decompress(codec, data, max_size), count, base_timestamp)


def check_batch(buf: bytes | bytearray | memoryview, pos: int) -> tuple[tuple, int, int, int, int] | None:
    """The common case in one call (the C helper): for an uncompressed v2 batch at ``pos`` that is well framed and
    whose records scan cleanly, ``(header fields, timestamped, min_ts, max_ts, null_keys)`` as `parse_header` and
    `scan_records` would give them; None for anything else (or without the helper), which then takes
    `validate_batch` and `validate_records`: they find and name the problem. The CRC is left to the caller."""
    if _check_batch_c is None:
        return None
    return _check_batch_c(buf, pos)


def has_compiled_scanner() -> bool:
    """Whether the C record scanner was built (the Python loop is used otherwise)."""
    return _scan_records_c is not None


def has_native_decompression() -> bool:
    """Whether compressed batches are decompressed and scanned in C (`compression.native`; snappy only when libsnappy
    loads); wire/compression.py's Python bindings otherwise."""
    return codecs.native is not None


class _Truncated(Exception):
    pass


def _varint(data, pos: int, max_bytes: int, bits: int) -> tuple[int, int]:
    """Zig-zag varint at ``pos`` as Kafka's ByteUtils reads it (bits past the width dropped); (value, next)."""
    raw = shift = 0
    for _ in range(max_bytes):
        if pos >= len(data):
            raise _Truncated
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            raw &= (1 << bits) - 1
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise ValueError


class _RecordError(Exception):
    """A record that breaks the format; the message is the answer's."""


def _skip_bytes(data, pos: int, rec_end: int, i: int, what: str, *, nullable: bool = True) -> tuple[int, bool]:
    """A varint length and that many bytes of record ``i`` (-1: null); (next position, whether null)."""
    size, pos = _varint(data, pos, 5, 32)
    if size < 0:
        if not nullable:
            raise _RecordError(f"record {i}: invalid negative {what} size {size}")
        return pos, True
    pos += size
    if pos > rec_end:
        raise _RecordError(f"record {i}: {what} runs past the record")
    return pos, False


def _scan_record(data, pos: int, end: int, i: int) -> tuple[int, int, bool]:
    """Record ``i`` at ``pos`` (DefaultRecord.readFrom): (where it ends, its timestamp delta, whether its key is null)."""
    length, pos = _varint(data, pos, 5, 32)
    if length < 0 or length > end - pos:
        raise _RecordError(f"record {i}: size {length} runs past the {end - pos} bytes left")
    rec_end = pos + length
    pos += 1  # attributes: unused in v2, not checked (DefaultRecord.readFrom)
    delta, pos = _varint(data, pos, 10, 64)
    offset_delta, pos = _varint(data, pos, 5, 32)
    if offset_delta != i:
        raise _RecordError(f"record {i}: offset delta {offset_delta}, inner offsets must be consecutive")
    pos, null_key = _skip_bytes(data, pos, rec_end, i, "key")
    pos, _ = _skip_bytes(data, pos, rec_end, i, "value")
    headers, pos = _varint(data, pos, 5, 32)
    if headers < 0 or headers > rec_end - pos:
        raise _RecordError(f"record {i}: invalid number of record headers {headers}")
    for _ in range(headers):
        pos, _ = _skip_bytes(data, pos, rec_end, i, "header key", nullable=False)
        pos, _ = _skip_bytes(data, pos, rec_end, i, "header value")
    if pos != rec_end:
        raise _RecordError(f"record {i}: size {length} but its fields take {length + pos - rec_end} bytes")
    return pos, delta, null_key


def scan_records_py(data: bytes | bytearray | memoryview, count: int, base_timestamp: int) -> ScanResult:
    """The record walk in Python; same checks, results and messages as wire/_batch_scan.c."""
    end = len(data)
    if count < 0 or count > end:  # every record takes at least one byte: refuse before looping
        return f"{count} records cannot fit in {end} bytes of record data", 0, 0, 0, 0
    timestamped = null_keys = 0
    low = high = 0
    pos = 0
    for i in range(count):
        try:
            pos, delta, null_key = _scan_record(data, pos, end, i)
        except _RecordError as exc:
            return str(exc), 0, 0, 0, 0
        except _Truncated:
            return f"record {i}: record data ends inside a varint", 0, 0, 0, 0
        except ValueError:
            return f"record {i}: varint too long", 0, 0, 0, 0
        null_keys += null_key
        # Java long arithmetic: base + delta wraps.
        timestamp = ((base_timestamp + delta - _INT64_MIN) & _UINT64) + _INT64_MIN
        if timestamp != NO_TIMESTAMP:
            if not timestamped:
                low = high = timestamp
            elif timestamp < low:
                low = timestamp
            elif timestamp > high:
                high = timestamp
            timestamped += 1
    if pos != end:
        return f"{end - pos} bytes left after the batch's {count} records", 0, 0, 0, 0
    return None, timestamped, low, high, null_keys
