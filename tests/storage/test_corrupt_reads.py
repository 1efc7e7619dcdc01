"""Reads over corrupt stored batches: the batches before are served, the bad one raises CorruptRecord.

The log is loaded after a clean shutdown (Kafka trusts it and does not re-read the segments), so a batch
length damaged on disk is met only by reads: nothing may raise struct.error or hand out a slice that runs
past the segment (a Fetch would send fewer bytes than it announced).
"""

from __future__ import annotations

import struct

import pytest
from storage_helpers import NOW, make_batch

from logway.storage.errors import CorruptRecord, KafkaStorageError
from logway.wire.batch import iter_headers
from logway.wire.records import decode_batches

# One index entry, near batch 13: the clean-shutdown load checks only the batches after it, and reads below
# it walk the batch chain from byte 0.
PROPS = {"index.interval.bytes": "1500"}
BATCHES = 20


def written_log(open_log):
    plog = open_log(PROPS)
    for i in range(BATCHES):
        plog.append(make_batch([bytes([65 + i]) * 50], timestamps=[NOW + i]), now_ms=NOW)
    plog.close()
    log_file = plog.dir / f"{0:020d}.log"
    positions = [pos for pos, _ in iter_headers(log_file.read_bytes())]
    assert plog._segments[0].offset_index.last_position > positions[10]
    return log_file, positions


def set_length(log_file, position: int, length: int) -> None:
    with open(log_file, "r+b") as f:
        f.seek(position + 8)
        f.write(struct.pack(">i", length))


def offsets(data: bytes) -> list[int]:
    return [r.offset for b in decode_batches(data) for r in b.records]


@pytest.mark.parametrize("length", [0x7FFFFF00, 5, -1], ids=["past-the-end", "too-short", "negative"])
def test_an_impossible_length_ends_the_readable_prefix(open_log, length):
    log_file, positions = written_log(open_log)
    set_length(log_file, positions[6], length)
    plog = open_log(PROPS, clean_shutdown=True)
    assert plog.log_end_offset == BATCHES  # a clean shutdown is trusted: the damage is not seen at load
    assert offsets(plog.read_bytes(0, positions[10])) == [0, 1, 2, 3, 4, 5]
    assert offsets(plog.read_bytes(2, 200, min_one=True)) == [2]
    with pytest.raises(CorruptRecord, match="byte"):
        plog.read(6, 1 << 20)
    with pytest.raises(CorruptRecord):
        plog.read(8, 1 << 20)  # reaching a later offset walks over the bad batch
    with pytest.raises(CorruptRecord):
        plog.offset_for_timestamp(NOW + 8)
    assert plog.offset_for_timestamp(NOW + 3) == (3, NOW + 3)


def test_a_length_that_leads_to_no_batch_withholds_that_batch(open_log):
    log_file, positions = written_log(open_log)
    set_length(log_file, positions[4], positions[7] - positions[4] - 12 + 20)  # lands 20 bytes into batch 7
    plog = open_log(PROPS, clean_shutdown=True)
    assert offsets(plog.read_bytes(0, positions[10])) == [0, 1, 2, 3]
    with pytest.raises(CorruptRecord):
        plog.read(4, 1 << 20)
    with pytest.raises(CorruptRecord):
        plog.read(4, 10, min_one=True)  # KIP-74's oversized first batch is checked the same way


def test_a_length_ending_just_short_of_the_file(open_log):
    log_file, positions = written_log(open_log)
    size = log_file.stat().st_size
    set_length(log_file, 0, size - 5 - 12)  # the next header would be read 5 bytes before the end
    plog = open_log(PROPS, clean_shutdown=True)
    with pytest.raises(CorruptRecord):
        plog.read(0, 1 << 20)
    with pytest.raises(CorruptRecord):
        plog.read(3, 1 << 20)
    with pytest.raises(CorruptRecord, match="leads to no batch header"):
        plog.offset_for_timestamp(NOW)  # found before the whole bogus "batch" is read into memory


def test_an_io_error_on_read_is_a_storage_error(open_log):
    """A descriptor that fails (here: closed under the log, as a failed disk would) is KAFKA_STORAGE_ERROR."""
    plog = open_log(PROPS)
    for i in range(3):
        plog.append(make_batch([b"x" * 50], timestamps=[NOW + i]), now_ms=NOW)
    plog._segments[0].close()
    for read in (lambda: plog.read(1, 1 << 20), lambda: plog.offset_for_timestamp(NOW + 1)):
        with pytest.raises(KafkaStorageError):
            read()
