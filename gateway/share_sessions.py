"""KIP-932 share sessions: which partitions a share consumer fetches from, and the epoch its next request carries.

Kafka's ShareSessionCache and SharePartitionManager.newContext: epoch 0 opens a session (replacing the member's
old one) with the request's partitions; each later request must carry the session's epoch, which then moves on
(wrapping to 1), adding the request's partitions and dropping the forgotten ones; epoch -1 is the member's last
request (its acknowledgements are applied, then the session is closed and what it still holds is released).
``group.share.max.share.sessions`` bounds the sessions (SHARE_SESSION_LIMIT_REACHED beyond it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from logway.wire.errors import ErrorCode

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ShareSession", "ShareSessionCache", "SessionError"]

E = ErrorCode
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
TopicIdPartition = tuple[uuid.UUID, int]


class SessionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch: after the largest int32 comes 1."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareSessionCache:
    """Share sessions by (group id, member id)."""

    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def context(self, group_id: str, member_id: str, epoch: int, add: Iterable[TopicIdPartition],
                forget: Iterable[TopicIdPartition], acknowledging: bool) -> ShareSession:
        """The session a request works in (see the module docstring); SessionError for what Kafka refuses."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            session = self._sessions.get(key)
            if session is None:
                raise SessionError(E.share_session_not_found, "no such share session")
            return session
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                raise SessionError(E.invalid_request, "acknowledgements in a request that opens a share session")
            self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_sessions:
                raise SessionError(E.share_session_limit_reached, "the share session cache is full")
            session = self._sessions[key] = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH))
            session.partitions.update(dict.fromkeys(add))
            return session
        session = self._sessions.get(key)
        if session is None:
            raise SessionError(E.share_session_not_found, "no such share session")
        if session.epoch != epoch:
            raise SessionError(E.invalid_share_session_epoch, f"expected epoch {session.epoch}, got {epoch}")
        session.partitions.update(dict.fromkeys(add))
        for tp in forget:
            session.partitions.pop(tp, None)
        session.epoch = next_epoch(session.epoch)
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def close_group(self, group_id: str) -> None:
        for key in [k for k in self._sessions if k[0] == group_id]:
            del self._sessions[key]
