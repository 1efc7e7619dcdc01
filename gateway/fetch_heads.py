"""Each topic's partitions as a Fetch with nothing new answers them, kept while the topic does not change.

A caught-up librdkafka consumer of 1,000 partitions sends a sessionless Fetch of all of them about ten times a
second (at 100 ms long polls), each time in another order (it rotates its partition list). For each, the broker
read every partition's high watermark, last stable offset and log start offset and packed its answer head: a
cache miss or more per partition, as they were last touched 100 ms before, and most of the request's cost.

Here a topic's heads (one per partition, in the answer's layout) and high watermarks are made once, with the
topic's change count read first (storage.partition_counts.Changes: bumped after every change of a partition's
fetch offsets), and used while that count and the topic object are the same: a request then costs a list lookup
per partition. Made only for a request that names at least half of the topic's partitions (a request for a few
partitions of a large busy topic walks them as before, rather than the whole topic at each change).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logway.storage.topic import Topic


class TopicHeads:
    """One topic's partitions' heads in one layout, and their high watermarks, as of ``count``."""

    __slots__ = ("topic", "count", "highs", "heads")

    def __init__(self, topic: Topic, count: int, highs: list[int], heads: list[bytes]) -> None:
        self.topic = topic
        self.count = count
        self.highs = highs
        self.heads = heads


class FetchHeads:
    """The TopicHeads of the topics sessionless Fetches have asked for, by topic name and layout; ``topics`` is
    the log manager's (to forget the heads of topics deleted since)."""

    def __init__(self, topics: Mapping[str, Topic]) -> None:
        self._topics = topics
        self._kept: dict[tuple[str, bool], TopicHeads] = {}

    def get(self, topic: Topic, with_start: bool, pack: Callable[[int, int, int, int], bytes],
            wanted: int) -> TopicHeads | None:
        """The heads of ``topic`` as they are now (with log start offsets from Fetch v5), made again if it
        changed; None if ``wanted`` (the partitions the request names) is under half the topic's partitions
        and none are kept."""
        key = (topic.name, with_start)
        kept = self._kept.get(key)
        if kept is not None and kept.topic is topic and kept.count == topic.changes.count:
            return kept
        plogs = topic.partitions
        if wanted * 2 < len(plogs):
            return None
        changes = topic.changes
        count = changes.count  # before the partitions are read: a change meanwhile makes it stale at once
        highs: list[int] = []
        heads: list[bytes] = []
        for index, plog in enumerate(plogs):
            if plog.changes is not changes:  # a partition not counting in its topic's count: nothing kept
                return None
            high, lso, start = plog.fetch_offsets()
            highs.append(high)
            heads.append(pack(index, high, lso, start))
        if key not in self._kept and len(self._kept) >= 2 * len(self._topics):
            self._forget_gone()
        self._kept[key] = kept = TopicHeads(topic, count, highs, heads)
        return kept

    def _forget_gone(self) -> None:
        """Drop the heads of topics deleted (or made again) since."""
        topics = self._topics
        self._kept = {key: kept for key, kept in self._kept.items() if topics.get(key[0]) is kept.topic}
