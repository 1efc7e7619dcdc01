"""The "consumer" embedded protocol of classic groups: the subscription a Java client sends in JoinGroup and the
assignment it gets in SyncGroup (Kafka's ConsumerProtocol), read and written with kio's schemas.

Every version is an int16 prefix then the fields of that version; each version extends the previous one
(v1: owned partitions, v2: generation, v3: rack id for subscriptions; v1+: user data for assignments), so an
unknown newer version is read with the newest reader, as Kafka's ConsumerProtocol does.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_assignment.v1 import data as assignment_v1
from kio.schema.consumer_protocol_assignment.v2 import data as assignment_v2
from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.schema.consumer_protocol_subscription.v1 import data as subscription_v1
from kio.schema.consumer_protocol_subscription.v2 import data as subscription_v2
from kio.schema.consumer_protocol_subscription.v3 import data as subscription_v3
from kio.serial import entity_reader, entity_writer

__all__ = ["CONSUMER_PROTOCOL_TYPE", "Subscription", "encode_assignment", "parse_assignment", "parse_subscription",
           "subscribed_topics", "version_of"]

CONSUMER_PROTOCOL_TYPE = "consumer"

_SUBSCRIPTIONS = (subscription_v0, subscription_v1, subscription_v2, subscription_v3)
_ASSIGNMENTS = (assignment_v0, assignment_v1, assignment_v2, assignment_v3)


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a classic consumer subscribes to, the partitions it says it owns, and its rack."""

    topics: tuple[str, ...]
    owned: dict[str, tuple[int, ...]]
    rack_id: str | None


@cache
def _reader(module, cls_name: str):
    return entity_reader(getattr(module, cls_name))


def version_of(data: bytes) -> int | None:
    """The int16 version prefix, None when there is none (or it is negative)."""
    if len(data) < 2:
        return None
    (version,) = struct.unpack_from(">h", data)
    return None if version < 0 else version


def parse_subscription(metadata: bytes) -> Subscription | None:
    """A version-prefixed ConsumerProtocolSubscription; None when the bytes cannot be parsed."""
    version = version_of(metadata)
    if version is None:
        return None
    module = _SUBSCRIPTIONS[min(version, len(_SUBSCRIPTIONS) - 1)]
    try:
        sub, _ = _reader(module, "ConsumerProtocolSubscription")(memoryview(metadata)[2:], 0)
    except Exception:  # kio raises several error types for malformed bytes; any of them means "unknown"
        return None
    owned = {tp.topic: tuple(tp.partitions) for tp in getattr(sub, "owned_partitions", ())}
    return Subscription(tuple(sub.topics), owned, getattr(sub, "rack_id", None))


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """Topics in a version-prefixed subscription; None when the bytes cannot be parsed."""
    sub = parse_subscription(metadata)
    return None if sub is None else frozenset(sub.topics)


def parse_assignment(data: bytes) -> tuple[dict[str, tuple[int, ...]], bytes | None] | None:
    """A version-prefixed ConsumerProtocolAssignment as (partitions by topic, user data); None when unreadable.
    An empty byte string is an empty assignment (a member that joined but never synced)."""
    if not data:
        return {}, None
    version = version_of(data)
    if version is None:
        return None
    module = _ASSIGNMENTS[min(version, len(_ASSIGNMENTS) - 1)]
    try:
        assignment, _ = _reader(module, "ConsumerProtocolAssignment")(memoryview(data)[2:], 0)
    except Exception:  # malformed bytes
        return None
    return {tp.topic: tuple(tp.partitions) for tp in assignment.assigned_partitions}, assignment.user_data


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment of ``version`` (capped at what kio knows), topics and partitions sorted."""
    module = _ASSIGNMENTS[max(0, min(version, len(_ASSIGNMENTS) - 1))]
    value = module.ConsumerProtocolAssignment(assigned_partitions=tuple(
        module.TopicPartition(topic=topic, partitions=tuple(sorted(parts)))
        for topic, parts in sorted(partitions.items()) if parts), user_data=None)
    buf = io.BytesIO()
    entity_writer(module.ConsumerProtocolAssignment)(buf, value)
    return struct.pack(">h", module.ConsumerProtocolAssignment.__version__) + buf.getvalue()
