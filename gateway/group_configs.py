"""GROUP config resources (resource type 32): per-group overrides of the group coordinator's settings.

Kafka 4's GroupConfig: ``kafka-configs --entity-type groups`` (DescribeConfigs, IncrementalAlterConfigs,
AlterConfigs on a GROUP resource) sets ``share.auto.offset.reset``, ``share.record.lock.duration.ms``,
``consumer.session.timeout.ms``, ... for one group; each falls back to its broker config (``group.share.*``,
``group.consumer.*``). A value is checked against the bounds the broker sets (``group.share.min.*`` /
``max.*``), with Kafka's INVALID_CONFIG. The overrides are kept in ``logway-group-configs.json`` in the first
log dir (Kafka keeps them in its metadata log), written atomically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from logway.storage.checkpoints import write_atomically
from logway.wire.errors import ErrorCode, KafkaError

__all__ = ["GROUP_CONFIGS", "GroupConfigs"]

E = ErrorCode
FILE_NAME = "logway-group-configs.json"
_DURATION = re.compile(r"by_duration:P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One group config: its type, the broker config it falls back to, and the broker configs bounding it."""

    kind: str  # INT, STRING, BOOLEAN
    broker_key: str | None
    default: str
    bounds: tuple[str, str] | None = None


def _ranged(key: str, default: str, low: str, high: str) -> GroupConfigDef:
    return GroupConfigDef("INT", key, default, (low, high))


# Kafka 4.3's GroupConfig.CONFIG_DEF, in its DescribeConfigs order.
GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": _ranged("group.consumer.session.timeout.ms", "45000",
                                           "group.consumer.min.session.timeout.ms",
                                           "group.consumer.max.session.timeout.ms"),
    "consumer.assignment.interval.ms": _ranged("group.consumer.assignment.interval.ms", "1000",
                                               "group.consumer.min.assignment.interval.ms",
                                               "group.consumer.max.assignment.interval.ms"),
    "share.auto.offset.reset": GroupConfigDef("STRING", None, "latest"),
    "share.renew.acknowledge.enable": GroupConfigDef("BOOLEAN", None, "true"),
    "streams.initial.rebalance.delay.ms": GroupConfigDef("INT", "group.streams.initial.rebalance.delay.ms", "3000"),
    "share.session.timeout.ms": _ranged("group.share.session.timeout.ms", "45000",
                                        "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "streams.assignment.interval.ms": GroupConfigDef("INT", "group.streams.assignment.interval.ms", "1000"),
    "share.heartbeat.interval.ms": _ranged("group.share.heartbeat.interval.ms", "5000",
                                           "group.share.min.heartbeat.interval.ms",
                                           "group.share.max.heartbeat.interval.ms"),
    "streams.heartbeat.interval.ms": GroupConfigDef("INT", "group.streams.heartbeat.interval.ms", "5000"),
    "share.delivery.count.limit": _ranged("group.share.delivery.count.limit", "5",
                                          "group.share.min.delivery.count.limit",
                                          "group.share.max.delivery.count.limit"),
    "consumer.heartbeat.interval.ms": _ranged("group.consumer.heartbeat.interval.ms", "5000",
                                              "group.consumer.min.heartbeat.interval.ms",
                                              "group.consumer.max.heartbeat.interval.ms"),
    "share.record.lock.duration.ms": _ranged("group.share.record.lock.duration.ms", "30000",
                                             "group.share.min.record.lock.duration.ms",
                                             "group.share.max.record.lock.duration.ms"),
    "share.assignment.interval.ms": _ranged("group.share.assignment.interval.ms", "1000",
                                            "group.share.min.assignment.interval.ms",
                                            "group.share.max.assignment.interval.ms"),
    "share.isolation.level": GroupConfigDef("STRING", None, "read_uncommitted"),
    "streams.session.timeout.ms": GroupConfigDef("INT", "group.streams.session.timeout.ms", "45000"),
    "share.partition.max.record.locks": _ranged("group.share.partition.max.record.locks", "2000",
                                                "group.share.min.partition.max.record.locks",
                                                "group.share.max.partition.max.record.locks"),
    "streams.num.standby.replicas": GroupConfigDef("INT", "group.streams.num.standby.replicas", "0"),
}


