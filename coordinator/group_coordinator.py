"""The group coordinator (Kafka's GroupCoordinator + GroupMetadataManager), sans-IO: a facade over its parts.

``GroupCoordinator`` owns the shared state (the ``GroupCache`` of groups and loaded partitions, the timers)
and serves each request from the module that holds its idea: ``membership`` (the classic protocol: JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, rebalances and sessions), ``consumer_membership`` (KIP-848:
ConsumerGroupHeartbeat), ``share_membership`` (KIP-932: ShareGroupHeartbeat, ShareGroupDescribe), ``offsets`` (OffsetCommit, TxnOffsetCommit and its markers, OffsetFetch,
OffsetDelete, expiry) and ``group_admin`` (DescribeGroups, ListGroups, DeleteGroups, ConsumerGroupDescribe).

Every request method takes the request's fields, ``now_ms`` and a ``respond`` callback that is called
exactly once: at once, or later from another call or from ``tick``. ``respond`` must not call back into
the coordinator. Groups are persisted to ``__consumer_offsets`` through an ``OffsetsLog`` before anything
that depends on the write is answered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from logway.coordinator.consumer_membership import ConsumerMembership
from logway.coordinator.group_admin import GroupAdmin
from logway.coordinator.group_cache import AnyGroup, GroupCache
from logway.coordinator.group_config import GroupConfig
from logway.coordinator.group_migration import GroupMigration
from logway.coordinator.group_store import Record
from logway.coordinator.membership import Membership
from logway.coordinator.offsets import Offsets
from logway.coordinator.offsets_log import OffsetsLog
from logway.coordinator.results import (
    HeartbeatResult,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    MemberIdentity,
    Respond,
    SyncGroupResult,
)
from logway.coordinator.share_membership import ShareMembership
from logway.coordinator.timers import Timers
from logway.coordinator.topics_image import TopicsImage, TopicsSnapshot
from logway.wire.errors import ErrorCode

__all__ = ["GroupCoordinator"]


class GroupCoordinator:
    """Consumer groups and committed offsets for every ``__consumer_offsets`` partition of this broker."""

    def __init__(self, offsets_log: OffsetsLog, config: GroupConfig | None = None,
                 topics: TopicsImage | None = None) -> None:
        self.config = config or GroupConfig()
        topics = topics or TopicsSnapshot()
        self._cache = GroupCache(offsets_log, self.config.num_partitions)
        self._timers = Timers()
        self._membership = membership = Membership(self._cache, self._timers, self.config)
        self._consumers = consumers = ConsumerMembership(self._cache, self._timers, self.config, topics)
        self._migration = GroupMigration(self._cache, self._timers, self.config, topics, consumers, membership)
        self.shares = shares = ShareMembership(self._cache, self._timers, self.config, topics)
        self._offsets = offsets = Offsets(self._cache, membership, self.config, topics)
        self.admin = admin = GroupAdmin(self._cache, offsets, consumers, topics, self.config)
        # The requests, each served by the part that holds its idea.
        self.consumer_group_heartbeat = consumers.heartbeat
        self.consumer_group_describe = admin.consumer_group_describe
        self.share_group_heartbeat = shares.heartbeat
        self.share_group_describe = shares.describe
        self.offset_commit = offsets.offset_commit
        self.txn_offset_commit = offsets.txn_offset_commit
        self.complete_txn = offsets.complete_txn
        self.offset_fetch = offsets.offset_fetch
        self.offset_delete = offsets.offset_delete
        self.expire_offsets = offsets.expire_offsets
        self.describe_groups = admin.describe_groups
        self.list_groups = admin.list_groups
        self.delete_groups = admin.delete_groups

    # --- the classic requests: to a classic group, or (KIP-848 migration) to a consumer group -----------

    def join_group(self, request: JoinGroupRequest, *, now_ms: int, respond: Respond[JoinGroupResult]) -> None:
        """JoinGroup (membership.Membership.join_group, or as a classic member of a consumer group)."""
        group = self._migration.consumer_group(request.group_id, joining=True)
        if group is not None:
            self._migration.join(group, request, now_ms=now_ms, respond=respond)
        else:
            self._membership.join_group(request, now_ms=now_ms, respond=respond)

    def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   assignments: Mapping[str, bytes], *, protocol_type: str | None = None,
                   protocol_name: str | None = None, now_ms: int, respond: Respond[SyncGroupResult]) -> None:
        """SyncGroup (membership.Membership.sync_group, or a classic member of a consumer group's assignment)."""
        group = self._migration.consumer_group(group_id)
        if group is not None:
            self._migration.sync(group, generation_id, member_id, group_instance_id, protocol_type=protocol_type,
                                 protocol_name=protocol_name, now_ms=now_ms, respond=respond)
        else:
            self._membership.sync_group(group_id, generation_id, member_id, group_instance_id, assignments,
                                        protocol_type=protocol_type, protocol_name=protocol_name, now_ms=now_ms,
                                        respond=respond)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int, *,
                  now_ms: int, respond: Respond[HeartbeatResult]) -> None:
        """Heartbeat (classic groups, or classic members of consumer groups)."""
        group = self._migration.consumer_group(group_id)
        if group is not None:
            self._migration.heartbeat(group, member_id, group_instance_id, generation_id, now_ms=now_ms,
                                      respond=respond)
        else:
            self._membership.heartbeat(group_id, member_id, group_instance_id, generation_id, now_ms=now_ms,
                                       respond=respond)

    def leave_group(self, group_id: str, members: Sequence[MemberIdentity], *, now_ms: int,
                    respond: Respond[LeaveGroupResult]) -> None:
        """LeaveGroup (classic groups, or classic members of consumer groups)."""
        group = self._migration.consumer_group(group_id)
        if group is not None:
            self._migration.leave(group, members, now_ms=now_ms, respond=respond)
        else:
            self._membership.leave_group(group_id, members, now_ms=now_ms, respond=respond)

    # --- loading and timers ------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        """How many partitions ``__consumer_offsets`` has."""
        return self.config.num_partitions

    @property
    def loading(self) -> frozenset[int]:
        """Partitions not loaded yet; their groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        return self._cache.partitions.loading

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that stores ``group_id``."""
        return self._cache.partition_for(group_id)

    def load(
        self, partition: int, now_ms: int, records: Iterable[Record] | None = None,
        pending_txn: Mapping[int, list[Record]] | None = None,
    ) -> None:
        """Rebuild a partition's groups and offsets from its records (read from the log unless given) and serve it.

        The gateway may read the records off the event loop and pass them in. ``pending_txn`` holds the
        offset records of transactions with no marker yet, by producer id: they wait for it.
        """
        classic, consumer, share = self._cache.replay(partition, now_ms, records)
        for group in classic:
            self._membership.start_sessions(group, now_ms)
        for consumer_group in consumer:
            self._consumers.start_sessions(consumer_group, now_ms)
        for share_group in share:
            self.shares.start_sessions(share_group, now_ms)
        self._offsets.load_pending_txn(pending_txn or {})
        self._cache.partitions.add(partition)

    def load_all(self, now_ms: int) -> None:
        """Load every partition not loaded yet."""
        for partition in sorted(self.loading):
            self.load(partition, now_ms)

    def group_status(self, group_id: str) -> ErrorCode | None:
        """The error a request naming ``group_id`` gets before anything else (invalid, still loading), or None."""
        return self._cache.validate_group_status(group_id)

    def share_group_alterable(self, group_id: str, *, create_at_ms: int | None = None) -> ErrorCode | None:
        """Whether the share offsets of ``group_id`` may be changed: GROUP_ID_NOT_FOUND for a group of another
        type, or no group (unless ``create_at_ms``: AlterShareGroupOffsets creates an empty share group then),
        NON_EMPTY_GROUP while the share group has members (Kafka's alter/deleteShareGroupOffsets)."""
        error = self._cache.validate_group_status(group_id)
        if error is not None:
            return error
        group = self._cache.any_group(group_id)
        if group is None:
            if create_at_ms is None:
                return ErrorCode.group_id_not_found
            return self.shares.create_empty(group_id, create_at_ms)
        if getattr(group, "group_type", "classic") != "share":
            return ErrorCode.group_id_not_found
        return None if group.is_empty() else ErrorCode.non_empty_group

    def group(self, group_id: str) -> AnyGroup | None:
        """The in-memory group (classic or consumer), for inspection."""
        return self._cache.any_group(group_id)

    def groups(self) -> list[AnyGroup]:
        """Every group of the loaded partitions, for metrics."""
        return self._cache.all_groups()

    def tick(self, now_ms: int) -> int | None:
        """Run due timers (session expiry, rebalance timeout, initial delay, pending sync); return the next deadline."""
        self._timers.run_due(now_ms)
        return self._timers.next_deadline()

    def next_deadline(self) -> int | None:
        """When ``tick`` next has work (requests can add deadlines), or None."""
        return self._timers.next_deadline()
