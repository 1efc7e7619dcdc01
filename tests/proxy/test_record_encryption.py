"""The record-encryption filter end to end: `logway proxy` with proxy.filter.enc.type=record-encryption in front
of a Logway broker process, real clients (librdkafka, the Java client). Through the proxy a client reads what it
wrote; the upstream's log files and a client reading the upstream directly see only ciphertext; a KEK rotation
leaves old records readable; a topic whose KEK is lost answers an error, not ciphertext."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "compat_tests" / "matrix"))
from logway.proxy.envelope import HEADER  # noqa: E402
from logway.proxy.kms import edek_kek_id  # noqa: E402
from logway.wire.protocol import read_uvarint  # noqa: E402
from logway.wire.records import decode_batches  # noqa: E402


def _encrypting(keyring: Path, *extra: str) -> tuple[str, ...]:
    return ("--override", "proxy.filters=enc", "--override", "proxy.filter.enc.type=record-encryption",
            "--override", "proxy.filter.enc.topics=enc-.*", "--override", "proxy.filter.enc.kms=file",
            "--override", f"proxy.filter.enc.kms.file.path={keyring}", *extra)


@pytest.fixture(scope="module")
def keyring(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("keys") / "keyring"


@pytest.fixture(scope="module")
def enc_proxy(tmp_path_factory, logway_upstream, proxy_process_type, keyring):
    p = proxy_process_type(tmp_path_factory.mktemp("enc-proxy"), logway_upstream.bootstrap,
                           _encrypting(keyring)).start()
    p.wait_node_port(1)
    try:
        yield p
    finally:
        p.stop()


def _create(bootstrap: str, topic: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(15)


def _produce(bootstrap: str, topic: str, records: list[tuple], **config) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    for partition, key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=list(headers), partition=partition)
    assert producer.flush(30) == 0


def _consume(bootstrap: str, topic: str, partitions: int, count: int, errors: list | None = None) -> list[tuple]:
    """``count`` records from the start of every partition; with ``errors``, until the first consumer error
    instead (collected there)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-{time.monotonic_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple] = []
    deadline = time.monotonic() + 30
    try:
        while (not errors if errors is not None else len(got) < count) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if errors is None:
                    raise AssertionError(message.error())
                errors.append(message.error())
                continue
            got.append((message.partition(), message.key(), message.value(), tuple(message.headers() or ())))
    finally:
        consumer.close()
    return got


def _records(n: int, tag: str) -> list[tuple]:
    return [(i % 3, None if i % 4 == 0 else f"key-{i}".encode(),
             None if i % 10 == 9 else f"{tag}-secret-{i:04d}-".encode() * (1 + i % 5),
             (("trace", f"t{i}".encode()),) if i % 2 else ()) for i in range(n)]


def _log_batches(upstream, topic: str):
    """Every batch of the topic in the upstream's segment files (the log holds the batches as written)."""
    for segment in sorted(Path(upstream.data_dir).glob(f"{topic}-*/*.log")):
        yield from decode_batches(segment.read_bytes())


def _segment_bytes(upstream, topic: str) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(Path(upstream.data_dir).glob(f"{topic}-*/*")) if p.is_file())


def test_librdkafka_reads_through_the_proxy_what_it_wrote_and_the_upstream_holds_only_ciphertext(
        enc_proxy, logway_upstream, topic_name, keyring):
    topic = f"enc-{topic_name}"
    _create(enc_proxy.bootstrap, topic)
    sent = _records(120, "rdk")
    _produce(enc_proxy.bootstrap, topic, sent[:60], **{"enable.idempotence": True})
    _produce(enc_proxy.bootstrap, topic, sent[60:], **{"compression.type": "zstd"})
    got = _consume(enc_proxy.bootstrap, topic, 3, len(sent))
    assert sorted(got, key=repr) == sorted(sent, key=repr)
    # The upstream: no plaintext in its files, nor in what a client reading it directly gets.
    raw = _segment_bytes(logway_upstream, topic)
    assert raw and b"rdk-secret" not in raw
    direct = _consume(logway_upstream.bootstrap, topic, 3, len(sent))
    assert len(direct) == len(sent)
    assert not any(b"secret" in (value or b"") for _, _, value, _ in direct)
    assert all(headers[0] == (HEADER, b"\x01") for _, _, value, headers in direct if value is not None)
    # Compression kept: the zstd producer's batches are zstd in the log, and their records are ciphertext too.
    batches = list(_log_batches(logway_upstream, topic))
    assert {b.header.compression for b in batches} == {0, 4}
    assert not any(b"secret" in (r.value or b"") for b in batches for r in b.records)
    assert oct(keyring.stat().st_mode & 0o777) == "0o600"


