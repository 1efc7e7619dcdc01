"""Consumer groups in the gateway: the sans-IO GroupCoordinator on trio, persisted to __consumer_offsets.

`ConsumerOffsetsLog` is the coordinator's OffsetsLog over storage (Kafka's key/value records, one v2
batch per append). `GroupService` turns the coordinator's respond-callbacks into awaitables, runs its timers
(session expiry, rebalance timeouts) from one trio task, and loads the offsets partitions in the background
at start-up: until a partition is loaded its groups get COORDINATOR_LOAD_IN_PROGRESS, as in Kafka.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import trio

from logway.coordinator.group_config import GroupConfig
from logway.coordinator.group_coordinator import GroupCoordinator
from logway.gateway.group_commit import flush_logs
from logway.wire.batch import (
    BASE_SEQUENCE_POS,
    BATCH_HEADER_SIZE,
    CRC_POS,
    BatchHeader,
    CorruptBatch,
    compute_crc,
    parse_header,
)
from logway.wire.errors import KafkaError
from logway.wire.records import ControlType, DecodedBatch, build_batch, control_type, decode_batch

if TYPE_CHECKING:
    from logway.gateway.broker import Broker
    from logway.gateway.config import BrokerConfig
    from logway.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's offsets topic settings (offsets.topic.segment.bytes default 100 MiB, compacted).
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}
_READ_CHUNK = 4 * 1024 * 1024
SLOW_ANSWER_S = 5.0  # group requests parked longer than this are logged (rebalance diagnosis)


def _now_ms() -> int:
    return int(time.time() * 1000)


class ConsumerOffsetsLog:
    """coordinator.offsets_log.OffsetsLog over the `__consumer_offsets` partitions of the broker's log (and, given
    another topic, the same over another compacted coordinator topic: `__share_group_state`)."""

    def __init__(self, broker: Broker, topic: str = OFFSETS_TOPIC, config: dict[str, str] | None = None) -> None:
        self.broker = broker
        self.topic = topic
        self.topic_config = OFFSETS_TOPIC_CONFIG if config is None else config
        self.unflushed: set[PartitionLog] = set()
        # Transactional offset records with no marker yet when a partition was read: partition -> pid -> records.
        self.pending_txn: dict[int, dict[int, list[tuple[bytes, bytes | None]]]] = {}

    def ensure_topic(self, partitions: int) -> None:
        if self.topic not in self.broker.logs.topics:
            self.broker.logs.create_topic(self.topic, partitions, dict(self.topic_config))

    def append(
        self, partition: int, records: list[tuple[bytes, bytes | None]], now_ms: int,
        producer: tuple[int, int] | None = None,
    ) -> None:
        if producer is None:
            batch = build_batch([(k, v, ()) for k, v in records], base_timestamp=now_ms)
        else:
            # A transactional batch, as Kafka's TxnOffsetCommit writes it (no sequence: the coordinator's own write).
            batch = _without_sequence(build_batch(
                [(k, v, ()) for k, v in records], base_timestamp=now_ms, producer_id=producer[0],
                producer_epoch=producer[1], base_sequence=0, is_transactional=True))
        plog = self.broker.partition(self.topic, partition)
        # The coordinator's writes are acks=all in Kafka (GroupMetadataManager): flush.acks.all.enable applies.
        if plog.append(bytearray(batch), now_ms=now_ms, coordinator=True, acks_all=True).flush_needed:
            self.unflushed.add(plog)

    def append_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool, now_ms: int) -> None:
        plog = self.broker.partition(self.topic, partition)
        if plog.append_marker(producer_id, producer_epoch, commit, now_ms=now_ms).flush_needed:
            self.unflushed.add(plog)

    async def flush_pending(self) -> None:
        """fsync (by the group commit) the partitions whose appends must be flushed before they are answered."""
        await flush_logs(self.broker.group_commit, self.unflushed)

    def read(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        """Every keyed record of one offsets partition; a batch that fails its CRC is logged and skipped.

        A damaged batch costs only the commits it holds: the ones stored after it still load, also on every
        later restart. Damage the batch chain itself cannot be walked past raises CorruptRecord.
        """
        plog = self.broker.partition(self.topic, partition)
        pending = self.pending_txn[partition] = {}
        yield from self.read_log(plog, pending)
        if not pending:
            del self.pending_txn[partition]

    def read_log(
        self, plog: PartitionLog, pending: dict[int, list[tuple[bytes, bytes | None]]] | None = None,
    ) -> Iterator[tuple[bytes, bytes | None]]:
        """The keyed records of a compacted coordinator log; transactional ones wait in ``pending`` for their marker."""
        partition = plog.partition
        offset, end = plog.log_start_offset, plog.log_end_offset
        if pending is None:
            pending = {}
        # Transactional offsets (TxnOffsetCommit) count at their COMMIT marker and not at all after an ABORT.
        while offset < end:
            data = plog.read_bytes(offset, _READ_CHUNK)
            if not data:
                break
            for header, batch in _whole_batches(data):
                if batch is None:
                    log.error("Skipping damaged batch at offsets %d-%d of %s-%d (record batch CRC-32C mismatch)",
                              header.base_offset, header.last_offset, plog.topic, partition)
                elif header.is_control:
                    committed = pending.pop(header.producer_id, [])
                    if batch.records and control_type(batch.records[0]) == ControlType.COMMIT:
                        yield from committed
                else:
                    records = [(r.key, r.value) for r in batch.records if r.offset >= offset and r.key is not None]
                    if header.is_transactional:
                        pending.setdefault(header.producer_id, []).extend(records)
                    else:
                        yield from records
                offset = max(offset, header.last_offset + 1)


def _without_sequence(batch: bytes) -> bytearray:
    """The batch with baseSequence -1 (RecordBatch.NO_SEQUENCE), re-signed: what Kafka's coordinators write."""
    out = bytearray(batch)
    out[BASE_SEQUENCE_POS : BASE_SEQUENCE_POS + 4] = b"\xff\xff\xff\xff"
    out[CRC_POS : CRC_POS + 4] = compute_crc(out, 0, len(out)).to_bytes(4, "big")
    return out


