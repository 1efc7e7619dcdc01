"""Transactions in the gateway: the sans-IO TransactionCoordinator on trio, persisted to __transaction_state.

`TransactionStateLog` is the coordinator's TxnStateLog over storage (Kafka's key/value records, one batch
per append). `LogMarkerWriter` writes COMMIT/ABORT markers straight into the local partition logs (what
Kafka's WriteTxnMarkers does between brokers) and into __consumer_offsets through the group coordinator.
`TransactionService` loads the state partitions in the background at start-up (COORDINATOR_LOAD_IN_PROGRESS
until then; the topic itself is created when the first transactional id is stored, as in Kafka), aborts timed-out transactions every transaction.abort.timed.out.transaction.cleanup.interval.ms
and expires idle transactional ids (transactional.id.expiration.ms), as Kafka's TransactionStateManager.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import trio

from logway.coordinator.txn_coordinator import TransactionCoordinator
from logway.gateway.group_commit import flush_logs
from logway.gateway.groups import OFFSETS_TOPIC, ConsumerOffsetsLog
from logway.server.audit_changes import transaction_timed_out
from logway.storage.errors import InvalidProducerEpoch, UnknownTopicOrPartition
from logway.wire.batch import CorruptBatch
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.records import build_batch

if TYPE_CHECKING:
    from logway.gateway.broker import Broker
    from logway.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
# Kafka's transaction state topic settings (transaction.state.log.segment.bytes default 100 MiB, compacted).
TXN_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}


def _now_ms() -> int:
    return int(time.time() * 1000)


class TransactionStateLog:
    """coordinator.txn_coordinator.TxnStateLog over the `__transaction_state` partitions."""

    def __init__(self, broker: Broker, unflushed: set[PartitionLog], partitions: int) -> None:
        self.broker = broker
        self.unflushed = unflushed
        self.partitions = partitions

    def append(self, partition: int, key: bytes, value: bytes | None, now_ms: int) -> None:
        if TXN_TOPIC not in self.broker.logs.topics:
            # Created on first use, as Kafka creates it for the first transactional id it coordinates.
            self.broker.logs.create_topic(TXN_TOPIC, self.partitions, dict(TXN_TOPIC_CONFIG))
            log.info("created %s with %d partitions", TXN_TOPIC, self.partitions)
        plog = self.broker.partition(TXN_TOPIC, partition)
        batch = bytearray(build_batch([(key, value, ())], base_timestamp=now_ms))
        if plog.append(batch, now_ms=now_ms, acks_all=True).flush_needed:  # acks=all, as Kafka's coordinator
            self.unflushed.add(plog)

    def read(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        """Every keyed record of one partition (the same reader as __consumer_offsets, without transactions)."""
        if TXN_TOPIC not in self.broker.logs.topics:
            return []  # no transactional id was ever used on this broker
        reader = ConsumerOffsetsLog(self.broker)
        plog = self.broker.partition(TXN_TOPIC, partition)
        records: list[tuple[bytes, bytes | None]] = []
        try:
            for record in reader.read_log(plog):
                records.append(record)
        except (KafkaError, CorruptBatch) as exc:
            log.error("Error loading transactions from %s-%d after %d records: %s", TXN_TOPIC, partition, len(records), exc)
        return records


class LogMarkerWriter:
    """coordinator.txn_coordinator.MarkerWriter over the local logs (Kafka's WriteTxnMarkers, without the network)."""

    def __init__(self, broker: Broker, unflushed: set[PartitionLog]) -> None:
        self.broker = broker
        self.unflushed = unflushed

    def write_markers(
        self, producer_id: int, producer_epoch: int, commit: bool, partitions: Iterable[tuple[str, int]], now_ms: int
    ) -> set[tuple[str, int]]:
        broker = self.broker
        partitions = list(partitions)
        offsets_partitions = [p for t, p in partitions if t == OFFSETS_TOPIC]
        failed = {(OFFSETS_TOPIC, p) for p in broker.groups.coordinator.complete_txn(
            producer_id, producer_epoch, commit, offsets_partitions, now_ms)} if offsets_partitions else set()
        for topic, index in partitions:
            if topic == OFFSETS_TOPIC:
                continue
            try:
                plog = broker.partition(topic, index)
                if plog.append_marker(producer_id, producer_epoch, commit, now_ms=now_ms).flush_needed:
                    self.unflushed.add(plog)
            except UnknownTopicOrPartition:
                continue  # Kafka drops the markers of a deleted partition
            except InvalidProducerEpoch as exc:
                log.warning("transaction marker for %s-%d refused: %s", topic, index, exc)
                continue
            except (KafkaError, OSError) as exc:
                log.warning("transaction marker for %s-%d failed: %s", topic, index, exc)
                failed.add((topic, index))
                continue
            broker.notify_append(topic, index)
        return failed


class TransactionService:
    """Async front of the TransactionCoordinator, owned by the Broker."""

    def __init__(self, broker: Broker) -> None:
        props = broker.config.properties
        self.unflushed: set[PartitionLog] = set()
        self.state_log = TransactionStateLog(broker, self.unflushed, int(props["transaction.state.log.num.partitions"]))
        self.coordinator = TransactionCoordinator(
            self.state_log,
            LogMarkerWriter(broker, self.unflushed),
            broker.next_producer_id,
            num_partitions=int(props["transaction.state.log.num.partitions"]),
            max_timeout_ms=int(props["transaction.max.timeout.ms"]),
            id_expiration_ms=int(props["transactional.id.expiration.ms"]),
            transaction_version=int(props["transaction.version"]),
        )
        self._abort_interval_s = int(props["transaction.abort.timed.out.transaction.cleanup.interval.ms"]) / 1000
        self._expire_interval_s = int(props["transaction.remove.expired.transaction.cleanup.interval.ms"]) / 1000

    async def ensure_topic(self) -> None:
        """Create __transaction_state (off the event loop) before the first transactional id is stored."""
        broker = self.state_log.broker
        if TXN_TOPIC not in broker.logs.topics:
            try:
                await broker.create_topic(TXN_TOPIC, self.state_log.partitions, dict(TXN_TOPIC_CONFIG))
                log.info("created %s with %d partitions", TXN_TOPIC, self.state_log.partitions)
            except KafkaError:
                pass  # created meanwhile by another request

    async def flush_pending(self) -> None:
        """fsync (by the group commit) the logs the coordinator's writes must be flushed in before they are answered."""
        await flush_logs(self.state_log.broker.group_commit, self.unflushed)
        await self.state_log.broker.groups.offsets_log.flush_pending()  # markers written to __consumer_offsets

    def take_unflushed(self) -> list[PartitionLog]:
        """The logs the coordinator's writes left to fsync, for a caller that has them flushed with its own
        appends (Produce v12, which adds partitions to transactions) and answers once they are."""
        logs = list(self.unflushed)
        self.unflushed.clear()
        return logs

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            await self._load_partitions()
            nursery.start_soon(self._expire_ids_loop)
            await self._abort_loop()

    async def _load_partitions(self) -> None:
        started = time.monotonic()
        coordinator = self.coordinator
        groups = self.state_log.broker.groups.coordinator
        while groups.loading:  # markers of a transaction completed at load may go to __consumer_offsets
            await trio.sleep(0.01)
        for partition in sorted(coordinator.loading):
            records = await trio.to_thread.run_sync(self.state_log.read, partition)
            coordinator.load(partition, records, _now_ms())
            await self.flush_pending()
        log.info("loaded %d transactions in %.2f s", len(coordinator.transactions()), time.monotonic() - started)

    async def _abort_loop(self) -> None:
        """Kafka's abortTimedOutTransactions (and the retry of markers that failed), every interval."""
        while True:
            await trio.sleep(self._abort_interval_s)
            try:
                for transactional_id in self.coordinator.abort_timed_out(_now_ms()):
                    self._audit_timeout(transactional_id)
                self.coordinator.retry_markers(_now_ms())
                await self.flush_pending()
            except Exception:
                log.exception("aborting timed-out transactions failed")

    def _audit_timeout(self, transactional_id: str) -> None:
        """A transaction the coordinator aborted at its timeout, for the audit log (no client asked for it)."""
        audit = self.state_log.broker.audit
        meta = self.coordinator.transaction(transactional_id)
        if audit.enabled and meta is not None:
            audit.record(transaction_timed_out(transactional_id, meta.producer_id, meta.producer_epoch,
                                               meta.timeout_ms))

    async def _expire_ids_loop(self) -> None:
        while True:
            await trio.sleep(self._expire_interval_s)
            try:
                self.coordinator.expire_transactional_ids(_now_ms())
                await self.flush_pending()
            except Exception:
                log.exception("expiring transactional ids failed")


def fenced_for_version(error: int, version: int, fenced_since: int) -> int:
    """PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for request versions older than ``fenced_since`` (KIP-588)."""
    if error == ErrorCode.producer_fenced and version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return error
