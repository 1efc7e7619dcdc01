"""Turn a log dir written by a stopped Apache Kafka broker into a Logway log dir (`logway import-kafka-logdir`).

Logway keeps Kafka's on-disk layout (see log_manager.py), so a Kafka partition folder is already a Logway one:
segments (.log), offset and time indexes (.index, .timeindex, Kafka's formats), partition.metadata with the
topic id, and the recovery-point / log-start-offset checkpoint files. What differs and is handled here:

- ``meta.properties`` marks a Kafka log dir (it is what SRC is checked for); Logway does not use it.
- ``__cluster_metadata-0`` is KRaft's metadata log, not a topic: never carried over (Logway would load it as one).
  Topic configs live only there, so imported topics get the broker defaults (warned about, by name).
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
from dataclasses import dataclass, field
from pathlib import Path

from logway.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
    write_checkpoint,
)
from logway.storage.cleaner import CLEANER_OFFSET_CHECKPOINT

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

    @property
    def offsets_partitions(self) -> int | None:
        return self.partitions.get(OFFSETS_TOPIC)


def import_kafka_logdir(src: Path, dest: Path | None = None, *, in_place: bool = False) -> ImportReport:
    """Copy (or, in place, adopt) the topic partitions of the stopped Kafka log dir ``src`` as a Logway log dir."""
    src = Path(src)
    meta = read_meta_properties(src)
    _check_not_running(src)
    if in_place:
        dest = src
    elif dest is None:
        raise NotAKafkaLogDir("give DEST, or --in-place to adopt SRC itself")
    else:
        dest = Path(dest)
        if dest.exists() and any(dest.iterdir()):
            raise NotAKafkaLogDir(f"{dest}: destination exists and is not empty")
    report = ImportReport()
    partitions = _partition_dirs(src, report)
    if not in_place:
        dest.mkdir(parents=True, exist_ok=True)
    for entry, (topic, _) in sorted(partitions.items()):
        if in_place:
            _set_aside_kafka_only(src / entry, dest / SET_ASIDE / entry)
        else:
            shutil.copytree(src / entry, dest / entry,
                            ignore=shutil.ignore_patterns(*(f"*{s}" for s in KAFKA_ONLY_SUFFIXES)))
        report.partitions[topic] = report.partitions.get(topic, 0) + 1
    carried = {topic_partition for topic_partition in map(_parse_partition_dir, partitions)}
    for name in CARRIED_CHECKPOINTS:
        offsets = read_checkpoint(src / name)
        if offsets or (src / name).exists():
            write_checkpoint(dest / name, {tp: off for tp, off in offsets.items() if tp in carried})
    if in_place:
        for name in (META_PROPERTIES, ".kafka_cleanshutdown"):
            if (src / name).exists():
                (dest / SET_ASIDE).mkdir(exist_ok=True)
                os.replace(src / name, dest / SET_ASIDE / name)
        if (src / METADATA_LOG_DIR).exists():
            (dest / SET_ASIDE).mkdir(exist_ok=True)
            os.replace(src / METADATA_LOG_DIR, dest / SET_ASIDE / METADATA_LOG_DIR)
    user_topics = sorted(t for t in report.partitions if not t.startswith("__"))
    if user_topics:
        report.warnings.append(
            "topic configs are not carried over (Kafka keeps them in its metadata log, __cluster_metadata): "
            f"{', '.join(user_topics)} get the broker defaults; set overrides again with kafka-configs --alter")
    if report.offsets_partitions is not None:
        report.warnings.append(
            f"{OFFSETS_TOPIC} has {report.offsets_partitions} partitions: start Logway with "
            f"offsets.topic.num.partitions={report.offsets_partitions} or committed group offsets are not found")
    report.warnings.append(f"imported from Kafka cluster {meta.get('cluster.id', '?')} node {meta.get('node.id', '?')}")
    return report


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


def _set_aside_kafka_only(partition_dir: Path, aside: Path) -> None:
    for path in partition_dir.iterdir():
        if path.name.endswith(KAFKA_ONLY_SUFFIXES):
            aside.mkdir(parents=True, exist_ok=True)
            os.replace(path, aside / path.name)


def _parse_partition_dir(name: str) -> tuple[str, int] | None:
    """Kafka's <topic>-<partition> folder name; None for -delete / -future / -stray folders and other files."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)
