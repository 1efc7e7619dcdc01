"""Committed offsets, sans-IO: OffsetCommit, TxnOffsetCommit and its markers, OffsetFetch, OffsetDelete and expiry.

Offsets live with their group in the ``GroupCache``; a commit is appended to ``__consumer_offsets`` before it
is cached and answered. Transactional commits (KIP-98, KIP-447) wait for their transaction's marker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from logway.coordinator.consumer_group import ConsumerGroup
from logway.coordinator.consumer_group_store import group_tombstones
from logway.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from logway.coordinator.group import GroupMetadata, GroupState
from logway.coordinator.group_cache import AnyGroup, GroupCache
from logway.coordinator.group_config import GroupConfig
from logway.coordinator.group_store import Record, group_tombstone, offset_record, offset_tombstone
from logway.coordinator.membership import Membership, validate_current_member, validate_member_generation
from logway.coordinator.offsets_schema import (
    OffsetCommitKey,
    OffsetCommitValue,
    SchemaError,
    decode_key,
    decode_offset_commit_value,
)
from logway.coordinator.results import (
    CommitOffset,
    FetchedOffset,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    Respond,
    TopicPartition,
)
from logway.coordinator.share_group import ShareGroup
from logway.coordinator.topics_image import TopicsImage, TopicsSnapshot
from logway.wire.errors import ErrorCode

__all__ = ["DEFAULT_RETENTION_TIME", "Offsets", "PendingTxnOffsets", "remove_all_offsets"]

log = logging.getLogger(__name__)

E = ErrorCode
# OffsetCommit's retention_time_ms default: use the broker's retention.
DEFAULT_RETENTION_TIME = -1

OffsetRemover = Callable[[AnyGroup], list[TopicPartition]]
"""Removes some of a group's offsets from the cache and returns which (for ``cleanup_groups``)."""


