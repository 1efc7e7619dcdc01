"""DescribeConfigs (key 32), v1-v4.

Resources: topics (type 2) with every topic-level property of storage.config.LogConfig; this broker (type 4,
named by its node id) with the broker configs Logway reads, typed and flagged read-only as Kafka describes
them (gateway/broker_config_types.py); the cluster default (type 4, name "") with the dynamic default broker
configs only. Sources and synonyms as Kafka's ConfigHelper gives them: a value's synonyms are the per-broker
dynamic (DYNAMIC_BROKER_CONFIG, 2), cluster-default dynamic (DYNAMIC_DEFAULT_BROKER_CONFIG, 3),
server.properties (STATIC_BROKER_CONFIG, 4) and default (DEFAULT_CONFIG, 5) values of each name that sets it
(log.retention.ms, .minutes, .hours), in that order, starting at the name itself; a topic override
(TOPIC_CONFIG, 1) comes first; the source is the first synonym's. v1: include_synonyms, config_source; v3:
include_documentation and config_type; v4: flexible. Groups (type 32, Kafka 4): every group config with the
group's override or the broker's value (gateway/group_configs.py). Unknown topics get
UNKNOWN_TOPIC_OR_PARTITION, other resource types INVALID_REQUEST.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from logway.gateway.broker_config_types import KAFKA_BROKER_CONFIGS, NOT_KAFKA_CONFIGS
from logway.gateway.config import BROKER_DEFAULTS
from logway.storage.config import BROKER_TO_TOPIC, LogConfig
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest
    from kio.schema.describe_configs.v4.response import DescribeConfigsResponse

    from logway.gateway.context import RequestContext

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

TOPIC = 2
BROKER = 4
GROUP = 32
# DescribeConfigsResponse ConfigSource values.
SOURCE_TOPIC, SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 2, 3, 4, 5
# DescribeConfigsResponse ConfigType values.
_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7}
_TOPIC_KINDS = {f.metadata["name"]: f.metadata["kind"] for f in dataclasses.fields(LogConfig)}
# Kafka's ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS: a topic config's primary broker synonym
# (log.retention.ms for retention.ms), and DynamicBrokerConfig.brokerConfigSynonyms: the names that set the same
# thing in precedence order (log.retention.ms, .minutes, .hours).
_PRIMARY: dict[str, str] = {}
_GROUPS: dict[str, list[str]] = {}
for _broker_name, _topic_name in BROKER_TO_TOPIC.items():
    _PRIMARY.setdefault(_topic_name, _broker_name)
    _GROUPS.setdefault(_topic_name, []).append(_broker_name)
_BROKER_SYNONYMS = {name: group for group in _GROUPS.values() for name in group}


def _levels(broker) -> list[tuple[dict[str, str], int]]:
    """The maps a broker config's value comes from, in Kafka's precedence order, with their source."""
    config = broker.config
    static = dict(config.given_properties)
    static.setdefault("broker.id", str(broker.node_id))  # KRaft copies node.id into broker.id
    defaults = {}
    for key in set(KAFKA_BROKER_CONFIGS) | set(BROKER_DEFAULTS):
        known = KAFKA_BROKER_CONFIGS.get(key)
        default = BROKER_DEFAULTS.get(key, known.default if known else None)
        # Logway defaults a few configs Kafka requires (node.id): once given, Kafka lists no default.
        if default is not None and (known is None or known.default is not None or key not in static):
            defaults[key] = default
    return [(broker.dynamic.per_broker, SOURCE_DYNAMIC_BROKER), (broker.dynamic.default, SOURCE_DYNAMIC_DEFAULT),
            (static, SOURCE_STATIC_BROKER), (defaults, SOURCE_DEFAULT)]


def _synonyms(levels, name: str) -> list[dict]:
    """Kafka's ConfigHelper.configSynonyms: every level's value of every synonym of ``name``, levels first, then
    what comes before the first entry for ``name`` itself dropped."""
    names = _BROKER_SYNONYMS.get(name, [name])
    out = [{"name": n, "value": values[n], "source": source} for values, source in levels for n in names if n in values]
    while out and out[0]["name"] != name:
        out.pop(0)
    return out


def _entry(name: str, value: str | None, source: int, kind: str | None, synonyms: list[dict]) -> dict:
    return {"name": name, "value": value, "read_only": False, "config_source": source, "is_sensitive": False,
            "synonyms": synonyms, "config_type": _TYPES.get(kind or "", 0), "documentation": None}


def _topic_configs(broker, name: str, with_synonyms: bool) -> list[dict]:
    """Kafka's createTopicConfigEntry: the override (TOPIC_CONFIG), then the primary broker synonym's levels."""
    topic = broker.logs.topics[name]
    levels = _levels(broker)
    out = []
    for key, value in sorted(topic.config.to_properties().items()):
        primary = _PRIMARY.get(key)
        synonyms = _synonyms(levels, primary) if primary else []
        if key in topic.overrides:
            synonyms.insert(0, {"name": key, "value": value, "source": SOURCE_TOPIC})
        source = synonyms[0]["source"] if synonyms else SOURCE_DEFAULT
        out.append(_entry(key, value, source, _TOPIC_KINDS.get(key), synonyms if with_synonyms else []))
    return out


def _broker_configs(broker, name: str, with_synonyms: bool) -> list[dict]:
    """Kafka's createBrokerConfigEntry. This broker (its node id): every config Logway reads, typed and flagged as
    Kafka describes them (broker_config_types); the cluster default (""): only the dynamic defaults."""
    levels = _levels(broker)
    if not name:
        keys = set(broker.dynamic.default)
        levels = [(values, source) for values, source in levels if source == SOURCE_DYNAMIC_DEFAULT]
    else:
        keys = ((set(broker.config.properties) | set(KAFKA_BROKER_CONFIGS)) - NOT_KAFKA_CONFIGS
                | set(broker.dynamic.default) | set(broker.dynamic.per_broker))
    out = []
    for key in sorted(keys):
        known = KAFKA_BROKER_CONFIGS.get(key)
        custom = known is None and key not in BROKER_DEFAULTS
        if custom and key not in broker.dynamic.default and key not in broker.dynamic.per_broker:
            continue  # a property Logway does not know: Kafka would not list it either
        synonyms = _synonyms(levels, key)
        if custom:  # a name Kafka does not know: listed without a value (no type to render it with)
            synonyms = [dict(s, value=None) for s in synonyms]
            value = None
        else:
            value = synonyms[0]["value"] if synonyms and synonyms[0]["name"] == key else (
                broker.config.properties.get(key) if name else None)
        source = synonyms[0]["source"] if synonyms else SOURCE_DEFAULT
        entry = _entry(key, value, source, known.kind if known else _guess_kind(value), synonyms if with_synonyms else [])
        entry["read_only"] = known.read_only if known else True
        out.append(entry)
    return out


def _guess_kind(value: str | None) -> str:
    if value in ("true", "false"):
        return "BOOLEAN"
    return "LONG" if value and value.lstrip("-").isdigit() else "STRING"


def _broker_name_problem(name: str, node_id: int) -> str | None:
    """ConfigHelper: "" (the cluster default) or this broker's id; else the message of its INVALID_REQUEST."""
    if not name:
        return None
    try:
        number = int(name)
    except ValueError:
        return f"Broker id must be an integer, but it is: {name}"
    if number != node_id:
        return f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
    return None


