"""KIP-932 share sessions: which partitions a share consumer fetches from, and the epoch its next request carries.

Kafka's ShareSessionCache and SharePartitionManager.newContext: epoch 0 opens a session (replacing the member's
old one) with the request's partitions; each later request must carry the session's epoch, which then moves on
(wrapping to 1), adding the request's partitions and dropping the forgotten ones; epoch -1 is the member's last
request (its acknowledgements are applied, then the session is closed and what it still holds is released).
``group.share.max.share.sessions`` bounds the sessions (SHARE_SESSION_LIMIT_REACHED beyond it).

A session belongs to the connection that opened it (Kafka's ShareSessionCache.connectionIdToSessionMap): when
that connection closes, ``disconnected`` names the session, which the caller ends as a member's leaving (its
records released at once, not when their locks run out). A session closed or replaced before that is no longer
the connection's.
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
    connection: object | None = None  # the connection that opened it


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch: after the largest int32 comes 1."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareSessionCache:
    """Share sessions by (group id, member id)."""

    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        self._by_connection: dict[object, ShareSession] = {}  # the session each live connection opened

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def context(self, group_id: str, member_id: str, epoch: int, add: Iterable[TopicIdPartition],
                forget: Iterable[TopicIdPartition], acknowledging: bool, connection: object | None = None,
                ) -> ShareSession:
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
            self.close(group_id, member_id)
            if len(self._sessions) >= self.max_sessions:
                raise SessionError(E.share_session_limit_reached, "the share session cache is full")
            session = self._sessions[key] = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH),
                                                         connection=connection)
            session.partitions.update(dict.fromkeys(add))
            if connection is not None:
                self._by_connection[connection] = session
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
        session = self._sessions.pop((group_id, member_id), None)
        if session is not None and self._by_connection.get(session.connection) is session:
            del self._by_connection[session.connection]
        return session

    def close_group(self, group_id: str) -> None:
        for key in [k for k in self._sessions if k[0] == group_id]:
            self.close(*key)

    def disconnected(self, connection: object) -> ShareSession | None:
        """The live session ``connection`` opened (None if it opened none, or that one is gone already)."""
        return self._by_connection.pop(connection, None)