class Offsets:
    """Committed offsets of the groups in a ``GroupCache``; a member's commit also keeps its session alive."""

    def __init__(self, cache: GroupCache, membership: Membership, config: GroupConfig,
                 topics: TopicsImage | None = None) -> None:
        self._cache = cache
        self._membership = membership
        self._config = config
        self._topics = topics or TopicsSnapshot()
        self._pending_txn = PendingTxnOffsets()

    def load_pending_txn(self, pending: Mapping[int, Iterable[Record]]) -> None:
        """Offset records of transactions with no marker yet in a loaded partition, by producer id: they wait for it."""
        self._pending_txn.load(pending)

    # --- OffsetCommit ------------------------------------------------------------------------

    def offset_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Sequence[CommitOffset],
        *,
        retention_time_ms: int = DEFAULT_RETENTION_TIME,
        api_version: int = 9,
        now_ms: int,
        respond: Respond[OffsetCommitResult],
    ) -> None:
        """OffsetCommit (v2+ checks). Generation -1 with an empty member id is a simple consumer's commit.

        ``retention_time_ms`` is v2-v4's field; anything but -1 stores an explicit expire timestamp.
        The gateway answers UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist before calling this.
        For a KIP-848 consumer group the generation is the member epoch (v9+, Kafka's ConsumerGroup checks).
        """
        expire = None if retention_time_ms == DEFAULT_RETENTION_TIME else now_ms + retention_time_ms
        if self._cache.share(group_id) is not None:
            respond(_all_failed(offsets, E.group_id_not_found))  # Kafka: a share group commits no offsets
            return
        consumer = self._cache.consumer(group_id)
        if consumer is not None and self._cache.validate_group_status(group_id) is None:
            respond(self._commit_to_consumer_group(consumer, (generation_id, member_id, group_instance_id), offsets,
                                                   api_version, expire, now_ms))
            return
        group, error = self._group_to_commit(group_id, generation_id, member_id, group_instance_id, now_ms,
                                             api_version)
        if error is not None:
            respond(_all_failed(offsets, error))
            return
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # Commits are allowed while preparing; the heartbeat tells the member to rejoin.
            self._membership.schedule_heartbeat(group, group.get(member_id), now_ms)
        respond(self._store_offsets(group, offsets, expire, now_ms))

    def _commit_to_consumer_group(
        self, group: ConsumerGroup, sender: tuple[int, str, str | None], offsets: Sequence[CommitOffset],
        api_version: int, expire_timestamp: int | None, now_ms: int, producer: tuple[int, int] | None = None,
    ) -> OffsetCommitResult:
        """A commit to a KIP-848 group: the member's epoch must be current, or not older than the epoch each
        partition was assigned at (Kafka's ConsumerGroup.validateOffsetCommit); a TxnOffsetCommit gets
        ILLEGAL_GENERATION where OffsetCommit gets STALE_MEMBER_EPOCH."""
        epoch, member_id, instance_id = sender
        error, check = group.validate_offset_commit(member_id, instance_id, epoch, transactional=producer is not None,
                                                    api_version=api_version)
        if producer is not None and error == E.stale_member_epoch:
            error = E.illegal_generation
        if error is not None:
            return _all_failed(offsets, error)
        refused: dict[TopicPartition, ErrorCode] = {}
        if check is not None:
            for o in offsets:
                partition_error = check(self._topics.topic_id(o.topic), o.partition)
                if partition_error is not None:
                    refused[(o.topic, o.partition)] = (
                        E.illegal_generation if producer is not None else partition_error)
        allowed = [o for o in offsets if (o.topic, o.partition) not in refused]
        if producer is None:
            result = self._store_offsets(group, allowed, expire_timestamp, now_ms)
        else:
            result = self._store_txn_offsets(group.group_id, producer, allowed, now_ms)
        return OffsetCommitResult({**result.partitions, **refused})

    def _group_to_commit(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, now_ms: int,
        api_version: int = 9,
    ) -> tuple[GroupMetadata, None] | tuple[GroupMetadata | None, ErrorCode]:
        """(group, None) when the sender may commit for the group, else the error to answer."""
        error = self._cache.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return None, error
        if self._cache.get(group_id) is None and generation_id >= 0:
            # A commit from a generation of a group this coordinator does not know: v9+ names the problem.
            return None, E.group_id_not_found if api_version >= 9 else E.illegal_generation
        # A group unknown here uses Kafka only to store offsets.
        group = self._cache.get_or_create(group_id, now_ms)
        error = _validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is None and group.is_state(GroupState.COMPLETING_REBALANCE):
            # The member has this generation from its JoinGroup but no assignment yet.
            error = E.rebalance_in_progress
        return group, error

    def _store_offsets(
        self, group: AnyGroup, offsets: Sequence[CommitOffset], expire_timestamp: int | None, now_ms: int
    ) -> OffsetCommitResult:
        """Append the commits, then cache them (Kafka's storeOffsets); oversized metadata fails per partition."""
        values = self._values(offsets, now_ms, expire_timestamp)
        error = self._append_offsets(group.group_id, values, now_ms)
        if values and error == E.none and self._cache.is_cached(group):
            group.offsets.update(values)
        return self._commit_result(offsets, error)

    def _values(
        self, offsets: Sequence[CommitOffset], now_ms: int, expire_timestamp: int | None
    ) -> dict[TopicPartition, OffsetCommitValue]:
        """The values to store for the commits whose metadata fits (an explicit v1 commit timestamp is kept)."""
        return {
            (o.topic, o.partition): OffsetCommitValue(
                offset=o.offset,
                leader_epoch=o.leader_epoch,
                metadata=o.metadata or "",
                commit_timestamp=now_ms if o.commit_timestamp in (None, -1) else o.commit_timestamp,
                expire_timestamp=expire_timestamp,
            )
            for o in offsets
            if self._metadata_fits(o.metadata)
        }

    def _append_offsets(
        self, group_id: str, values: Mapping[TopicPartition, OffsetCommitValue], now_ms: int,
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode:
        """Append the offset records (in the producer's transaction when given); nothing to append is no error."""
        if not values:
            return E.none
        records = [offset_record(group_id, tp, v) for tp, v in values.items()]
        partition = self._cache.partition_for(group_id)
        return self._cache.append(partition, records, now_ms, E.invalid_commit_offset_size, producer)

    def _commit_result(self, offsets: Sequence[CommitOffset], error: ErrorCode) -> OffsetCommitResult:
        """The append's error per partition, OFFSET_METADATA_TOO_LARGE where the metadata did not fit."""
        return OffsetCommitResult({
            (o.topic, o.partition): error if self._metadata_fits(o.metadata) else E.offset_metadata_too_large
            for o in offsets
        })

    def _metadata_fits(self, metadata: str | None) -> bool:
        """offset.metadata.max.bytes, measured like Java's String.length (UTF-16 code units)."""
        return (
            metadata is None
            or len(metadata.encode("utf-16-le", "surrogatepass")) // 2 <= self._config.offset_metadata_max_bytes
        )

    # --- transactional offsets (KIP-98, KIP-447) -------------------------------------------------

    def txn_offset_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Sequence[CommitOffset],
        *,
        now_ms: int,
        respond: Respond[OffsetCommitResult],
    ) -> None:
        """TxnOffsetCommit: the offsets are written in the producer's transaction and become the group's on COMMIT.

        KIP-447: a member id / generation given by the producer (the consumer's group metadata) must be the
        group's current ones (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), as Kafka's
        GroupCoordinator.handleTxnCommitOffsets checks them.
        """
        if self._cache.share(group_id) is not None:
            respond(_all_failed(offsets, E.group_id_not_found))
            return
        consumer = self._cache.consumer(group_id)
        if consumer is not None and self._cache.validate_group_status(group_id) is None:
            respond(self._commit_to_consumer_group(consumer, (generation_id, member_id, group_instance_id), offsets,
                                                   0, None, now_ms, producer=(producer_id, producer_epoch)))
            return
        error = self._validate_txn_commit(group_id, generation_id, member_id, group_instance_id, now_ms)
        if error is not None:
            respond(_all_failed(offsets, error))
            return
        respond(self._store_txn_offsets(group_id, (producer_id, producer_epoch), offsets, now_ms))

    def _store_txn_offsets(
        self, group_id: str, producer: tuple[int, int], offsets: Sequence[CommitOffset], now_ms: int
    ) -> OffsetCommitResult:
        """Append the commits in the producer's transaction; they wait for its marker."""
        values = self._values(offsets, now_ms, None)
        error = self._append_offsets(group_id, values, now_ms, producer=producer)
        if values and error == E.none:
            self._pending_txn.add(producer[0], group_id, values)
        return self._commit_result(offsets, error)

    def _validate_txn_commit(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, now_ms: int
    ) -> ErrorCode | None:
        """The group checks of a TxnOffsetCommit; a group unknown here is created for a commit without a member."""
        error = self._cache.validate_group_status(group_id)
        if error is not None:
            return error
        if self._cache.get(group_id) is None and (generation_id >= 0 or member_id):
            return E.illegal_generation if generation_id >= 0 else E.unknown_member_id
        group = self._cache.get_or_create(group_id, now_ms)
        if member_id and not group.has(member_id):
            return E.unknown_member_id
        if group_instance_id is not None and member_id and validate_current_member(group, member_id, group_instance_id):
            return E.fenced_instance_id
        if generation_id >= 0 and generation_id != group.generation_id:
            return E.illegal_generation
        return None

    def complete_txn(
        self, producer_id: int, producer_epoch: int, commit: bool, partitions: Iterable[int], now_ms: int
    ) -> set[int]:
        """Write the transaction's marker to these offsets partitions; on COMMIT its offsets become the groups'.

        Returns the partitions whose marker could not be written (the transaction coordinator retries them).
        """
        failed = set()
        for partition in partitions:
            if not self._cache.append_marker(partition, producer_id, producer_epoch, commit, now_ms):
                failed.add(partition)
                continue
            for group_id, offsets in self._pending_txn.take(producer_id, partition, self._cache.partition_for):
                if commit:
                    # A group that only stores offsets may exist only through this commit (e.g. after a restart).
                    holder = self._cache.any_group(group_id) or self._cache.get_or_create(group_id, now_ms)
                    holder.offsets.update(offsets)
        return failed

    # --- OffsetFetch, OffsetDelete, expiry -------------------------------------------------------

    def offset_fetch(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None,
        *,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
        now_ms: int,
        respond: Respond[OffsetFetchResult],
    ) -> None:
        """OffsetFetch for one group: the given partitions, or every committed one when ``partitions`` is None.

        Offsets are returned whatever the group state (the group may not use Kafka's group management).
        With ``require_stable`` (v7+, KIP-447) a partition with a transactional commit awaiting its marker gets
        UNSTABLE_OFFSET_COMMIT and offset -1, so a read_committed consumer retries instead of starting from a
        stale offset. v9+ carries the member id and epoch: a KIP-848 member must send its current epoch
        (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
        """
        error = self._cache.validate_group_status(group_id, allow_empty_id=True)
        group = self._cache.any_group(group_id)
        if error is None and isinstance(group, ConsumerGroup):
            error = group.validate_offset_fetch(member_id, member_epoch)
        elif error is None and isinstance(group, ShareGroup):
            error = E.group_id_not_found
        if error is not None:
            respond(OffsetFetchResult(error))
            return
        committed = group.offsets if group is not None else {}
        wanted = sorted(committed) if partitions is None else partitions
        pending = self._pending_txn.partitions_of(group_id) if require_stable else set()
        result = []
        for topic, partition in wanted:
            value = committed.get((topic, partition))
            if (topic, partition) in pending:
                result.append(FetchedOffset(topic, partition, -1, -1, "", E.unstable_offset_commit))
            elif value is None:
                result.append(FetchedOffset(topic, partition, -1, -1, ""))
            else:
                result.append(FetchedOffset(topic, partition, value.offset, value.leader_epoch, value.metadata))
        respond(OffsetFetchResult(E.none, tuple(result)))

    def offset_delete(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition],
        *,
        now_ms: int,
        respond: Respond[OffsetDeleteResult],
    ) -> None:
        """OffsetDelete: only for an Empty group, or for topics no member of a consumer group subscribes to."""
        error = self._cache.validate_group_status(group_id)
        group = self._cache.any_group(group_id)
        if error is None and (group is None or isinstance(group, ShareGroup)):
            error = E.group_id_not_found
        if error is not None:
            respond(OffsetDeleteResult(error))
            return
        deletable = _deletable_offsets(group, partitions)
        if deletable is None:
            respond(OffsetDeleteResult(E.non_empty_group))
            return
        eligible, errors = deletable
        if eligible:
            self.cleanup_groups([group], lambda g: _remove_offsets(g, eligible), now_ms)
            errors.update((tp, E.none) for tp in eligible)
        respond(OffsetDeleteResult(E.none, {tp: errors[tp] for tp in partitions}))

    def expire_offsets(self, now_ms: int) -> int:
        """offsets.retention.minutes: drop expired offsets (writing tombstones) and empty groups left with none.

        Kafka's rules: an Empty group's offsets expire retention after it became empty (or after the commit,
        for groups loaded from old records); a Stable consumer group only loses offsets of topics no member
        subscribes to; a simple consumer's offsets expire retention after their commit. Returns the number
        of offsets removed.
        """
        return self.cleanup_groups(
            self._cache.all_groups(),
            lambda g: g.remove_expired_offsets(now_ms, self._config.offsets_retention_ms),
            now_ms,
        )

    def cleanup_groups(self, groups: Iterable[AnyGroup], remove: OffsetRemover, now_ms: int) -> int:
        """Kafka's cleanupGroupMetadata: remove offsets, drop groups left Empty without offsets, write tombstones.

        Returns the number of offsets removed.
        """
        by_partition: dict[int, list[Record]] = {}
        removed = 0
        for group in groups:
            removed_offsets = remove(group)
            removed += len(removed_offsets)
            records = by_partition.setdefault(self._cache.partition_for(group.group_id), [])
            records.extend(offset_tombstone(group.group_id, tp) for tp in removed_offsets)
            records.extend(self._maybe_drop(group, now_ms))
        for partition, records in by_partition.items():
            if records:
                # Like Kafka, the cache is updated even if the tombstones fail to land; the next expiry
                # run or a compaction of stale data cannot resurrect a group that has members.
                error = self._cache.append(partition, records, now_ms, E.unknown_server_error)
                if error != E.none:
                    log.warning(
                        "failed to write %d tombstones to partition %d: %s", len(records), partition, error.name
                    )
        return removed


    def _maybe_drop(self, group: AnyGroup, now_ms: int) -> list[Record]:
        """An empty group left without offsets is deleted (Kafka's maybeDeleteGroup); its tombstones. Share groups
        do not expire (Kafka's ShareGroup.shouldExpire): DeleteGroups deletes them."""
        if isinstance(group, ShareGroup):
            return []
        if isinstance(group, ConsumerGroup):
            if not group.is_empty() or group.offsets:
                return []
            self._cache.drop(group, now_ms)
            return [r.encode() for r in group_tombstones(group)]
        if not group.is_state(GroupState.EMPTY) or group.offsets:
            return []
        self._cache.drop(group, now_ms)
        self._membership.forget(group.group_id)
        # Generation 0 groups only ever stored offsets and have no metadata record to delete.
        return [group_tombstone(group.group_id)] if group.generation_id > 0 else []


