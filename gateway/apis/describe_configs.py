"""DescribeConfigs (key 32), v1-v4.

Resources: topics (type 2) with every topic-level property of storage.config.LogConfig, and this broker
(type 4, named by its node id) with the broker configs Logway reads, typed, flagged read-only and with the
synonyms (STATIC then DEFAULT) as Kafka lists them (gateway/broker_config_types.py). Sources as Kafka reports them: TOPIC_CONFIG (1) for a
topic override, STATIC_BROKER_CONFIG (4) for a value from server.properties or the command line,
DEFAULT_CONFIG (5) otherwise. v1: include_synonyms, config_source; v3: include_documentation and
config_type; v4: flexible. Unknown topics get UNKNOWN_TOPIC_OR_PARTITION, other resource types
INVALID_REQUEST.
"""

from __future__ import annotations

import dataclasses

from logway.gateway.broker_config_types import KAFKA_BROKER_CONFIGS, NOT_KAFKA_CONFIGS
from logway.gateway.config import BROKER_DEFAULTS
from logway.gateway.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from logway.storage.config import BROKER_TO_TOPIC, LogConfig
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

TOPIC = 2
BROKER = 4
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5
# DescribeConfigsResponse ConfigType values.
_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7}
_TOPIC_KINDS = {f.metadata["name"]: f.metadata["kind"] for f in dataclasses.fields(LogConfig)}
# A topic config's synonyms are its override and its primary broker synonym (the first in Kafka's
# ServerTopicConfigSynonyms list: log.retention.ms for retention.ms), as Kafka's ConfigHelper lists them:
# the static value if set, then the broker default, skipped when Kafka has none (these four).
_PRIMARY: dict[str, str] = {}
for _broker_name, _topic_name in BROKER_TO_TOPIC.items():
    _PRIMARY.setdefault(_topic_name, _broker_name)
_NO_BROKER_DEFAULT = frozenset({"log.retention.ms", "log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms"})
_TOPIC_DEFAULTS = LogConfig().to_properties()


def _broker_value_given(broker, topic_name: str) -> bool:
    given = broker.config.given_properties
    return any(b in given for b, t in BROKER_TO_TOPIC.items() if t == topic_name)


def _entry(name: str, value: str, source: int, kind: str | None, synonyms: list[dict]) -> dict:
    return {"name": name, "value": value, "read_only": False, "config_source": source, "is_sensitive": False,
            "synonyms": synonyms, "config_type": _TYPES.get(kind or "", 0), "documentation": None}


def _topic_configs(broker, name: str, with_synonyms: bool) -> list[dict]:
    topic = broker.logs.topics[name]
    out = []
    for key, value in sorted(topic.config.to_properties().items()):
        if key in topic.overrides:
            source = SOURCE_TOPIC
        elif _broker_value_given(broker, key):
            source = SOURCE_STATIC_BROKER
        else:
            source = SOURCE_DEFAULT
        synonyms = _topic_synonyms(broker, key, value, key in topic.overrides) if with_synonyms else []
        out.append(_entry(key, value, source, _TOPIC_KINDS.get(key), synonyms))
    return out


def _topic_synonyms(broker, key: str, value: str, overridden: bool) -> list[dict]:
    out = [{"name": key, "value": value, "source": SOURCE_TOPIC}] if overridden else []
    primary = _PRIMARY.get(key)
    if primary is None:
        return out
    given = broker.config.given_properties
    if primary in given:
        out.append({"name": primary, "value": broker.config.properties[primary], "source": SOURCE_STATIC_BROKER})
    if primary not in _NO_BROKER_DEFAULT:
        out.append({"name": primary, "value": _TOPIC_DEFAULTS[key], "source": SOURCE_DEFAULT})
    return out


def _broker_configs(broker, with_synonyms: bool) -> list[dict]:
    """The broker configs Logway reads, typed and flagged as Kafka describes them (broker_config_types)."""
    config = broker.config
    given = dict(config.given_properties)
    values = dict(config.properties)
    if "broker.id" not in given:
        # KRaft copies node.id into broker.id, so Kafka reports it as a static config.
        given["broker.id"] = values["broker.id"] = str(broker.node_id)
    names = (set(values) | set(KAFKA_BROKER_CONFIGS)) - NOT_KAFKA_CONFIGS
    out = []
    for key in sorted(names):
        known = KAFKA_BROKER_CONFIGS.get(key)
        if known is None and key not in BROKER_DEFAULTS:
            continue  # a property Logway does not know: Kafka would not list it either
        default = BROKER_DEFAULTS.get(key, known.default if known else None)
        value = given.get(key, values.get(key, default))
        source = SOURCE_STATIC_BROKER if key in given else SOURCE_DEFAULT
        synonyms = []
        if with_synonyms:
            if key in given:
                synonyms.append({"name": key, "value": value, "source": SOURCE_STATIC_BROKER})
            # Logway defaults a few configs Kafka requires (node.id): once given, Kafka lists no default.
            kafka_has_default = known is None or known.default is not None
            if default is not None and (kafka_has_default or key not in given):
                synonyms.append({"name": key, "value": default, "source": SOURCE_DEFAULT})
        entry = _entry(key, value, source, known.kind if known else _guess_kind(value), synonyms)
        entry["read_only"] = known.read_only if known else True
        out.append(entry)
    return out


def _guess_kind(value: str | None) -> str:
    if value in ("true", "false"):
        return "BOOLEAN"
    return "LONG" if value and value.lstrip("-").isdigit() else "STRING"


def _authorized(ctx, resource_type: int, name: str) -> bool:
    """KafkaApis/ConfigHelper: DESCRIBE_CONFIGS on the topic, or on the cluster for a broker's configs."""
    if resource_type == TOPIC:
        return ctx.authorized(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name)
    if resource_type == BROKER:
        return ctx.authorized(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)
    return True


async def handle(ctx, request):
    broker = ctx.broker
    results = []
    for r in request.resources:
        result = {"error_code": ErrorCode.none, "error_message": None, "resource_type": r.resource_type,
                  "resource_name": r.resource_name, "configs": []}
        if not _authorized(ctx, r.resource_type, r.resource_name):
            result.update(error_code=ErrorCode.topic_authorization_failed if r.resource_type == TOPIC
                          else ErrorCode.cluster_authorization_failed)
        elif r.resource_type == TOPIC:
            if r.resource_name not in broker.logs.topics:
                result.update(error_code=ErrorCode.unknown_topic_or_partition,
                              error_message=f"Topic {r.resource_name} does not exist")
            else:
                result["configs"] = _topic_configs(broker, r.resource_name, request.include_synonyms)
        elif r.resource_type == BROKER:
            if r.resource_name not in ("", str(broker.node_id)):
                result.update(error_code=ErrorCode.invalid_request,
                              error_message=f"Unexpected broker id, expected {broker.node_id}, but received {r.resource_name}")
            else:
                result["configs"] = _broker_configs(broker, request.include_synonyms)
        else:
            result.update(error_code=ErrorCode.invalid_request,
                          error_message=f"Unsupported resource type {r.resource_type}")
        if r.configuration_keys is not None and result["configs"]:
            wanted = set(r.configuration_keys)
            result["configs"] = [c for c in result["configs"] if c["name"] in wanted]
        results.append(result)
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "results": results})
