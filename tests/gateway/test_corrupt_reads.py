"""Corrupt stored data answers a per-partition error; healthy partitions of the same request are served.

The gateway is stopped cleanly, so on restart it trusts the segments (as Kafka trusts a clean shutdown) and
the corruption is met only when a read reaches it: Fetch and ListOffsets must answer CORRUPT_MESSAGE for that
partition (Kafka's CorruptRecordException) and keep the connection open.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logway.wire.batch import iter_headers
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, encode_body, reader_for, request_type, response_type
from logway.wire.records import decode_batches

TOPIC = "corrupt-reads"
RECORDS = 60  # 60 batches of ~270 bytes: past index.interval.bytes, so the index skips the first batches
HEALTHY = 0
# partition -> the batchLength written over the first batch's
CORRUPTIONS = {
    1: 0x7FFFFF00,  # runs far past the end of the segment
    2: 3,  # shorter than a batch header
    3: None,  # ends 5 bytes before the end of the file: a header read there comes back short
}


def write_topic(bootstrap: str) -> list[bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1 + len(CORRUPTIONS), 1)])[TOPIC].result(15)
    values = [f"value-{i:04d}-".encode() * 12 for i in range(RECORDS)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1, "acks": "all"})
    for partition in range(1 + len(CORRUPTIONS)):
        for v in values:
            producer.produce(TOPIC, v, partition=partition)
            producer.flush(15)  # one batch per record
    assert producer.flush(15) == 0
    return values


def corrupt_first_batch_length(partition_dir: Path, length: int | None) -> None:
    log_file = sorted(partition_dir.glob("*.log"))[0]
    size = log_file.stat().st_size
    with open(log_file, "r+b") as f:
        f.seek(8)  # batchLength of the batch at byte 0
        f.write(struct.pack(">i", size - 5 - 12 if length is None else length))


def evict_from_page_cache(data_dir: Path, topic: str) -> None:
    """fsync the topic's files and drop them from the page cache, so the next read comes from disk."""
    for path in data_dir.glob(f"{topic}-*/*"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def request_frame(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    payload = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    payload += encode_body(build(request_type(api_key, version), body))
    return struct.pack(">i", len(payload)) + payload


def roundtrip(s: socket.socket, api_key: int, version: int, correlation_id: int, body: dict):
    s.sendall(request_frame(api_key, version, correlation_id, body))
    (size,) = struct.unpack(">i", _exact(s, 4))
    frame = _exact(s, size)
    assert struct.unpack_from(">i", frame)[0] == correlation_id
    response, _ = reader_for(response_type(api_key, version))(frame, 4)
    return response


def _exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "the gateway closed the connection"
        buf += chunk
    return buf


def fetch_all(s: socket.socket, correlation_id: int) -> dict[int, tuple[int, bytes]]:
    partitions = [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20} for p in range(4)]
    response = roundtrip(s, 1, 4, correlation_id, {
        "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 1 << 24, "isolation_level": 0,
        "topics": [{"topic": TOPIC, "partitions": partitions}],
    })
    [topic] = response.responses
    return {p.partition_index: (p.error_code, p.records or b"") for p in topic.partitions}


def test_corrupt_batch_is_a_partition_error_and_the_connection_lives(gateway_process):
    gw = gateway_process.start()
    values = write_topic(gw.bootstrap)
    gw.stop()  # clean shutdown: the restart trusts the segments
    for partition, length in CORRUPTIONS.items():
        corrupt_first_batch_length(gw.data_dir / f"{TOPIC}-{partition}", length)
    evict_from_page_cache(gw.data_dir, TOPIC)
    gw.start()

    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        # The first fetch reads evicted files (paged in off the event loop, gateway/cold_reads.py), the second
        # cached ones: the same answers. The same connection answers again after the errors.
        for attempt in range(2):
            result = fetch_all(s, correlation_id=10 + attempt)
            error, records = result[HEALTHY]
            assert error == ErrorCode.none
            assert [r.value for b in decode_batches(records) for r in b.records] == values
            for partition in CORRUPTIONS:
                assert result[partition] == (ErrorCode.corrupt_message, b""), partition

        # ListOffsets by timestamp walks the batch headers: the same per-partition answer.
        response = roundtrip(s, 2, 1, 20, {"replica_id": -1, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": p, "timestamp": 0} for p in range(4)]}]})
        by_partition = {p.partition_index: p for p in response.topics[0].partitions}
        assert (by_partition[HEALTHY].error_code, by_partition[HEALTHY].offset) == (ErrorCode.none, 0)
        for partition in CORRUPTIONS:
            assert by_partition[partition].error_code == ErrorCode.corrupt_message

    # What a librdkafka user sees: every record of the healthy partition, an error event for each bad one.
    consumer = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": "corrupt-reads", "enable.auto.commit": False})
    got, errors = [], set()
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(4)])
        deadline = time.monotonic() + 20
        while (len(got) < RECORDS or len(errors) < len(CORRUPTIONS)) and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.2):
                if m.error() is None:
                    got.append((m.partition(), m.value()))
                elif m.error().code() == KafkaError.INVALID_MSG:  # librdkafka's name for CORRUPT_MESSAGE (2)
                    errors.add(m.partition())
    finally:
        consumer.close()
    assert got == [(HEALTHY, v) for v in values]
    assert errors == set(CORRUPTIONS)
    assert gw.proc.poll() is None, "the gateway is still running"


def test_a_damaged_offsets_batch_costs_only_its_own_commit(gateway_process):
    gw = gateway_process.start()
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    admin.create_topics([NewTopic("committed", 1, 1)])["committed"].result(15)
    del admin
    conf = {"bootstrap.servers": gw.bootstrap, "group.id": "damaged-group", "enable.auto.commit": False}
    consumer = Consumer(conf)
    for offset in (5, 9, 11, 17):  # one batch per commit in the group's offsets partition
        consumer.commit(offsets=[TopicPartition("committed", 0, offset)], asynchronous=False)
    consumer.close()
    gw.stop()

    [offsets_log] = [f for f in gw.data_dir.glob("__consumer_offsets-*/*.log") if f.stat().st_size]
    data = offsets_log.read_bytes()
    positions = [(pos, h.size) for pos, h in iter_headers(data)]
    assert len(positions) == 4
    with open(offsets_log, "r+b") as f:  # flip the last byte of the 2nd and of the last batch: only CRCs can tell
        for pos, size in (positions[1], positions[3]):
            f.seek(pos + size - 1)
            f.write(bytes([data[pos + size - 1] ^ 0xFF]))
    gw.start()

    consumer = Consumer(conf)
    try:
        [tp] = consumer.committed([TopicPartition("committed", 0)], timeout=15)
    finally:
        consumer.close()
    assert tp.offset == 11  # the last commit whose batch is intact
    assert gw.proc.poll() is None, "the gateway is still running"
    assert gw.log_path.read_text().count("Skipping damaged batch") == 2
