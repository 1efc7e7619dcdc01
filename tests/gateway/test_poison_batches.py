"""Poison batches over a real socket: the ProduceResponse names the error, nothing is appended, consumers go on.

A hand-made batch with a valid CRC-32C that lies about its records is sent in a raw Produce v8
request between good messages from kafka-python; a kafka-python consumer must then read exactly
the good messages at contiguous offsets (before the fix such batches were appended with error 0).

Also a disk-full append: ENOSPC is injected by wrapping ``os.write`` for the gateway's segment files
(a full disk cannot be produced cheaply for real); the gateway, its socket and the clients are real.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import time

import crc32c
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kio.serial import entity_reader
from raw_requests import read_frame

from logway.wire import compression
from logway.wire.batch import ATTRIBUTES_POS, CRC_POS, LAST_OFFSET_DELTA_POS, LENGTH_POS, RECORDS_COUNT_POS
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, encode_body, request_type, response_type
from logway.wire.records import build_batch
from logway.wire.varint import encode_varint

PRODUCE_VERSION = 8  # the first version with error_message


def _record(offset_delta: int, value: bytes, size_fix: int = 0) -> bytes:
    body = b"\x00\x00" + encode_varint(offset_delta) + encode_varint(-1) + encode_varint(len(value)) + value + b"\x00"
    return encode_varint(len(body) + size_fix) + body


def _batch(records_data: bytes, count: int, *, attributes: int = 0, last_offset_delta: int | None = None) -> bytes:
    """A v2 batch header with a correct CRC-32C around hand-made record bytes."""
    out = bytearray(build_batch([(None, b"x", ())]))[:61] + records_data
    struct.pack_into(">i", out, LENGTH_POS, len(out) - 12)
    struct.pack_into(">h", out, ATTRIBUTES_POS, attributes)
    struct.pack_into(">i", out, LAST_OFFSET_DELTA_POS, count - 1 if last_offset_delta is None else last_offset_delta)
    struct.pack_into(">i", out, RECORDS_COUNT_POS, count)
    struct.pack_into(">I", out, CRC_POS, crc32c.crc32c(bytes(out[ATTRIBUTES_POS:])))
    return bytes(out)


GOOD = [_record(0, b"p0"), _record(1, b"p1"), _record(2, b"p2")]

POISON = {
    # recordsCount and lastOffsetDelta agree with each other but not with the records inside
    "count says 2, 3 records inside": (_batch(b"".join(GOOD), 2), ErrorCode.invalid_record),
    "count says 4, 3 records inside": (_batch(b"".join(GOOD), 4), ErrorCode.invalid_record),
    "record length varint too long": (_batch(GOOD[0] + _record(1, b"p1", 3) + GOOD[2], 3), ErrorCode.invalid_record),
    "record length varint too short": (_batch(GOOD[0] + _record(1, b"p1", -2) + GOOD[2], 3), ErrorCode.invalid_record),
    "offset deltas not consecutive": (_batch(GOOD[0] + _record(5, b"p1") + GOOD[2], 3), ErrorCode.invalid_record),
    "trailing bytes": (_batch(b"".join(GOOD) + b"\x00\x00\x00", 3), ErrorCode.invalid_record),
    "lz4 attribute over plain records": (_batch(b"".join(GOOD), 3, attributes=compression.LZ4), ErrorCode.corrupt_message),
    "gzip attribute over garbage": (_batch(b"\x1f\x8b garbage", 3, attributes=compression.GZIP), ErrorCode.corrupt_message),
    "unknown codec 5": (_batch(b"".join(GOOD), 3, attributes=5), ErrorCode.corrupt_message),
    "unknown codec 7": (_batch(b"".join(GOOD), 3, attributes=7), ErrorCode.corrupt_message),
    # ProduceRequest.validateRecords: exactly one whole v2 batch per partition
    "two batches": (_batch(b"".join(GOOD), 3) * 2, ErrorCode.invalid_record),
    "truncated batch": (_batch(b"".join(GOOD), 3)[:-5], ErrorCode.invalid_record),
    "three bytes": (b"\x00\x00\x00", ErrorCode.invalid_record),
    "magic 1": (_batch(b"".join(GOOD), 3)[:16] + b"\x01" + _batch(b"".join(GOOD), 3)[17:], ErrorCode.invalid_record),
    "lz4 records that lie": (
        _batch(compression.compress(compression.LZ4, b"".join(GOOD)), 2, attributes=compression.LZ4),
        ErrorCode.invalid_record,
    ),
}


def _produce_raw(port: int, topic: str, records: bytes) -> tuple[int, str | None]:
    """Send one Produce v8 request (acks=-1) with ``records`` for partition 0; (error_code, error_message)."""
    body = build(request_type(0, PRODUCE_VERSION), {
        "transactional_id": None, "acks": -1, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    })
    client_id = b"poison"
    payload = struct.pack(">hhih", 0, PRODUCE_VERSION, 7, len(client_id)) + client_id + encode_body(body)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        frame = read_frame(s)
    assert struct.unpack_from(">i", frame)[0] == 7
    response, _ = entity_reader(response_type(0, PRODUCE_VERSION))(bytes(frame), 4)
    partition = response.responses[0].partition_responses[0]
    return partition.error_code, partition.error_message


def _consume(bootstrap: str, topic: str, expected: int) -> list:
    """Every record of partition 0 from the start: until ``expected`` arrived (10 s at most), then one more poll."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    records: list = []
    deadline = time.monotonic() + 10
    try:
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        for batch in consumer.poll(timeout_ms=300).values():  # anything past the expected records
            records.extend(batch)
    finally:
        consumer.close()
    return records


