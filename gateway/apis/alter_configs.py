"""AlterConfigs (key 33), v0-v2 (Kafka 4 serves the same). v1: no change; v2: flexible.

Replaces a resource's whole set of dynamic overrides (Kafka semantics: a key not in the request goes back
to its default). TOPIC resources are applied to the topic's logs at once and persisted with the topic
(DescribeConfigs then reports DYNAMIC_TOPIC_CONFIG); validate_only checks without changing anything.
BROKER resources ("" for the cluster default, or this broker's node id) change the dynamic broker configs
(gateway/dynamic_broker_config.py: persisted, applied at once; Kafka's INVALID_REQUEST for a config that
cannot change dynamically). GROUP resources (Kafka 4) set a group's config overrides (gateway/group_configs.py). Errors are per resource with Kafka's codes: TOPIC_AUTHORIZATION_FAILED without ALTER_CONFIGS on
the topic, UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG for an unknown key or a bad value, INVALID_REQUEST
for a resource or key named twice, a null value or an empty topic name. Changes of one topic run one at a
time (Broker.alter_topic_config). The shared steps here serve IncrementalAlterConfigs too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from logway.storage.config import LogConfig
from logway.storage.errors import InvalidConfig
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.alter_configs.v2.request import AlterConfigsRequest
    from kio.schema.alter_configs.v2.response import AlterConfigsResponse

    from logway.gateway.context import RequestContext

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2

TOPIC = 2
BROKER = 4
GROUP = 32

# From the current overrides, the new override set of a resource (raises KafkaError on a bad request).
Change = Callable[[Mapping[str, str]], dict[str, str]]


async def alter_resource(ctx: RequestContext, resource_type: int, name: str, change: Change,
                         validate_only: bool) -> None:
    """Compute, validate and (unless validate_only) apply one resource's new overrides."""
    broker = ctx.broker
    if resource_type == TOPIC:
        if not name:  # Kafka's ControllerConfigurationValidator
            raise KafkaError("Default topic resources are not allowed.", ErrorCode.invalid_request)

        def checked(current: dict[str, str]) -> dict[str, str] | None:
            overrides = change(current)
            nulls = sorted(key for key, value in overrides.items() if value is None)
            if nulls:  # ControllerConfigurationValidator: an InvalidRequestException
                raise KafkaError(f"Null value not supported for topic configs: {','.join(nulls)}",
                                 ErrorCode.invalid_request)
            try:
                LogConfig.from_properties(overrides, broker.logs.default_config)
            except InvalidConfig as exc:
                raise KafkaError(str(exc), ErrorCode.invalid_config) from None
            return None if validate_only else overrides

        await broker.alter_topic_config(name, checked)
    elif resource_type == BROKER:
        check_broker_name(name, broker.node_id)

        def checked_broker(current: dict[str, str]) -> dict[str, str] | None:
            configs = change(current)
            nulls = sorted(key for key, value in configs.items() if value is None)
            if nulls:  # ConfigAdminManager.preprocess
                raise KafkaError(f"Null value not supported for : {', '.join(nulls)}", ErrorCode.invalid_request)
            broker.dynamic.check(configs, name)
            return None if validate_only else configs

        await broker.alter_broker_config(name, checked_broker)
    elif resource_type == GROUP:
        _alter_group(ctx, name, change, validate_only)
    else:
        raise KafkaError(f"Unsupported resource type {resource_type}", ErrorCode.invalid_request)


def _alter_group(ctx, name: str, change: Change, validate_only: bool) -> None:
    """A GROUP resource (Kafka 4): the group's config overrides, checked against GroupConfig's rules (GROUP
    ALTER_CONFIGS is request_acls' rule)."""
    configs = ctx.broker.group_configs
    new = change(dict(configs.overrides.get(name, {})))
    configs.check(new)
    if not validate_only:
        configs.set(name, new)


def check_broker_name(name: str, node_id: int) -> None:
    """A BROKER resource names the cluster default ("") or this broker (ConfigAdminManager's checks)."""
    if not name:
        return
    try:
        number = int(name)
    except ValueError:
        raise KafkaError(f"Node id must be an integer, but it is: {name}", ErrorCode.invalid_request) from None
    if number != node_id:
        raise KafkaError(f"Unexpected broker id, expected {node_id}, but received {name}", ErrorCode.invalid_request)


def duplicate_resources(resources) -> set[tuple[int, str]]:
    """Resources named more than once: Kafka answers each with INVALID_REQUEST and alters none of them."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {key for key, n in counts.items() if n > 1}


async def resource_result(ctx: RequestContext, r, change: Change, validate_only: bool,
                          duplicates: set[tuple[int, str]]) -> dict:
    """One resource's response entry: alter it, or the error Kafka gives."""
    result = {"error_code": ErrorCode.none, "error_message": None, "resource_type": r.resource_type,
              "resource_name": r.resource_name}
    try:
        if (r.resource_type, r.resource_name) in duplicates:
            raise KafkaError("Error due to duplicate resource keys", ErrorCode.invalid_request)
        await alter_resource(ctx, r.resource_type, r.resource_name, change, validate_only)
    except KafkaError as exc:
        result.update(error_code=exc.error_code, error_message=str(exc))
    return result


def _replace_with(configs) -> Change:
    def change(_current: Mapping[str, str]) -> dict[str, str]:
        names = Counter(c.name for c in configs)
        dup = sorted(n for n, k in names.items() if k > 1)
        if dup:
            raise KafkaError(f"Error due to duplicate config keys: {', '.join(dup)}", ErrorCode.invalid_request)
        return {c.name: c.value for c in configs}

    return change


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    duplicates = duplicate_resources(request.resources)
    responses = [await resource_result(ctx, r, _replace_with(r.configs), request.validate_only, duplicates)
                 for r in request.resources]
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "responses": responses})