def test_topics_the_pattern_does_not_name_pass_as_they_are(enc_proxy, logway_upstream, topic_name):
    topic = f"plain-{topic_name}"
    _create(enc_proxy.bootstrap, topic, 1)
    sent = [(0, b"k", b"plain-value", ())]
    _produce(enc_proxy.bootstrap, topic, sent)
    assert _consume(logway_upstream.bootstrap, topic, 1, 1) == sent  # stored as written


def test_java_client_reads_through_the_proxy_what_it_wrote(enc_proxy, logway_upstream, tmp_path):
    from programs import java
    from records import assert_exact, expected_offsets, make_records, unique, write_spec

    records = make_records(150, 3, ("none", "lz4"))
    topic = unique("enc-java")
    out = java("roundtrip", enc_proxy.bootstrap, topic, "3", write_spec(tmp_path, "rt", records),
               "enable.idempotence=true", "acks=all")
    assert out.sent == expected_offsets(records)
    assert_exact(records, out.records)
    stored = [r for b in _log_batches(logway_upstream, topic) for r in b.records]
    plain = {r.value for r in records if r.value}
    assert len(stored) == len(records) and not any(r.value in plain for r in stored)
    raw = _segment_bytes(logway_upstream, topic)
    assert not any(v in raw for v in plain if len(v) > 8 and not v.startswith(b"large"))  # lz4 runs hide those


def _kek_ids(upstream, topic: str) -> set[str]:
    """The KEK of each encrypted record's EDEK, as stored upstream."""
    ids = set()
    for batch in _log_batches(upstream, topic):
        for r in batch.records:
            if r.value is not None and r.headers and r.headers[0].key == HEADER:
                size, pos = read_uvarint(r.value, 1)
                ids.add(edek_kek_id(r.value[pos : pos + size]))
    return ids


def test_after_a_kek_rotation_new_records_use_the_new_kek_and_old_ones_still_read(
        enc_proxy, logway_upstream, topic_name, keyring):
    topic = f"enc-{topic_name}"
    _create(enc_proxy.bootstrap, topic, 1)
    before = [(0, b"k", f"before-{i}".encode(), ()) for i in range(10)]
    _produce(enc_proxy.bootstrap, topic, before)
    (old,) = _kek_ids(logway_upstream, topic)
    rotated = subprocess.run([sys.executable, "-m", "logway.cli", "kms", "rotate", "--keyring", str(keyring),
                              "--kek", topic], capture_output=True, text=True, timeout=30)
    assert rotated.returncode == 0, rotated.stderr
    new = rotated.stdout.split()[-1]
    assert new != old
    after: list[tuple] = []
    deadline = time.monotonic() + 20  # the proxy notices the keyring changed within a second
    while new not in _kek_ids(logway_upstream, topic) and time.monotonic() < deadline:
        after.append((0, b"k", f"after-{len(after)}".encode(), ()))
        _produce(enc_proxy.bootstrap, topic, after[-1:])
    assert _kek_ids(logway_upstream, topic) == {old, new}
    got = _consume(enc_proxy.bootstrap, topic, 1, len(before) + len(after))
    assert got == before + after
    assert json.loads(keyring.read_text())["keks"][topic] and len(json.loads(keyring.read_text())["keks"][topic]) == 2


def test_a_topic_whose_kek_is_lost_answers_an_error_not_ciphertext(processes, logway_upstream, topic_name,
                                                                  tmp_path):
    keyring = tmp_path / "lost" / "keyring"
    proxy = processes["proxy"](logway_upstream.bootstrap, *_encrypting(keyring)).start()
    proxy.wait_node_port(1)
    topic = f"enc-{topic_name}"
    _create(proxy.bootstrap, topic, 1)
    _produce(proxy.bootstrap, topic, [(0, b"k", b"lost-secret", ())])
    proxy.stop()
    doc = json.loads(keyring.read_text())
    del doc["keks"][topic]  # the KEK is lost
    keyring.write_text(json.dumps(doc))
    proxy.start()
    proxy.wait_node_port(1)
    errors: list = []
    got = _consume(proxy.bootstrap, topic, 1, 0, errors)
    assert got == []
    assert errors and errors[0].code() == KafkaError.INVALID_MSG, errors  # CORRUPT_MESSAGE (2)
    assert "does not decrypt" in proxy.log() and "is not in the keyring" in proxy.log()
