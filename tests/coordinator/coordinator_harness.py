"""A fake offsets log, a fake clock and request helpers for driving the group coordinator without sleeping.

Named uniquely (not ``helpers``) because every test folder puts itself on the same sys.path.
"""

from __future__ import annotations

import io
import struct
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription
from kio.serial import entity_writer

from logway.coordinator.consumer_results import ConsumerHeartbeatRequest
from logway.coordinator.group_config import GroupConfig
from logway.coordinator.group_coordinator import GroupCoordinator
from logway.coordinator.results import CommitOffset, JoinGroupRequest, MemberIdentity
from logway.coordinator.topics_image import TopicsSnapshot
from logway.wire.errors import ErrorCode

_write_subscription_v1 = entity_writer(ConsumerProtocolSubscription)


def subscription(*topics: str) -> bytes:
    """A version-prefixed consumer protocol subscription (v1), as the Java client sends in JoinGroup."""
    buf = io.BytesIO()
    _write_subscription_v1(buf, ConsumerProtocolSubscription(topics=topics, user_data=None, owned_partitions=()))
    return struct.pack(">h", 1) + buf.getvalue()


class FakeOffsetsLog:
    """In-memory ``__consumer_offsets``: every appended record kept in order; can be told to fail appends."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.fail_with: Exception | None = None
        self.appends = 0
        self.markers: list[tuple[int, int, bool]] = []

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], now_ms: int,
               producer: tuple[int, int] | None = None) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.appends += 1
        self.partitions[partition].extend(records)

    def append_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool, now_ms: int) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.markers.append((partition, producer_id, commit))

    def read(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        return list(self.partitions[partition])


class Reply:
    """A ``respond`` callback that remembers its result and fails the test if called twice."""

    def __init__(self) -> None:
        self.results: list[Any] = []

    def __call__(self, result: Any) -> None:
        assert not self.results, f"respond called twice: {self.results[0]} then {result}"
        self.results.append(result)

    @property
    def done(self) -> bool:
        return bool(self.results)

    @property
    def value(self) -> Any:
        assert self.results, "no response yet"
        return self.results[0]

    @property
    def error(self) -> ErrorCode:
        return self.value.error_code


class Cluster:
    """One coordinator, its fake log and a fake clock, with one helper per request."""

    def __init__(self, log: FakeOffsetsLog | None = None, load: bool = True, topics: TopicsSnapshot | None = None,
                 **config: Any) -> None:
        self.log = log or FakeOffsetsLog()
        self.now = 1_000_000
        self.topics = topics or TopicsSnapshot()
        self.gc = GroupCoordinator(self.log, GroupConfig(**config), self.topics)
        if load:
            self.gc.load_all(self.now)

    def advance(self, ms: int) -> None:
        """Move the clock and run every timer due, as the gateway's timer task would."""
        self.now += ms
        self.gc.tick(self.now)

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: Sequence[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        session: int = 10_000,
        rebalance: int = 30_000,
        client_id: str = "client",
        require_known_member_id: bool = True,
        skip: bool = False,
    ) -> Reply:
        reply = Reply()
        request = JoinGroupRequest(
            group,
            member_id,
            instance,
            protocol_type,
            protocols if protocols is not None else [("range", subscription("t"))],
            client_id=client_id,
            client_host="/127.0.0.1",
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            require_known_member_id=require_known_member_id,
            support_skip_assignment=skip,
        )
        self.gc.join_group(request, now_ms=self.now, respond=reply)
        return reply

    def join_new(self, group: str, **kw: Any) -> Reply:
        """A v4+ client's first join: MEMBER_ID_REQUIRED, then the real join with the given id."""
        first = self.join(group, **kw)
        if kw.get("instance") is None:
            assert first.error == ErrorCode.member_id_required
            return self.join(group, first.value.member_id, **kw)
        return first

    def sync(
        self,
        group: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes] | None = None,
        *,
        instance: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Reply:
        reply = Reply()
        self.gc.sync_group(
            group,
            generation,
            member_id,
            instance,
            assignments or {},
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            now_ms=self.now,
            respond=reply,
        )
        return reply

    def heartbeat(self, group: str, generation: int, member_id: str, instance: str | None = None) -> ErrorCode:
        reply = Reply()
        self.gc.heartbeat(group, member_id, instance, generation, now_ms=self.now, respond=reply)
        return reply.error

    def leave(self, group: str, *members: MemberIdentity) -> Reply:
        reply = Reply()
        self.gc.leave_group(group, members, now_ms=self.now, respond=reply)
        return reply

    def commit(
        self,
        group: str,
        offsets: dict[tuple[str, int], int],
        *,
        generation: int = -1,
        member_id: str = "",
        instance: str | None = None,
        metadata: str = "",
        leader_epoch: int = -1,
        retention_time_ms: int = -1,
        api_version: int = 9,
    ) -> dict[tuple[str, int], ErrorCode]:
        reply = Reply()
        self.gc.offset_commit(
            group,
            generation,
            member_id,
            instance,
            [CommitOffset(t, p, o, leader_epoch, metadata) for (t, p), o in offsets.items()],
            retention_time_ms=retention_time_ms,
            api_version=api_version,
            now_ms=self.now,
            respond=reply,
        )
        return reply.value.partitions

    def fetch(self, group: str, partitions: Sequence[tuple[str, int]] | None = None) -> Reply:
        reply = Reply()
        self.gc.offset_fetch(group, partitions, now_ms=self.now, respond=reply)
        return reply

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """Every committed offset of the group, as OffsetFetch with topics=null returns them."""
        reply = self.fetch(group)
        assert reply.error == ErrorCode.none
        return {(p.topic, p.partition): p.offset for p in reply.value.partitions}

    def describe(self, group: str) -> Any:
        reply = Reply()
        self.gc.describe_groups([group], now_ms=self.now, respond=reply)
        return reply.value.groups[0]

    def state(self, group: str) -> str:
        return self.describe(group).state

    def stable_group(self, group: str, n: int, **kw: Any) -> tuple[list[str], int]:
        """Bring ``n`` dynamic members to a Stable generation; returns (member ids, generation), leader first."""
        replies = [self.join_new(group, **kw) for _ in range(n)]
        self.advance(self.gc.config.initial_rebalance_delay_ms * 2)
        assert all(r.done and r.error == ErrorCode.none for r in replies), [r.results for r in replies]
        generation = replies[0].value.generation_id
        leader = replies[0].value.leader
        members = [leader] + [r.value.member_id for r in replies if r.value.member_id != leader]
        syncs = [self.sync(group, generation, m) for m in members[1:]]
        assignments = {m: f"assignment-{m}".encode() for m in members}
        syncs.insert(0, self.sync(group, generation, leader, assignments))
        assert all(s.error == ErrorCode.none for s in syncs)
        assert self.state(group) == "Stable"
        return members, generation

    # --- KIP-848 consumer groups ----------------------------------------------------------------------

    def consumer_heartbeat(self, group: str, member_id: str, epoch: int, **fields: Any) -> Any:
        """One ConsumerGroupHeartbeat (fields as ConsumerHeartbeatRequest names them); its result."""
        reply = Reply()
        self.gc.consumer_group_heartbeat(
            request=ConsumerHeartbeatRequest(group, member_id, epoch, **fields), now_ms=self.now, respond=reply)
        return reply.value

    def consumer_join(self, group: str, member_id: str, topics: Sequence[str] = ("t",), **fields: Any) -> Any:
        """A full joining heartbeat (epoch 0) subscribed to ``topics``."""
        fields.setdefault("rebalance_timeout_ms", 30_000)
        return self.consumer_heartbeat(group, member_id, 0, subscribed_topic_names=tuple(topics), owned={}, **fields)

    def consumer_describe(self, group: str) -> Any:
        reply = Reply()
        self.gc.consumer_group_describe([group], now_ms=self.now, respond=reply)
        return reply.value[0]
