"""Partitions of a Produce request a filter refuses, answered per partition as Kafka answers them (sans-IO).

Kafka answers a Produce per partition: one partition's records rejected (INVALID_RECORD with the index of each
bad record in ``record_errors``, v8+) does not stop the others. A filter that refuses some partitions (record
validation, record encryption) forwards the request without them, and adds their answers to the upstream's
response (``Refusals.finish``); when it refuses every partition the request never goes upstream and the filter
answers it alone (``Refusals.answer``). An acks=0 Produce gets no answer, as from Kafka: its refused
partitions are only dropped.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any

from logway.proxy.filters.base import Answer
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, field_entity, response_type

PRODUCE = 0
TopicKey = str | uuid.UUID  # a topic's name (Produce v3-12) or id (v13)


@dataclass(frozen=True)
class Refusal:
    """Why a partition's records are not forwarded: the error code, a message and, for INVALID_RECORD, the
    index of each bad record within its batch with its message (Kafka's BatchIndexAndErrorMessage)."""

    error: ErrorCode
    message: str | None = None
    record_errors: tuple[tuple[int, str | None], ...] = ()


def topic_key(version: int, topic: Any) -> TopicKey:
    """The key of a kio Produce request topic: its name, or (v13) its id."""
    return topic.topic_id if version >= 13 else topic.name


@dataclass
class Refusals:
    """The refused partitions of one Produce request, by (topic key, partition index)."""

    version: int
    refused: dict[tuple[TopicKey, int], Refusal] = field(default_factory=dict)

    def refuse(self, topic: TopicKey, partition: int, refusal: Refusal) -> None:
        self.refused[topic, partition] = refusal

    def apply(self, request: Any) -> Any:
        """The request without the refused partitions (the same object when none is). Raises Answer when none
        is left, with every partition's refusal (nothing answers an acks=0 Produce: its partitions are dropped,
        the emptied request forwarded)."""
        if not self.refused:
            return request
        topics = []
        for topic in request.topic_data:
            key = topic_key(self.version, topic)
            kept = tuple(p for p in topic.partition_data if (key, p.index) not in self.refused)
            if kept:
                topics.append(topic if len(kept) == len(topic.partition_data)
                              else dataclasses.replace(topic, partition_data=kept))
        if not topics and request.acks != 0:
            raise Answer(self.finish(build(response_type(PRODUCE, self.version),
                                           {"throttle_time": 0, "responses": []})))
        return dataclasses.replace(request, topic_data=tuple(topics))

    def finish(self, response: Any) -> Any:
        """``response`` with the refused partitions' answers added, each to its topic's entry."""
        cls = response_type(PRODUCE, self.version)
        topic_cls = field_entity(cls, "responses")
        partition_cls = field_entity(topic_cls, "partition_responses")
        by_topic: dict[TopicKey, list[Any]] = {}
        for (topic, index), refusal in self.refused.items():
            by_topic.setdefault(topic, []).append(build(partition_cls, _partition(index, refusal)))
        entries = []
        for entry in response.responses:
            extra = by_topic.pop(topic_key(self.version, entry), None)
            entries.append(entry if extra is None else dataclasses.replace(
                entry, partition_responses=entry.partition_responses + tuple(extra)))
        for topic, partitions in by_topic.items():
            name = {"topic_id": topic} if self.version >= 13 else {"name": topic}
            entries.append(build(topic_cls, {**name, "partition_responses": []}))
            entries[-1] = dataclasses.replace(entries[-1], partition_responses=tuple(partitions))
        return dataclasses.replace(response, responses=tuple(entries))


def _partition(index: int, refusal: Refusal) -> dict:
    return {"index": index, "error_code": refusal.error, "base_offset": -1, "log_append_time": -1,
            "log_start_offset": -1, "error_message": refusal.message,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in refusal.record_errors]}
