"""Dynamic broker configs (Kafka's DynamicBrokerConfig): set by AlterConfigs / IncrementalAlterConfigs on a
BROKER resource, persisted under the first log dir, applied at once and again on every start.

Two levels, as Kafka: the cluster-wide default (resource name "") and this broker (its node id); the
effective value of a key is the per-broker one, else the cluster default, else server.properties, else
Kafka's default. Kafka keeps them in its metadata log; a single broker keeps one JSON object per level
(``dynamic-broker-default.json``, ``dynamic-broker-<node id>.json``) beside the data: JSON, not a
properties file, so any name a client sends (custom configs may hold "=", newlines, ...) reads back as sent.

What may change: the log defaults Kafka reconfigures dynamically (DynamicLogConfig: the primary broker
synonym of every topic config, e.g. ``log.retention.ms``, ``log.segment.bytes``, ``log.cleanup.policy``,
``message.max.bytes``) — topics without an override pick the new value up at once — and the cleaner's
``log.cleaner.threads`` / ``.dedupe.buffer.size`` / ``.io.buffer.load.factor`` / ``.backoff.ms``. A config
Kafka cannot change dynamically gets Kafka's INVALID_REQUEST "Cannot update these configs dynamically";
one Kafka can change but Logway does not apply at run time (thread pools, listeners, SSL, connection
quotas) gets INVALID_REQUEST saying so. Names Kafka does not know are stored and listed, as Kafka does
(custom configs).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from logway.gateway.broker_config_types import KAFKA_BROKER_CONFIGS
from logway.gateway.config import BROKER_DEFAULTS
from logway.storage import fs
from logway.storage.checkpoints import write_atomically
from logway.storage.cleaner import CLEANER_KEYS, CleanerConfig
from logway.storage.config import BROKER_TO_TOPIC, LogConfig
from logway.storage.errors import InvalidConfig, KafkaStorageError
from logway.wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

DEFAULT_RESOURCE = ""
_FILE = "dynamic-broker-{}.json"

# Kafka's DynamicLogConfig.ReconfigurableConfigs: the primary broker synonym of each topic config.
_PRIMARY_LOG_KEYS = frozenset(
    next(b for b, t in BROKER_TO_TOPIC.items() if t == topic) for topic in set(BROKER_TO_TOPIC.values())
)
# Kafka's LogCleaner.ReconfigurableConfigs that Logway's cleaner reads.
_CLEANER_KEYS = frozenset({"log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
                           "log.cleaner.io.buffer.load.factor", "log.cleaner.backoff.ms"})
# What Logway changes at run time.
DYNAMIC_KEYS = _PRIMARY_LOG_KEYS | _CLEANER_KEYS
# Dynamic in Kafka (DynamicBrokerConfig.AllDynamicConfigs) but read by Logway only at start-up.
_KAFKA_DYNAMIC_NOT_APPLIED = frozenset({
    "listeners", "advertised.listeners", "listener.security.protocol.map", "sasl.enabled.mechanisms",
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connection.creation.rate",
    "num.io.threads", "num.network.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads", "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second",
    "producer.id.expiration.ms", "follower.replication.throttled.rate", "leader.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
})
_KAFKA_DYNAMIC_PREFIXES = ("ssl.", "sasl.", "listener.name.", "remote.log.")
# Kafka's DynamicBrokerConfig.PerBrokerConfigs (listener and SSL settings): not at the cluster-default level.
_PER_BROKER_ONLY = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map"})


def _known_static(key: str) -> bool:
    """A Kafka broker config Logway knows that Kafka cannot change dynamically."""
    if _not_applied(key):
        return False
    known = KAFKA_BROKER_CONFIGS.get(key)
    if known is not None:
        return known.read_only
    return key in BROKER_DEFAULTS or key in CLEANER_KEYS or key in BROKER_TO_TOPIC


def _not_applied(key: str) -> bool:
    return key in _KAFKA_DYNAMIC_NOT_APPLIED or key.startswith(_KAFKA_DYNAMIC_PREFIXES) or (
        key in KAFKA_BROKER_CONFIGS and not KAFKA_BROKER_CONFIGS[key].read_only and key not in DYNAMIC_KEYS)


def _java_set(keys) -> str:
    return "[" + ", ".join(sorted(keys)) + "]"


class DynamicBrokerConfigs:
    """The two levels of dynamic broker configs of one broker, loaded from and saved to its first log dir."""

    def __init__(self, log_dir: Path, node_id: int) -> None:
        self.log_dir = log_dir
        self.node_id = node_id
        self.levels: dict[str, dict[str, str]] = {DEFAULT_RESOURCE: {}, str(node_id): {}}

    @property
    def default(self) -> dict[str, str]:
        """The cluster-wide dynamic defaults (resource name "")."""
        return self.levels[DEFAULT_RESOURCE]

    @property
    def per_broker(self) -> dict[str, str]:
        """This broker's own dynamic configs (resource name = node id)."""
        return self.levels[str(self.node_id)]

    def path(self, level: str) -> Path:
        return self.log_dir / _FILE.format(level or "default")

    def load(self) -> None:
        """Read both files; a missing file is an empty level, an entry that no longer validates is skipped."""
        for level in self.levels:
            try:
                props = json.loads(self.path(level).read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                raise KafkaStorageError(f"cannot read the dynamic broker configs {self.path(level)}: {exc}") from None
            if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
                raise KafkaStorageError(f"{self.path(level)}: expected a JSON object of strings")
            good = {}
            for key, value in props.items():
                try:
                    self.check({**good, key: value}, level)
                except KafkaError as exc:
                    log.warning("ignoring dynamic broker config %s=%s in %s: %s", key, value, self.path(level), exc)
                    continue
                good[key] = value
            self.levels[level] = good

    def save(self, level: str, props: Mapping[str, str]) -> None:
        """Persist one level (temp file, fsync, rename, fsync of the dir): file work, for a worker thread."""
        fs.make_dirs(self.log_dir)
        write_atomically(self.path(level), json.dumps(dict(sorted(props.items())), indent=1) + "\n")

    def effective(self, static: Mapping[str, str], replace: tuple[str, Mapping[str, str]] | None = None) -> dict[str, str]:
        """server.properties overlaid by the cluster default, then by this broker's level (Kafka's precedence);
        ``replace`` swaps one level's content (to check a change before it is made)."""
        levels = dict(self.levels)
        if replace is not None:
            levels[replace[0]] = dict(replace[1])
        return {**static, **levels[DEFAULT_RESOURCE], **levels[str(self.node_id)]}

    def check(self, props: Mapping[str, str], level: str) -> None:
        """Kafka's DynamicBrokerConfig.validateConfigs, then the values: KafkaError INVALID_REQUEST."""
        fixed = [k for k in props if _known_static(k)]
        if fixed:
            raise KafkaError(f"Cannot update these configs dynamically: {_java_set(fixed)}", ErrorCode.invalid_request)
        if level == DEFAULT_RESOURCE:
            per_broker = [k for k in props if k in _PER_BROKER_ONLY or k.startswith("listener.name.")]
            if per_broker:
                raise KafkaError("Cannot update these configs at default cluster level, broker id must be specified: "
                                 f"{_java_set(per_broker)}", ErrorCode.invalid_request)
        not_applied = [k for k in props if _not_applied(k)]
        if not_applied:
            raise KafkaError(f"Logway applies these configs only at start-up (set them in server.properties): "
                             f"{_java_set(not_applied)}", ErrorCode.invalid_request)
        for key, value in props.items():
            if key in _PRIMARY_LOG_KEYS:
                try:
                    LogConfig.from_broker_properties({key: value})
                except InvalidConfig as exc:
                    raise KafkaError(str(exc).replace(f"configuration {BROKER_TO_TOPIC[key]}:",
                                                      f"configuration {key}:"), ErrorCode.invalid_request) from None
        try:
            CleanerConfig.from_broker_properties({k: v for k, v in props.items() if k in _CLEANER_KEYS})
        except InvalidConfig as exc:
            raise KafkaError(str(exc), ErrorCode.invalid_request) from None
