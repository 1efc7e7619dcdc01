"""Record batches against kafka-python 3.x's builder and reader, both ways, for every codec."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from logway.wire import compression
from logway.wire.batch import BATCH_HEADER_SIZE, parse_header
from logway.wire.records import Header, NewRecord, Record, build_batch, decode_batch

CODECS = sorted(compression.CODEC_BY_CODE)
blobs = st.none() | st.binary(max_size=30)
records_strategy = st.lists(
    st.builds(
        NewRecord,
        key=blobs,
        value=blobs,
        headers=st.lists(st.tuples(st.text(max_size=6), blobs), max_size=2),
        # kafka-python starts maxTimestamp at the first record's, Java at -1: equal for timestamps >= -1.
        timestamp=st.integers(-1, 2**62),
    ),
    min_size=1,
    max_size=15,
)


def kafka_python_build(records: list[NewRecord], codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**30,
    )
    for offset, r in enumerate(records):
        builder.append(offset, r.timestamp, r.key, r.value, list(r.headers))
    return bytes(builder.build())


def kafka_python_read(raw: bytes) -> list[Record]:
    batch = DefaultRecordBatch(raw)
    assert batch.validate_crc()
    return [Record(r.offset, r.timestamp, r.key, r.value, tuple(Header(k, v) for k, v in r.headers)) for r in batch]


def as_records(records: list[NewRecord]) -> list[Record]:
    return [
        Record(i, r.timestamp, r.key, r.value, tuple(Header(k, v) for k, v in r.headers)) for i, r in enumerate(records)
    ]


@settings(max_examples=40, deadline=None)
@given(records=records_strategy, codec=st.sampled_from(CODECS))
def test_we_read_kafka_python_batches(records: list[NewRecord], codec: int) -> None:
    assert decode_batch(kafka_python_build(records, codec)).records == as_records(records)


@settings(max_examples=40, deadline=None)
@given(records=records_strategy, codec=st.sampled_from(CODECS))
def test_kafka_python_reads_our_batches(records: list[NewRecord], codec: int) -> None:
    assert kafka_python_read(build_batch(records, compression=codec)) == as_records(records)


def compressible(n: int = 30) -> list[NewRecord]:
    """Records that compress well, so kafka-python keeps the compression it was asked for."""
    return [
        NewRecord(
            b"user-%d" % (i % 4), b'{"event": "click", "n": %d}' % i * 3, [("src", b"web")], 1_700_000_000_000 + i
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", [compression.NONE, compression.SNAPPY])
def test_same_bytes_as_kafka_python(codec: int) -> None:
    # kafka-python writes partitionLeaderEpoch 0 where the Java client writes -1; otherwise its
    # layout is MemoryRecordsBuilder's, and its snappy uses the same library as ours.
    ours = build_batch(compressible(), compression=codec, partition_leader_epoch=0)
    assert ours == kafka_python_build(compressible(), codec)


@pytest.mark.parametrize("codec", [compression.GZIP, compression.LZ4, compression.ZSTD])
def test_same_batch_as_kafka_python_apart_from_the_compressed_stream(codec: int) -> None:
    # gzip (level 9, mtime now), lz4 (content size stored) and zstd (content size stored) streams
    # differ from the Java client's, which we follow; everything else must be equal.
    ours = build_batch(compressible(), compression=codec, partition_leader_epoch=0)
    theirs = kafka_python_build(compressible(), codec)
    ours_header, their_header = parse_header(ours), parse_header(theirs)
    for field in ("base_offset", "attributes", "last_offset_delta", "base_timestamp", "max_timestamp", "records_count"):
        assert getattr(ours_header, field) == getattr(their_header, field), field
    assert compression.decompress(codec, ours[BATCH_HEADER_SIZE:]) == compression.decompress(
        codec, theirs[BATCH_HEADER_SIZE:]
    )
