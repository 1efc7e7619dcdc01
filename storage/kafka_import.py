"""Turn a log dir written by a stopped Apache Kafka broker into a Logway log dir (`logway import-kafka-logdir`).

Logway keeps Kafka's on-disk layout (see log_manager.py), so a Kafka partition folder is already a Logway one:
segments (.log), offset and time indexes (.index, .timeindex, Kafka's formats), partition.metadata with the
topic id, and the recovery-point / log-start-offset checkpoint files. What differs and is handled here:

- ``meta.properties`` marks a Kafka log dir (it is what SRC is checked for); Logway does not use it.
- ``__cluster_metadata-0`` is KRaft's metadata log, not a topic: never carried over (Logway would load it as one).
  Topic configs live only there: they are read from it (TopicRecord, ConfigRecord, RemoveTopicRecord, in the newest
  snapshot and the log after it) and written to each partition's topic.properties, as Logway keeps them.
- Kafka-only internal topics (``__transaction_state``, ``__share_group_state``) are left out; ``__consumer_offsets``
  is carried over (Logway reads Kafka's own offset-commit key/value schemas), and its partition count is reported:
  Logway's ``offsets.topic.num.partitions`` must equal it, or groups hash to the wrong partition.
- ``.snapshot`` producer-state files have Kafka's field layout, not Logway's (which keeps five batches per
  producer), so they are not carried over: Logway rebuilds producer state from the batch headers on first start.
- ``.kafka_cleanshutdown`` is not carried over, so Logway's first start checks every segment past the recovery point.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from logway.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
    write_checkpoint,
)
from logway.storage.cleaner import CLEANER_OFFSET_CHECKPOINT
from logway.storage.log_manager import read_topic_id, write_properties
from logway.wire.batch import CorruptBatch
from logway.wire.records import decode_batches

META_PROPERTIES = "meta.properties"
METADATA_LOG_DIR = "__cluster_metadata-0"
OFFSETS_TOPIC = "__consumer_offsets"
SKIPPED_INTERNAL_TOPICS = ("__transaction_state", "__share_group_state", "__cluster_metadata")
KAFKA_ONLY_SUFFIXES = (".snapshot",)  # producer-state snapshots in Kafka's field layout
CARRIED_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)
SET_ASIDE = ".kafka-only"  # in place: where Kafka-only files go (not a <topic>-<partition> name: Logway skips it)


class NotAKafkaLogDir(ValueError):
    """SRC is not a log dir of a stopped Kafka broker (or DEST is unusable); the message is one line."""


@dataclass
class ImportReport:
    """What was carried over and what was not, for the command to print."""

    partitions: dict[str, int] = field(default_factory=dict)   # topic -> partition count carried over
    skipped: list[str] = field(default_factory=list)           # folders left out, with the reason
    warnings: list[str] = field(default_factory=list)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)  # topic -> config overrides carried over
    source: str = ""                                                   # the Kafka cluster and node of SRC

    @property
    def offsets_partitions(self) -> int | None:
        return self.partitions.get(OFFSETS_TOPIC)


def import_kafka_logdir(src: Path, dest: Path | None = None, *, in_place: bool = False) -> ImportReport:
    """Copy (or, in place, adopt) the topic partitions of the stopped Kafka log dir ``src`` as a Logway log dir.

    A copy is built beside DEST under a temporary name and renamed at the end, so a failed import leaves no
    half-filled DEST behind."""
    src = Path(src)
    meta = read_meta_properties(src)
    _check_not_running(src)
    report = ImportReport(source=f"Kafka cluster {meta.get('cluster.id', '?')}, node {meta.get('node.id', '?')}")
    partitions = _partition_dirs(src, report)
    if in_place:
        _adopt_in_place(src, partitions)
        _carry_checkpoints(src, src, partitions)
        _carry_topic_configs(src / SET_ASIDE / METADATA_LOG_DIR, src, partitions, report)
    else:
        if dest is None:
            raise NotAKafkaLogDir("give DEST, or --in-place to adopt SRC itself")
        dest = Path(dest)
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            raise NotAKafkaLogDir(f"{dest}: destination exists and is not an empty directory")
        building = dest.with_name(dest.name + ".importing")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        try:
            for entry in sorted(partitions):
                shutil.copytree(src / entry, building / entry,
                                ignore=shutil.ignore_patterns(*(f"*{s}" for s in KAFKA_ONLY_SUFFIXES)))
            _carry_checkpoints(src, building, partitions)
            _carry_topic_configs(src / METADATA_LOG_DIR, building, partitions, report)
            if dest.exists():
                dest.rmdir()
            os.replace(building, dest)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
    for topic, _ in partitions.values():
        report.partitions[topic] = report.partitions.get(topic, 0) + 1
    if report.offsets_partitions is not None:
        report.warnings.append(
            f"{OFFSETS_TOPIC} has {report.offsets_partitions} partitions: start Logway with "
            f"offsets.topic.num.partitions={report.offsets_partitions} or committed group offsets are not found")
    return report


def _adopt_in_place(log_dir: Path, partitions: dict[str, tuple[str, int]]) -> None:
    """Move what only Kafka uses into <log dir>/.kafka-only: the metadata log, meta.properties, the clean-shutdown
    marker and each partition's producer-state snapshots."""
    aside = log_dir / SET_ASIDE
    for entry in partitions:
        for path in (log_dir / entry).iterdir():
            if path.name.endswith(KAFKA_ONLY_SUFFIXES):
                (aside / entry).mkdir(parents=True, exist_ok=True)
                os.replace(path, aside / entry / path.name)
    for name in (META_PROPERTIES, ".kafka_cleanshutdown", METADATA_LOG_DIR):
        if (log_dir / name).exists():
            aside.mkdir(exist_ok=True)
            os.replace(log_dir / name, aside / name)


