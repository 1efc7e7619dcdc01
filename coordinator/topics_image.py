"""The coordinator's read-only view of the broker's topics (Kafka's CoordinatorMetadataImage), sans-IO."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = ["TopicsImage", "TopicsSnapshot"]


class TopicsImage(Protocol):
    """Names, ids and partition counts of the existing topics; the gateway implements it over storage."""

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The id of the topic named ``name``, None if there is none."""
        ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id, None if there is none."""
        ...

    def partition_count(self, name: str) -> int:
        """How many partitions the topic has (0 if it does not exist)."""
        ...

    def names(self) -> Iterable[str]:
        """Every topic name (internal topics included, as Kafka's metadata image lists them)."""
        ...


class TopicsSnapshot:
    """A fixed ``TopicsImage``: name -> (id, partition count). Tests build one; so can a caller that has no live view."""

    def __init__(self, topics: Mapping[str, tuple[uuid.UUID, int]] | None = None) -> None:
        self.topics = dict(topics or {})

    def add(self, name: str, partitions: int, topic_id: uuid.UUID | None = None) -> uuid.UUID:
        """Create or resize a topic; returns its id."""
        tid = topic_id or (self.topics[name][0] if name in self.topics else uuid.uuid4())
        self.topics[name] = (tid, partitions)
        return tid

    def remove(self, name: str) -> None:
        self.topics.pop(name, None)

    def topic_id(self, name: str) -> uuid.UUID | None:
        entry = self.topics.get(name)
        return None if entry is None else entry[0]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((name for name, (tid, _) in self.topics.items() if tid == topic_id), None)

    def partition_count(self, name: str) -> int:
        entry = self.topics.get(name)
        return 0 if entry is None else entry[1]

    def names(self) -> Iterable[str]:
        return self.topics.keys()