class GroupConfigs:
    """The per-group overrides, over the broker's properties."""

    def __init__(self, log_dir: Path, broker_properties: Mapping[str, str],
                 given_properties: Mapping[str, str] | None = None) -> None:
        self.path = log_dir / FILE_NAME
        self._props = broker_properties
        self._given = given_properties or {}
        self.overrides: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        if self.path.exists():
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.overrides = {g: {k: str(v) for k, v in c.items()} for g, c in data.items() if isinstance(c, dict)}

    def value(self, group_id: str, name: str) -> str:
        """The group's value of a config: its override, else the broker's, else Kafka's default."""
        override = self.overrides.get(group_id, {}).get(name)
        if override is not None:
            return override
        definition = GROUP_CONFIGS[name]
        if definition.broker_key and definition.broker_key in self._props:
            return self._props[definition.broker_key]
        return definition.default

    def int_value(self, group_id: str, name: str) -> int:
        return int(self.value(group_id, name))

    def describe(self, group_id: str) -> list[tuple[str, str, int, str, list[tuple[str, str, int]]]]:
        """(name, value, source, kind, synonyms) of every group config, as Kafka's DescribeConfigs lists them:
        the override (GROUP_CONFIG, 8), then the broker config (STATIC_BROKER_CONFIG 4 if set, DEFAULT_CONFIG 5)."""
        out = []
        overrides = self.overrides.get(group_id, {})
        for name, definition in GROUP_CONFIGS.items():
            synonyms: list[tuple[str, str, int]] = []
            if name in overrides:
                synonyms.append((name, overrides[name], 8))
            broker_name = definition.broker_key or name
            if definition.broker_key and definition.broker_key in self._given:
                synonyms.append((broker_name, self._props[broker_name], 4))
            synonyms.append((broker_name, definition.default, 5))
            out.append((name, synonyms[0][1], synonyms[0][2], definition.kind, synonyms))
        return out

    def check(self, overrides: Mapping[str, str | None]) -> None:
        """Kafka's GroupConfig.validate: known names, typed values, within the broker's bounds."""
        unknown = [name for name in overrides if name not in GROUP_CONFIGS]
        if unknown:
            raise KafkaError(f"Unknown group config name: {unknown[0]}", E.invalid_config)
        for name, value in overrides.items():
            definition = GROUP_CONFIGS[name]
            if value is None:
                raise KafkaError(f"Null value not supported for group configs: {name}", E.invalid_request)
            self._check_value(name, definition, value)

    def _check_value(self, name: str, definition: GroupConfigDef, value: str) -> None:
        if definition.kind == "INT":
            try:
                number = int(value)
            except ValueError:
                raise KafkaError(f"Invalid value {value} for configuration {name}: Not a number of type INT",
                                 E.invalid_config) from None
            if definition.bounds is not None:
                low, high = (int(self._props.get(k, "0")) for k in definition.bounds)
                if not low <= number <= high:
                    raise KafkaError(f"{name} must be greater than or equal to {definition.bounds[0]} ({low}) and "
                                     f"less than or equal to {definition.bounds[1]} ({high})", E.invalid_config)
        elif definition.kind == "BOOLEAN" and value.lower() not in ("true", "false"):
            raise KafkaError(f"Invalid value {value} for configuration {name}: Expected value to be either true or "
                             "false", E.invalid_config)
        elif name == "share.auto.offset.reset" and value.lower() not in ("earliest", "latest") \
                and not _DURATION.fullmatch(value):
            raise KafkaError(f"Invalid value {value} for configuration {name}: The value must be either 'earliest', "
                             "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.", E.invalid_config)
        elif name == "share.isolation.level" and value not in ("read_committed", "read_uncommitted"):
            raise KafkaError(f"Invalid value {value} for configuration {name}: String must be one of: "
                             "read_committed, read_uncommitted", E.invalid_config)

    def set(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """Replace the group's overrides (checked) and write them."""
        if overrides:
            self.overrides[group_id] = dict(overrides)
        else:
            self.overrides.pop(group_id, None)
        # Durable as every metadata file (storage.checkpoints: temp file, fsync, rename, directory fsync), so a
        # power loss keeps the old overrides or the new ones, whole.
        write_atomically(self.path, json.dumps(self.overrides, sort_keys=True))

    def forget(self, group_id: str) -> None:
        """DeleteGroups: Kafka deletes a group's configs with it."""
        if group_id in self.overrides:
            self.set(group_id, {})
