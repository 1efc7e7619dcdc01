"""Long-polling fetches waiting for appends (Kafka's fetch purgatory, watched by partition), kept by topic.

A fetch registers once per topic with the set of partitions it reads, not once per partition: a consumer of
1,000 partitions long-polls every few hundred milliseconds, and a thousand registrations and removals per poll
cost more than the rest of its request. An append looks at the fetches waiting on its topic and wakes those
that read its partition.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import trio


class FetchWaiters:
    """Which waiting fetch reads which partitions, by topic."""

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[trio.Event, Collection[int]]] = {}

    def notify(self, topic: str, partition: int) -> None:
        """An append to ``topic``-``partition``: wake the fetches that read it."""
        waiting = self._by_topic.get(topic)
        if waiting:
            for event, partitions in waiting.items():
                if partition in partitions:
                    event.set()

    async def wait(self, partitions: Mapping[str, Collection[int]], deadline: float) -> bool:
        """Sleep until one of ``partitions`` (by topic) gets an append or trio's clock reaches ``deadline``; True
        if an append woke it."""
        event = trio.Event()
        for topic, indexes in partitions.items():
            self._by_topic.setdefault(topic, {})[event] = indexes
        try:
            with trio.move_on_at(deadline):
                await event.wait()
            return event.is_set()
        finally:
            for topic in partitions:
                waiting = self._by_topic.get(topic)
                if waiting is not None:
                    waiting.pop(event, None)
                    if not waiting:
                        del self._by_topic[topic]
