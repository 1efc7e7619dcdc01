"""compression.type on a topic: batches in another codec are recompressed on append, as Kafka's LogValidator does."""

from __future__ import annotations

import pytest
from storage_helpers import NOW, log_batches

from logway.storage.errors import RecordTooLarge
from logway.wire import compression as codecs
from logway.wire.records import Header, NewRecord, build_batch

CODEC_NAMES = {codecs.NONE: "uncompressed", codecs.GZIP: "gzip", codecs.SNAPPY: "snappy", codecs.LZ4: "lz4", codecs.ZSTD: "zstd"}


def producer_batch(codec: int, *, base_sequence: int = 0, count: int = 4) -> bytearray:
    records = [
        NewRecord(b"key-%d" % i, b"value %d " % i * 30, [Header("h", b"%d" % i), ("null", None)], NOW + i)
        for i in range(count)
    ]
    return bytearray(
        build_batch(records, compression=codec, producer_id=77, producer_epoch=2, base_sequence=base_sequence)
    )


@pytest.mark.parametrize("target", list(CODEC_NAMES), ids=list(CODEC_NAMES.values()))
@pytest.mark.parametrize("source", list(CODEC_NAMES), ids=[f"from-{n}" for n in CODEC_NAMES.values()])
def test_batches_are_stored_in_the_topic_codec(open_log, source, target):
    plog = open_log({"compression.type": CODEC_NAMES[target]})
    plog.append(producer_batch(codecs.NONE, count=1), now_ms=NOW)
    sent = producer_batch(source, base_sequence=1)
    original = bytes(sent)
    result = plog.append(sent, now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (1, 4)

    stored = log_batches(plog)[1]  # decode_batches checks the CRC of what is on disk
    header = stored.header
    assert header.compression == target
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.last_offset_delta) == (77, 2, 1, 3)
    assert (header.base_offset, header.base_timestamp, header.max_timestamp) == (1, NOW, NOW + 3)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in stored.records] == [
        (1 + i, b"key-%d" % i, b"value %d " % i * 30, NOW + i) for i in range(4)
    ]
    assert stored.records[2].headers == (Header("h", b"2"), Header("null", None))
    if source == target:
        on_disk = plog.read_bytes(1, 100_000)
        assert on_disk[17:] == original[17:]  # zero-copy: only baseOffset and leader epoch were patched


def test_producer_compression_type_keeps_the_producer_bytes(open_log):
    plog = open_log({"compression.type": "producer"})
    for codec in CODEC_NAMES:
        sent = producer_batch(codec, base_sequence=4 * codec)
        original = bytes(sent)
        result = plog.append(sent, now_ms=NOW)
        assert plog.read_bytes(result.base_offset, 100_000)[17:] == original[17:]


def test_only_batches_in_another_codec_are_rebuilt_and_retries_are_still_duplicates(open_log):
    plog = open_log({"compression.type": "zstd"})
    zstd_first = producer_batch(codecs.ZSTD, base_sequence=0)
    gzip_second = producer_batch(codecs.GZIP, base_sequence=4)
    result = plog.append(bytearray(zstd_first + gzip_second), now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (0, 7)
    batches = log_batches(plog)
    assert [b.header.compression for b in batches] == [codecs.ZSTD, codecs.ZSTD]
    assert [b.header.base_offset for b in batches] == [0, 4]
    retry = plog.append(producer_batch(codecs.GZIP, base_sequence=4), now_ms=NOW)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (4, 7)


def test_log_append_time_applies_to_the_rebuilt_batch(open_log):
    plog = open_log({"compression.type": "lz4", "message.timestamp.type": "LogAppendTime"})
    result = plog.append(producer_batch(codecs.NONE), now_ms=NOW + 50)
    assert result.log_append_time_ms == NOW + 50
    [stored] = log_batches(plog)
    assert stored.header.compression == codecs.LZ4 and stored.header.log_append_time
    assert {r.timestamp for r in stored.records} == {NOW + 50}


def test_a_batch_that_grows_past_max_message_bytes_is_refused(open_log):
    compressible = bytearray(build_batch([(b"k", b"a" * 5000, ())], compression=codecs.GZIP))
    plog = open_log({"compression.type": "uncompressed", "max.message.bytes": "1000"})
    with pytest.raises(RecordTooLarge, match="exceeds the maximum configured size of 1000"):
        plog.append(compressible, now_ms=NOW)
    assert plog.log_end_offset == 0
