"""One member of a classic group: identity, timeouts, protocols, assignment and its waiting responses."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from logway.coordinator.results import JoinGroupResult, Respond, SyncGroupResult

__all__ = ["MemberMetadata"]


@dataclass(eq=False, slots=True)
class MemberMetadata:
    """Kafka's MemberMetadata: what a member told us when it joined, plus where its pending responses go."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_respond: Respond[JoinGroupResult] | None = None
    sync_respond: Respond[SyncGroupResult] | None = None
    # A member that joined but has not yet been part of a completed rebalance (Kafka's isNew): it
    # has no session yet, so it is expired by the new-member join timeout instead.
    is_new: bool = False
    protocol_names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.protocol_names = _distinct_names(self.protocols)

    @property
    def is_static(self) -> bool:
        """Static members (KIP-345) carry a group.instance.id."""
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        """A JoinGroup response is owed to this member."""
        return self.join_respond is not None

    @property
    def awaiting_sync(self) -> bool:
        """A SyncGroup response is owed to this member."""
        return self.sync_respond is not None

    def set_protocols(self, protocols: Sequence[tuple[str, bytes]]) -> None:
        """Replace the member's supported protocols (in preference order)."""
        self.protocols = list(protocols)
        self.protocol_names = _distinct_names(self.protocols)

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for ``protocol`` (its subscription, for the consumer protocol)."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata in the same order (Kafka's MemberMetadata.matches)."""
        return len(protocols) == len(self.protocols) and all(
            name == n and bytes(meta) == m for (name, meta), (n, m) in zip(protocols, self.protocols, strict=True)
        )

    def vote(self, candidates: Collection[str]) -> str:
        """The member's most preferred protocol among the candidates all members support."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


def _distinct_names(protocols: Sequence[tuple[str, bytes]]) -> list[str]:
    """Protocol names in preference order, each once: Kafka's MemberMetadata.protocols is a set, so a JoinGroup
    naming a protocol twice counts it once in the group's votes (counted twice, no protocol matched every
    member and the rebalance raised in the coordinator's timer task, which stopped the gateway)."""
    return list(dict.fromkeys(name for name, _ in protocols))