class PendingTxnOffsets:
    """TxnOffsetCommit offsets waiting for their transaction's marker: producer id -> group -> offsets."""

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, dict[TopicPartition, OffsetCommitValue]]] = {}

    def add(self, producer_id: int, group_id: str, values: Mapping[TopicPartition, OffsetCommitValue]) -> None:
        """Offsets the producer committed for the group in its open transaction."""
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {}).update(values)

    def load(self, pending: Mapping[int, Iterable[Record]]) -> None:
        """Add the offset records of transactions with no marker yet, by producer id; unreadable ones are skipped."""
        for producer_id, records in pending.items():
            for key, value in records:
                try:
                    k = decode_key(key)
                    if isinstance(k, OffsetCommitKey) and value is not None:
                        self.add(producer_id, k.group, {(k.topic, k.partition): decode_offset_commit_value(value)})
                except SchemaError as exc:
                    log.error("skipping an unreadable transactional offset record: %s", exc)

    def take(
        self, producer_id: int, partition: int, partition_for: Callable[[str], int]
    ) -> list[tuple[str, dict[TopicPartition, OffsetCommitValue]]]:
        """Remove and return the producer's pending offsets of the groups stored in ``partition``."""
        pending = self._by_producer.get(producer_id, {})
        taken = [(group_id, pending.pop(group_id)) for group_id in [g for g in pending if partition_for(g) == partition]]
        if not pending:
            self._by_producer.pop(producer_id, None)
        return taken

    def partitions_of(self, group_id: str) -> set[TopicPartition]:
        """The partitions of the group with a transactional commit awaiting its marker."""
        return {tp for groups in self._by_producer.values() for tp in groups.get(group_id, ())}


