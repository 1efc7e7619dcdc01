"""One share partition (KIP-932): which records of a topic partition a share group has delivered, to whom,
and what became of them. Sans-IO: driven by calls and a clock.

Kafka's SharePartition. The share-partition start offset (SPSO) is the first offset not yet done; from it up
to ``end`` every offset has a state: AVAILABLE (to deliver, again), ACQUIRED (delivered to a member, locked
until ``group.share.record.lock.duration.ms``), ACKNOWLEDGED (accepted) or ARCHIVED (rejected, a gap, or past
``group.share.delivery.count.limit`` deliveries). Offsets from ``end`` on have never been delivered. A release,
a lapsed lock or a member that leaves makes a record AVAILABLE again (ARCHIVED once it reached the delivery
limit); the SPSO moves over finished offsets. At most ``group.share.partition.max.record.locks`` offsets are
in flight (acquired or waiting behind one), which bounds the state, so one entry per offset is kept.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from logway.coordinator.share_state_records import StateBatch
from logway.wire.errors import ErrorCode

__all__ = ["AcknowledgeType", "RecordState", "ShareLimits", "SharePartition"]

E = ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids (the delivery state persisted in ``__share_group_state``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # v2 (KIP-1222): keep the lock


@dataclass(frozen=True, slots=True)
class ShareLimits:
    """The group's share settings in force (broker defaults or the group's config)."""

    lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000


@dataclass(slots=True)
class _Offset:
    state: RecordState
    delivery_count: int
    member: str = ""
    deadline: int = 0


AcquiredRange = tuple[int, int, int]
"""(first offset, last offset, delivery count) of records handed to a member."""


class SharePartition:
    """The delivery state of one topic partition for one share group."""

    def __init__(self, start_offset: int, limits: ShareLimits | None = None) -> None:
        self.start = start_offset
        self.end = start_offset
        self.limits = limits or ShareLimits()
        self._offsets: dict[int, _Offset] = {}

    # --- reading ------------------------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where the next delivery starts: the first AVAILABLE offset in flight, else the first never delivered."""
        for offset in range(self.start, self.end):
            entry = self._offsets.get(offset)
            if entry is not None and entry.state is RecordState.AVAILABLE:
                return offset
        return self.end

    def can_acquire(self) -> bool:
        """Something is AVAILABLE in flight, or there is room for new records."""
        return self.next_fetch_offset() < self.end or self.end - self.start < self.limits.max_record_locks

    def in_flight(self) -> int:
        return self.end - self.start

    def acquired_by(self, member_id: str) -> list[int]:
        return [o for o, e in self._offsets.items() if e.state is RecordState.ACQUIRED and e.member == member_id]

    def state_of(self, offset: int) -> tuple[RecordState, int]:
        """(state, delivery count) of an offset (below the SPSO: ACKNOWLEDGED; from ``end`` on: AVAILABLE, 0)."""
        if offset < self.start:
            return RecordState.ACKNOWLEDGED, 0
        entry = self._offsets.get(offset)
        return (RecordState.AVAILABLE, 0) if entry is None else (entry.state, entry.delivery_count)

    def next_deadline(self) -> int | None:
        deadlines = [e.deadline for e in self._offsets.values() if e.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # --- acquiring ----------------------------------------------------------------------------------------

    def acquire(self, member_id: str, batches: Iterable[tuple[int, int, bool]], max_records: int,
                now_ms: int) -> list[AcquiredRange]:
        """Hand the member up to ``max_records`` records of these log batches ((first, last, is_control), from
        ``next_fetch_offset()``), whole batches as Kafka's batch-optimized mode does; offsets with no record
        (control batches, the holes between batches) are archived as they are passed."""
        acquired: list[int] = []
        deadline = now_ms + self.limits.lock_duration_ms
        for first, last, control in batches:
            if acquired and len(acquired) >= max_records:
                break
            if first > self.end:
                self._archive_range(self.end, first - 1)
            if control:
                if last >= self.end:
                    self._archive_range(max(first, self.end), last)
                continue
            if not self._acquire_batch(member_id, max(first, self.start), last, deadline, acquired):
                break
        return _ranges(acquired, self._offsets)

    def _acquire_batch(self, member_id: str, first: int, last: int, deadline: int, acquired: list[int]) -> bool:
        """Acquire the AVAILABLE offsets of one batch; False when the in-flight window is full."""
        for offset in range(first, last + 1):
            if offset >= self.end:
                if offset - self.start >= self.limits.max_record_locks:
                    return False
                self._offsets[offset] = _Offset(RecordState.AVAILABLE, 0)
                self.end = offset + 1
            entry = self._offsets.get(offset)
            if entry is None or entry.state is not RecordState.AVAILABLE:
                continue
            entry.state, entry.member, entry.deadline = RecordState.ACQUIRED, member_id, deadline
            entry.delivery_count += 1
            acquired.append(offset)
        return True

    def _archive_range(self, first: int, last: int) -> None:
        for offset in range(first, last + 1):
            self._offsets[offset] = _Offset(RecordState.ARCHIVED, 0)
        self.end = max(self.end, last + 1)
        self._advance()

    # --- acknowledging, releasing, lock expiry ------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[tuple[int, int, Sequence[int]]],
                    now_ms: int) -> tuple[ErrorCode, set[int]]:
        """Apply a member's acknowledgements ((first, last, types): one type for the whole range or one per
        offset). Every offset must be ACQUIRED by this member (else INVALID_RECORD_STATE and nothing changes);
        offsets past what was ever acquired are INVALID_REQUEST.
        Returns the error and the offsets whose state changed."""
        plan: list[tuple[int, int]] = []
        for first, last, types in batches:
            if last < first or (len(types) != 1 and len(types) != last - first + 1) or not types:
                return E.invalid_request, set()
            if last >= self.end:  # SharePartition: "Batch record not found ... past acquired records"
                return E.invalid_request, set()
            for i, offset in enumerate(range(first, last + 1)):
                if offset < self.start:
                    continue  # already done (Kafka skips batches below the SPSO)
                kind = types[0] if len(types) == 1 else types[i]
                entry = self._offsets.get(offset)
                if entry is None or entry.state is not RecordState.ACQUIRED or entry.member != member_id:
                    return E.invalid_record_state, set()
                if kind not in AcknowledgeType._value2member_map_:
                    return E.invalid_request, set()
                plan.append((offset, kind))
        changed = set()
        for offset, kind in plan:
            if kind == AcknowledgeType.RENEW:
                self._offsets[offset].deadline = now_ms + self.limits.lock_duration_ms
                continue
            self._finish(offset, kind)
            changed.add(offset)
        self._advance()
        return E.none, changed

    def _finish(self, offset: int, kind: int) -> None:
        entry = self._offsets[offset]
        entry.member, entry.deadline = "", 0
        if kind == AcknowledgeType.ACCEPT:
            entry.state = RecordState.ACKNOWLEDGED
        elif kind == AcknowledgeType.RELEASE:
            self._make_available(entry)
        else:  # REJECT, GAP
            entry.state = RecordState.ARCHIVED

    def _make_available(self, entry: _Offset) -> None:
        """A record given back: delivered again, unless it reached the delivery limit (then archived)."""
        entry.member, entry.deadline = "", 0
        limited = entry.delivery_count >= self.limits.delivery_count_limit
        entry.state = RecordState.ARCHIVED if limited else RecordState.AVAILABLE

    def release_member(self, member_id: str) -> set[int]:
        """A member left or closed its share session: what it had acquired is given back."""
        return self._release(lambda e: e.member == member_id)

    def expire_locks(self, now_ms: int) -> set[int]:
        """Acquisition locks past their deadline are given back (Kafka's AcquisitionLockTimerTask)."""
        return self._release(lambda e: e.deadline <= now_ms)

    def _release(self, which) -> set[int]:
        changed = set()
        for offset, entry in self._offsets.items():
            if entry.state is RecordState.ACQUIRED and which(entry):
                self._make_available(entry)
                changed.add(offset)
        self._advance()
        return changed

    def _advance(self) -> None:
        """Move the SPSO over finished offsets and forget them."""
        while self.start < self.end:
            entry = self._offsets.get(self.start)
            if entry is None or entry.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            del self._offsets[self.start]
            self.start += 1

    def skip_to(self, log_start_offset: int) -> bool:
        """The log's start moved past the SPSO (retention, DeleteRecords): what is gone is archived."""
        if log_start_offset <= self.start:
            return False
        for offset in list(self._offsets):
            if offset < log_start_offset:
                del self._offsets[offset]
        self.start = log_start_offset
        self.end = max(self.end, self.start)
        self._advance()
        return True

    def reset(self, start_offset: int) -> None:
        """AlterShareGroupOffsets (or a fresh start): forget everything, start delivering at ``start_offset``."""
        self._offsets.clear()
        self.start = self.end = start_offset

    # --- persistence --------------------------------------------------------------------------------------

    def state_batches(self, offsets: Iterable[int] | None = None) -> tuple[StateBatch, ...]:
        """Runs of equal (state, delivery count) over the in-flight offsets (or just ``offsets``); an ACQUIRED
        record is written as AVAILABLE: after a restart it is delivered again, as in Kafka."""
        chosen = sorted(self._offsets if offsets is None else (o for o in offsets if o in self._offsets))
        out: list[StateBatch] = []
        for offset in chosen:
            entry = self._offsets[offset]
            state = RecordState.AVAILABLE if entry.state is RecordState.ACQUIRED else entry.state
            last = out[-1] if out else None
            if (last is not None and last.last_offset == offset - 1 and last.delivery_state == state
                    and last.delivery_count == entry.delivery_count):
                out[-1] = StateBatch(first_offset=last.first_offset, last_offset=offset,
                                     delivery_state=last.delivery_state, delivery_count=last.delivery_count)
            else:
                out.append(StateBatch(first_offset=offset, last_offset=offset, delivery_state=int(state),
                                      delivery_count=entry.delivery_count))
        return tuple(out)

    def apply_state(self, start_offset: int, batches: Iterable[StateBatch], *, replace_all: bool) -> None:
        """Load persisted state: a snapshot (``replace_all``) or an update laid over what is there."""
        if replace_all:
            self._offsets.clear()
            self.start = self.end = start_offset
        elif start_offset >= 0 and start_offset > self.start:
            self.skip_to(start_offset)
        for batch in batches:
            state = RecordState(batch.delivery_state) if batch.delivery_state in RecordState._value2member_map_ \
                else RecordState.AVAILABLE
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            # A damaged record cannot make this loop run away: no more than the in-flight bound is kept.
            last = min(batch.last_offset, self.start + 2 * self.limits.max_record_locks)
            for offset in range(max(batch.first_offset, self.start), last + 1):
                self._offsets[offset] = _Offset(state, batch.delivery_count)
                self.end = max(self.end, offset + 1)
        for offset in range(self.start, self.end):  # a hole in what was written: never delivered
            self._offsets.setdefault(offset, _Offset(RecordState.AVAILABLE, 0))
        self._advance()


def _ranges(offsets: list[int], states: dict[int, _Offset]) -> list[AcquiredRange]:
    """Consecutive acquired offsets with one delivery count, as ShareFetch's AcquiredRecords list them."""
    out: list[AcquiredRange] = []
    for offset in offsets:
        count = states[offset].delivery_count
        if out and out[-1][1] == offset - 1 and out[-1][2] == count:
            out[-1] = (out[-1][0], offset, count)
        else:
            out.append((offset, offset, count))
    return out