def _whole_batches(data: bytes) -> Iterator[tuple[BatchHeader, DecodedBatch | None]]:
    """(header, decoded batch or None if it fails its checks) for each whole batch; a trailing partial one is left."""
    pos = 0
    while len(data) - pos >= BATCH_HEADER_SIZE:
        header = parse_header(data, pos)
        if header.size < BATCH_HEADER_SIZE:
            raise CorruptBatch(f"batch length {header.batch_length} shorter than a batch header")
        if header.size > len(data) - pos:
            return
        try:
            yield header, decode_batch(data, pos)
        except CorruptBatch:
            yield header, None
        pos += header.size


class BrokerTopics:
    """coordinator.topics_image.TopicsImage over the broker's live topics (what KIP-848 assignments name)."""

    def __init__(self, broker: Broker) -> None:
        self._topics = broker.logs.topics

    def topic_id(self, name: str) -> uuid.UUID | None:
        topic = self._topics.get(name)
        return None if topic is None else topic.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        # Linear, but only for describing assignments (ConsumerGroupDescribe): not on a request's hot path.
        return next((t.name for t in self._topics.values() if t.topic_id == topic_id), None)

    def partition_count(self, name: str) -> int:
        topic = self._topics.get(name)
        return 0 if topic is None else len(topic.partitions)

    def names(self) -> Iterable[str]:
        return list(self._topics)


def group_config(config: BrokerConfig) -> GroupConfig:
    """The coordinator's settings from the broker's properties (Kafka's names)."""
    props = config.properties
    return GroupConfig(
        num_partitions=config.offsets_topic_num_partitions,
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        offsets_retention_ms=int(props["offsets.retention.minutes"]) * 60_000,
        max_session_timeout_ms=int(props["group.max.session.timeout.ms"]),
        min_session_timeout_ms=int(props["group.min.session.timeout.ms"]),
        offset_metadata_max_bytes=int(props["offset.metadata.max.bytes"]),
        consumer_session_timeout_ms=int(props["group.consumer.session.timeout.ms"]),
        consumer_heartbeat_interval_ms=int(props["group.consumer.heartbeat.interval.ms"]),
        consumer_max_size=int(props["group.consumer.max.size"]),
        consumer_assignors=tuple(a.strip() for a in props["group.consumer.assignors"].split(",") if a.strip()),
        consumer_assignment_interval_ms=int(props["group.consumer.assignment.interval.ms"]),
        consumer_regex_refresh_interval_ms=int(props["group.consumer.regex.refresh.interval.ms"]),
        consumer_migration_policy=props["group.consumer.migration.policy"],
        share_session_timeout_ms=int(props["group.share.session.timeout.ms"]),
        share_heartbeat_interval_ms=int(props["group.share.heartbeat.interval.ms"]),
        share_max_size=int(props["group.share.max.size"]),
        share_assignment_interval_ms=int(props["group.share.assignment.interval.ms"]),
        share_record_lock_duration_ms=int(props["group.share.record.lock.duration.ms"]),
        share_delivery_count_limit=int(props["group.share.delivery.count.limit"]),
        share_partition_max_record_locks=int(props["group.share.partition.max.record.locks"]),
    )


