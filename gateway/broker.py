"""The broker: configuration, the log, cluster identity, consumer groups, and the waits that tie appends to fetches.

One Broker per gateway process. It owns the storage LogManager and the GroupService, and runs the periodic
work (retention, time-based flushes, checkpoints, the log cleaner) as trio tasks; fsync and compaction run
in worker threads so the event loop never blocks on disk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import trio

from logway.coordinator.producer_ids import ProducerIdManager
from logway.gateway.client_quotas import QuotaStore
from logway.gateway.config import BrokerConfig
from logway.gateway.dynamic_broker_config import DynamicBrokerConfigs
from logway.gateway.fetch_heads import FetchHeads
from logway.gateway.fetch_sessions import FetchSessionCache
from logway.gateway.fetch_waiters import FetchWaiters, Watched
from logway.gateway.group_commit import GroupCommit
from logway.gateway.group_configs import GroupConfigs
from logway.gateway.groups import GroupService
from logway.gateway.meta_properties import load_cluster_id
from logway.gateway.metrics.stats import BrokerStats
from logway.gateway.shares import ShareService
from logway.gateway.transactions import TransactionService
from logway.server import request_time
from logway.server.audit import NO_AUDIT, Audit
from logway.server.audit_writer import AuditLog
from logway.server.config import ConfigError
from logway.server.quotas import ClientQuotas
from logway.server.security.ownership import Owners
from logway.server.security.realm import Realm
from logway.storage.cleaner import CleanerConfig
from logway.storage.config import LogConfig
from logway.storage.errors import KafkaStorageError, UnknownTopicOrPartition
from logway.storage.log_manager import CHECKPOINT_INTERVAL_MS, LogManager, log_partitions_added
from logway.storage.partition_log import PartitionLog
from logway.storage.topic import Topic

log = logging.getLogger(__name__)

# CreateTopics/CreatePartitions make this many partitions per worker-thread call (about 0.1-2 s of file work).
PARTITIONS_PER_CHUNK = 100


def _delete_logs(logs: list[PartitionLog]) -> None:
    for plog in logs:
        plog.delete()


def now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        # SCRAM users (logway users, AlterUserScramCredentials) and ACLs, for every listener of the broker.
        self.realm = Realm(config.log_dirs[0])
        # Dynamic broker configs (AlterConfigs on a BROKER resource) over server.properties.
        self.dynamic = DynamicBrokerConfigs(Path(config.log_dirs[0]), self.node_id)
        # Client quotas (DescribeClientQuotas / AlterClientQuotas), measured per request and kept in the first log dir.
        self.quotas = ClientQuotas(config.quota_windows, config.controller_quota_windows)
        self.quota_store = QuotaStore(Path(config.log_dirs[0]), self.quotas)
        self.logs = LogManager(
            [Path(d) for d in config.log_dirs], config.log_config,
            cleaner_config=config.cleaner_config, max_open_segments=config.max_open_segments,
        )
        self.cluster_id = ""
        self._waiters = FetchWaiters()
        self._creation_lock = trio.Lock()
        # Under ACLs, which principal each producer id was handed to (Produce refuses another's).
        self.producer_owners = Owners(200_000)
        self.stats = BrokerStats()  # counters for the metrics endpoint
        # KIP-227 incremental fetch sessions (gateway/fetch_sessions.py).
        self.fetch_sessions = FetchSessionCache(int(config.properties["max.incremental.fetch.session.cache.slots"]))
        # Each topic's partitions as a Fetch with nothing new answers them (gateway/fetch_heads.py).
        self.fetch_heads = FetchHeads(self.logs.topics)
        # Appends that must be fsynced before they are acknowledged share fsyncs (gateway/group_commit.py).
        self.group_commit = GroupCommit(self._flushed)
        # The audit log (audit.log.file): opened with the log, so an unwritable file stops start-up.
        self.audit: Audit = NO_AUDIT

    # --- lifecycle ------------------------------------------------------------------------------

    def open(self) -> None:
        if self.config.audit is not None:
            try:
                self.audit = AuditLog(self.config.audit)
            except OSError as exc:
                raise ConfigError(f"audit.log.file={self.config.audit.file}: cannot open: {exc.strerror or exc}") \
                    from None
            log.info("audit log: %s", self.config.audit.file)
        self.cluster_id = load_cluster_id([Path(d) for d in self.config.log_dirs], self.node_id,
                                          self.config.properties.get("cluster.id") or "")
        self._load_acls()
        self.dynamic.load()
        self.quota_store.load()
        self.logs.reconfigure(*self._log_defaults())  # before the logs load, so they open with the defaults
        self.logs.open()
        self.producer_ids = ProducerIdManager(Path(self.config.log_dirs[0]) / "producer-id-block")
        self.group_configs = GroupConfigs(Path(self.config.log_dirs[0]), self.config.properties,
                                          self.config.given_properties)
        self.group_configs.load()
        self.groups = GroupService(self)
        self.groups.open()
        self.shares = ShareService(self)
        self.groups.coordinator.shares.member_left = self.shares.member_left
        self.groups.coordinator.admin.share_group_deleted = self.shares.group_deleted
        self.transactions = TransactionService(self)
        log.info(
            "broker %d of cluster %s: %d topics in %s",
            self.node_id, self.cluster_id, len(self.logs.topics), ", ".join(self.config.log_dirs),
        )

    def close(self) -> None:
        self.logs.close()
        self.audit.close()

    def _load_acls(self) -> None:
        """With authorizer.class.name set, the stored ACLs; without it, no authorization at all, as Kafka."""
        config = self.config
        if not config.authorizer_enabled:
            return
        try:
            self.realm.load_acls(config.super_users, config.allow_everyone_if_no_acl_found)
        except (OSError, ValueError) as exc:
            raise KafkaStorageError(str(exc)) from None
        log.info("authorizer on: %d ACLs, super users %s", len(self.realm.authorizer.acls), sorted(config.super_users))

    @property
    def authorizer(self):
        """The ACLs of the broker's realm (None: no authorization)."""
        return self.realm.authorizer

    async def run_background(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        if self.quotas.request.enabled:  # a stored request_percentage quota: time the connections' requests
            request_time.enable()
        async with trio.open_nursery() as nursery:
            await nursery.start(self.group_commit.run)  # first: the coordinators' loading may wait on it
            nursery.start_soon(self._retention_loop)
            nursery.start_soon(self._flush_loop)
            if self.logs.cleaner_config.enable:
                nursery.start_soon(self._cleaner_loop)
            await nursery.start(self.groups.run)
            await nursery.start(self.shares.run)
            await nursery.start(self.transactions.run)
            task_status.started()

    async def _retention_loop(self) -> None:
        """Retention and delayed deletes every few seconds; Kafka's checkpoint files every minute, off the loop."""
        interval = min(max(self.config.retention_check_interval_ms, 100) / 1000, 5.0)
        last_checkpoint = trio.current_time()
        while True:
            await trio.sleep(interval)
            try:
                self.logs.maintenance(now_ms())
                self.stats.retention_runs += 1
                if trio.current_time() - last_checkpoint >= CHECKPOINT_INTERVAL_MS / 1000:
                    last_checkpoint = trio.current_time()
                    await trio.to_thread.run_sync(self.logs.write_checkpoints, self.logs.checkpoint_snapshot())
            except Exception:
                log.exception("log maintenance failed")

    async def _flush_loop(self) -> None:
        """Kafka's log flusher: fsync the logs whose flush.ms has passed since their last flush, and write the
        recovery-point checkpoint after flushes moved recovery points.

        Kafka checks every log.flush.scheduler.interval.ms, by default never (so there flush.ms alone does
        nothing, KAFKA-19151), and writes the checkpoint every log.flush.offset.checkpoint.interval.ms (60 s);
        Logway checks every second (or at that interval, when shorter) and writes the checkpoint within a
        second of a flush, so that recovery after a power loss reads only what was not fsynced.
        """
        interval = min(int(self.config.properties["log.flush.scheduler.interval.ms"]), 1000) / 1000
        while True:
            await trio.sleep(max(interval, 0.01))
            for partition in self.logs.flush_due(now_ms()):
                try:
                    await trio.to_thread.run_sync(partition.flush)
                except KafkaStorageError:
                    pass  # the log went offline and logged why; the other logs are still flushed
                self._flushed(partition)
            if self.logs.recovery_points_moved:
                snapshot = self.logs.checkpoint_snapshot(recovery_points_only=True)
                try:
                    await trio.to_thread.run_sync(self.logs.write_checkpoints, snapshot)
                except OSError as exc:
                    log.error("writing the recovery-point checkpoint failed (retried after the next flush): %s", exc)

    def _flushed(self, plog: PartitionLog) -> None:
        """A flush of ``plog`` ended: its high watermark may have moved past appends that waited for it."""
        self.notify_append(plog.topic, plog.partition)

    async def _cleaner_loop(self) -> None:
        """Kafka's log cleaner: compact due logs in worker threads, swap the result in on the loop."""
        while True:
            due = self.logs.compaction_due(now_ms())
            if not due:
                await trio.sleep(self.logs.cleaner_config.backoff_ms / 1000)  # dynamic: read each time
                continue
            async with trio.open_nursery() as nursery:
                for plog in due:
                    nursery.start_soon(self._compact, plog)

    async def _compact(self, plog: PartitionLog) -> None:
        try:
            stats = await trio.to_thread.run_sync(plog.compact, now_ms())
        except Exception:
            self.stats.compactions_failed += 1
            log.exception("compaction of %s-%d failed", plog.topic, plog.partition)
            return
        finally:
            plog.finish_compaction()
        self.stats.compactions += 1
        self.stats.compaction_segments_cleaned += stats.segments_cleaned
        self.stats.compaction_bytes_removed += stats.bytes_removed
        # Kafka's LogCleaner logs a summary per cleaning ("Log cleaner thread 0 cleaned log ... (dirty section
        # = [x, y])" and its CleanerStats); the same numbers in one line.
        log.info("compacted %s-%d (offsets %d-%d): %d segments into %d, %d bytes removed (%d -> %d), %d of %d "
                 "records removed, in %.1f s", plog.topic, plog.partition, stats.first_dirty_offset,
                 stats.end_offset - 1, stats.segments_cleaned, stats.segments_written, stats.bytes_removed,
                 stats.bytes_before, stats.bytes_after, stats.records_removed, stats.records_read,
                 stats.duration_ms / 1000)

    # --- topics -----------------------------------------------------------------------------------

    def partition(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition; raises UnknownTopicOrPartition."""
        return self.logs.get_partition(topic, partition)

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        """CreateTopics' file work in chunks on a worker thread, so other clients keep being answered meanwhile.

        The topic becomes visible (Metadata, Produce) only once every partition exists, as in Kafka where the
        controller commits a topic's records in one batch; creations run one at a time, like its event queue.
        """
        async with self._creation_lock:
            logs = self.logs
            topic = logs.begin_topic(name, partitions, configs)
            try:
                for first in range(0, partitions, PARTITIONS_PER_CHUNK):
                    dirs = logs.place_partitions(min(PARTITIONS_PER_CHUNK, partitions - first))
                    topic.partitions.extend(await trio.to_thread.run_sync(logs.make_partitions, topic, first, dirs))
            except BaseException:
                made, topic.partitions = topic.partitions, []
                logs.abort_topic(topic)
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(_delete_logs, made)
                raise
            logs.finish_topic(topic)
            return topic

    async def create_partitions(self, name: str, total_count: int) -> None:
        """CreatePartitions in chunks off the event loop; the new partitions appear together at the end."""
        async with self._creation_lock:
            logs = self.logs
            topic = logs.check_new_partition_count(name, total_count)
            current = len(topic.partitions)
            made: list[PartitionLog] = []
            try:
                for first in range(current, total_count, PARTITIONS_PER_CHUNK):
                    dirs = logs.place_partitions(min(PARTITIONS_PER_CHUNK, total_count - first), made)
                    made.extend(await trio.to_thread.run_sync(logs.make_partitions, topic, first, dirs))
                if logs.topics.get(name) is not topic:
                    raise UnknownTopicOrPartition(f"Topic '{name}' was deleted while its partitions were created.")
            except BaseException:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(_delete_logs, made)
                raise
            topic.partitions.extend(made)
            log_partitions_added(name, current, total_count)

    async def alter_topic_config(self, name: str, change: Callable[[dict[str, str]], dict[str, str] | None]) -> None:
        """AlterConfigs on a topic: ``change`` maps the current overrides to the new ones (None: validate only).

        One at a time with topic and partition creation (so no change is lost and new partitions get it);
        the properties files are written on a worker thread.
        """
        async with self._creation_lock:
            topic = self.logs.topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartition(f"Topic {name} does not exist")
            overrides = change(dict(topic.overrides))
            if overrides is None:
                return
            try:
                await trio.to_thread.run_sync(self.logs.alter_config, name, overrides)
            except OSError as exc:
                if self.logs.topics.get(name) is not topic:
                    raise UnknownTopicOrPartition(f"Topic {name} was deleted while its configs changed.") from None
                raise KafkaStorageError(f"writing the configs of topic {name} failed: {exc}") from None

    def _log_defaults(self) -> tuple[LogConfig, CleanerConfig]:
        """The topic defaults and cleaner settings from server.properties and the dynamic broker configs."""
        if not self.dynamic.default and not self.dynamic.per_broker:
            return self.config.log_config, self.config.cleaner_config
        props = self.dynamic.effective(self.config.properties)
        return LogConfig.from_broker_properties(props), CleanerConfig.from_broker_properties(props)

    async def alter_broker_config(self, level: str, change: Callable[[dict[str, str]], dict[str, str] | None]) -> None:
        """AlterConfigs on a BROKER resource ("" = cluster default, else this node's id): ``change`` maps the
        level's current dynamic configs to the new ones (None: validate only). The file is written first
        (on a worker thread), then the logs take the new defaults at once. One at a time with topic and
        partition creation, so partitions being made never miss a new default."""
        async with self._creation_lock:
            new = change(dict(self.dynamic.levels[level]))
            if new is None:
                return
            try:
                await trio.to_thread.run_sync(self.dynamic.save, level, new)
            except OSError as exc:
                raise KafkaStorageError(f"writing the dynamic broker configs failed: {exc}") from None
            self.dynamic.levels[level] = new
            self.logs.reconfigure(*self._log_defaults())
            log.info("dynamic broker configs of %s are now %s", f"broker {level}" if level else "the cluster", new)

    def auto_create_topic(self, name: str) -> None:
        """Create a topic on first use with num.partitions (auto.create.topics.enable), as Kafka does."""
        log.info("auto-creating topic %s (auto.create.topics.enable, num.partitions=%d)", name, self.config.num_partitions)
        self.logs.create_topic(name, self.config.num_partitions)

    def next_producer_id(self) -> int:
        return self.producer_ids.next_producer_id()

    # --- appends wake fetches -----------------------------------------------------------------------

    def notify_append(self, topic: str, partition: int) -> None:
        self._waiters.notify(topic, partition)

    async def wait_for_append(self, partitions: Watched, deadline: float) -> bool:
        """Sleep until one of the partitions (by topic: see FetchWaiters.wait) gets an append or trio's clock
        reaches ``deadline``; True if woken by an append."""
        self.stats.fetches_waiting += 1
        try:
            return await self._waiters.wait(partitions, deadline)
        finally:
            self.stats.fetches_waiting -= 1
