"""Group administration, sans-IO: DescribeGroups, ListGroups and DeleteGroups over the cached classic groups."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from logway.coordinator.group import GroupMetadata, GroupState
from logway.coordinator.group_cache import GroupCache
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
from logway.wire.errors import ErrorCode

__all__ = ["CLASSIC_GROUP_TYPE", "GroupAdmin"]

E = ErrorCode
CLASSIC_GROUP_TYPE = "classic"


class GroupAdmin:
    """What admin clients ask of the groups in a ``GroupCache``; deleting a group deletes its offsets."""

    def __init__(self, cache: GroupCache, offsets: Offsets) -> None:
        self._cache = cache
        self._offsets = offsets

    def describe_groups(self, group_ids: Sequence[str], *, now_ms: int, respond: Respond[DescribeGroupsResult]) -> None:
        """DescribeGroups: an unknown group is reported as Dead without error, as Kafka does."""
        described = []
        for group_id in group_ids:
            error = self._cache.validate_group_status(group_id, allow_empty_id=True)
            group = self._cache.get(group_id)
            if error is not None:
                described.append(DescribedGroup(group_id, error))
            elif group is None:
                described.append(DescribedGroup(group_id, E.none, GroupState.DEAD.value))
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

        Every group here is a "classic" group. While partitions load, the groups known so far come back
        with COORDINATOR_LOAD_IN_PROGRESS, as Kafka does.
        """
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        error = E.coordinator_load_in_progress if self._cache.partitions.loading else E.none
        if types and CLASSIC_GROUP_TYPE not in types:
            respond(ListGroupsResult(error))
            return
        groups = tuple(
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._cache.groups.values()
            if not states or g.state.value.lower() in states
        )
        respond(ListGroupsResult(error, groups))

    def delete_groups(self, group_ids: Sequence[str], *, now_ms: int, respond: Respond[DeleteGroupsResult]) -> None:
        """DeleteGroups: only Empty groups (NON_EMPTY_GROUP otherwise); their offsets and metadata are tombstoned."""
        errors: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self._cache.validate_group_status(group_id, allow_empty_id=True)
            group = self._cache.get(group_id)
            if error is not None:
                errors[group_id] = error
            elif group is None:
                errors[group_id] = E.group_id_not_found
            elif group.is_state(GroupState.EMPTY):
                if group not in eligible:
                    eligible.append(group)
                errors[group_id] = E.none
            else:
                errors[group_id] = E.non_empty_group
        if eligible:
            self._offsets.cleanup_groups(eligible, remove_all_offsets, now_ms)
        respond(DeleteGroupsResult({gid: errors[gid] for gid in group_ids}))


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
