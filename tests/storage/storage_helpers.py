"""Storage test helpers: a tiny v2 batch builder (uncompressed records, varints) and a fake clock."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

NOW = 1_700_000_000_000  # a fixed wall clock (ms) for tests


def _varint(value: int) -> bytes:
    """Kafka's zigzag varint/varlong."""
    zz = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zz & ~0x7F:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


def make_batch(
    values: Sequence[bytes],
    *,
    timestamps: Sequence[int] | None = None,
    keys: Sequence[bytes | None] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytearray:
    """One valid uncompressed v2 record batch with baseOffset 0 and a correct CRC-32C."""
    timestamps = list(timestamps) if timestamps is not None else [NOW] * len(values)
    keys = list(keys) if keys is not None else [None] * len(values)
    base_ts = timestamps[0]
    records = bytearray()
    for i, (value, ts, key) in enumerate(zip(values, timestamps, keys, strict=True)):
        body = b"\x00" + _varint(ts - base_ts) + _varint(i) + _bytes_field(key) + _bytes_field(value) + _varint(0)
        records += _varint(len(body)) + body
    after_crc = struct.pack(
        ">hiqqqhii", 0, len(values) - 1, base_ts, max(timestamps), producer_id, producer_epoch, base_sequence, len(values)
    ) + records
    batch_length = 4 + 1 + 4 + len(after_crc)
    return bytearray(
        struct.pack(">qiibI", 0, batch_length, -1, 2, crc32c.crc32c(after_crc)) + after_crc
    )


class FakeClock:
    """A settable wall clock in ms."""

    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def keyed_batch(
    pairs: Sequence[tuple[bytes | None, bytes | None]],
    *,
    codec: int = 0,
    timestamp: int = NOW,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytearray:
    """A v2 batch of (key, value) records built by wire.records (any codec; value None is a tombstone)."""
    from logway.wire.records import NewRecord, build_batch

    return bytearray(
        build_batch(
            [NewRecord(k, v, (), timestamp) for k, v in pairs],
            compression=codec,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=transactional,
        )
    )


def log_batches(plog):
    """Every decoded batch of a partition log from its start offset, read the way a consumer fetches."""
    from logway.wire.records import decode_batches

    batches = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read_bytes(offset, 1 << 20)
        if not data:
            break
        decoded = list(decode_batches(data))
        batches.extend(decoded)
        offset = decoded[-1].header.last_offset + 1
    return batches


def log_records(plog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in a partition log."""
    return [(r.offset, r.key, r.value) for b in log_batches(plog) for r in b.records]
