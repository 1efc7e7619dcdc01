"""Topic configs as Kafka's KRaft metadata log leaves them (the byte layout a real Kafka 4.3.1 wrote: frame version,
apiKey, version as varints, then compact strings and tagged fields), and what the import writes from them."""

import uuid
from pathlib import Path

from logway.storage.kafka_import import import_kafka_logdir, topic_configs
from logway.wire.records import build_batch

OLD_ID, NEW_ID, OTHER_ID = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def compact(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    data = s.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def topic_record(name: str, topic_id: uuid.UUID) -> bytes:
    return b"\x01\x02\x00" + compact(name) + topic_id.bytes + b"\x00"


def config_record(topic: str, key: str, value: str | None, resource_type: int = 2) -> bytes:
    return b"\x01\x04\x00" + bytes([resource_type]) + compact(topic) + compact(key) + compact(value) + b"\x00"


def remove_topic_record(topic_id: uuid.UUID) -> bytes:
    return b"\x01\x09\x00" + topic_id.bytes + b"\x00"


def write_metadata_log(log_dir: Path, values: list[bytes]) -> None:
    md = log_dir / "__cluster_metadata-0"
    md.mkdir(parents=True)
    batch = build_batch([(None, v, ()) for v in values], base_timestamp=1)
    (md / "00000000000000000000.log").write_bytes(batch)


def test_overrides_follow_deletes_removed_topics_and_recreation(tmp_path: Path) -> None:
    write_metadata_log(tmp_path, [
        config_record("", "min.insync.replicas", "1", resource_type=4),       # a broker config: not a topic's
        topic_record("orders", OLD_ID),
        config_record("orders", "retention.ms", "1000"),
        remove_topic_record(OLD_ID),                                          # deleted ...
        topic_record("orders", NEW_ID),                                       # ... and created anew
        config_record("orders", "cleanup.policy", "compact"),
        topic_record("events", OTHER_ID),
        config_record("events", "retention.ms", "-1"),
        config_record("events", "segment.bytes", "1048576"),
        config_record("events", "segment.bytes", None),                       # override deleted
    ])
    configs, ids = topic_configs(tmp_path / "__cluster_metadata-0")
    assert configs == {"orders": {"cleanup.policy": "compact"}, "events": {"retention.ms": "-1"}}
    assert ids == {"orders": NEW_ID, "events": OTHER_ID}


def test_import_writes_overrides_only_for_the_topic_id_the_partitions_carry(tmp_path: Path) -> None:
    src = tmp_path / "kafka"
    write_metadata_log(src, [topic_record("events", OTHER_ID), config_record("events", "retention.ms", "-1"),
                             topic_record("orders", NEW_ID), config_record("orders", "retention.ms", "5")])
    (src / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=abc\n")
    for name, topic_id in (("events-0", OTHER_ID), ("orders-0", OLD_ID)):  # orders-0 is of an older topic id
        (src / name).mkdir()
        (src / name / "partition.metadata").write_text(f"version: 0\ntopic_id: {_b64(topic_id)}\n")
        (src / name / "00000000000000000000.snapshot").write_bytes(b"kafka's layout")
    report = import_kafka_logdir(src, tmp_path / "logway")
    dest = tmp_path / "logway"
    assert (dest / "events-0" / "topic.properties").read_text() == "retention.ms=-1\n"
    assert not (dest / "orders-0" / "topic.properties").exists()
    assert not list(dest.glob("*/*.snapshot")) and not (dest / "__cluster_metadata-0").exists()
    assert report.configs == {"events": {"retention.ms": "-1"}}
    assert report.partitions == {"events": 1, "orders": 1}


def _b64(topic_id: uuid.UUID) -> str:
    import base64

    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
