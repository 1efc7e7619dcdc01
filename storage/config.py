"""Topic-level log configuration with Kafka's property names, types, defaults and validation.

Each `LogConfig` field carries its Kafka property name, type and validator in its metadata, so
the dataclass is the single table behind parsing (`from_properties`), describing
(`to_properties`) and the broker-level synonyms (`BROKER_TO_TOPIC`, Kafka's
ServerTopicConfigSynonyms).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from logway.storage.errors import InvalidConfig

__all__ = ["BROKER_TO_TOPIC", "LONG_MAX", "LogConfig"]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

INT, LONG, DOUBLE, STRING, LIST, BOOLEAN = "INT", "LONG", "DOUBLE", "STRING", "LIST", "BOOLEAN"

Check = Callable[[Any], str | None]  # returns Kafka's validator message, or None when valid


def _at_least(minimum: float) -> Check:
    return lambda v: None if v >= minimum else f"Value must be at least {minimum}"


def _between(low: float, high: float) -> Check:
    def check(v: float) -> str | None:
        if v < low:
            return f"Value must be no less than {low}"
        if v > high:
            return f"Value must be no more than {high}"
        return None

    return check


def _one_of(*choices: str) -> Check:
    def check(v: str | tuple[str, ...]) -> str | None:
        for item in (v,) if isinstance(v, str) else v:
            if item not in choices:
                return f"String must be one of: {', '.join(choices)}"
        return None

    return check


def _gzip_level(v: int) -> str | None:
    # Kafka's GzipCompression.LevelValidator: -1 (default) or 1..9.
    return None if v == -1 or 1 <= v <= 9 else "Value must be one of: -1, [1...9]"


def _prop(name: str, default: Any, kind: str, check: Check | None = None) -> Any:
    return field(default=default, metadata={"name": name, "kind": kind, "check": check})


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective configuration of one topic's logs (Kafka's LogConfig, topic-level names)."""

    segment_bytes: int = _prop("segment.bytes", 1073741824, INT, _at_least(14))
    segment_ms: int = _prop("segment.ms", 604800000, LONG, _at_least(1))
    segment_jitter_ms: int = _prop("segment.jitter.ms", 0, LONG, _at_least(0))
    segment_index_bytes: int = _prop("segment.index.bytes", 10485760, INT, _at_least(4))
    index_interval_bytes: int = _prop("index.interval.bytes", 4096, INT, _at_least(0))
    flush_messages: int = _prop("flush.messages", LONG_MAX, LONG, _at_least(1))
    flush_ms: int = _prop("flush.ms", LONG_MAX, LONG, _at_least(0))
    # Logway's, not Kafka's: acks=all produces are acknowledged once fsynced (Redpanda's write.caching=false).
    flush_acks_all: bool = _prop("flush.acks.all.enable", False, BOOLEAN)
    retention_ms: int = _prop("retention.ms", 604800000, LONG, _at_least(-1))
    retention_bytes: int = _prop("retention.bytes", -1, LONG)
    cleanup_policy: tuple[str, ...] = _prop("cleanup.policy", ("delete",), LIST, _one_of("compact", "delete"))
    message_timestamp_type: str = _prop(
        "message.timestamp.type", "CreateTime", STRING, _one_of("CreateTime", "LogAppendTime")
    )
    message_timestamp_before_max_ms: int = _prop("message.timestamp.before.max.ms", LONG_MAX, LONG, _at_least(0))
    message_timestamp_after_max_ms: int = _prop("message.timestamp.after.max.ms", 3600000, LONG, _at_least(0))
    max_message_bytes: int = _prop("max.message.bytes", 1048588, INT, _at_least(0))
    file_delete_delay_ms: int = _prop("file.delete.delay.ms", 60000, LONG, _at_least(0))
    compression_type: str = _prop(
        "compression.type", "producer", STRING, _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
    )
    compression_gzip_level: int = _prop("compression.gzip.level", -1, INT, _gzip_level)
    compression_lz4_level: int = _prop("compression.lz4.level", 9, INT, _between(1, 17))
    compression_zstd_level: int = _prop("compression.zstd.level", 3, INT, _between(-131072, 22))
    min_cleanable_dirty_ratio: float = _prop("min.cleanable.dirty.ratio", 0.5, DOUBLE, _between(0.0, 1.0))
    delete_retention_ms: int = _prop("delete.retention.ms", 86400000, LONG, _at_least(0))
    min_compaction_lag_ms: int = _prop("min.compaction.lag.ms", 0, LONG, _at_least(0))
    max_compaction_lag_ms: int = _prop("max.compaction.lag.ms", LONG_MAX, LONG, _at_least(1))
    # Accepted and described like Kafka so admin tools can set them; a single broker does not act on them.
    # Kafka 4's set: message.downconversion.enable is gone (KIP-724), the remote.log.* switches are new (KIP-950).
    min_insync_replicas: int = _prop("min.insync.replicas", 1, INT, _at_least(1))
    unclean_leader_election_enable: bool = _prop("unclean.leader.election.enable", False, BOOLEAN)
    preallocate: bool = _prop("preallocate", False, BOOLEAN)
    leader_replication_throttled_replicas: tuple[str, ...] = _prop("leader.replication.throttled.replicas", (), LIST)
    follower_replication_throttled_replicas: tuple[str, ...] = _prop(
        "follower.replication.throttled.replicas", (), LIST
    )
    remote_storage_enable: bool = _prop("remote.storage.enable", False, BOOLEAN)
    remote_log_copy_disable: bool = _prop("remote.log.copy.disable", False, BOOLEAN)
    remote_log_delete_on_disable: bool = _prop("remote.log.delete.on.disable", False, BOOLEAN)
    local_retention_ms: int = _prop("local.retention.ms", -2, LONG, _at_least(-2))
    local_retention_bytes: int = _prop("local.retention.bytes", -2, LONG, _at_least(-2))

    @property
    def delete_enabled(self) -> bool:
        """Whether retention by time and size applies (cleanup.policy contains "delete")."""
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        """Whether the topic is compacted (cleanup.policy contains "compact")."""
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """Whether the broker stamps batches with its own clock (message.timestamp.type=LogAppendTime)."""
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Apply topic-level overrides (`segment.bytes`, ...) on top of ``base`` (Kafka's defaults if None)."""
        changes: dict[str, Any] = {}
        for name, raw in props.items():
            f = _FIELDS.get(name)
            if f is None:
                # Kafka's AdminManager/ConfigHelper message for CreateTopics/AlterConfigs.
                raise InvalidConfig(f"Unknown topic config name: {name}")
            changes[f.name] = _parse(name, raw, f.metadata["kind"], f.metadata["check"])
        return dataclasses.replace(base or cls(), **changes)

    @classmethod
    def from_broker_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """Topic defaults from a server.properties mapping, with Kafka's synonym precedence.

        For retention and roll time the most precise unit wins (``log.retention.ms`` over
        ``.minutes`` over ``.hours``), as in Kafka's KafkaConfig; other broker keys are ignored.
        """
        topic_props: dict[str, str] = {}
        for topic_name, synonyms in _SYNONYMS.items():
            for broker_name, multiplier in synonyms:
                raw = props.get(broker_name)
                if raw is None:
                    continue
                if multiplier != 1:
                    value = _parse(broker_name, raw, INT, None)
                    raw = str(value * multiplier if value >= 0 else value)
                topic_props[topic_name] = raw
                break
        return cls.from_properties(topic_props)

    def to_properties(self) -> dict[str, str]:
        """Every topic-level property as Kafka describes it (DescribeConfigs strings)."""
        return {f.metadata["name"]: _format(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def overrides_from(self, base: LogConfig) -> dict[str, str]:
        """The properties whose value differs from ``base`` (what DescribeConfigs calls TOPIC_CONFIG sources)."""
        mine, theirs = self.to_properties(), base.to_properties()
        return {k: v for k, v in mine.items() if theirs[k] != v}


_FIELDS: dict[str, dataclasses.Field] = {f.metadata["name"]: f for f in dataclasses.fields(LogConfig)}

# Kafka's ServerTopicConfigSynonyms: topic name -> broker names in precedence order, with a unit multiplier.
_SYNONYMS: dict[str, list[tuple[str, int]]] = {
    "segment.bytes": [("log.segment.bytes", 1)],
    "segment.ms": [("log.roll.ms", 1), ("log.roll.hours", 3600000)],
    "segment.jitter.ms": [("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3600000)],
    "segment.index.bytes": [("log.index.size.max.bytes", 1)],
    "index.interval.bytes": [("log.index.interval.bytes", 1)],
    "flush.messages": [("log.flush.interval.messages", 1)],
    "flush.ms": [("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)],
    "flush.acks.all.enable": [("log.flush.acks.all.enable", 1)],
    "retention.ms": [("log.retention.ms", 1), ("log.retention.minutes", 60000), ("log.retention.hours", 3600000)],
    "retention.bytes": [("log.retention.bytes", 1)],
    "cleanup.policy": [("log.cleanup.policy", 1)],
    "message.timestamp.type": [("log.message.timestamp.type", 1)],
    "message.timestamp.before.max.ms": [("log.message.timestamp.before.max.ms", 1)],
    "message.timestamp.after.max.ms": [("log.message.timestamp.after.max.ms", 1)],
    "max.message.bytes": [("message.max.bytes", 1)],
    "file.delete.delay.ms": [("log.segment.delete.delay.ms", 1)],
    "compression.type": [("compression.type", 1)],
    "compression.gzip.level": [("compression.gzip.level", 1)],
    "compression.lz4.level": [("compression.lz4.level", 1)],
    "compression.zstd.level": [("compression.zstd.level", 1)],
    "min.cleanable.dirty.ratio": [("log.cleaner.min.cleanable.ratio", 1)],
    "delete.retention.ms": [("log.cleaner.delete.retention.ms", 1)],
    "min.compaction.lag.ms": [("log.cleaner.min.compaction.lag.ms", 1)],
    "max.compaction.lag.ms": [("log.cleaner.max.compaction.lag.ms", 1)],
    "min.insync.replicas": [("min.insync.replicas", 1)],
    "unclean.leader.election.enable": [("unclean.leader.election.enable", 1)],
    "preallocate": [("log.preallocate", 1)],
    "local.retention.ms": [("log.local.retention.ms", 1)],
    "local.retention.bytes": [("log.local.retention.bytes", 1)],
}

BROKER_TO_TOPIC: dict[str, str] = {broker: topic for topic, syns in _SYNONYMS.items() for broker, _ in syns}


def _parse(name: str, raw: str, kind: str, check: Check | None) -> Any:
    """Parse one property value as Kafka's ConfigDef.parseType does, then run its validator."""
    text = str(raw).strip()
    value: Any
    try:
        if kind in (INT, LONG):
            value = int(text, 10)
            limit = INT_MAX if kind == INT else LONG_MAX
            if not -limit - 1 <= value <= limit:
                raise ValueError(text)
        elif kind == DOUBLE:
            value = float(text)
        elif kind == BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise InvalidConfig(f"Invalid value {raw} for configuration {name}: Expected value to be either true or false")
            value = text.lower() == "true"
        elif kind == LIST:
            value = tuple(item.strip() for item in text.split(",")) if text else ()
        else:
            value = text
    except ValueError:
        raise InvalidConfig(f"Invalid value {raw} for configuration {name}: Not a number of type {kind}") from None
    problem = check(value) if check else None
    if problem:
        raise InvalidConfig(f"Invalid value {raw} for configuration {name}: {problem}")
    return value


def _format(value: Any) -> str:
    """Render a value the way Kafka's DescribeConfigs does."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)