def _carry_checkpoints(src: Path, dest: Path, partitions: dict[str, tuple[str, int]]) -> None:
    """The recovery-point, log-start-offset and cleaner checkpoints, limited to the partitions carried over."""
    carried = set(partitions.values())
    for name in CARRIED_CHECKPOINTS:
        if (src / name).exists() and (src / name).stat().st_size:  # Kafka leaves an empty cleaner checkpoint
            offsets = read_checkpoint(src / name)
            write_checkpoint(dest / name, {tp: off for tp, off in offsets.items() if tp in carried})


def read_meta_properties(log_dir: Path) -> dict[str, str]:
    """Kafka's meta.properties of a log dir, or NotAKafkaLogDir saying why it is not one."""
    if not log_dir.is_dir():
        raise NotAKafkaLogDir(f"{log_dir}: not a directory")
    try:
        text = (log_dir / META_PROPERTIES).read_text(encoding="utf-8")
    except OSError:
        raise NotAKafkaLogDir(f"{log_dir}: not a Kafka log dir (no {META_PROPERTIES})") from None
    props = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    if "cluster.id" not in props and "broker.id" not in props and "node.id" not in props:
        raise NotAKafkaLogDir(f"{log_dir}: {META_PROPERTIES} names no cluster.id or node.id: not a Kafka log dir")
    return props


def _check_not_running(log_dir: Path) -> None:
    """Kafka holds a lock on <log dir>/.lock (FileChannel.tryLock, an fcntl lock) while it runs."""
    lock = log_dir / ".lock"
    if not lock.exists():
        return
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.lockf(fd, fcntl.LOCK_UN)
    except OSError:
        raise NotAKafkaLogDir(f"{log_dir}: locked by a running broker; stop Kafka first") from None
    finally:
        os.close(fd)


def _partition_dirs(log_dir: Path, report: ImportReport) -> dict[str, tuple[str, int]]:
    """The <topic>-<partition> folders to carry over; the rest goes to report.skipped with the reason."""
    out = {}
    for entry in sorted(os.listdir(log_dir)):
        if not (log_dir / entry).is_dir() or entry == SET_ASIDE:
            continue
        parsed = _parse_partition_dir(entry)
        if parsed is None:
            report.skipped.append(f"{entry} (not a <topic>-<partition> folder, e.g. a deleted or future partition)")
        elif parsed[0] in SKIPPED_INTERNAL_TOPICS:
            report.skipped.append(f"{entry} (Kafka-internal: {'KRaft metadata log' if entry == METADATA_LOG_DIR else 'not used by Logway'})")
        else:
            out[entry] = parsed
    return out