def test_poison_batches_are_refused_and_consumers_read_only_the_good_records(logway, topic_name):
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap, linger_ms=0)
    good = []
    for name, (batch, expected) in POISON.items():
        value = f"good before {name}".encode()
        producer.send(topic_name, value, partition=0).get(timeout=10)
        good.append(value)
        code, message = _produce_raw(logway.port, topic_name, batch)
        assert (name, code) == (name, expected)
        assert message
    producer.send(topic_name, b"good at the end", partition=0).get(timeout=10)
    good.append(b"good at the end")
    producer.close()

    records = _consume(logway.bootstrap, topic_name, len(good))
    assert [r.value for r in records] == good
    assert [r.offset for r in records] == list(range(len(good)))


@pytest.mark.parametrize("codec", ["none", "lz4", "gzip", "snappy", "zstd"])
def test_real_client_batches_pass_validation(logway, topic_name, codec):
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap, compression_type=None if codec == "none" else codec,
                             linger_ms=20)
    values = [b"v%d" % i * (i % 7) for i in range(200)]
    for i, value in enumerate(values):
        producer.send(topic_name, value, key=b"k%d" % i if i % 3 else None, headers=[("h", b"x")] * (i % 2),
                      partition=0)
    producer.flush(timeout=10)
    producer.close()
    assert [r.value for r in _consume(logway.bootstrap, topic_name, len(values))] == values


def test_disk_full_answers_kafka_storage_error_and_appends_nothing(logway, topic_name, monkeypatch, caplog):
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap, linger_ms=0)
    producer.send(topic_name, b"before", partition=0).get(timeout=10)
    real_write = os.write
    data_dir = str(logway.data_dir)
    failures = []

    def full_disk(fd, data):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(data_dir) and path.endswith(".log") and not failures:
            failures.append(path)
            real_write(fd, memoryview(data)[: len(data) // 2])  # a short write, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    code, message = _produce_raw(logway.port, topic_name, build_batch([(None, b"lost", ())] * 3))
    assert code == ErrorCode.kafka_storage_error and "No space left" in message
    assert failures and any("nothing written" in r.getMessage() for r in caplog.records)
    producer.send(topic_name, b"after", partition=0).get(timeout=10)
    producer.close()
    records = _consume(logway.bootstrap, topic_name, 2)
    assert [(r.offset, r.value) for r in records] == [(0, b"before"), (1, b"after")]