def _group_configs(broker, name: str, with_synonyms: bool) -> list[dict]:
    """Kafka 4's GROUP resource: every group config, the group's override (GROUP_CONFIG, 8) before the broker's."""
    out = []
    for key, value, source, kind, synonyms in broker.group_configs.describe(name):
        entries = [{"name": n, "value": v, "source": src} for n, v, src in synonyms] if with_synonyms else []
        out.append(_entry(key, value, source, kind, entries))
    return out


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    broker = ctx.broker
    results = []
    for r in request.resources:
        result = {"error_code": ErrorCode.none, "error_message": None, "resource_type": r.resource_type,
                  "resource_name": r.resource_name, "configs": []}
        if r.resource_type == TOPIC:
            if r.resource_name not in broker.logs.topics:
                result.update(error_code=ErrorCode.unknown_topic_or_partition,
                              error_message=f"Topic {r.resource_name} does not exist")
            else:
                result["configs"] = _topic_configs(broker, r.resource_name, request.include_synonyms)
        elif r.resource_type == BROKER:
            problem = _broker_name_problem(r.resource_name, broker.node_id)
            if problem:
                result.update(error_code=ErrorCode.invalid_request, error_message=problem)
            else:
                result["configs"] = _broker_configs(broker, r.resource_name, request.include_synonyms)
        elif r.resource_type == GROUP:
            result["configs"] = _group_configs(broker, r.resource_name, request.include_synonyms)
        else:
            result.update(error_code=ErrorCode.invalid_request,
                          error_message=f"Unsupported resource type {r.resource_type}")
        if r.configuration_keys is not None and result["configs"]:
            wanted = set(r.configuration_keys)
            result["configs"] = [c for c in result["configs"] if c["name"] in wanted]
        results.append(result)
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "results": results})
