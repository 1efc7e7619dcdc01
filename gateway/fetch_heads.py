"""Each topic's partitions as a Fetch with nothing new answers them, kept while the topic does not change.

A caught-up librdkafka consumer of 1,000 partitions sends a sessionless Fetch of all of them about ten times a
second (at 100 ms long polls), each time in another order (it rotates its partition list). For each, the broker
read every partition's high watermark, last stable offset and log start offset and packed its answer head: a
cache miss or more per partition, as they were last touched 100 ms before, and most of the request's cost.

Here what such a request read (each partition's head, in the answer's layout, and high watermark) is kept by
topic with the topic's change count read before it (storage.partition_counts.Changes: bumped after every change
of a partition's fetch offsets). While the topic is the same object at the same count, a request for partitions
kept costs a list lookup each; a partition not kept yet is read as before and added (so the members of a group,
each with its own partitions, fill one topic's heads). A change starts the topic's heads afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logway.storage.topic import Topic


class TopicHeads:
    """One topic's partitions' heads in one layout and their high watermarks (None: not read yet), as of
    ``count``."""

    __slots__ = ("topic", "count", "highs", "heads")

    def __init__(self, topic: Topic, count: int) -> None:
        self.topic = topic
        self.count = count
        size = len(topic.partitions)
        self.highs: list[int | None] = [None] * size
        self.heads: list[bytes | None] = [None] * size


class FetchHeads:
    """The TopicHeads of the topics sessionless Fetches have asked for, by topic name and layout (with log start
    offsets from Fetch v5, or not); ``topics`` is the log manager's (to forget the heads of deleted topics)."""

    def __init__(self, topics: Mapping[str, Topic]) -> None:
        self._topics = topics
        self._kept: dict[tuple[str, bool], TopicHeads] = {}

    def current(self, topic: Topic, with_start: bool) -> TopicHeads | None:
        """The heads kept of ``topic`` if it has not changed since (nor gained partitions)."""
        kept = self._kept.get((topic.name, with_start))
        if (kept is not None and kept.topic is topic and kept.count == topic.changes.count
                and len(kept.highs) == len(topic.partitions)):
            return kept
        return None

    def add(self, topic: Topic, with_start: bool, count: int, indexes: list[int], highs: list[int],
            heads: list[bytes]) -> None:
        """Keep what a request read of ``topic``'s partitions ``indexes`` after its change count was ``count``."""
        if topic.changes.count != count or any(plog.changes is not topic.changes for plog in
                                                 (topic.partitions[i] for i in indexes)):
            return  # changed meanwhile (a flush thread), or a partition not counting in its topic's count
        key = (topic.name, with_start)
        kept = self.current(topic, with_start)  # at ``count`` if any: the topic's mark is ``count``
        if kept is None:
            if key not in self._kept and len(self._kept) >= 2 * len(self._topics):
                self._forget_gone()
            self._kept[key] = kept = TopicHeads(topic, count)
        kept_highs, kept_heads = kept.highs, kept.heads
        for index, high, head in zip(indexes, highs, heads, strict=True):
            kept_highs[index] = high
            kept_heads[index] = head

    def _forget_gone(self) -> None:
        """Drop the heads of topics deleted (or made again) since."""
        topics = self._topics
        self._kept = {key: kept for key, kept in self._kept.items() if topics.get(key[0]) is kept.topic}
