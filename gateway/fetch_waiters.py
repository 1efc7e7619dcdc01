"""Long-polling fetches waiting for appends (Kafka's fetch purgatory, watched by partition), kept by topic.

A waiting fetch registers once per topic, not once per partition: a consumer of 1,000 partitions long-polls every
few hundred milliseconds, and a thousand registrations and removals per poll cost more than the rest of its request.
Nor does it build a set of its partitions to register: a sessionless fetch hands over its partitions as the request
lists them, and they are read into a set only when an append to that topic arrives while it waits (then once); a
fetch session's request hands over the set its session keeps between requests (gateway/fetch_sessions.py). So the
work of a long poll on idle partitions is one entry per topic, and of a wake-up the fetches of the appended topic.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

import trio

# What a waiting fetch reads: (topic, partition indexes) pairs, or a mapping of topic to partition indexes.
Watched = Iterable[tuple[str, Iterable[int]]] | Mapping[str, Iterable[int]]


class _Partitions:
    """The partitions one waiting fetch reads in one topic: a set, or the request's partition iterables until an
    append to the topic asks whether it reads the partition appended to."""

    __slots__ = ("index", "sources")

    def __init__(self, partitions: Iterable[int]) -> None:
        self.index: Collection[int] | None = partitions if isinstance(partitions, (set, frozenset)) else None
        self.sources: list[Iterable[int]] = [] if self.index is not None else [partitions]

    def add(self, partitions: Iterable[int]) -> None:
        """The same topic named twice in one request."""
        if self.index is not None:
            self.sources.append(self.index)
            self.index = None
        self.sources.append(partitions)

    def __contains__(self, partition: int) -> bool:
        if self.index is None:
            index: set[int] = set()
            for source in self.sources:
                index.update(source)
            self.index, self.sources = index, []
        return partition in self.index


class FetchWaiters:
    """Which waiting fetch reads which partitions, by topic."""

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[trio.Event, _Partitions]] = {}

    def notify(self, topic: str, partition: int) -> None:
        """An append to ``topic``-``partition``: wake the fetches that read it."""
        waiting = self._by_topic.get(topic)
        if waiting:
            for event, partitions in waiting.items():
                if partition in partitions:
                    event.set()

    async def wait(self, partitions: Watched, deadline: float) -> bool:
        """Sleep until one of ``partitions`` ((topic, its partition indexes) pairs, or a mapping of them) gets an
        append or trio's clock reaches ``deadline``; True if an append woke it. The indexes are only read if an
        append to their topic comes while waiting: an iterable over the request is enough (it must not change
        meanwhile)."""
        event = trio.Event()
        topics: dict[str, _Partitions] = {}
        for topic, indexes in partitions.items() if isinstance(partitions, Mapping) else partitions:
            known = topics.get(topic)
            if known is None:
                topics[topic] = known = _Partitions(indexes)
                self._by_topic.setdefault(topic, {})[event] = known
            else:
                known.add(indexes)
        try:
            with trio.move_on_at(deadline):
                await event.wait()
            return event.is_set()
        finally:
            for topic in topics:
                waiting = self._by_topic.get(topic)
                if waiting is not None:
                    waiting.pop(event, None)
                    if not waiting:
                        del self._by_topic[topic]
