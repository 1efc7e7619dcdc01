"""The change events of a request and its answer (server/audit.py), sans-IO: a kio request and the response it
got in, one event per resource changed or refused out. Both processes call it with what they have: the broker
after its handler answered (gateway/dispatch.py), the proxy when the upstream's answer comes back (the audit
filter), so the log says what happened, not only what was asked.

APIs (by key): CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, AlterConfigs,
IncrementalAlterConfigs, CreateAcls, DeleteAcls (one event per ACL deleted, or per filter that failed),
AlterUserScramCredentials (never the salt or salted password), AlterClientQuotas, DeleteGroups, OffsetDelete,
AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932: a share group's start offsets reset or its state of
whole topics forgotten), and EndTxn when it aborts. validate_only requests change nothing and are not events. Config values whose
names look like secrets (passwords, JAAS configs) are written as "[hidden]".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from logway.server.audit import Client, Event, change
from logway.server.security.authorizer import Operation, PatternType, Permission, ResourceType
from logway.server.stats import request_label
from logway.wire.errors import ErrorCode

CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, END_TXN, CREATE_ACLS, DELETE_ACLS = 19, 20, 21, 26, 30, 31
ALTER_CONFIGS, CREATE_PARTITIONS, DELETE_GROUPS, INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE = 33, 37, 42, 44, 47
ALTER_CLIENT_QUOTAS, ALTER_USER_SCRAM_CREDENTIALS = 49, 51
ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 91, 92

# Kafka's ConfigResource.Type, IncrementalAlterConfigs' OpType and ScramMechanism codes.
CONFIG_RESOURCE_TYPES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
CONFIG_OPERATIONS = {0: "SET", 1: "DELETE", 2: "APPEND", 3: "SUBTRACT"}
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_SECRET = re.compile(r"password|jaas|secret|credential|token", re.IGNORECASE)
HIDDEN = "[hidden]"

Changes = Callable[[Client, str, Any, Any], Iterator[Event]]


def _outcome(error_code: int) -> str | None:
    """The error's Kafka name (None for NONE)."""
    if error_code == 0:
        return None
    try:
        return ErrorCode(error_code).name.upper()
    except ValueError:
        return str(error_code)


def config_value(name: str, value: str | None) -> str | None:
    """A config's value as the log shows it: hidden when its name looks like a secret's."""
    return HIDDEN if value is not None and _SECRET.search(name) else value


def _event(client: Client, action: str, kind: str, name: Any, error_code: int, message: str | None = None,
           **details: Any) -> Event:
    return change(client, action, kind, name, _outcome(error_code), message, details)


# --- per API --------------------------------------------------------------------------------------------


