"""A topic as storage knows it (name, id, config, partition logs) and Kafka's topic-name rules."""

from __future__ import annotations

import base64
import re
import uuid
from dataclasses import dataclass, field

from logway.storage.config import LogConfig
from logway.storage.errors import InvalidTopic
from logway.storage.partition_counts import Changes
from logway.storage.partition_log import PartitionLog

MAX_NAME_LENGTH = 249  # Kafka's Topic.MAX_NAME_LENGTH
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


@dataclass(slots=True)
class Topic:
    """One topic's identity, effective config, explicit overrides and partition logs (index = partition)."""

    name: str
    topic_id: uuid.UUID
    config: LogConfig
    overrides: dict[str, str] = field(default_factory=dict)
    partitions: list[PartitionLog] = field(default_factory=list)
    # Shared by its partition logs (each bumps it when its fetch offsets change): see partition_counts.Changes.
    changes: Changes = field(default_factory=Changes)
    # Partitions of Fetch answers with nothing new, counted per topic by the fast path that answers them (the
    # others count in their partitions' counters); the metrics add it to the topic's TotalFetchRequestsPerSec.
    fetch_requests: int = 0


def validate_topic_name(name: str) -> None:
    """Raise InvalidTopic with Kafka's message (org.apache.kafka.common.internals.Topic.validate)."""
    if not name:
        raise InvalidTopic("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopic('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopic(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        )
    if not _LEGAL.fullmatch(name):
        raise InvalidTopic(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'"
        )


def collision_key(name: str) -> str:
    """Names equal after '.' -> '_' collide in metric names; Kafka refuses the second one."""
    return name.replace(".", "_")


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    """Inverse of `encode_topic_id`."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
