"""Share groups in the gateway (KIP-932): ShareFetch and ShareAcknowledge over the share partitions, on trio.

``ShareService`` keeps the share partitions (coordinator/share_state.ShareStateStore) persisted in the compacted
``__share_group_state`` topic (created on first use, loaded at start), the share sessions (share_sessions.py),
and a timer task that releases records whose acquisition lock lapsed. A ShareFetch applies the acknowledgements
it carries, then acquires records for the member from each partition of its session (whole log batches, at most
``max_records``, long-polling up to ``max_wait_ms`` for new or released records); acknowledgements are written
and flushed before they are answered, so an acknowledged acknowledgement survives a kill of the broker.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import trio

from logway.coordinator.share_partition import AcquiredRange, ShareLimits, SharePartition
from logway.coordinator.share_state import SharePartitionKey, ShareStateStore
from logway.gateway.groups import ConsumerOffsetsLog
from logway.gateway.share_sessions import FINAL_EPOCH, SessionError, ShareSessionCache
from logway.wire.batch import BATCH_HEADER_SIZE, CorruptBatch, parse_header
from logway.wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from logway.gateway.broker import Broker
    from logway.storage.partition_log import PartitionLog

__all__ = ["SHARE_STATE_TOPIC", "ShareService"]

log = logging.getLogger(__name__)
E = ErrorCode
SHARE_STATE_TOPIC = "__share_group_state"
SHARE_STATE_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}
_READ_CHUNK = 1 << 20
Acks = dict[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]]
_ISO_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class PartitionAnswer:
    """What a ShareFetch or ShareAcknowledge says about one partition."""

    error: ErrorCode = E.none
    ack_error: ErrorCode | None = None  # None: the request acknowledged nothing here
    records: bytearray = field(default_factory=bytearray)
    acquired: list[AcquiredRange] = field(default_factory=list)


class ShareService:
    """The share partitions, share sessions and acquisition locks of the broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        props = broker.config.properties
        self.state_log = ConsumerOffsetsLog(broker, SHARE_STATE_TOPIC, SHARE_STATE_CONFIG)
        self.store = ShareStateStore(
            self.state_log, num_partitions=int(props["share.coordinator.state.topic.num.partitions"]),
            updates_per_snapshot=int(props["share.coordinator.snapshot.update.records.per.snapshot"]),
            limits=self.limits)
        self.sessions = ShareSessionCache(int(props["group.share.max.share.sessions"]))
        self.loaded = trio.Event()
        self._wakeup = trio.Event()

    def limits(self, group_id: str) -> ShareLimits:
        configs = self.broker.group_configs
        return ShareLimits(lock_duration_ms=configs.int_value(group_id, "share.record.lock.duration.ms"),
                           delivery_count_limit=configs.int_value(group_id, "share.delivery.count.limit"),
                           max_record_locks=configs.int_value(group_id, "share.partition.max.record.locks"))

    # --- lifecycle ----------------------------------------------------------------------------------------

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Load ``__share_group_state`` (if it exists), then release lapsed locks as their deadlines come."""
        task_status.started()
        if SHARE_STATE_TOPIC in self.broker.logs.topics:
            started = time.monotonic()
            for partition in range(self.store.num_partitions):
                records = await trio.to_thread.run_sync(self._read_state_partition, partition)
                self.store.load(records)
            log.info("loaded %s in %.2f s", SHARE_STATE_TOPIC, time.monotonic() - started)
        self.loaded.set()
        while True:
            self._wakeup = trio.Event()
            deadline = self.store.next_deadline()
            if deadline is None:
                await self._wakeup.wait()
                continue
            with trio.move_on_after(max(0, deadline - _now_ms()) / 1000):
                await self._wakeup.wait()
            released = self.store.expire_locks(_now_ms())
            if released:
                await self.state_log.flush_pending()
                self._notify(released)

    def _read_state_partition(self, partition: int) -> list:
        try:
            return list(self.state_log.read(partition))
        except (KafkaError, CorruptBatch) as exc:
            log.error("Error loading %s-%d: %s", SHARE_STATE_TOPIC, partition, exc)
            return []

    def _notify(self, keys: Iterable[SharePartitionKey]) -> None:
        """Records became available again: wake the share fetches (and fetches) long-polling those partitions."""
        by_id = {t.topic_id: t.name for t in self.broker.logs.topics.values()}
        for _group, topic_id, partition in keys:
            name = by_id.get(topic_id)
            if name is not None:
                self.broker.notify_append(name, partition)

    # --- hooks from the group coordinator -----------------------------------------------------------------

    def member_left(self, group_id: str, member_id: str) -> None:
        """A member left its share group (or was fenced): its session goes, its records come back."""
        self.sessions.close(group_id, member_id)
        self._notify(self.store.release_member(group_id, member_id, _now_ms()))
        self._wakeup.set()

    def connection_closed(self, connection: object) -> None:
        """Kafka's ShareSessionCache disconnect listener: the session the connection opened ends, and its
        member's acquired records are released (the member stays in its group)."""
        session = self.sessions.disconnected(connection)
        if session is not None:
            self.member_left(session.group_id, session.member_id)

    def group_deleted(self, group_id: str) -> None:
        """DeleteGroups of a share group: its share partitions' state and its configs go with it."""
        self.sessions.close_group(group_id)
        self.store.delete(self.store.keys_of(group_id), _now_ms())
        self.broker.group_configs.forget(group_id)

    # --- ShareFetch and ShareAcknowledge ------------------------------------------------------------------

    async def fetch(self, group_id: str, member_id: str, epoch: int, partitions: list[tuple[uuid.UUID, int]],
                    forget: list[tuple[uuid.UUID, int]], acks: Acks, *, max_wait_ms: int, max_bytes: int,
                    max_records: int, denied: frozenset[uuid.UUID] = frozenset(), connection: object = None,
                    ) -> dict[tuple[uuid.UUID, int], PartitionAnswer]:
        """One ShareFetch after the request checks: acknowledgements applied, then records acquired (unless it
        is the session's last request). The partitions of ``denied`` topics (no TOPIC READ) answer
        TOPIC_AUTHORIZATION_FAILED, for their records and their acknowledgements. SessionError for a session
        problem."""
        await self.loaded.wait()
        session = self.sessions.context(group_id, member_id, epoch, partitions, forget, bool(acks), connection)
        answers = self._acknowledge(group_id, member_id, acks, denied)
        if epoch == FINAL_EPOCH:
            self.member_left(group_id, member_id)
        else:
            deadline = trio.current_time() + max_wait_ms / 1000
            by_id = {t.topic_id: t.name for t in self.broker.logs.topics.values()}
            targets = [tp for tp in session.partitions if tp[0] not in denied]
            for tp in session.partitions:
                if tp[0] in denied:
                    answers.setdefault(tp, PartitionAnswer()).error = E.topic_authorization_failed
            while True:
                got = self._acquire(group_id, member_id, targets, by_id, max_bytes, max_records)
                for tp, answer in got.items():
                    mine = answers.setdefault(tp, PartitionAnswer())
                    mine.error, mine.records, mine.acquired = answer.error, answer.records, answer.acquired
                if any(a.acquired for a in got.values()) or trio.current_time() >= deadline:
                    break
                topics: dict[str, set[int]] = {}
                for topic_id, partition in targets:
                    if topic_id in by_id:
                        topics.setdefault(by_id[topic_id], set()).add(partition)
                if not await self.broker.wait_for_append(topics, deadline):
                    break
        await self.state_log.flush_pending()
        self._wakeup.set()
        return answers

    async def acknowledge(self, group_id: str, member_id: str, epoch: int, acks: Acks,
                          denied: frozenset[uuid.UUID] = frozenset()) -> dict[tuple[uuid.UUID, int], PartitionAnswer]:
        """ShareAcknowledge: the session's epoch is checked and moves on (or, at -1, the session closes)."""
        await self.loaded.wait()
        if epoch == 0:
            raise SessionError(E.invalid_share_session_epoch, "ShareAcknowledge cannot open a share session")
        self.sessions.context(group_id, member_id, epoch, [], [], False)
        answers = self._acknowledge(group_id, member_id, acks, denied)
        if epoch == FINAL_EPOCH:
            self.member_left(group_id, member_id)
        await self.state_log.flush_pending()
        return answers

    def _acknowledge(self, group_id: str, member_id: str, acks: Acks,
                     denied: frozenset[uuid.UUID]) -> dict[tuple[uuid.UUID, int], PartitionAnswer]:
        answers: dict[tuple[uuid.UUID, int], PartitionAnswer] = {}
        now = _now_ms()
        released: list[SharePartitionKey] = []
        for (topic_id, partition), batches in acks.items():
            if topic_id in denied:
                answers[(topic_id, partition)] = PartitionAnswer(ack_error=E.topic_authorization_failed)
                continue
            key = (group_id, topic_id, partition)
            share_partition = self.store.get(key)
            if share_partition is None:
                answers[(topic_id, partition)] = PartitionAnswer(ack_error=E.invalid_record_state)
                continue
            error, changed = share_partition.acknowledge(member_id, batches, now)
            if error == E.none and changed:
                error = self.store.persist(key, changed, now)
                released.append(key)
            answers[(topic_id, partition)] = PartitionAnswer(ack_error=error)
        self._notify(released)
        return answers

    def _acquire(self, group_id: str, member_id: str, targets: list[tuple[uuid.UUID, int]],
                 by_id: dict[uuid.UUID, str], max_bytes: int, max_records: int,
                 ) -> dict[tuple[uuid.UUID, int], PartitionAnswer]:
        answers = {}
        budget, records_left = max_bytes, max_records
        for topic_id, partition in targets:
            name = by_id.get(topic_id)
            if name is None:
                answers[(topic_id, partition)] = PartitionAnswer(E.unknown_topic_id)
                continue
            try:
                plog = self.broker.partition(name, partition)
            except KafkaError as exc:
                answers[(topic_id, partition)] = PartitionAnswer(exc.error_code)
                continue
            if budget <= 0 or records_left <= 0:
                continue
            answer = self._acquire_from(group_id, member_id, (topic_id, partition), plog, budget, records_left)
            if answer.error != E.none or answer.acquired:
                answers[(topic_id, partition)] = answer
                budget -= len(answer.records)
                records_left -= sum(last - first + 1 for first, last, _ in answer.acquired)
        return answers

    def _acquire_from(self, group_id: str, member_id: str, tp: tuple[uuid.UUID, int], plog: PartitionLog,
                      max_bytes: int, max_records: int) -> PartitionAnswer:
        key = (group_id, *tp)
        now = _now_ms()
        self._ensure_topic()
        share_partition, error = self.store.open(key, lambda: self._initial_offset(group_id, plog, now), now)
        if error != E.none:
            return PartitionAnswer(error)
        if share_partition.skip_to(plog.log_start_offset):
            self.store.persist(key, (), now)
        if not share_partition.can_acquire():
            return PartitionAnswer()
        offset = share_partition.next_fetch_offset()
        committed = self.broker.group_configs.value(group_id, "share.isolation.level") == "read_committed"
        upper = plog.last_stable_offset if committed else plog.high_watermark
        if offset >= upper:
            return PartitionAnswer()
        try:
            data = plog.read_bytes(offset, max_bytes)
        except KafkaError as exc:
            return PartitionAnswer(exc.error_code)
        batches = [b for b in _batches(data) if b.first < upper]
        skipped = _aborted(batches, plog.aborted_transactions(offset, upper)) if committed else set()
        acquired = share_partition.acquire(
            member_id, [(b.first, b.last, b.control or b.first in skipped) for b in batches], max_records, now)
        if not acquired:
            return PartitionAnswer()
        answer = PartitionAnswer(acquired=acquired)
        for b in batches:
            if any(a_first <= b.last and b.first <= a_last for a_first, a_last, _ in acquired):
                answer.records += data[b.start:b.end]
        return answer

    def _initial_offset(self, group_id: str, plog: PartitionLog, now_ms: int) -> int:
        """share.auto.offset.reset: "latest" (Kafka's default) starts at the high watermark, "earliest" at the
        log start, "by_duration:<ISO 8601 duration>" at the first record at most that old."""
        policy = self.broker.group_configs.value(group_id, "share.auto.offset.reset").lower()
        if policy == "earliest":
            return plog.log_start_offset
        if policy.startswith("by_duration:"):
            found = plog.offset_for_timestamp(now_ms - _duration_ms(policy.split(":", 1)[1]))
            return found[0] if found is not None else plog.high_watermark
        return plog.high_watermark

    # --- offsets admin ------------------------------------------------------------------------------------

    def start_offset(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        return self.store.get((group_id, topic_id, partition))

    async def reset(self, keys: list[tuple[SharePartitionKey, int]]) -> dict[SharePartitionKey, ErrorCode]:
        await self.loaded.wait()
        self._ensure_topic()
        now = _now_ms()
        out = {key: self.store.reset(key, offset, now) for key, offset in keys}
        await self.state_log.flush_pending()
        return out

    async def delete(self, keys: list[SharePartitionKey]) -> ErrorCode:
        await self.loaded.wait()
        error = self.store.delete(keys, _now_ms())
        await self.state_log.flush_pending()
        return error

    def _ensure_topic(self) -> None:
        self.state_log.ensure_topic(self.store.num_partitions)


class _Batch(NamedTuple):
    first: int
    last: int
    control: bool
    start: int  # its bytes in the data read
    end: int
    producer_id: int
    transactional: bool


def _batches(data: bytes) -> Iterable[_Batch]:
    """Each whole batch in ``data``."""
    pos = 0
    while len(data) - pos >= BATCH_HEADER_SIZE:
        header = parse_header(data, pos)
        if header.size < BATCH_HEADER_SIZE or header.size > len(data) - pos:
            return
        yield _Batch(header.base_offset, header.last_offset, header.is_control, pos, pos + header.size,
                     header.producer_id, header.is_transactional)
        pos += header.size


def _aborted(batches: list[_Batch], aborted: list[tuple[int, int]]) -> set[int]:
    """The first offsets of the batches of aborted transactions (share.isolation.level=read_committed: they are
    archived, never delivered), as a read_committed consumer skips them: from an aborted transaction's first
    offset, its producer's transactional batches until its control batch (the abort marker)."""
    starts = sorted(aborted, key=lambda a: a[1])
    open_ids: set[int] = set()
    out: set[int] = set()
    for b in batches:
        while starts and starts[0][1] <= b.first:
            open_ids.add(starts.pop(0)[0])
        if b.control:
            open_ids.discard(b.producer_id)
        elif b.transactional and b.producer_id in open_ids:
            out.add(b.first)
    return out


def _duration_ms(text: str) -> int:
    """An ISO 8601 duration (PnDTnHnMn.nS) in milliseconds (checked when the config was set)."""
    match = _ISO_DURATION.fullmatch(text.upper())
    if not match:
        return 0
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)
