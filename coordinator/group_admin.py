"""Group administration, sans-IO: DescribeGroups, ListGroups, DeleteGroups and ConsumerGroupDescribe.

Classic groups and KIP-848 consumer groups share the group id namespace: ListGroups lists both (with their
type, KIP-848), DeleteGroups deletes either, DescribeGroups describes classic groups only (a consumer group is
"Dead" to it, with GROUP_ID_NOT_FOUND from v6), ConsumerGroupDescribe consumer groups only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from logway.coordinator.consumer_group import Assignment, ConsumerGroup, ConsumerGroupMember, EpochAssignment
from logway.coordinator.consumer_membership import ConsumerMembership
from logway.coordinator.consumer_results import DescribedConsumerGroup, DescribedConsumerMember, NamedAssignment
from logway.coordinator.group import GroupMetadata, GroupState
from logway.coordinator.group_cache import AnyGroup, GroupCache
from logway.coordinator.group_config import GroupConfig
from logway.coordinator.offsets import Offsets, remove_all_offsets
from logway.coordinator.results import (
    DeleteGroupsResult,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsResult,
    ListedGroup,
    ListGroupsResult,
    Respond,
)
from logway.coordinator.share_group import ShareGroup
from logway.coordinator.share_group import group_tombstones as share_group_tombstones
from logway.coordinator.topics_image import TopicsImage
from logway.wire.errors import ErrorCode

__all__ = ["CLASSIC_GROUP_TYPE", "GroupAdmin"]

E = ErrorCode
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_MEMBER_TYPE, CLASSIC_MEMBER_TYPE = 1, 0  # ConsumerGroupDescribe's MemberType


class GroupAdmin:
    """What admin clients ask of the groups in a ``GroupCache``; deleting a group deletes its offsets."""

    def __init__(self, cache: GroupCache, offsets: Offsets, consumers: ConsumerMembership, topics: TopicsImage,
                 config: GroupConfig) -> None:
        self._cache = cache
        self._offsets = offsets
        self._consumers = consumers
        self._topics = topics
        self._config = config
        self.share_group_deleted: Callable[[str], None] | None = None  # the share partitions' state goes with it

    def describe_groups(self, group_ids: Sequence[str], *, not_found_error: bool = False, now_ms: int,
                        respond: Respond[DescribeGroupsResult]) -> None:
        """DescribeGroups: an unknown (or non-classic) group is reported as Dead, without error before v6 and with
        GROUP_ID_NOT_FOUND from v6 (``not_found_error``, KIP-1043), as Kafka does."""
        described = []
        for group_id in group_ids:
            error = self._cache.validate_group_status(group_id, allow_empty_id=True)
            group = self._cache.get(group_id)
            if error is not None:
                described.append(DescribedGroup(group_id, error))
            elif group is None:
                missing = E.group_id_not_found if not_found_error else E.none
                described.append(DescribedGroup(group_id, missing, GroupState.DEAD.value))
            else:
                described.append(_describe(group))
        respond(DescribeGroupsResult(tuple(described)))

    def list_groups(
        self,
        states_filter: Collection[str] = (),
        types_filter: Collection[str] = (),
        *,
        now_ms: int,
        respond: Respond[ListGroupsResult],
    ) -> None:
        """ListGroups (v4 states filter, v5 types filter; both case-insensitive, empty means all).

        While partitions load, the groups known so far come back with COORDINATOR_LOAD_IN_PROGRESS, as Kafka
        does.
        """
        states = {s.lower().strip() for s in states_filter}
        types = {t.lower() for t in types_filter}
        error = E.coordinator_load_in_progress if self._cache.partitions.loading else E.none
        groups = tuple(
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value, _group_type(g))
            for g in self._cache.all_groups()
            if (not states or g.state.value.lower() in states) and (not types or _group_type(g) in types)
        )
        respond(ListGroupsResult(error, groups))

    def delete_groups(self, group_ids: Sequence[str], *, now_ms: int, respond: Respond[DeleteGroupsResult]) -> None:
        """DeleteGroups: only Empty groups (NON_EMPTY_GROUP otherwise); their offsets and metadata are tombstoned."""
        errors: dict[str, ErrorCode] = {}
        eligible: list[AnyGroup] = []
        for group_id in group_ids:
            error = self._cache.validate_group_status(group_id, allow_empty_id=True)
            group = self._cache.any_group(group_id)
            if error is not None:
                errors[group_id] = error
            elif group is None:
                errors[group_id] = E.group_id_not_found
            elif _is_empty(group):
                if group not in eligible:
                    eligible.append(group)
                errors[group_id] = E.none
            else:
                errors[group_id] = E.non_empty_group
        shares = [g for g in eligible if isinstance(g, ShareGroup)]
        others = [g for g in eligible if not isinstance(g, ShareGroup)]
        if others:
            self._offsets.cleanup_groups(others, remove_all_offsets, now_ms)
        for group in shares:
            errors[group.group_id] = self._delete_share_group(group, now_ms)
        respond(DeleteGroupsResult({gid: errors[gid] for gid in group_ids}))

    def _delete_share_group(self, group: ShareGroup, now_ms: int) -> ErrorCode:
        """An empty share group's records are tombstoned and its share partitions' state deleted."""
        records = [r.encode() for r in share_group_tombstones(group)]
        error = self._cache.append(self._cache.partition_for(group.group_id), records, now_ms, E.unknown_server_error)
        if error == E.none:
            self._cache.drop(group, now_ms)
            if self.share_group_deleted is not None:
                self.share_group_deleted(group.group_id)
        return error

    def consumer_group_describe(self, group_ids: Sequence[str], *, now_ms: int,
                                respond: Respond[tuple[DescribedConsumerGroup, ...]]) -> None:
        """ConsumerGroupDescribe: each KIP-848 group's epochs, assignor, and members with their assignments
        (what they own, partitions still being revoked included) and targets, topics by id and name."""
        described = []
        for group_id in group_ids:
            error = self._cache.validate_group_status(group_id)
            group = self._cache.consumer(group_id)
            if error is not None:
                described.append(DescribedConsumerGroup(group_id, error))
            elif group is None:
                kind = "not found" if self._cache.any_group(group_id) is None else "is not a consumer group"
                described.append(DescribedConsumerGroup(group_id, E.group_id_not_found,
                                                        f"Group {group_id} {kind}."))
            else:
                described.append(self._describe_consumer_group(group))
        respond(tuple(described))

    def _describe_consumer_group(self, group: ConsumerGroup) -> DescribedConsumerGroup:
        members = tuple(self._describe_member(m, group.target_of(m.member_id)) for m in group.members.values())
        return DescribedConsumerGroup(
            group.group_id, E.none, group_state=group.state.value, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.preferred_assignor(self._config.consumer_assignors[0]), members=members)

    def _describe_member(self, m: ConsumerGroupMember, target: Assignment) -> DescribedConsumerMember:
        owned: dict = {}
        for assignment in (m.assigned, m.pending_revocation):
            for topic_id, parts in assignment.items():
                owned.setdefault(topic_id, set()).update(parts)
        return DescribedConsumerMember(
            m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
            tuple(sorted(m.subscribed_topic_names)), m.subscribed_topic_regex, self._named(owned),
            self._named(target), CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE)

    def _named(self, assignment: Assignment | EpochAssignment | dict) -> NamedAssignment:
        """Topics by id and name; a topic that no longer exists is left out, as Kafka does."""
        out = []
        for topic_id, parts in sorted(assignment.items()):
            name = self._topics.topic_name(topic_id)
            if name is not None:
                out.append((topic_id, name, tuple(sorted(parts))))
        return tuple(out)


def _group_type(group: AnyGroup) -> str:
    return CLASSIC_GROUP_TYPE if isinstance(group, GroupMetadata) else group.group_type


def _is_empty(group: AnyGroup) -> bool:
    return group.is_state(GroupState.EMPTY) if isinstance(group, GroupMetadata) else group.is_empty()


def _describe(group: GroupMetadata) -> DescribedGroup:
    """Kafka's GroupMetadata.summary: member metadata and assignments only when Stable."""
    stable = group.is_state(GroupState.STABLE)
    protocol = (group.protocol_name or "") if stable else ""
    members = tuple(
        DescribedMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            metadata=m.metadata(protocol) if stable else b"",
            assignment=m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return DescribedGroup(group.group_id, E.none, group.state.value, group.protocol_type or "", protocol, members)