def _carry_topic_configs(metadata_dir: Path, dest: Path, partitions: dict[str, tuple[str, int]],
                         report: ImportReport) -> None:
    """Write each carried topic's config overrides (from Kafka's metadata log) to its partitions' topic.properties."""
    if not metadata_dir.is_dir():
        report.warnings.append(f"no {METADATA_LOG_DIR} here (it is in Kafka's metadata.log.dir): topic configs are "
                               "not carried over, imported topics get the broker defaults")
        return
    try:
        configs, ids = topic_configs(metadata_dir)
    except (OSError, CorruptBatch, ValueError, IndexError, struct.error) as exc:
        report.warnings.append(f"topic configs not carried over: {METADATA_LOG_DIR} unreadable ({exc}); "
                               "imported topics get the broker defaults")
        return
    for entry, (topic, _) in partitions.items():
        # Only for the topic the folder belongs to: a folder of an older topic of the same name keeps none.
        if configs.get(topic) and ids.get(topic) == read_topic_id(dest / entry):
            write_properties(dest / entry, configs[topic])
            report.configs[topic] = configs[topic]


# KRaft metadata records (metadata/src/main/resources/common/metadata/*.json), framed by MetadataRecordSerde as
# unsigned varints frameVersion, apiKey, version, then the flexible-version body (compact strings, tagged fields).
TOPIC_RECORD, CONFIG_RECORD, REMOVE_TOPIC_RECORD = 2, 4, 9
TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC


def topic_configs(metadata_dir: Path) -> tuple[dict[str, dict[str, str]], dict[str, uuid.UUID]]:
    """Topic config overrides and topic ids as the metadata log leaves them: the newest snapshot (.checkpoint),
    then the log's records after it; a null value (a deleted override) and a removed topic drop what they name."""
    configs: dict[str, dict[str, str]] = {}
    ids: dict[str, uuid.UUID] = {}
    snapshots = sorted(metadata_dir.glob("*.checkpoint"))
    start = int(snapshots[-1].name.split("-")[0]) if snapshots else 0
    sources = [(snapshots[-1], 0)] if snapshots else []
    sources += [(seg, start) for seg in sorted(metadata_dir.glob("*.log"))]
    for path, from_offset in sources:
        for batch in decode_batches(path.read_bytes()):
            if batch.header.attributes & 0x20:  # control batch: leader change, snapshot header/footer
                continue
            for record in batch.records:
                if record.offset >= from_offset and record.value:
                    _apply(record.value, configs, ids)
    return configs, ids


def _apply(value: bytes, configs: dict[str, dict[str, str]], ids: dict[str, uuid.UUID]) -> None:
    reader = _Reader(value)
    reader.varint()  # frame version
    api_key = reader.varint()
    reader.varint()  # record version
    if api_key == TOPIC_RECORD:
        name = reader.compact_string()
        topic_id = uuid.UUID(bytes=reader.take(16))
        if ids.get(name) != topic_id:
            configs.pop(name, None)  # a topic of that name created anew starts without overrides
        ids[name] = topic_id
    elif api_key == CONFIG_RECORD:
        resource_type = reader.take(1)[0]
        resource, key, val = reader.compact_string(), reader.compact_string(), reader.compact_string()
        if resource_type == TOPIC_RESOURCE and key is not None:
            if val is None:
                configs.get(resource, {}).pop(key, None)
            else:
                configs.setdefault(resource, {})[key] = val
    elif api_key == REMOVE_TOPIC_RECORD:
        topic_id = uuid.UUID(bytes=reader.take(16))
        for name in [n for n, i in ids.items() if i == topic_id]:
            del ids[name]
            configs.pop(name, None)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("metadata record shorter than its fields")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def compact_string(self) -> str | None:
        length = self.varint() - 1
        return None if length < 0 else self.take(length).decode("utf-8")


def _parse_partition_dir(name: str) -> tuple[str, int] | None:
    """Kafka's <topic>-<partition> folder name; None for -delete / -future / -stray folders and other files."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)
