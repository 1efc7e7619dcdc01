"""The append checks that need the records themselves (the record-level part of Kafka's LogValidator).

The produce path normally touches batch headers only. Two topic configs force decoding, as in
Kafka: a compacted topic refuses records without a key, and a topic whose ``compression.type``
is a codec (not ``producer``) stores every batch in that codec, so a batch in another codec is
rebuilt. Batches that need neither are passed through untouched.
"""

from __future__ import annotations

from collections.abc import Sequence

from logway.storage.errors import CorruptRecord, InvalidRecord, RecordTooLarge
from logway.wire.batch import BatchHeader, CorruptBatch
from logway.wire.records import decode_batch, rebuild_batch


def convert_batches(
    view: memoryview,
    headers: Sequence[tuple[int, BatchHeader]],
    *,
    topic_partition: str,
    compacted: bool,
    codec: int | None,
    max_message_bytes: int,
) -> bytearray | None:
    """Check keys for a compacted topic and recompress batches not in ``codec``; None if no byte changes.

    Rebuilt batches keep the producer id, epoch, base sequence, transactional flag, record
    timestamps, offset deltas and lastOffsetDelta (so sequence numbers still line up); their
    size is checked against max.message.bytes again, as Kafka's UnifiedLog.append does after
    recompression.
    """
    decode = [compacted or (codec is not None and header.compression != codec) for _, header in headers]
    if not any(decode):
        return None
    parts: list[bytes | memoryview] = []
    changed = False
    for (pos, header), needed in zip(headers, decode, strict=True):
        raw = view[pos : pos + header.size]
        if not needed:
            parts.append(raw)
            continue
        try:
            records = decode_batch(raw, verify_crc=False).records
        except CorruptBatch as e:
            raise CorruptRecord(str(e)) from None
        if compacted and any(record.key is None for record in records):
            raise InvalidRecord(f"Compacted topic cannot accept message without key in topic partition {topic_partition}.")
        if codec is None or header.compression == codec:
            parts.append(raw)
            continue
        rebuilt = rebuild_batch(header, records, compression=codec)
        if len(rebuilt) > max_message_bytes:
            raise RecordTooLarge(
                f"Message batch size is {len(rebuilt)} bytes in append to partition {topic_partition} "
                f"which exceeds the maximum configured size of {max_message_bytes}."
            )
        parts.append(rebuilt)
        changed = True
    return bytearray(b"".join(parts)) if changed else None
