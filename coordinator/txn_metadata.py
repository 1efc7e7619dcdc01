"""One transactional id's state (Kafka's TransactionMetadata and TransactionState), sans-IO.

States and the transitions Kafka allows (TransactionState.validPreviousStates):

    Empty -> Ongoing -> PrepareCommit -> CompleteCommit -> Ongoing ...
                     -> PrepareAbort  -> CompleteAbort  -> Ongoing ...
             Ongoing -> PrepareEpochFence -> PrepareAbort (a zombie fenced or a transaction timed out)
    Empty / CompleteCommit / CompleteAbort -> Dead (transactional.id.expiration.ms)

A change is prepared on a copy (``transition``), persisted to ``__transaction_state`` and only then
made current, so a failed write leaves the id as it was (Kafka's pendingState / completeTransitionTo).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import IntEnum

from logway.coordinator.txn_schema import TxnLogValue

__all__ = ["TransactionMetadata", "TxnState", "InvalidTransition", "epoch_exhausted", "NO_PRODUCER_EPOCH"]

NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MAX_VALUE


class TxnState(IntEnum):
    """Kafka's TransactionState ids (the byte stored in TransactionLogValue.TransactionStatus)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's DescribeTransactions/ListTransactions report (TransactionState.stateName)."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}

_COMPLETE = {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
VALID_PREVIOUS: dict[TxnState, set[TxnState]] = {
    TxnState.EMPTY: set(_COMPLETE),
    TxnState.ONGOING: {TxnState.ONGOING, *_COMPLETE},
    TxnState.PREPARE_COMMIT: {TxnState.ONGOING},
    TxnState.PREPARE_ABORT: {TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE, *_COMPLETE},
    TxnState.COMPLETE_COMMIT: {TxnState.PREPARE_COMMIT},
    TxnState.COMPLETE_ABORT: {TxnState.PREPARE_ABORT},
    TxnState.DEAD: set(_COMPLETE),
    TxnState.PREPARE_EPOCH_FENCE: {TxnState.ONGOING},
}


class InvalidTransition(RuntimeError):
    """A transition Kafka's TransactionMetadata would refuse with an IllegalStateException (a coordinator bug)."""


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: one bump left is kept for fencing."""
    return epoch >= MAX_EPOCH - 1


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    previous_producer_id: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    next_producer_id: int = -1  # transaction version 2: the id a transaction ending at an exhausted epoch moves to
    client_version: int = 0  # ClientTransactionVersion: 2 when the transaction was run by a transaction-v2 client

    @property
    def in_completed_state(self) -> bool:
        return self.state in _COMPLETE

    def transition(self, state: TxnState, now_ms: int, **changes) -> TransactionMetadata:
        """A copy in ``state`` with ``changes`` applied; raises InvalidTransition for a move Kafka refuses."""
        if self.state not in VALID_PREVIOUS[state]:
            raise InvalidTransition(f"transactional id {self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}")
        changed = dataclasses.replace(self, state=state, last_update_ms=now_ms, **changes)
        changed.partitions = set(changes.get("partitions", self.partitions))
        return changed

    def to_log_value(self) -> TxnLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in self.partitions:
            by_topic.setdefault(topic, []).append(partition)
        return TxnLogValue(
            self.producer_id, self.producer_epoch, self.timeout_ms, int(self.state),
            {t: tuple(sorted(ps)) for t, ps in by_topic.items()}, self.last_update_ms, self.start_ms,
            self.previous_producer_id, self.next_producer_id, self.client_version,
        )

    @classmethod
    def from_log_value(cls, transactional_id: str, value: TxnLogValue) -> TransactionMetadata:
        return cls(
            transactional_id, value.producer_id, value.producer_epoch, value.timeout_ms, TxnState(value.state),
            {(t, p) for t, ps in value.partitions.items() for p in ps}, value.start_ms, value.last_update_ms,
            value.previous_producer_id, next_producer_id=value.next_producer_id, client_version=value.client_version,
        )