def _create_topics(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    asked = {t.name: t for t in request.topics}
    for result in response.topics:
        topic = asked.get(result.name)
        details = {} if topic is None else {
            "partitions": topic.num_partitions, "replication_factor": topic.replication_factor,
            "configs": {c.name: config_value(c.name, c.value) for c in topic.configs}}
        yield _event(client, action, "TOPIC", result.name, result.error_code, result.error_message, **details)


def _delete_topics(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    for result in response.responses:
        topic_id = getattr(result, "topic_id", None)
        extra = {"topic_id": str(topic_id)} if topic_id is not None and topic_id.int else {}
        yield _event(client, action, "TOPIC", result.name, result.error_code, getattr(result, "error_message", None),
                     **extra)


def _create_partitions(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    counts = {t.name: t.count for t in request.topics}
    for result in response.results:
        yield _event(client, action, "TOPIC", result.name, result.error_code, result.error_message,
                     partitions=counts.get(result.name))


def _delete_records(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    asked = {(t.name, p.partition_index): p.offset for t in request.topics for p in t.partitions}
    for topic in response.topics:
        for p in topic.partitions:
            yield _event(client, action, "TOPIC", topic.name, p.error_code, partition=p.partition_index,
                         offset=asked.get((topic.name, p.partition_index)), low_watermark=p.low_watermark)


def _configs(show: Callable[[Any], dict]) -> Changes:
    """AlterConfigs and IncrementalAlterConfigs: one event per resource, with its configs as ``show`` gives them."""
    def changes(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
        asked = {(r.resource_type, r.resource_name): r.configs for r in request.resources}
        for result in response.responses:
            configs = asked.get((result.resource_type, result.resource_name), ())
            kind = CONFIG_RESOURCE_TYPES.get(result.resource_type, str(result.resource_type))
            yield _event(client, action, kind, result.resource_name, result.error_code, result.error_message,
                         configs=[show(c) for c in configs])
    return changes


_alter_configs = _configs(lambda c: {"name": c.name, "value": config_value(c.name, c.value)})
_incremental_alter_configs = _configs(lambda c: {
    "name": c.name, "operation": CONFIG_OPERATIONS.get(c.config_operation, c.config_operation),
    "value": config_value(c.name, c.value)})


def acl_details(resource_type: int, name: str, pattern: int, principal: str, host: str, operation: int,
                permission: int) -> dict[str, Any]:
    """An ACL binding in Kafka's words (kafka-acls' names)."""
    return {"acl": {"resource_type": _enum_name(ResourceType, resource_type), "resource_name": name,
                    "pattern_type": _enum_name(PatternType, pattern), "principal": principal, "host": host,
                    "operation": _enum_name(Operation, operation), "permission": _enum_name(Permission, permission)}}


def _enum_name(enum: type, value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return str(value)


def _create_acls(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    for creation, result in zip(request.creations, response.results, strict=False):
        yield _event(client, action, "ACL", creation.resource_name, result.error_code, result.error_message,
                     **acl_details(creation.resource_type, creation.resource_name, creation.resource_pattern_type,
                                   creation.principal, creation.host, creation.operation, creation.permission_type))


def _delete_acls(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    for f, result in zip(request.filters, response.filter_results, strict=False):
        if result.error_code != 0:
            yield _event(client, action, "ACL", f.resource_name_filter, result.error_code, result.error_message)
            continue
        for acl in result.matching_acls:
            yield _event(client, action, "ACL", acl.resource_name, acl.error_code, acl.error_message,
                         **acl_details(acl.resource_type, acl.resource_name, acl.pattern_type, acl.principal,
                                       acl.host, acl.operation, acl.permission_type))


def _alter_user_scram_credentials(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    changes: dict[str, list[dict]] = {}
    for d in request.deletions:
        changes.setdefault(d.name, []).append({"delete": SCRAM_MECHANISMS.get(d.mechanism, d.mechanism)})
    for u in request.upsertions:
        changes.setdefault(u.name, []).append({"upsert": SCRAM_MECHANISMS.get(u.mechanism, u.mechanism),
                                               "iterations": u.iterations})
    for result in response.results:
        yield _event(client, action, "USER", result.user, result.error_code, result.error_message,
                     credentials=changes.get(result.user, []))


def _alter_client_quotas(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    def entity(entries: Any) -> tuple:  # (an answer may list an entity's parts in another order)
        return tuple(sorted((e.entity_type, e.entity_name or "") for e in entries))
    ops = {entity(e.entity): e.ops for e in request.entries}
    for result in response.entries:
        key = entity(result.entity)
        name = ",".join(f"{t}={n or '<default>'}" for t, n in key)
        shown = [{"key": o.key, "remove": True} if o.remove else {"key": o.key, "value": o.value}
                 for o in ops.get(key, ())]
        yield _event(client, action, "CLIENT_QUOTA", name, result.error_code, result.error_message, ops=shown)


def _delete_groups(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    for result in response.results:
        yield _event(client, action, "GROUP", result.group_id, result.error_code)


def _offset_delete(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    if response.error_code != 0:
        yield _event(client, action, "GROUP", request.group_id, response.error_code,
                     topics=[t.name for t in request.topics])
        return
    for topic in response.topics:
        for error, partitions in _by_error(topic.partitions).items():
            yield _event(client, action, "GROUP", request.group_id, error, topic=topic.name, partitions=partitions)


def _alter_share_group_offsets(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    if response.error_code != 0:  # the group refused as a whole (NON_EMPTY_GROUP, GROUP_AUTHORIZATION_FAILED, ...)
        yield _event(client, action, "GROUP", request.group_id, response.error_code, response.error_message,
                     topics=[t.topic_name for t in request.topics])
        return
    asked = {(t.topic_name, p.partition_index): p.start_offset for t in request.topics for p in t.partitions}
    for topic in response.responses:
        for error, partitions in _by_error(topic.partitions).items():
            yield _event(client, action, "GROUP", request.group_id, error, topic=topic.topic_name,
                         partitions=partitions, start_offsets=[asked.get((topic.topic_name, p)) for p in partitions])


def _delete_share_group_offsets(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    if response.error_code != 0:
        yield _event(client, action, "GROUP", request.group_id, response.error_code, response.error_message,
                     topics=[t.topic_name for t in request.topics])
        return
    for topic in response.responses:
        yield _event(client, action, "GROUP", request.group_id, topic.error_code, topic.error_message,
                     topic=topic.topic_name)


def _by_error(partitions: Any) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for p in partitions:
        out.setdefault(p.error_code, []).append(p.partition_index)
    return out


def _end_txn(client: Client, action: str, request: Any, response: Any) -> Iterator[Event]:
    if not request.committed:
        yield _event(client, action, "TRANSACTIONAL_ID", request.transactional_id, response.error_code,
                     result="ABORT", producer_id=request.producer_id, producer_epoch=request.producer_epoch)


_CHANGES: dict[int, Changes] = {
    CREATE_TOPICS: _create_topics, DELETE_TOPICS: _delete_topics, CREATE_PARTITIONS: _create_partitions,
    DELETE_RECORDS: _delete_records, ALTER_CONFIGS: _alter_configs, INCREMENTAL_ALTER_CONFIGS: _incremental_alter_configs,
    CREATE_ACLS: _create_acls, DELETE_ACLS: _delete_acls, ALTER_USER_SCRAM_CREDENTIALS: _alter_user_scram_credentials,
    ALTER_CLIENT_QUOTAS: _alter_client_quotas, DELETE_GROUPS: _delete_groups, OFFSET_DELETE: _offset_delete,
    END_TXN: _end_txn, ALTER_SHARE_GROUP_OFFSETS: _alter_share_group_offsets,
    DELETE_SHARE_GROUP_OFFSETS: _delete_share_group_offsets,
}
CHANGE_APIS = frozenset(_CHANGES)
"""The API keys whose requests change something the audit log records."""


def changes_anything(api_key: int, request: Any) -> bool:
    """Whether a request of a CHANGE_APIS key may change something (not validate_only, not a commit)."""
    if getattr(request, "validate_only", False):
        return False
    return api_key != END_TXN or not request.committed


def change_events(client: Client, api_key: int, request: Any, response: Any) -> list[Event]:
    """The change events of ``request`` answered with ``response`` (none for other APIs, validate_only requests
    and commits)."""
    changes = _CHANGES.get(api_key)
    if changes is None or not changes_anything(api_key, request):
        return []
    return list(changes(client, request_label(api_key), request, response))


def transaction_timed_out(transactional_id: str, producer_id: int, producer_epoch: int, timeout_ms: int) -> Event:
    """The transaction coordinator aborted a transaction older than its timeout (no client asked)."""
    return change(None, "EndTxn", "TRANSACTIONAL_ID", transactional_id, details={
        "result": "ABORT", "reason": f"timed out after transaction.timeout.ms={timeout_ms}",
        "producer_id": producer_id, "producer_epoch": producer_epoch})
