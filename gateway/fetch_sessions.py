"""Incremental fetch sessions (KIP-227, Fetch v7+), as Kafka's FetchManager and FetchSessionCache keep them.

A consumer that sends session_epoch 0 asks for a session: the broker remembers the partitions and fetch offsets
of that full request and answers with a session id. Later requests of the session (epoch 1, 2, ...) carry only
the partitions whose fetch offset or limits changed, plus forgotten_topics_data to drop some, and the answer
lists only partitions with something new: records, an error, or a changed high watermark / log start offset /
last stable offset. Epoch -1 closes a session (and with session id 0 is the sessionless fetch librdkafka sends).
Errors are Kafka's, top level with no partitions: an unknown session id FETCH_SESSION_ID_NOT_FOUND, a wrong
epoch INVALID_FETCH_SESSION_EPOCH, a session used both with topic ids (v13+) and names FETCH_SESSION_TOPIC_ID_ERROR.

Memory is bounded: at most max.incremental.fetch.session.cache.slots sessions (Kafka's default 1000), each of at
most MAX_SESSION_PARTITIONS partitions and all of them together at most MAX_CACHED_PARTITIONS (Logway's bounds;
Kafka bounds only the slots). When the cache is full a new session evicts the least recently used one idle for
EVICTION_S (Kafka's 120 s), else the smallest session if the new one is larger (Kafka's FetchSessionCache.tryEvict);
otherwise the fetch is answered sessionless (session id 0), which clients take as "send full requests".

A session belongs to the principal and listener that created it (Logway's rule; Kafka keys sessions by id alone):
to anyone else it does not exist. Its id cannot name it for them, nor close it, nor tell them it exists: a
request naming another's session gets FETCH_SESSION_ID_NOT_FOUND whatever its epoch, exactly as an id that was
never issued, and ids come from `secrets`, so they cannot be predicted from the ones a client sees.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from logway.wire.errors import ErrorCode
from logway.wire.fetch import FetchPartitionResult, FetchTopicResult, FileSlice

FINAL_EPOCH = -1  # close the session (session id 0: a sessionless full fetch)
INITIAL_EPOCH = 0  # start a new session with a full request
EVICTION_S = 120.0  # Kafka's FetchSessionCache evictionMs
MAX_SESSION_PARTITIONS = 50_000
MAX_CACHED_PARTITIONS = 200_000


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: what the client last asked (offset, limit) and last saw (watermarks)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    high_watermark: int = -2  # never sent yet: the first answer always carries the partition
    log_start_offset: int = -2
    last_stable_offset: int = -2


@dataclass(slots=True)
class SessionTopic:
    """A topic of the session in the place of a request topic: its cached partitions, which the fetch handler
    reads (partition, fetch_offset, partition_max_bytes) from and whose watermarks it compares; with the set of
    their indexes, which a long poll of the session waits on (gateway/fetch_waiters.py)."""

    topic: str
    topic_id: Any
    partitions: list[CachedPartition]
    indexes: set[int] = field(default_factory=set)


@dataclass(slots=True)
class SessionRequest:
    """The request the handler serves: the session's partitions in place of the request's topics."""

    topics: list[SessionTopic]
    max_bytes: int
    min_bytes: int
    isolation_level: int
    max_wait: Any


# Who a session belongs to: the listener it was created on and the principal that created it.
Owner = tuple[str, str]


@dataclass
class FetchSession:
    id: int
    uses_topic_ids: bool
    owner: Owner
    epoch: int = 1  # the epoch the next incremental request must carry
    last_used: float = 0.0
    # (topic key, partition) -> cached partition; the key is the name (v7-v12) or the topic id (v13+).
    partitions: dict[tuple[Any, int], CachedPartition] = field(default_factory=dict)
    # The partitions grouped by topic as requests read them, kept from request to request until a partition
    # joins, leaves or moves (None: to be grouped again): a quiet session's requests do not regroup them.
    topics: list[SessionTopic] | None = None


@dataclass(slots=True)
class SessionContext:
    """How one Fetch request is served: the request to read (or a top-level error), the session id to answer."""

    request: Any
    session_id: int = 0
    error: int = ErrorCode.none
    session: FetchSession | None = None
    incremental: bool = False

    def watched(self, names: list[str | None], skip: Collection[str]) -> list[tuple[str, Iterable[int]]]:
        """What a long poll of this request waits on (FetchWaiters.wait): each topic's name but those unknown or in
        ``skip``, with its partitions: a session's kept set, or the request's own partitions, read only if an
        append to the topic comes while waiting."""
        watched: list[tuple[str, Iterable[int]]] = []
        for topic, name in zip(self.request.topics, names, strict=True):
            if name and name not in skip and topic.partitions:
                if isinstance(topic, SessionTopic):
                    watched.append((name, topic.indexes))
                else:
                    watched.append((name, (_fields(p)[0] for p in topic.partitions)))
        return watched

    def response_topics(self, topics: list[FetchTopicResult]) -> list[FetchTopicResult]:
        """Remember what this answer tells the client; an incremental answer keeps only what changed."""
        session = self.session
        if session is None:
            return topics
        out = []
        served = []
        for topic, asked in zip(topics, self.request.topics, strict=True):
            kept = []
            for result, cached in zip(topic.partitions, asked.partitions, strict=True):
                if _note(result, cached) or not self.incremental:
                    kept.append(result)
                if self.incremental and _has_records(result):
                    served.append(cached)
            if kept:
                topic.partitions = kept
                out.append(topic)
        # Kafka moves a partition that returned data to the end of an incremental session, so the next
        # answers' max_bytes go to the others first (no partition starves).
        key_of = {id(c): k for k, c in session.partitions.items()} if served else {}
        for cached in served:
            key = key_of[id(cached)]
            session.partitions[key] = session.partitions.pop(key)
        if served:
            session.topics = None
        return out


def _note(result: FetchPartitionResult, cached: CachedPartition) -> bool:
    """Record the watermarks sent; True if the partition has news (records, an error, a moved watermark)."""
    changed = bool(result.error_code) or result.records is None or _has_records(result)
    if (result.high_watermark, result.log_start_offset, result.last_stable_offset) != (
            cached.high_watermark, cached.log_start_offset, cached.last_stable_offset):
        cached.high_watermark = result.high_watermark
        cached.log_start_offset = result.log_start_offset
        cached.last_stable_offset = result.last_stable_offset
        changed = True
    return changed


def _has_records(result: FetchPartitionResult) -> bool:
    records = result.records
    return records is not None and bool(records.size if isinstance(records, FileSlice) else len(records))


def _fields(partition: Any) -> tuple[int, int, int]:
    """(partition, fetch_offset, partition_max_bytes) of a request partition: the fetch handler's tuple, or an
    object with those fields."""
    if isinstance(partition, tuple):
        return partition
    return partition.partition, partition.fetch_offset, partition.partition_max_bytes


def _next_epoch(epoch: int) -> int:
    return 1 if epoch == 2**31 - 1 else epoch + 1


class FetchSessionCache:
    """The broker's fetch sessions, least recently used first."""

    def __init__(self, slots: int = 1000, clock=time.monotonic) -> None:
        self.slots = slots
        self.clock = clock
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.cached_partitions = 0

    def context(self, version: int, request: Any, owner: Owner) -> SessionContext:
        """Kafka's FetchManager.newContext for ``owner``'s request: sessionless, a new full session, an incremental
        one, or an error. Another owner's sessions are not there for it. ``request``'s topics hold partitions as
        the fetch handler reads them (see _fields)."""
        if version < 7:
            return SessionContext(request)
        session_id, epoch = request.session_id, request.session_epoch
        uses_ids = version >= 13
        session = self.sessions.get(session_id)
        if session is not None and session.owner != owner:
            session = None
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if session is not None:
                self._remove(session_id)
            if epoch == FINAL_EPOCH:
                return SessionContext(request)
            return self._new_session(request, uses_ids, owner)
        if session is None:
            return SessionContext(request, error=ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return SessionContext(request, error=ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_ids:  # Kafka keeps the session: the client may retry right
            return SessionContext(request, error=ErrorCode.fetch_session_topic_id_error)
        self.cached_partitions += self._update(session, request, uses_ids)
        if len(session.partitions) > MAX_SESSION_PARTITIONS or self.cached_partitions > MAX_CACHED_PARTITIONS:
            self._remove(session_id)  # too large to keep: the client starts over with a full request
            return SessionContext(request, error=ErrorCode.fetch_session_id_not_found)
        session.epoch = _next_epoch(epoch)
        session.last_used = self.clock()
        self.sessions.move_to_end(session_id)
        return SessionContext(_as_request(session, request, uses_ids), session.id, session=session, incremental=True)

    def _new_session(self, request: Any, uses_ids: bool, owner: Owner) -> SessionContext:
        partitions = {}
        for topic in request.topics:
            key = topic.topic_id if uses_ids else topic.topic
            for index, offset, max_bytes in map(_fields, topic.partitions):
                partitions[(key, index)] = CachedPartition(index, offset, max_bytes)
        if len(partitions) > MAX_SESSION_PARTITIONS or not self._make_room(len(partitions)):
            return SessionContext(request)
        session = FetchSession(self._new_id(), uses_ids, owner, last_used=self.clock(), partitions=partitions)
        self.sessions[session.id] = session
        self.cached_partitions += len(partitions)
        return SessionContext(_as_request(session, request, uses_ids), session.id, session=session)

    def _update(self, session: FetchSession, request: Any, uses_ids: bool) -> int:
        """Apply an incremental request's changes and forgotten partitions; return the change in size."""
        before = len(session.partitions)
        moved = False
        for topic in request.topics:
            key = topic.topic_id if uses_ids else topic.topic
            for index, offset, max_bytes in map(_fields, topic.partitions):
                cached = session.partitions.get((key, index))
                if cached is None:
                    session.partitions[(key, index)] = CachedPartition(index, offset, max_bytes)
                    moved = True
                else:
                    cached.fetch_offset = offset
                    cached.partition_max_bytes = max_bytes
        for forgotten in request.forgotten_topics_data:
            key = forgotten.topic_id if uses_ids else forgotten.topic
            for partition in forgotten.partitions:
                moved |= session.partitions.pop((key, partition), None) is not None
        if moved:
            session.topics = None
        return len(session.partitions) - before

    def _make_room(self, size: int) -> bool:
        """Free a slot (and partitions) for a new session of ``size`` partitions, evicting as Kafka does."""
        now = self.clock()
        while len(self.sessions) >= self.slots or self.cached_partitions + size > MAX_CACHED_PARTITIONS:
            if not self.sessions:
                return False
            oldest = next(iter(self.sessions.values()))
            if now - oldest.last_used >= EVICTION_S:
                self._remove(oldest.id)
                continue
            smallest = min(self.sessions.values(), key=lambda s: len(s.partitions))
            if len(smallest.partitions) >= size:
                return False
            self._remove(smallest.id)
        return True

    def _remove(self, session_id: int) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.cached_partitions -= len(session.partitions)

    def _new_id(self) -> int:
        """An unused id in 1..2^31-1, unpredictable (secrets: no client can work out the next one)."""
        while True:
            session_id = 1 + secrets.randbelow(2**31 - 1)
            if session_id not in self.sessions:
                return session_id


def _as_request(session: FetchSession, request: Any, uses_ids: bool) -> SessionRequest:
    """The session's partitions grouped by topic, in the order they joined, with the request's limits."""
    if session.topics is None:
        topics: dict[Any, SessionTopic] = {}
        for (key, _), cached in session.partitions.items():
            topic = topics.get(key)
            if topic is None:
                topic = topics[key] = SessionTopic("" if uses_ids else key, key if uses_ids else None, [])
            topic.partitions.append(cached)
            topic.indexes.add(cached.partition)
        session.topics = list(topics.values())
    return SessionRequest(session.topics, request.max_bytes, request.min_bytes, request.isolation_level,
                          request.max_wait)
