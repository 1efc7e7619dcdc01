"""LogConfig: Kafka's names, defaults, validation messages and describe strings."""

from __future__ import annotations

import pytest

from logway.storage.config import BROKER_TO_TOPIC, LONG_MAX, LogConfig
from logway.storage.errors import InvalidConfig


def test_kafka_defaults():
    props = LogConfig().to_properties()
    assert props["segment.bytes"] == "1073741824"
    assert props["segment.ms"] == "604800000"
    assert props["segment.index.bytes"] == "10485760"
    assert props["index.interval.bytes"] == "4096"
    assert props["flush.messages"] == props["flush.ms"] == str(LONG_MAX)
    assert props["retention.ms"] == "604800000" and props["retention.bytes"] == "-1"
    assert props["cleanup.policy"] == "delete"
    assert props["message.timestamp.type"] == "CreateTime"
    assert props["max.message.bytes"] == "1048588"
    assert props["file.delete.delay.ms"] == "60000"
    assert props["compression.type"] == "producer"
    assert props["min.cleanable.dirty.ratio"] == "0.5"
    assert props["delete.retention.ms"] == "86400000"
    assert props["min.compaction.lag.ms"] == "0"
    assert props["message.timestamp.before.max.ms"] == str(LONG_MAX)
    assert props["message.timestamp.after.max.ms"] == "3600000"


def test_overrides_apply_on_a_base_and_round_trip():
    base = LogConfig.from_properties({"retention.ms": "1000"})
    config = LogConfig.from_properties({"cleanup.policy": "compact, delete", "preallocate": "TRUE"}, base)
    assert config.retention_ms == 1000 and config.compact_enabled and config.delete_enabled and config.preallocate
    assert LogConfig.from_properties(config.to_properties()) == config
    assert config.overrides_from(LogConfig()) == {
        "retention.ms": "1000", "cleanup.policy": "compact,delete", "preallocate": "true"
    }


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"segment.bytes": "abc"}, "Invalid value abc for configuration segment.bytes: Not a number of type INT"),
        ({"segment.bytes": "13"}, "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
        ({"segment.bytes": "4294967296"}, "Not a number of type INT"),
        ({"retention.ms": "-2"}, "Value must be at least -1"),
        ({"cleanup.policy": "forever"}, "String must be one of: compact, delete"),
        ({"message.timestamp.type": "Now"}, "String must be one of: CreateTime, LogAppendTime"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "Value must be no more than 1.0"),
        ({"preallocate": "yes"}, "Expected value to be either true or false"),
        ({"retention.hours": "1"}, "Unknown topic config name: retention.hours"),
    ],
)
def test_invalid_values_are_rejected_with_kafkas_message(props, message):
    with pytest.raises(InvalidConfig, match=message):
        LogConfig.from_properties(props)


def test_broker_synonyms_cover_the_log_properties():
    assert BROKER_TO_TOPIC["log.segment.bytes"] == "segment.bytes"
    assert BROKER_TO_TOPIC["log.roll.hours"] == BROKER_TO_TOPIC["log.roll.ms"] == "segment.ms"
    assert BROKER_TO_TOPIC["log.retention.minutes"] == "retention.ms"
    assert BROKER_TO_TOPIC["message.max.bytes"] == "max.message.bytes"
    assert BROKER_TO_TOPIC["log.cleaner.min.cleanable.ratio"] == "min.cleanable.dirty.ratio"
    assert BROKER_TO_TOPIC["log.segment.delete.delay.ms"] == "file.delete.delay.ms"
    assert BROKER_TO_TOPIC["log.cleaner.delete.retention.ms"] == "delete.retention.ms"
    with pytest.raises(InvalidConfig):
        LogConfig.from_broker_properties({"log.retention.hours": "many"})


def test_topic_configs_are_kafka_4s():
    """Kafka 4 dropped message.downconversion.enable (KIP-724) and has the remote.log.* switches (KIP-950)."""
    with pytest.raises(InvalidConfig, match="Unknown topic config name: message.downconversion.enable"):
        LogConfig.from_properties({"message.downconversion.enable": "false"})
    config = LogConfig.from_properties({"remote.log.copy.disable": "true"})
    assert config.to_properties()["remote.log.copy.disable"] == "true"
    assert config.to_properties()["remote.log.delete.on.disable"] == "false"
