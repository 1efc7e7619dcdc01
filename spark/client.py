"""Driver-side Kafka look-ups (topic partitions, earliest/latest/by-time offsets) through librdkafka.

The equivalent of Spark's KafkaOffsetReader. It speaks plain Kafka (Metadata, ListOffsets), so it
works against any broker; it never joins a group and never commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import confluent_kafka as ck

from logway.spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    OffsetLimit,
    PartitionOffsets,
    Strategy,
    Subscribe,
    SubscribePattern,
    TopicPartition,
)

# Spark's Java consumer reads uncommitted data by default; librdkafka defaults to read_committed,
# which would stop short of the high watermark that "latest" resolves to.
_CONSUMER_DEFAULTS = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "auto.offset.reset": "error",
    "isolation.level": "read_uncommitted",
}


def consumer_config(kafka_params: Mapping[str, str], group_id: str) -> dict[str, str]:
    """librdkafka consumer settings: the user's `kafka.*` params win over our defaults, except commits."""
    config = {**_CONSUMER_DEFAULTS, "group.id": group_id, **kafka_params}
    config["enable.auto.commit"] = "false"
    config["auto.offset.reset"] = "error"
    return config


class OffsetReader:
    """Resolves subscriptions and offset specs to concrete partition offsets. Not picklable: driver only."""

    def __init__(self, kafka_params: Mapping[str, str], group_id: str, timeout_s: float = 30.0) -> None:
        self._consumer = ck.Consumer(consumer_config(kafka_params, group_id))
        self._timeout = timeout_s

    def close(self) -> None:
        """Close the underlying consumer."""
        self._consumer.close()

    def partitions(self, strategy: Strategy) -> list[TopicPartition]:
        """Topic partitions the strategy names right now (assign is taken as given, like Spark)."""
        return self.subscription(strategy)[0]

    def subscription(self, strategy: Strategy) -> tuple[list[TopicPartition], list[str]]:
        """The strategy's topic partitions, and the subscribed topics the broker does not have."""
        if isinstance(strategy, Assign):
            return sorted(strategy.partitions), []
        if isinstance(strategy, Subscribe):
            found, missing = [], []
            for topic in strategy.topics:
                meta = self._consumer.list_topics(topic, timeout=self._timeout).topics.get(topic)
                if meta is not None and meta.error is None:
                    found.extend((topic, p) for p in meta.partitions)
                else:
                    missing.append(topic)
            return sorted(found), missing
        assert isinstance(strategy, SubscribePattern)
        meta = self._consumer.list_topics(timeout=self._timeout)
        return sorted((t, p) for t, tm in meta.topics.items()
                      if tm.error is None and strategy.matches(t) for p in tm.partitions), []

    def _watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        return self._consumer.get_watermark_offsets(ck.TopicPartition(tp[0], tp[1]), timeout=self._timeout,
                                                    cached=False)

    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """Log start offsets."""
        return {tp: self._watermarks(tp)[0] for tp in tps}

    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """High watermarks: the offset the next record will get."""
        return {tp: self._watermarks(tp)[1] for tp in tps}

    def for_times(self, stamps: Mapping[TopicPartition, int], no_match: str) -> PartitionOffsets:
        """First offset with timestamp >= ts per partition; no such record -> error or latest (Spark's strategy)."""
        if not stamps:
            return {}
        query = [ck.TopicPartition(t, p, ts) for (t, p), ts in stamps.items()]
        found = self._consumer.offsets_for_times(query, timeout=self._timeout)
        out = {}
        for tp in found:
            if tp.error is not None:
                raise RuntimeError(f"ListOffsets by timestamp failed for {tp.topic}-{tp.partition}: {tp.error}")
            if tp.offset < 0:
                if no_match == "error":
                    raise ValueError(f"No offset matched from request of topic-partition {tp.topic}-{tp.partition} "
                                     f"and timestamp {stamps[(tp.topic, tp.partition)]}.")
                out[(tp.topic, tp.partition)] = self._watermarks((tp.topic, tp.partition))[1]
            else:
                out[(tp.topic, tp.partition)] = tp.offset
        return out

    def resolve(self, limit: OffsetLimit, tps: list[TopicPartition], is_start: bool) -> PartitionOffsets:
        """Concrete offsets for `limit` over `tps` (per-partition JSON may name other partitions, as in Spark)."""
        if limit.kind == "earliest":
            return self.earliest(tps)
        if limit.kind == "latest":
            return self.latest(tps)
        if limit.kind == "global_timestamp":
            assert limit.global_timestamp is not None
            return self._by_time({tp: limit.global_timestamp for tp in tps}, limit.no_match, is_start)
        if limit.kind == "timestamps":
            return self._by_time(dict(limit.offsets), limit.no_match, is_start)
        specific = dict(limit.offsets)
        earliest = self.earliest([tp for tp, o in specific.items() if o == EARLIEST])
        latest = self.latest([tp for tp, o in specific.items() if o == LATEST])
        return {tp: earliest.get(tp, latest.get(tp, o)) for tp, o in specific.items()}

    def _by_time(self, stamps: dict[TopicPartition, int], no_match: str, is_start: bool) -> PartitionOffsets:
        # Ending timestamps with no matching record read to the end (Spark: isStartingOffsets=false -> latest).
        return self.for_times(stamps, no_match if is_start else "latest")
