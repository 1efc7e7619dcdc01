"""Transaction coordinator (Kafka's TransactionCoordinator + TransactionStateManager), sans-IO.

Driven by calls with a ``now_ms`` clock. Every state change is written to ``__transaction_state`` (through
``TxnStateLog``) before it becomes current. Ending a transaction writes PrepareCommit/PrepareAbort, then the
COMMIT/ABORT markers to every partition in it (through ``MarkerWriter``), then CompleteCommit/CompleteAbort;
a transaction left in a Prepare state (a crash between the two writes, or a marker write that failed) is
completed at load and retried by ``tick``. The request handlers answer Kafka's error codes.

Transaction version 2 (KIP-890 part 2, ``end_txn_v2``): a client's EndTxn v5 bumps the producer epoch at
every commit or abort (the markers carry the new epoch, so a zombie of the old one is fenced at its next
write) and answers it; a retry is recognized by the previous epoch; an epoch at its end moves the producer to
a new id at epoch 0. Partitions join the transaction from the partition's own Produce v12 (``add_partitions``
with ``client_version`` 2) and the offsets partition from TxnOffsetCommit v5, with no AddPartitionsToTxn or
AddOffsetsToTxn from the client. With ``transaction_version`` (the cluster's finalized transaction.version) 1
or more, __transaction_state values are written in schema version 1, as Kafka 4 does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from logway.coordinator.partitioning import LoadedPartitions
from logway.coordinator.txn_metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TxnState,
    epoch_exhausted,
)
from logway.coordinator.txn_schema import SchemaError, decode_key, decode_value, encode_key, encode_value
from logway.wire.errors import ErrorCode as E
from logway.wire.errors import KafkaError

__all__ = ["MarkerWriter", "TransactionCoordinator", "TxnStateLog"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# Kafka's defaults: transaction.max.timeout.ms, transactional.id.expiration.ms, transaction.state.log.num.partitions.
DEFAULT_MAX_TIMEOUT_MS = 900_000
DEFAULT_ID_EXPIRATION_MS = 604_800_000
DEFAULT_NUM_PARTITIONS = 50


class TxnStateLog(Protocol):
    """Persistence for the compacted ``__transaction_state`` topic (the gateway implements it over storage)."""

    def append(self, partition: int, key: bytes, value: bytes | None, now_ms: int) -> None:
        """Append one record durably (under the flush policy); raise KafkaError or OSError on failure."""
        ...


class MarkerWriter(Protocol):
    def write_markers(
        self, producer_id: int, producer_epoch: int, commit: bool, partitions: Iterable[TopicPartition], now_ms: int
    ) -> set[TopicPartition]:
        """Append a COMMIT or ABORT control batch to each partition; return the ones that failed (to retry)."""
        ...


@dataclass(frozen=True, slots=True)
class InitResult:
    error: E
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    """Every transactional id of this broker, by ``__transaction_state`` partition."""

    def __init__(
        self,
        state_log: TxnStateLog,
        markers: MarkerWriter,
        next_producer_id: Callable[[], int],
        *,
        num_partitions: int = DEFAULT_NUM_PARTITIONS,
        max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
        id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS,
        transaction_version: int = 2,
    ) -> None:
        self._log = state_log
        self.transaction_version = transaction_version
        self._markers = markers
        self._next_producer_id = next_producer_id
        self._partitions = LoadedPartitions(num_partitions)
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self._txns: dict[str, TransactionMetadata] = {}

    # --- loading -----------------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        """How many partitions ``__transaction_state`` has."""
        return self._partitions.num_partitions

    @property
    def loading(self) -> frozenset[int]:
        """``__transaction_state`` partitions not loaded yet: their ids answer COORDINATOR_LOAD_IN_PROGRESS."""
        return self._partitions.loading

    def partition_for(self, transactional_id: str) -> int:
        """Kafka's TransactionStateManager.partitionFor: Utils.abs(transactionalId.hashCode) % partitions."""
        return self._partitions.partition_for(transactional_id)

    def load(self, partition: int, records: Iterable[tuple[bytes, bytes | None]], now_ms: int) -> None:
        """Replay a partition's records (the last one per id wins) and serve its ids.

        A transaction found in PrepareCommit/PrepareAbort gets its markers and its Complete state now, as
        Kafka's TransactionStateManager hands such transactions to the marker channel when it loads them.
        """
        loaded: dict[str, TransactionMetadata] = {}
        for key, value in records:
            try:
                tid = decode_key(key)
                if value is None:
                    loaded.pop(tid, None)
                else:
                    loaded[tid] = TransactionMetadata.from_log_value(tid, decode_value(value))
            except (SchemaError, ValueError, UnicodeDecodeError) as exc:
                log.error("skipping an unreadable record of __transaction_state-%d: %s", partition, exc)
        for tid, meta in loaded.items():
            if meta.state == TxnState.DEAD:
                continue
            if meta.state == TxnState.PREPARE_EPOCH_FENCE:  # never written by Kafka; be lenient
                meta.state = TxnState.ONGOING
            self._txns[tid] = meta
        self._partitions.add(partition)
        for meta in list(loaded.values()):
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                log.info("completing transaction of %s left in %s", meta.transactional_id, meta.state.kafka_name)
                self._complete(meta.transactional_id, now_ms)

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        """The current state of an id (for Describe/List and tests)."""
        return self._txns.get(transactional_id)

    def transactions(self) -> list[TransactionMetadata]:
        return list(self._txns.values())

    def _check_coordinator(self, transactional_id: str | None) -> E | None:
        if not transactional_id:
            return E.invalid_request
        if not self._partitions.serves(transactional_id):
            return E.coordinator_load_in_progress
        return None

    # --- InitProducerId ------------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_producer_id: int, expected_epoch: int, now_ms: int
    ) -> InitResult:
        """InitProducerId with a transactional id: a new epoch (or a new producer id), fencing older producers.

        ``expected_producer_id``/``expected_epoch`` are the v3+ fields (-1 when absent): a KIP-360 bump of a
        producer that is still the current one.
        """
        error = self._check_coordinator(transactional_id)
        if error is not None:
            return InitResult(error)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return InitResult(E.invalid_transaction_timeout)
        expected = (expected_producer_id, expected_epoch) if expected_producer_id != -1 else None
        meta = self._txns.get(transactional_id)
        if meta is None:
            producer_id = self._next_producer_id()
            meta = TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms,
                                       last_update_ms=now_ms, previous_producer_id=producer_id)  # as Kafka 4 writes it
            self._txns[transactional_id] = meta
        if expected is not None and not _valid_expected_producer(meta, *expected):
            return InitResult(E.producer_fenced)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return InitResult(E.concurrent_transactions)
        if meta.state == TxnState.ONGOING:
            # Kafka aborts the ongoing transaction with a fencing epoch bump and answers CONCURRENT_TRANSACTIONS:
            # the client retries and then gets the epoch bumped a second time (TransactionCoordinator).
            self._fence_and_abort(meta, now_ms)
            return InitResult(E.concurrent_transactions)
        if meta.state == TxnState.DEAD:
            return InitResult(E.concurrent_transactions)
        if epoch_exhausted(meta.producer_epoch) and (expected is None or expected[1] == meta.producer_epoch):
            changed = meta.transition(TxnState.EMPTY, now_ms, producer_id=self._next_producer_id(), producer_epoch=0,
                                      previous_producer_id=meta.producer_id, last_producer_epoch=NO_PRODUCER_EPOCH,
                                      timeout_ms=timeout_ms, partitions=set(), start_ms=-1)
        else:
            epoch = _bumped_epoch(meta, expected)
            if epoch is None:
                return InitResult(E.producer_fenced)
            new_epoch, last_epoch = epoch
            changed = meta.transition(TxnState.EMPTY, now_ms, producer_epoch=new_epoch, last_producer_epoch=last_epoch,
                                      timeout_ms=timeout_ms, partitions=set(), start_ms=-1)
        error = self._persist(changed, now_ms)
        if error is not None:
            return InitResult(error)
        return InitResult(E.none, changed.producer_id, changed.producer_epoch)

    # --- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------

    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition],
        now_ms: int, client_version: int = 0,
    ) -> E:
        """Put partitions in the producer's transaction (starting one if none is ongoing); ``client_version`` 2
        when a Produce v12 or TxnOffsetCommit v5 adds them (transaction version 2)."""
        meta, error = self._current(transactional_id, producer_id, producer_epoch)
        if error is not None:
            return error
        assert meta is not None
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return E.concurrent_transactions
        wanted = set(partitions)
        if meta.state == TxnState.ONGOING and wanted <= meta.partitions:
            return E.none
        start = meta.start_ms if meta.state == TxnState.ONGOING else now_ms
        changed = meta.transition(TxnState.ONGOING, now_ms, partitions=meta.partitions | wanted, start_ms=start,
                                  client_version=client_version)
        return self._persist(changed, now_ms) or E.none

    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition) -> E:
        """KIP-890 part 1: a transactional produce must go to a partition of the producer's ongoing transaction.

        While the id's state partition loads the answer is NOT_ENOUGH_REPLICAS, a retriable error, as Kafka's
        AddPartitionsToTxnManager maps the coordinator errors of a verification for the producer.
        """
        if not self._partitions.serves(transactional_id):
            return E.not_enough_replicas
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        if producer_epoch < meta.producer_epoch:
            return E.invalid_producer_epoch
        if meta.state != TxnState.ONGOING or tp not in meta.partitions or producer_epoch != meta.producer_epoch:
            return E.invalid_txn_state
        return E.none

    # --- EndTxn -------------------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, now_ms: int) -> E:
        """Commit or abort: PrepareCommit/PrepareAbort persisted, markers written, then the Complete state."""
        meta, error = self._current(transactional_id, producer_id, producer_epoch)
        if error is not None:
            return error
        assert meta is not None
        state = meta.state
        if state == TxnState.ONGOING:
            return self._end(meta, commit, now_ms)
        # Retries and mismatches, as TransactionCoordinator.endTransaction answers them.
        if state == TxnState.COMPLETE_COMMIT:
            return E.none if commit else E.invalid_txn_state
        if state == TxnState.COMPLETE_ABORT:
            return E.invalid_txn_state if commit else E.none
        if state == TxnState.PREPARE_COMMIT:
            return E.concurrent_transactions if commit else E.invalid_txn_state
        if state == TxnState.PREPARE_ABORT:
            return E.invalid_txn_state if commit else E.concurrent_transactions
        if state == TxnState.PREPARE_EPOCH_FENCE:
            return E.concurrent_transactions
        return E.invalid_txn_state  # Empty (nothing to end) or Dead

    def end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                   now_ms: int) -> InitResult:
        """EndTxn v5 (Kafka's endTransaction above transaction version 1): the error, and the producer id and
        epoch the client goes on with (-1, -1 with an error). Kafka's table for the finished states: Empty
        takes an abort at the current epoch (a new epoch, nothing to mark); CompleteCommit / CompleteAbort take
        a retry of the same end at the previous epoch (no change) or an abort at the current one."""
        error = self._check_coordinator(transactional_id)
        if error is not None:
            return InitResult(error)
        meta = self._txns.get(transactional_id)
        if meta is None:
            return InitResult(E.invalid_producer_id_mapping)
        retry_on_overflow = (meta.previous_producer_id == producer_id and producer_epoch == MAX_EPOCH - 1
                             and meta.producer_epoch == 0)
        retry = retry_on_overflow or meta.producer_epoch == producer_epoch + 1
        if meta.producer_id != producer_id and not retry_on_overflow:
            return InitResult(E.invalid_producer_id_mapping)
        if not _valid_v2_epoch(meta, producer_epoch, retry):
            return InitResult(E.producer_fenced)
        finished = {TxnState.COMPLETE_COMMIT: True, TxnState.COMPLETE_ABORT: False}
        if meta.state == TxnState.ONGOING:
            return self._end_v2(meta, commit, now_ms, nothing_added=False)
        if meta.state in finished:
            if retry:
                same = finished[meta.state] == commit
                return InitResult(E.none, meta.producer_id, meta.producer_epoch) if same else InitResult(
                    E.invalid_txn_state)
            return InitResult(E.invalid_txn_state) if commit else self._end_v2(meta, False, now_ms, nothing_added=True)
        if meta.state == TxnState.EMPTY and not commit:
            return self._end_v2(meta, False, now_ms, nothing_added=True)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            same = (meta.state == TxnState.PREPARE_COMMIT) == commit
            return InitResult(E.concurrent_transactions if same else E.invalid_txn_state)
        return InitResult(E.invalid_txn_state)

    def _end_v2(self, meta: TransactionMetadata, commit: bool, now_ms: int, *, nothing_added: bool) -> InitResult:
        """Kafka's prepareAbortOrCommit with an epoch bump (a new producer id to follow an exhausted epoch)."""
        next_id = self._next_producer_id() if epoch_exhausted(meta.producer_epoch) else -1
        prepared = meta.transition(
            TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, now_ms,
            producer_epoch=min(meta.producer_epoch + 1, MAX_EPOCH), last_producer_epoch=meta.producer_epoch,
            next_producer_id=next_id, client_version=2, start_ms=now_ms if nothing_added else meta.start_ms)
        error = self._persist(prepared, now_ms)
        if error is not None:
            return InitResult(error)
        self._complete(meta.transactional_id, now_ms)
        if next_id != -1:
            return InitResult(E.none, next_id, 0)
        return InitResult(E.none, prepared.producer_id, prepared.producer_epoch)

    def _end(self, meta: TransactionMetadata, commit: bool, now_ms: int) -> E:
        prepared = meta.transition(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, now_ms)
        error = self._persist(prepared, now_ms)
        if error is not None:
            return error
        self._complete(meta.transactional_id, now_ms)
        return E.none  # Kafka answers once the Prepare state is written; the markers follow

    def _complete(self, transactional_id: str, now_ms: int) -> None:
        """Write the markers of a prepared transaction, then its Complete state (retried by ``tick`` on failure)."""
        meta = self._txns[transactional_id]
        commit = meta.state == TxnState.PREPARE_COMMIT
        failed = self._markers.write_markers(meta.producer_id, meta.producer_epoch, commit, sorted(meta.partitions), now_ms)
        if failed:
            log.warning("transaction markers of %s failed on %s; retrying", transactional_id, sorted(failed))
            return
        moved = {}
        if meta.next_producer_id != -1:  # transaction version 2 past an exhausted epoch: the new id, epoch 0
            moved = {"producer_id": meta.next_producer_id, "producer_epoch": 0,
                     "previous_producer_id": meta.producer_id}
        done = meta.transition(TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT, now_ms,
                               partitions=set(), next_producer_id=-1, **moved)
        self._persist(done, now_ms)

    def _fence_and_abort(self, meta: TransactionMetadata, now_ms: int) -> None:
        """Kafka's prepareFenceProducerEpoch + endTransaction(ABORT): the old producer's epoch is no longer valid."""
        fenced = meta.transition(TxnState.PREPARE_EPOCH_FENCE, now_ms,
                                 producer_epoch=min(meta.producer_epoch + 1, 32767), last_producer_epoch=meta.producer_epoch)
        self._txns[meta.transactional_id] = fenced  # in memory only, as Kafka's pending state
        error = self._end(fenced, False, now_ms)
        if error is not None and error != E.none:
            self._txns[meta.transactional_id] = meta
            log.warning("aborting the transaction of %s failed: %s", meta.transactional_id, error.name)

    # --- timers --------------------------------------------------------------------------------------

    def abort_timed_out(self, now_ms: int) -> list[str]:
        """Abort ongoing transactions older than their timeout (Kafka's abortTimedOutTransactions); their ids."""
        aborted = []
        for meta in list(self._txns.values()):
            if meta.state == TxnState.ONGOING and meta.start_ms + meta.timeout_ms < now_ms:
                log.info("aborting transaction of %s (producer %d, epoch %d): it exceeded its %d ms timeout",
                         meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.timeout_ms)
                self._fence_and_abort(meta, now_ms)
                aborted.append(meta.transactional_id)
        return aborted

    def retry_markers(self, now_ms: int) -> None:
        """Complete transactions whose markers failed earlier."""
        for meta in list(self._txns.values()):
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._complete(meta.transactional_id, now_ms)

    def expire_transactional_ids(self, now_ms: int) -> list[str]:
        """Remove ids idle for transactional.id.expiration.ms with no transaction open (tombstones)."""
        expired = []
        for meta in list(self._txns.values()):
            if meta.in_completed_state and meta.last_update_ms + self.id_expiration_ms <= now_ms:
                try:
                    self._log.append(self.partition_for(meta.transactional_id), encode_key(meta.transactional_id),
                                     None, now_ms)
                except (KafkaError, OSError) as exc:
                    log.warning("expiring transactional id %s failed: %s", meta.transactional_id, exc)
                    continue
                del self._txns[meta.transactional_id]
                expired.append(meta.transactional_id)
        return expired

    # --- helpers -------------------------------------------------------------------------------------

    def _current(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[TransactionMetadata | None, E | None]:
        """The id's metadata if this producer id and epoch are its current ones (Kafka's checks, in order)."""
        error = self._check_coordinator(transactional_id)
        if error is not None:
            return None, error
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return None, E.invalid_producer_id_mapping
        if producer_epoch != meta.producer_epoch:
            return None, E.producer_fenced
        return meta, None

    def _persist(self, changed: TransactionMetadata, now_ms: int) -> E | None:
        """Write the new state and make it current; the error Kafka answers when the write fails."""
        tid = changed.transactional_id
        value = encode_value(changed.to_log_value(), null_partitions=changed.state == TxnState.EMPTY,
                             version=1 if self.transaction_version >= 1 else 0)
        try:
            self._log.append(self.partition_for(tid), encode_key(tid), value, now_ms)
        except KafkaError as exc:
            log.warning("append to __transaction_state for %s failed: %s", tid, exc)
            if exc.error_code in (E.unknown_topic_or_partition, E.not_enough_replicas, E.request_timed_out):
                return E.coordinator_not_available
            if exc.error_code in (E.record_list_too_large, E.message_too_large):
                return E.unknown_server_error
            return E.not_coordinator
        except OSError as exc:
            log.warning("append to __transaction_state for %s failed: %s", tid, exc)
            return E.not_coordinator
        self._txns[tid] = changed
        return None


def _valid_v2_epoch(meta: TransactionMetadata, producer_epoch: int, retry: bool) -> bool:
    """Kafka's isValidEpoch of a client's EndTxn v5: the current epoch, or a retry's where a retry can be."""
    if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return retry
    if meta.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        return retry or producer_epoch == meta.producer_epoch
    return producer_epoch == meta.producer_epoch


def _valid_expected_producer(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """Kafka's isValidProducerId: a new id, the current producer id, or the previous one with an exhausted epoch."""
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == meta.producer_id
        or (producer_id == meta.previous_producer_id and epoch_exhausted(epoch))
    )


def _bumped_epoch(meta: TransactionMetadata, expected: tuple[int, int] | None) -> tuple[int, int] | None:
    """(new epoch, last epoch) of Kafka's prepareIncrementProducerEpoch; None means PRODUCER_FENCED."""
    bumped = meta.producer_epoch + 1
    if expected is None or meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
        return bumped, meta.producer_epoch
    if expected[1] == meta.last_producer_epoch:
        # A retry of a bump whose answer was lost: the current epoch again.
        return meta.producer_epoch, meta.last_producer_epoch
    return None
