"""Reads the topics out of a "consumer" protocol subscription (the JoinGroup metadata the Java client sends)."""

from __future__ import annotations

import struct

from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription
from kio.serial import entity_reader

__all__ = ["CONSUMER_PROTOCOL_TYPE", "subscribed_topics"]

CONSUMER_PROTOCOL_TYPE = "consumer"

# Every ConsumerProtocolSubscription version starts with the v0 fields (topics, user_data), so the v0
# reader reads the topic list of any version, like Kafka's ConsumerProtocol.deserializeSubscription.
_read_v0 = entity_reader(ConsumerProtocolSubscription)


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """Topics in a version-prefixed subscription; None when the bytes cannot be parsed."""
    if len(metadata) < 2:
        return None
    (version,) = struct.unpack_from(">h", metadata)
    if version < 0:
        return None
    try:
        subscription, _ = _read_v0(memoryview(metadata)[2:], 0)
    except Exception:  # kio raises several error types for malformed bytes; any of them means "unknown"
        return None
    return frozenset(subscription.topics)