def _all_failed(offsets: Sequence[CommitOffset], error: ErrorCode) -> OffsetCommitResult:
    """Every partition of a commit fails with ``error``."""
    return OffsetCommitResult({(o.topic, o.partition): error for o in offsets})


def _validate_offset_commit(
    group: GroupMetadata, generation_id: int, member_id: str, group_instance_id: str | None
) -> ErrorCode | None:
    """A member's commit must come from a current member and generation; a simple consumer's only to an Empty group."""
    if generation_id >= 0 or member_id != "" or group_instance_id is not None:
        return validate_member_generation(group, member_id, group_instance_id, generation_id)
    if not group.is_state(GroupState.EMPTY):
        return E.unknown_member_id  # only members may commit for a group that has members
    return None


def _deletable_offsets(
    group: AnyGroup, partitions: Sequence[TopicPartition]
) -> tuple[list[TopicPartition], dict[TopicPartition, ErrorCode]] | None:
    """The partitions OffsetDelete may delete and the errors of the others; None for a non-consumer group with members."""
    if isinstance(group, GroupMetadata):
        if group.is_state(GroupState.EMPTY):
            return list(partitions), {}
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
    eligible: list[TopicPartition] = []
    errors: dict[TopicPartition, ErrorCode] = {}
    for tp in partitions:
        if group.is_subscribed_to_topic(tp[0]):
            errors[tp] = E.group_subscribed_to_topic
        else:
            eligible.append(tp)
    return eligible, errors


def _remove_offsets(group: AnyGroup, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    removed = [tp for tp in partitions if tp in group.offsets]
    for tp in removed:
        del group.offsets[tp]
    return removed


def remove_all_offsets(group: AnyGroup) -> list[TopicPartition]:
    """An ``OffsetRemover`` for DeleteGroups: every offset of the group."""
    removed = list(group.offsets)
    group.offsets.clear()
    return removed