class GroupService:
    """Async front of the GroupCoordinator, owned by the Broker."""

    def __init__(self, broker: Broker) -> None:
        config = broker.config
        self.offsets_log = ConsumerOffsetsLog(broker)
        props = config.properties
        self.topics = BrokerTopics(broker)
        self.coordinator = GroupCoordinator(self.offsets_log, group_config(config), self.topics)
        self._retention_check_ms = int(props["offsets.retention.check.interval.ms"])
        self._wakeup = trio.Event()

    def open(self) -> None:
        self.offsets_log.ensure_topic(self.coordinator.num_partitions)

    async def call(self, method: Callable[..., None], /, **kwargs: Any) -> Any:
        """Call a coordinator method and wait for its respond-callback."""
        done = trio.Event()
        box: list[Any] = []

        def respond(result: Any) -> None:
            box.append(result)
            done.set()

        started = time.monotonic()
        method(now_ms=_now_ms(), respond=respond, **kwargs)
        self._wakeup.set()  # the call may have added an earlier timer
        await done.wait()
        waited = time.monotonic() - started
        if waited > SLOW_ANSWER_S:
            # A parked JoinGroup/SyncGroup also holds back every later request on its connection (as in Kafka).
            request = kwargs.get("request")  # JoinGroup passes its fields as one JoinGroupRequest
            group_id = kwargs.get("group_id") if request is None else request.group_id
            member_id = kwargs.get("member_id") if request is None else request.member_id
            log.info("%s of group %s (member %s) answered after %.1f s", method.__name__,
                     group_id, member_id or "-", waited)
        # A commit is answered only once it is as durable as the flush policy says.
        await self.offsets_log.flush_pending()
        return box[0]

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._load_partitions)
            nursery.start_soon(self._expire_offsets_loop)
            task_status.started()
            await self._timer_loop()

    async def _load_partitions(self) -> None:
        started = time.monotonic()
        coordinator = self.coordinator
        for partition in sorted(coordinator.loading):
            records = await trio.to_thread.run_sync(self._read_offsets_partition, partition)
            coordinator.load(partition, _now_ms(), records, self.offsets_log.pending_txn.pop(partition, None))
            self._wakeup.set()
        log.info("loaded %d groups' offsets partitions in %.2f s", coordinator.num_partitions, time.monotonic() - started)

    def _read_offsets_partition(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        """The records of one offsets partition, up to damage that cannot be read past.

        Kafka's GroupMetadataManager logs "Error loading offsets from ..." and serves the partition anyway;
        the broker must not die of it. Unlike Kafka, which then drops what it had read of that partition,
        the groups keep the commits read before the damage.
        """
        records: list[tuple[bytes, bytes | None]] = []
        try:
            for record in self.offsets_log.read(partition):
                records.append(record)
        except (KafkaError, CorruptBatch) as exc:
            log.error("Error loading offsets from %s-%d after %d records: %s", OFFSETS_TOPIC, partition, len(records), exc)
        return records

    async def _timer_loop(self) -> None:
        while True:
            deadline = self.coordinator.tick(_now_ms())
            self._wakeup = trio.Event()
            if deadline is None:
                await self._wakeup.wait()
            else:
                with trio.move_on_after(max(0, deadline - _now_ms()) / 1000):
                    await self._wakeup.wait()

    async def _expire_offsets_loop(self) -> None:
        while True:
            await trio.sleep(self._retention_check_ms / 1000)
            if not self.coordinator.loading:
                self.coordinator.expire_offsets(_now_ms())
