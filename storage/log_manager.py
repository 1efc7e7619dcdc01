"""All partition logs of the broker across its log.dirs (Kafka's LogManager).

On disk, per log dir::

    <topic>-<partition>/                 one partition: segments, indexes, producer snapshots,
        partition.metadata               Kafka's "version: 0 / topic_id: <base64url uuid>"
        topic.properties                 the topic's config overrides (Kafka keeps them in its
                                         metadata log; a single broker keeps them beside the data)
    <topic>-<partition>.<uuidhex>-delete  a deleted partition waiting for file.delete.delay.ms
    recovery-point-offset-checkpoint, log-start-offset-checkpoint
    cleaner-offset-checkpoint            first dirty offset of each compacted partition
    .kafka_cleanshutdown                 present only between a clean close and the next open
    .lock                                locked (fcntl, exclusive) by the process that has the dir open
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from logway.storage import fs
from logway.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
    write_atomically,
    write_checkpoint,
)
from logway.storage.cleaner import CLEANER_OFFSET_CHECKPOINT, CleanerConfig
from logway.storage.config import LogConfig
from logway.storage.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    KafkaStorageError,
    LogDirLocked,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from logway.storage.log_loader import RecoveryLoss
from logway.storage.open_files import OPEN_SEGMENTS
from logway.storage.partition_counts import PartitionCounters
from logway.storage.partition_log import PartitionLog
from logway.storage.progress import Progress
from logway.storage.topic import Topic, collision_key, decode_topic_id, encode_topic_id, validate_topic_name

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"  # Kafka's CleanShutdownFileHandler
LOCK_FILE = ".lock"  # Kafka's LogManager.LockFileName
PARTITION_METADATA_FILE = "partition.metadata"
TOPIC_PROPERTIES_FILE = "topic.properties"
DELETE_DIR_SUFFIX = "-delete"
CHECKPOINT_INTERVAL_MS = 60000  # Kafka's log.flush.offset.checkpoint.interval.ms default

log = logging.getLogger(__name__)


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class LogManager:
    """Creates, loads, retains, flushes and deletes the partition logs of every topic."""

    def __init__(
        self,
        log_dirs: list[str | Path],
        default_config: LogConfig,
        *,
        clock_ms: Callable[[], int] | None = None,
        cleaner_config: CleanerConfig | None = None,
        max_open_segments: int | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.cleaner_config = cleaner_config or CleanerConfig()
        self.topics: dict[str, Topic] = {}
        self._clock = clock_ms or _wall_clock_ms
        self._pending_deletes: list[tuple[int, PartitionLog]] = []
        self.recovery_loss = RecoveryLoss()  # summed over every log loaded; read by metrics
        self.recovered_bytes = 0  # bytes recovery scanned batch by batch at start-up; read by metrics
        # The counters of deleted topics' partitions, so broker-wide totals never go down (read by metrics).
        self.deleted_counters = PartitionCounters()
        self._locks: list[int] = []  # descriptors of the held .lock files
        # A flush moved a recovery point since the recovery-point checkpoint was last written (set from flush
        # threads; the broker writes the checkpoint soon after, see `checkpoint_snapshot`).
        self.recovery_points_moved = False
        # Topics whose partitions are being made (possibly on a worker thread); not visible to clients yet.
        self.creating: dict[str, Topic] = {}
        if max_open_segments is not None:  # the bound is per process, like the OS limit it protects
            OPEN_SEGMENTS.max_open = max_open_segments

    # -- startup and shutdown ------------------------------------------------------------------------

    def open(self) -> None:
        """Lock every log dir, create missing dirs, finish pending deletions, load and recover every partition."""
        found: dict[str, dict[int, PartitionLog]] = {}
        metadata: dict[str, tuple[uuid.UUID, dict[str, str]]] = {}
        self._lock_log_dirs()
        try:
            for log_dir in self.log_dirs:
                self._load_log_dir(log_dir, found, metadata)
            self._assemble_topics(found, metadata)
        except BaseException:
            for logs in found.values():
                for plog in logs.values():
                    plog.close()
            self.topics.clear()
            self._unlock_log_dirs()
            raise
        self.checkpoint()
        for log_dir in self.log_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            if marker.exists():
                # Gone for good before anything is appended: a marker back after a power loss would make the next
                # start trust segments holding data that was never fsynced.
                fs.unlink(marker)
                fs.sync_dir(log_dir)

    def _load_log_dir(
        self, log_dir: Path, found: dict[str, dict[int, PartitionLog]],
        metadata: dict[str, tuple[uuid.UUID, dict[str, str]]],
    ) -> None:
        """Load (and recover) every partition directory of one log dir into ``found``; finish pending deletions."""
        clean = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
        recovery_points = read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        cleaner_offsets = read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
        entries = sorted(e for e in os.listdir(log_dir) if (log_dir / e).is_dir())
        # Kafka's LogManager.loadLogs: "Skipping recovery of N logs ... since clean shutdown file was found" or
        # "Recovering N logs ... since no clean shutdown file was found", then "Loaded N logs in X ms".
        log.info("loading %d partition directories from %s (%s)", len(entries), log_dir,
                 "clean shutdown: recovery skipped" if clean else "no clean shutdown file: recovering unflushed segments")
        started = time.monotonic()
        loaded = scanned = 0
        loss = RecoveryLoss()
        progress = Progress(log, "loading %s: %d of %d partition directories, %d bytes scanned by recovery so far")

        def recovered(size: int) -> None:  # after each segment recovery scanned: a long one reports progress too
            nonlocal scanned
            scanned += size
            progress.update(log_dir, loaded, len(entries), scanned)

        for entry in entries:
            progress.update(log_dir, loaded, len(entries), scanned)
            path = log_dir / entry
            if entry.endswith(DELETE_DIR_SUFFIX):
                fs.rmtree(path, ignore_errors=True)
                continue
            parsed = _parse_partition_dir(entry)
            if parsed is None:
                log.warning("ignoring %s: not a <topic>-<partition> directory", path)
                continue
            topic, partition = parsed
            if partition in found.get(topic, {}):
                raise KafkaStorageError(f"duplicate log directories for {entry}: {found[topic][partition].dir}, {path}")
            if topic not in metadata:
                metadata[topic] = (read_topic_id(path) or uuid.uuid4(), _read_properties(path))
            plog = found.setdefault(topic, {})[partition] = PartitionLog(
                path,
                topic,
                partition,
                self._topic_config(topic, metadata[topic][1]),
                recovery_point=recovery_points.get(parsed, 0),
                log_start_offset=start_offsets.get(parsed, 0),
                clean_shutdown=clean,
                clock_ms=self._clock,
                cleaner_offset=cleaner_offsets.get(parsed),
                cleaner_config=self.cleaner_config,
                on_offline=self._log_dir_failed,
                on_recovered=recovered,
                on_flushed=self._recovery_point_moved,
            )
            self.recovery_loss.add(plog.recovery_loss)
            self.recovered_bytes += plog.recovered_bytes
            loss.add(plog.recovery_loss)
            loaded += 1
        log.info("loaded %d partitions from %s in %.2f s: recovery scanned %d bytes, truncated %d segments "
                 "(%d bytes dropped)", loaded, log_dir, time.monotonic() - started, scanned, loss.truncations,
                 loss.bytes_dropped)

    def _assemble_topics(
        self, found: dict[str, dict[int, PartitionLog]], metadata: dict[str, tuple[uuid.UUID, dict[str, str]]],
    ) -> None:
        """Make the topics from the loaded partitions; a partition missing from every log dir is recreated empty."""
        for name, logs in found.items():
            topic_id, overrides = metadata[name]
            topic = Topic(name, topic_id, self._topic_config(name, overrides), overrides)
            self.topics[name] = topic
            for p in range(max(logs) + 1):
                if p not in logs:
                    log.warning("partition %s-%d is missing from every log dir; recreating it empty", name, p)
                    logs[p] = self._new_partition(topic, p)
                logs[p].changes = topic.changes  # loaded before its topic was made (nothing has read it yet)
                topic.partitions.append(logs[p])
                if not (logs[p].dir / PARTITION_METADATA_FILE).exists():
                    _write_topic_id(logs[p].dir, topic_id)  # keep the id stable from now on

    def close(self) -> None:
        """Flush and close every log, write checkpoints, then mark each log dir as cleanly shut down."""
        for plog in self._all_logs():
            plog.close()
        for _, plog in self._pending_deletes:
            plog.delete()
        self._pending_deletes = []
        self.checkpoint()
        if any(plog.offline for plog in self._all_logs()):
            return  # a log that failed a write is not cleanly shut down: the next start recovers it
        for log_dir in self.log_dirs:
            fd = fs.open(log_dir / CLEAN_SHUTDOWN_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                fs.fsync(fd)
            finally:
                os.close(fd)
            fs.sync_dir(log_dir)
        self._unlock_log_dirs()

    def _lock_log_dirs(self) -> None:
        """Take each log dir's ``.lock`` exclusively, or raise LogDirLocked (Kafka's LogManager.lockLogDirs).

        A POSIX record lock (fcntl), as Java's FileChannel.tryLock takes on Linux, so Kafka and Logway also
        exclude each other; the kernel drops it when the process dies, so a killed broker leaves no stale lock.
        """
        try:
            for log_dir in self.log_dirs:
                fs.make_dirs(log_dir)
                fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as e:
                    os.close(fd)
                    if e.errno in (errno.EACCES, errno.EAGAIN):
                        raise LogDirLocked(
                            f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}. "
                            "Another broker process is using this directory."
                        ) from None
                    raise
                self._locks.append(fd)
        except BaseException:
            self._unlock_log_dirs()
            raise

    def _unlock_log_dirs(self) -> None:
        for fd in self._locks:
            os.close(fd)  # closing the descriptor releases its lock
        self._locks = []

    def checkpoint(self) -> None:
        """Write recovery points, log start offsets and cleaner offsets of every log dir (Kafka's checkpoint files)."""
        self.write_checkpoints(self.checkpoint_snapshot())

    def checkpoint_snapshot(self, *, recovery_points_only: bool = False) -> dict[Path, dict[str, dict[tuple[str, int], int]]]:
        """What the checkpoint files would hold now (cheap; on the thread that owns the logs). ``recovery_points_only``:
        the recovery-point file alone, which the broker writes within a second of a flush moving one."""
        if recovery_points_only:
            self.recovery_points_moved = False
        per_dir: dict[Path, list[PartitionLog]] = {d: [] for d in self.log_dirs}
        for plog in self._all_logs():
            per_dir[plog.dir.parent].append(plog)
        snapshot: dict[Path, dict[str, dict[tuple[str, int], int]]] = {}
        for log_dir, logs in per_dir.items():
            files = snapshot[log_dir] = {
                RECOVERY_POINT_CHECKPOINT: {(p.topic, p.partition): p.recovery_point for p in logs}}
            if not recovery_points_only:
                files[LOG_START_OFFSET_CHECKPOINT] = {(p.topic, p.partition): p.log_start_offset for p in logs}
                files[CLEANER_OFFSET_CHECKPOINT] = {
                    (p.topic, p.partition): p.cleaner_offset for p in logs if p.cleaner_offset is not None}
        return snapshot

    @staticmethod
    def write_checkpoints(snapshot: dict[Path, dict[str, dict[tuple[str, int], int]]]) -> None:
        """Write (and fsync) a checkpoint snapshot; plain file I/O, safe on a worker thread."""
        for log_dir, files in snapshot.items():
            for name, offsets in files.items():
                write_checkpoint(log_dir / name, offsets)

    # -- topics ----------------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> Topic:
        """Create a topic with Kafka's validation; each partition goes to the least-used log dir (seed 000).

        All at once, on the calling thread; the gateway creates large topics in chunks off the event loop
        with `begin_topic`, `place_partitions`, `make_partitions` and `finish_topic` (the same steps).
        """
        topic = self.begin_topic(name, num_partitions, configs, topic_id)
        try:
            topic.partitions.extend(self.make_partitions(topic, 0, self.place_partitions(num_partitions)))
        except BaseException:
            self.abort_topic(topic)
            raise
        self.finish_topic(topic)
        return topic

    def begin_topic(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> Topic:
        """Validate a new topic and reserve its name until `finish_topic` or `abort_topic`."""
        validate_topic_name(name)
        if name in self.topics or name in self.creating:
            raise TopicAlreadyExists(f"Topic '{name}' already exists.")
        clashes = [t for t in itertools.chain(self.topics, self.creating) if collision_key(t) == collision_key(name)]
        if clashes:
            raise InvalidTopic(f"Topic '{name}' collides with existing topics: {', '.join(clashes)}")
        if num_partitions < 1:
            raise InvalidPartitions("Number of partitions must be larger than 0.")
        overrides = {k: str(v).strip() for k, v in (configs or {}).items()}
        config = LogConfig.from_properties(overrides, self.default_config)
        topic = Topic(name, topic_id or uuid.uuid4(), config, overrides)
        self.creating[name] = topic
        return topic

    def place_partitions(self, count: int, pending: Iterable[PartitionLog] = ()) -> list[Path]:
        """The log dir of each of ``count`` new partitions: the least used one each time (seed 000).

        Partitions of topics being created count, and so do ``pending`` ones made but not yet attached.
        """
        counts = dict.fromkeys(self.log_dirs, 0)
        creating = (t.partitions for t in self.creating.values())
        for plog in itertools.chain(self._all_logs(), *creating, pending):
            counts[plog.dir.parent] += 1
        dirs = []
        for _ in range(count):
            least = min(self.log_dirs, key=lambda d: counts[d])
            counts[least] += 1
            dirs.append(least)
        return dirs

    def make_partitions(self, topic: Topic, first: int, dirs: list[Path]) -> list[PartitionLog]:
        """Create partitions ``first``, ``first + 1``, ... in ``dirs`` (file work only: safe on a worker thread).

        On an error the partitions made by this call are deleted again and KafkaStorageError is raised.
        """
        made: list[PartitionLog] = []
        try:
            for i, log_dir in enumerate(dirs):
                made.append(self._new_partition(topic, first + i, log_dir))
            for log_dir in set(dirs):
                fs.sync_dir(log_dir)  # the new partition directories survive a power loss
        except OSError as e:
            for plog in made:
                plog.delete()
            raise KafkaStorageError(f"creating partitions of {topic.name} failed: {e}") from e
        return made

    def finish_topic(self, topic: Topic) -> None:
        """Make a topic whose partitions are all made visible to clients."""
        del self.creating[topic.name]
        self.topics[topic.name] = topic
        overrides = ", ".join(f"{k}={v}" for k, v in sorted(topic.overrides.items()))
        log.info("created topic %s (id %s) with %d partitions%s", topic.name, encode_topic_id(topic.topic_id),
                 len(topic.partitions), f" and configs {overrides}" if overrides else "")

    def abort_topic(self, topic: Topic) -> None:
        """Give up a topic being created: delete what was made and free its name."""
        self.creating.pop(topic.name, None)
        for plog in topic.partitions:
            plog.delete()

    def create_partitions(self, name: str, total_count: int) -> None:
        """Grow a topic to ``total_count`` partitions (CreatePartitions; partitions never shrink)."""
        topic = self.check_new_partition_count(name, total_count)
        current = len(topic.partitions)
        topic.partitions.extend(self.make_partitions(topic, current, self.place_partitions(total_count - current)))
        log_partitions_added(name, current, total_count)

    def check_new_partition_count(self, name: str, total_count: int) -> Topic:
        """The topic, if ``total_count`` is a valid new partition count for it (Kafka's CreatePartitions checks)."""
        topic = self._topic(name)
        current = len(topic.partitions)
        if total_count < current:
            raise InvalidPartitions(f"Topic currently has {current} partitions, which is higher than the requested {total_count}.")
        if total_count == current:
            raise InvalidPartitions(f"Topic already has {current} partitions.")
        return topic

    def delete_topic(self, name: str) -> None:
        """Remove a topic at once; its dirs are renamed ``<topic>-<p>.<uuidhex>-delete`` and removed later."""
        topic = self._topic(name)
        del self.topics[name]
        now = self._clock()
        self.deleted_counters.fetch_requests += topic.fetch_requests
        for plog in topic.partitions:
            self.deleted_counters.add(plog.counters)
            plog.rename_dir(plog.dir.with_name(f"{plog.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"))
            self._pending_deletes.append((now + plog.config.file_delete_delay_ms, plog))
        log.info("deleted topic %s and its %d partitions (their directories are removed after file.delete.delay.ms)",
                 name, len(topic.partitions))

    def alter_config(self, name: str, overrides: Mapping[str, str]) -> None:
        """Replace a topic's config overrides (AlterConfigs semantics) and apply them to its logs."""
        topic = self._topic(name)
        overrides = {k: str(v).strip() for k, v in overrides.items()}
        config = LogConfig.from_properties(overrides, self.default_config)
        for plog in topic.partitions:
            write_properties(plog.dir, overrides)
            plog.config = config
        topic.config, topic.overrides = config, overrides

    def reconfigure(self, default_config: LogConfig, cleaner_config: CleanerConfig) -> None:
        """New broker-level defaults (dynamic broker configs): every topic's logs take them at once, except
        for the keys the topic overrides (Kafka's DynamicLogConfig.reconfigure)."""
        self.default_config = default_config
        self.cleaner_config = cleaner_config
        for topic in itertools.chain(self.topics.values(), self.creating.values()):
            topic.config = self._topic_config(topic.name, topic.overrides)
            for plog in topic.partitions:
                plog.config = topic.config
                plog.cleaner_config = cleaner_config

    def get_partition(self, topic: str, partition: int) -> PartitionLog:
        """The log of one partition; UnknownTopicOrPartition if this broker has no such partition."""
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            raise UnknownTopicOrPartition(f"This server does not host this topic-partition: {topic}-{partition}")
        return t.partitions[partition]

    # -- periodic work -----------------------------------------------------------------------------------

    def maintenance(self, now_ms: int | None = None) -> None:
        """Retention, delayed file deletion, producer expiry and held index entries (cheap; call every few seconds).

        The periodic checkpoint files are the caller's: take a ``checkpoint_snapshot()`` here and write it
        with ``write_checkpoints`` off the event loop, every CHECKPOINT_INTERVAL_MS.
        """
        now = self._clock() if now_ms is None else now_ms
        OPEN_SEGMENTS.close_expired()
        for plog in self._all_logs():
            plog.delete_old_segments(now)
            plog.delete_pending_segments(now)
            plog.expire_producers(now)
            plog.write_held_index_entries()
        # A deleted topic's log that a compaction thread still reads waits for finish_compaction.
        due = [plog for deadline, plog in self._pending_deletes if deadline <= now and not plog.compacting]
        self._pending_deletes = [(d, p) for d, p in self._pending_deletes if d > now or p.compacting]
        for plog in due:
            log.debug("removing %s (deleted topic)", plog.dir)
            plog.delete()

    def flush_due(self, now_ms: int) -> list[PartitionLog]:
        """Logs with unflushed data whose flush.ms has elapsed since their last flush (Kafka's flushDirtyLogs), and
        logs that rolled a segment since (Kafka's roll schedules a flush up to the new segment): so the recovery
        point moves at least every segment, and recovery after a crash reads at most the active segments."""
        return [
            plog
            for plog in self._all_logs()
            if plog.has_unflushed() and (now_ms - plog.last_flush_ms >= plog.config.flush_ms or plog.rolled_since_flush)
        ]

    def compaction_due(self, now_ms: int) -> list[PartitionLog]:
        """Compacted logs to clean now, dirtiest first, at most log.cleaner.threads minus those running.

        Kafka's LogCleanerManager.grabFilthiestCompactedLog: a log qualifies when its cleanable
        ratio exceeds min.cleanable.dirty.ratio or a dirty segment is older than
        max.compaction.lag.ms; logs being compacted and logs whose last compaction failed
        (Kafka's uncleanable partitions) are skipped. Call on the event-loop thread, then for each
        log ``plog.compact(now_ms)`` in a worker thread and ``plog.finish_compaction()`` back here.
        """
        cleaner = self.cleaner_config
        if not cleaner.enable:
            return []
        logs = list(self._all_logs())
        slots = cleaner.threads - sum(1 for plog in logs if plog.compacting)
        if slots <= 0:
            return []
        ranked = []
        for plog in logs:
            if not plog.config.compact_enabled or plog.compacting or plog.compaction_failed:
                continue
            cleanable = plog.cleanable_range(now_ms)
            if cleanable.is_due(plog.config):
                ranked.append((cleanable.cleanable_ratio, plog))
        ranked.sort(key=lambda item: item[0], reverse=True)
        return [plog for _, plog in ranked[:slots]]

    # -- helpers -----------------------------------------------------------------------------------------

    def _recovery_point_moved(self) -> None:
        self.recovery_points_moved = True

    def sync_log_dirs(self) -> None:
        """fsync every log dir, so partition directories renamed or removed there stay so after a power loss
        (a topic deletion: file work, for a worker thread)."""
        for log_dir in self.log_dirs:
            fs.sync_dir(log_dir)

    def _log_dir_failed(self, failed: PartitionLog) -> None:
        """Kafka's LogDirFailureChannel: an I/O error one log could not undo takes its whole log dir offline."""
        log_dir = failed.dir.parent
        log.error("log dir %s is offline: its partitions take no appends until the broker restarts", log_dir)
        for plog in list(self._all_logs()):
            if plog.dir.parent == log_dir:
                plog.take_offline()

    def _all_logs(self) -> Iterator[PartitionLog]:
        for topic in self.topics.values():
            yield from topic.partitions

    def _topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
        return topic

    def _topic_config(self, name: str, overrides: dict[str, str]) -> LogConfig:
        """The effective config of a loaded topic; overrides that no longer validate are skipped, not fatal."""
        try:
            return LogConfig.from_properties(overrides, self.default_config)
        except InvalidConfig:
            config = self.default_config
            for key, value in overrides.items():
                try:
                    config = LogConfig.from_properties({key: value}, config)
                except InvalidConfig as e:
                    log.warning("topic %s: ignoring stored config %s=%s: %s", name, key, value, e)
            return config

    def _new_partition(self, topic: Topic, partition: int, log_dir: Path | None = None) -> PartitionLog:
        """Create one partition directory with its metadata files and an empty log."""
        if log_dir is None:
            log_dir = self.place_partitions(1)[0]
        path = log_dir / f"{topic.name}-{partition}"
        if path.exists():
            raise KafkaStorageError(f"{path} already exists")
        fs.mkdir(path)
        _write_topic_id(path, topic.topic_id, sync_dir=False)
        write_properties(path, topic.overrides, sync_dir=False)
        fs.sync_dir(path)  # once for both (its own name in the log dir: by make_partitions)
        return PartitionLog(
            path, topic.name, partition, topic.config, clock_ms=self._clock, cleaner_config=self.cleaner_config,
            on_offline=self._log_dir_failed, on_flushed=self._recovery_point_moved, changes=topic.changes,
        )


def log_partitions_added(topic: str, current: int, total: int) -> None:
    """The operator's line for CreatePartitions."""
    log.info("created partitions %d-%d of topic %s (now %d partitions)", current, total - 1, topic, total)


def _parse_partition_dir(name: str) -> tuple[str, int] | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def _write_topic_id(partition_dir: Path, topic_id: uuid.UUID, *, sync_dir: bool = True) -> None:
    write_atomically(partition_dir / PARTITION_METADATA_FILE, f"version: 0\ntopic_id: {encode_topic_id(topic_id)}\n",
                     sync_dir=sync_dir)


def read_topic_id(partition_dir: Path) -> uuid.UUID | None:
    try:
        fields = dict(
            line.split(":", 1) for line in (partition_dir / PARTITION_METADATA_FILE).read_text().splitlines() if ":" in line
        )
        return decode_topic_id(fields["topic_id"].strip())
    except (OSError, KeyError, ValueError):
        log.warning("no readable %s in %s", PARTITION_METADATA_FILE, partition_dir)
        return None


def write_properties(partition_dir: Path, props: Mapping[str, str], *, sync_dir: bool = True) -> None:
    write_atomically(partition_dir / TOPIC_PROPERTIES_FILE, "".join(f"{k}={v}\n" for k, v in sorted(props.items())),
                     sync_dir=sync_dir)


def _read_properties(partition_dir: Path) -> dict[str, str]:
    try:
        text = (partition_dir / TOPIC_PROPERTIES_FILE).read_text(encoding="utf-8")
    except OSError:
        return {}
    props = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props
