"""Record batch v2 header: parse, validate and patch in place, without touching the records.

Layout (Kafka "Implementation" chapter, record batch v2):

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordsCount int32 | records...

The CRC-32C covers attributes to the end of the batch; partitionLeaderEpoch sits
outside it so a broker can patch it (and baseOffset) without recomputing the CRC.
This is the only per-batch work on the produce hot path: O(batches), never O(records).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes before batchLength counts
MAGIC_V2 = 2

# Field positions relative to the start of a batch.
BASE_OFFSET_POS = 0
LENGTH_POS = 8
LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
LAST_OFFSET_DELTA_POS = 23
BASE_TIMESTAMP_POS = 27
MAX_TIMESTAMP_POS = 35
PRODUCER_ID_POS = 43
PRODUCER_EPOCH_POS = 51
BASE_SEQUENCE_POS = 53
RECORDS_COUNT_POS = 57

# attributes bits
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U = struct.Struct(">I")
_H = struct.Struct(">h")


class CorruptBatch(ValueError):
    """The bytes are not a valid v2 record batch (bad length, magic or CRC)."""


class UnsupportedMagic(CorruptBatch):
    """A legacy (v0/v1) message set where a v2 batch is required."""


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the batch occupies in a log or a request, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at Int32.MAX_VALUE (Kafka's DefaultRecordBatch.incrementSequence).
        return (self.base_sequence + self.last_offset_delta) % 2**31


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Read the 61-byte header at ``pos`` (no validation beyond having the bytes)."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptBatch(f"batch header needs {BATCH_HEADER_SIZE} bytes, have {len(buf) - pos}")
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of a batch from its attributes to its end."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + size])


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = True) -> BatchHeader:
    """Parse and check one batch at ``pos``: magic, length fields and CRC-32C."""
    if len(buf) - pos < LOG_OVERHEAD + 5:
        raise CorruptBatch("truncated batch")
    magic = buf[pos + MAGIC_POS]
    if magic != MAGIC_V2:
        raise UnsupportedMagic(f"record batch magic {magic}, only v2 is accepted")
    header = parse_header(buf, pos)
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptBatch(f"batch length {header.batch_length} shorter than a header")
    if header.size > len(buf) - pos:
        raise CorruptBatch(f"batch length {header.batch_length} runs past the {len(buf) - pos} bytes present")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptBatch("negative lastOffsetDelta or record count")
    if check_crc and compute_crc(buf, pos, header.size) != header.crc:
        raise CorruptBatch("record batch CRC-32C mismatch")
    return header


def iter_headers(buf: bytes | bytearray | memoryview, *, check_crc: bool = True):
    """Yield ``(position, header)`` for every batch in a buffer holding whole batches.

    Raises CorruptBatch if the buffer holds anything else (a partial batch included).
    """
    pos = 0
    end = len(buf)
    while pos < end:
        header = validate_batch(buf, pos, check_crc=check_crc)
        yield pos, header
        pos += header.size


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Set baseOffset in place (outside the CRC)."""
    _Q.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)


def patch_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Set partitionLeaderEpoch in place (outside the CRC)."""
    _I.pack_into(buf, pos + LEADER_EPOCH_POS, epoch)


def patch_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp_ms: int) -> None:
    """Stamp a batch with LogAppendTime: set the timestamp-type bit and maxTimestamp, then re-CRC.

    Kafka (message.timestamp.type=LogAppendTime) sets maxTimestamp to the append time and leaves
    the per-record deltas alone; readers use maxTimestamp for every record of such a batch.
    """
    patch_max_timestamp(buf, pos, size, timestamp_ms, log_append_time=True)


def patch_max_timestamp(
    buf: bytearray | memoryview, pos: int, size: int, timestamp_ms: int, *, log_append_time: bool
) -> None:
    """Set maxTimestamp and the timestamp-type bit, then re-CRC (Kafka's DefaultRecordBatch.setMaxTimestamp)."""
    (attributes,) = _H.unpack_from(buf, pos + ATTRIBUTES_POS)
    attributes = attributes | TIMESTAMP_TYPE_MASK if log_append_time else attributes & ~TIMESTAMP_TYPE_MASK
    _H.pack_into(buf, pos + ATTRIBUTES_POS, attributes)
    _Q.pack_into(buf, pos + MAX_TIMESTAMP_POS, timestamp_ms)
    _U.pack_into(buf, pos + CRC_POS, compute_crc(buf, pos, size))
