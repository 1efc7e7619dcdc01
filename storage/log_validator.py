"""What a producer's batches must pass before they are appended, and their conversion (Kafka's LogValidator).

`validate_batches` runs the checks of Kafka's UnifiedLog.analyzeAndValidateRecords and
LogValidator on every batch: header (magic, lengths, baseOffset 0, max.message.bytes, CRC-32C,
count vs lastOffsetDelta, no control batch, a sequence for a producer id), then every record in
one pass (wire.batch_validation, decompressing if needed) and every CreateTime record's timestamp
against message.timestamp.before/after.max.ms. Nothing is written unless every batch passes.

`convert_batches` handles the two topic configs that change bytes, as in Kafka: a compacted topic
refuses records without a key, and a topic whose ``compression.type`` is a codec (not
``producer``) stores every batch in that codec, so a batch in another codec is rebuilt. Batches
that need neither are passed through untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from logway.storage.config import LogConfig
from logway.storage.errors import CorruptRecord, InvalidRecord, InvalidTimestamp, RecordTooLarge
from logway.wire.batch import NO_PRODUCER_ID, BatchHeader, CorruptBatch, compute_crc, iter_headers, validate_batch
from logway.wire.batch_validation import MalformedRecords, RecordsSummary, check_batch, summarize, validate_records
from logway.wire.records import decode_batch, rebuild_batch

NO_TIMESTAMP = -1


@dataclass(slots=True)
class ValidBatch:
    """A batch that passed validation: where it is in the append buffer, its header, what its records hold."""

    pos: int
    header: BatchHeader
    records: RecordsSummary


def validate_batches(
    view: memoryview, config: LogConfig, now_ms: int, topic_partition: str, *, coordinator: bool = False
) -> list[ValidBatch]:
    """Check every batch in ``view``; raise the Kafka error of the first one that fails.

    ``coordinator``: a coordinator's own transactional write, which carries a producer id without sequences.
    """
    batches = []
    pos = 0
    while pos < len(view):
        batch = _validate_one(view, pos, config, now_ms, topic_partition, coordinator)
        batches.append(batch)
        pos += batch.header.size
    return batches


def _validate_one(
    view: memoryview, pos: int, config: LogConfig, now_ms: int, topic_partition: str, coordinator: bool = False
) -> ValidBatch:
    """One batch, in Kafka's order: its framing, its header fields and CRC, every record, every timestamp."""
    scanned = check_batch(view, pos)  # the usual batch: header and records read in one call
    header = _parse_header(view, pos) if scanned is None else BatchHeader(*scanned[0])
    _check_header(view, pos, header, config, topic_partition, coordinator)
    if scanned is None:
        records = _validate_records(view, pos, header, topic_partition)
    else:
        records = summarize(header, *scanned[1:])
    try:
        _check_timestamps(header, records, config, now_ms)
    except InvalidTimestamp as e:
        if "out of range" not in str(e):
            raise
        raise _out_of_range(view, pos, header, config, now_ms) from None
    return ValidBatch(pos, header, records)


def _parse_header(view: memoryview, pos: int) -> BatchHeader:
    """The header of a batch `check_batch` did not take (compressed, or with a problem to name)."""
    try:
        return validate_batch(view, pos, check_crc=False)
    except CorruptBatch as e:
        raise CorruptRecord(str(e)) from None


def _check_header(
    view: memoryview, pos: int, header: BatchHeader, config: LogConfig, topic_partition: str, coordinator: bool
) -> None:
    """The header fields and the CRC-32C, as Kafka's analyzeAndValidateRecords and LogValidator check them."""
    if header.base_offset != 0:
        raise InvalidRecord(f"The baseOffset of the record batch in the append to {topic_partition} should be 0, "
                            f"but it is {header.base_offset}")
    if header.size > config.max_message_bytes:
        raise RecordTooLarge(f"The record batch size in the append to {topic_partition} is {header.size} bytes "
                             f"which exceeds the maximum configured value of {config.max_message_bytes}.")
    if compute_crc(view, pos, header.size) != header.crc:
        raise CorruptRecord(f"Record is corrupt (stored crc = {header.crc}) in topic partition {topic_partition}.")
    if header.records_count <= 0 or header.records_count != header.last_offset_delta + 1:
        raise InvalidRecord(f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of records "
                            f"{header.records_count} in topic partition {topic_partition}")
    if header.is_control:
        raise InvalidRecord(f"Clients are not allowed to write control records in topic partition {topic_partition}")
    if header.producer_id != NO_PRODUCER_ID and header.base_sequence < 0 and not coordinator:
        raise InvalidRecord(f"Invalid sequence number {header.base_sequence} in record batch with producerId "
                            f"{header.producer_id} in topic partition {topic_partition}")


