"""AlterClientQuotas (key 49), v0-v1 (v1: flexible).

Each entry sets or removes quotas of one entity, checked as Kafka's ClientQuotaControlManager checks them
(server/quotas.py): entity types user, client-id (and the two together) or ip alone, names not empty (null is the
<default> entity), keys of the entity's kind, values above 0 that fit their type (whole numbers for the byte and
connection rates). One result per entity, as Kafka answers (its entity rebuilt from the request's map of type to
name: a type named twice keeps its last name): a key given twice gets "Duplicate quota key", then, as in Kafka,
every entity met again (that one included) "Ignoring duplicate entity". ``validate_only`` answers the same and
changes nothing. The valid entries are written to the first log dir (gateway/client_quotas.py), then applied to
every connection at once. Needs CLUSTER ALTER_CONFIGS under ACLs (request_acls).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.gateway.client_quotas import Changes
from logway.server.quota_entities import Entity, check_entity, check_value, describe_entity, make_entity
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest
    from kio.schema.alter_client_quotas.v1.response import AlterClientQuotasResponse

    from logway.gateway.context import RequestContext

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1


def _ops(entity: Entity, entry) -> dict[str, float | None]:
    """The entry's key -> value (None: remove); a key given twice is Kafka's INVALID_REQUEST."""
    ops: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key in ops:
            raise KafkaError(f"Duplicate quota key {op.key} not updating quota for this entity "
                             f"{describe_entity(entity)}", ErrorCode.invalid_request)
        ops[op.key] = None if op.remove else op.value
    return ops


def _checked(entity: Entity, ops: dict[str, float | None], current: dict[str, float]) -> dict[str, float | None]:
    """The changes the entry makes (removing an absent key or setting the same value is none), checked."""
    keys = check_entity(entity)
    changes: dict[str, float | None] = {}
    for key, value in ops.items():
        if value is None:
            if key in current:
                changes[key] = None
            continue
        check_value(keys, key, value)
        if current.get(key) != value:
            changes[key] = value
    return changes


async def handle(ctx: RequestContext, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    configs = ctx.broker.quotas.configs
    results: dict[Entity, tuple[int, str | None]] = {}
    changes: dict[Entity, dict[str, float | None]] = {}
    for entry in request.entries:
        entity = make_entity(dict((e.entity_type, e.entity_name) for e in entry.entity).items())
        ops: dict[str, float | None] = {}
        try:
            ops = _ops(entity, entry)
        except KafkaError as exc:
            results[entity] = (exc.error_code, str(exc))
        if entity in results:
            # (Kafka still applies what an earlier entry for the entity changed.)
            results[entity] = (ErrorCode.invalid_request, f"Ignoring duplicate entity {describe_entity(entity)}")
            continue
        try:
            changes[entity] = _checked(entity, ops, configs.get(entity, {}))
        except KafkaError as exc:
            results[entity] = (exc.error_code, str(exc))
            continue
        results[entity] = (ErrorCode.none, None)
    todo: Changes = [(entity, ops) for entity, ops in changes.items() if ops]
    if todo and not request.validate_only:
        await ctx.broker.quota_store.alter(todo)
    return build(response_type(API_KEY, ctx.version), {"entries": [
        {"error_code": code, "error_message": message,
         "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity]}
        for entity, (code, message) in results.items()]})
