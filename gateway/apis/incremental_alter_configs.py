"""IncrementalAlterConfigs (key 44), v0-v1 (Kafka 4 serves the same). v1: flexible.

Changes single keys of a resource's dynamic overrides: SET (0), DELETE (1, back to the default), APPEND (2)
and SUBTRACT (3). APPEND/SUBTRACT apply only to list configs (cleanup.policy, the throttled-replica lists)
and start from the current value; on any other key Kafka's ConfigAdminManager answers INVALID_CONFIG
"Config value append is not allowed for config key: <key>" (for SUBTRACT as well). The rest (authorization,
validation, validate_only, BROKER resources) is AlterConfigs' (gateway/apis/alter_configs.py). On a BROKER
resource the list configs are the broker's (log.cleanup.policy) and start from Kafka's default.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from logway.gateway.apis.alter_configs import BROKER, Change, duplicate_resources, resource_result
from logway.gateway.broker_config_types import KAFKA_BROKER_CONFIGS
from logway.storage.config import LogConfig
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest
    from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse

    from logway.gateway.context import RequestContext

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_LIST_KEYS = frozenset(f.metadata["name"] for f in dataclasses.fields(LogConfig) if f.metadata["kind"] == "LIST")
_BROKER_LIST_KEYS = frozenset(k for k, t in KAFKA_BROKER_CONFIGS.items() if t.kind == "LIST")


def _current_list(ctx: RequestContext, resource_type: int, current: Mapping[str, str], key: str) -> list[str]:
    """A list config's value now: the override, else the broker's default for topics, else Kafka's default for
    a broker level (ConfigAdminManager.prepareIncrementalConfigs)."""
    raw = current.get(key)
    if raw is None:
        if resource_type == BROKER:
            raw = KAFKA_BROKER_CONFIGS[key].default or ""
        else:
            raw = ctx.broker.logs.default_config.to_properties()[key]
    return [item.strip() for item in raw.split(",") if item.strip()]


def _incremental(ctx: RequestContext, resource_type: int, configs) -> Change:
    list_keys = _BROKER_LIST_KEYS if resource_type == BROKER else _LIST_KEYS

    def change(current: Mapping[str, str]) -> dict[str, str]:
        dup = sorted(n for n, k in Counter(c.name for c in configs).items() if k > 1)
        if dup:
            raise KafkaError(f"Error due to duplicate config keys: {', '.join(dup)}", ErrorCode.invalid_request)
        new = dict(current)
        for c in configs:
            if c.config_operation == SET:
                new[c.name] = c.value
            elif c.config_operation == DELETE:
                new.pop(c.name, None)
            elif c.config_operation in (APPEND, SUBTRACT):
                if c.name not in list_keys:
                    raise KafkaError(f"Config value append is not allowed for config key: {c.name}",
                                     ErrorCode.invalid_config)
                items = _current_list(ctx, resource_type, current, c.name)
                given = [v.strip() for v in (c.value or "").split(",") if v.strip()]
                if c.config_operation == APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                new[c.name] = ",".join(items)
            else:
                # Kafka 4.3.1 answers UNKNOWN_SERVER_ERROR for a topic (OpType.forId throws on an unknown id);
                # a BROKER resource is checked first by ConfigAdminManager: INVALID_REQUEST.
                code = ErrorCode.invalid_request if resource_type == BROKER else ErrorCode.unknown_server_error
                raise KafkaError(f"Unknown operations type {c.config_operation}", code)
        return new

    return change


async def handle(ctx: RequestContext, request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    duplicates = duplicate_resources(request.resources)
    responses = [await resource_result(ctx, r, _incremental(ctx, r.resource_type, r.configs), request.validate_only, duplicates)
                 for r in request.resources]
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "responses": responses})