def _validate_records(view: memoryview, pos: int, header: BatchHeader, topic_partition: str) -> RecordsSummary:
    """Every record of a batch `check_batch` did not take, decompressed if need be."""
    try:
        return validate_records(view, pos, header)
    except MalformedRecords as e:  # Kafka's InvalidRecordException from the record iterator
        raise InvalidRecord(f"{e} in topic partition {topic_partition}") from None
    except CorruptBatch as e:
        raise CorruptRecord(f"{e} in topic partition {topic_partition}") from None


def _out_of_range(view: memoryview, pos: int, header: BatchHeader, config: LogConfig, now_ms: int) -> InvalidTimestamp:
    """The error for a batch with records outside the timestamp bounds; the records are named only when asked."""
    low, high = now_ms - config.message_timestamp_before_max_ms, now_ms + config.message_timestamp_after_max_ms
    raw = bytes(view[pos : pos + header.size])  # the request buffer may be reused before the records are named
    return InvalidTimestamp("One or more records have been rejected due to invalid timestamp",
                            lambda: _timestamp_errors(raw, low, high))


def _decoded(raw: bytes) -> list:
    """The records of a batch already validated: only for naming the offending ones once a batch is refused."""
    return decode_batch(raw, verify_crc=False).records


def _timestamp_errors(raw: bytes, low: int, high: int) -> tuple[tuple[int, str], ...]:
    """Every record outside [low, high], as Kafka's LogValidator.validateTimestamp names them."""
    errors = []
    for i, record in enumerate(_decoded(raw)):
        if record.timestamp != NO_TIMESTAMP and not low <= record.timestamp <= high:
            errors.append((i, f"Timestamp {record.timestamp} of message with offset {i} is out of range. "
                              f"The timestamp should be within [{low}, {high}]"))
    return tuple(errors)


def _keyless_errors(view: memoryview, batches: list[ValidBatch], topic_partition: str) -> InvalidRecord:
    """Kafka's LogValidator.validateKey for each keyless record, reported as a RecordValidationException (its
    message shows the first three by index; the records are named only when asked: see RecordErrors)."""
    message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    raws = [bytes(view[b.pos : b.pos + b.header.size]) for b in batches if b.records.null_keys]

    def name_records() -> tuple[tuple[int, str], ...]:
        return tuple((i, message) for raw in raws for i, record in enumerate(_decoded(raw)) if record.key is None)

    total = sum(b.records.null_keys for b in batches)
    return InvalidRecord(f"One or more records have been rejected due to {total} record errors in total, and only "
                         "showing the first three errors at most", name_records)


def _check_timestamps(header: BatchHeader, records: RecordsSummary, config: LogConfig, now_ms: int) -> None:
    """Kafka's LogValidator.validateTimestamp (KIP-937) for every record, by the batch's smallest and largest."""
    if config.log_append_time:
        if header.log_append_time:
            raise InvalidTimestamp("Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.")
        return
    low, high = now_ms - config.message_timestamp_before_max_ms, now_ms + config.message_timestamp_after_max_ms
    for timestamp in (records.min_timestamp, records.max_timestamp):
        if timestamp is not None and timestamp != NO_TIMESTAMP and not low <= timestamp <= high:
            raise InvalidTimestamp(
                f"Timestamp {timestamp} of message is out of range. The timestamp should be within [{low}, {high}]"
            )
    if header.log_append_time and records.max_timestamp == NO_TIMESTAMP:
        raise InvalidTimestamp("Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.")


def convert_batches(
    view: memoryview,
    batches: list[ValidBatch],
    *,
    topic_partition: str,
    compacted: bool,
    codec: int | None,
    max_message_bytes: int,
) -> tuple[memoryview, list[ValidBatch]]:
    """Refuse keyless records on a compacted topic and recompress batches not in ``codec``.

    Returns the buffer and batches to write: the same ones when no byte changes. Rebuilt batches
    keep the producer id, epoch, base sequence, transactional flag, record timestamps, offset
    deltas and lastOffsetDelta (so sequence numbers still line up); their size is checked against
    max.message.bytes again, as Kafka's UnifiedLog.append does after recompression.
    """
    if compacted and any(batch.records.null_keys for batch in batches):
        raise _keyless_errors(view, batches, topic_partition)
    if codec is None or all(batch.header.compression == codec for batch in batches):
        return view, batches
    parts: list[bytes | memoryview] = []
    for batch in batches:
        raw = view[batch.pos : batch.pos + batch.header.size]
        if batch.header.compression == codec:
            parts.append(raw)
            continue
        rebuilt = rebuild_batch(batch.header, decode_batch(raw, verify_crc=False).records, compression=codec)
        if len(rebuilt) > max_message_bytes:
            raise RecordTooLarge(
                f"Message batch size is {len(rebuilt)} bytes in append to partition {topic_partition} "
                f"which exceeds the maximum configured size of {max_message_bytes}."
            )
        parts.append(rebuilt)
    converted = memoryview(bytearray(b"".join(parts)))
    # The records (so their summaries) are the same; only positions and headers moved.
    moved = [
        ValidBatch(pos, header, batch.records)
        for (pos, header), batch in zip(iter_headers(converted, check_crc=False), batches, strict=True)
    ]
    return converted, moved
