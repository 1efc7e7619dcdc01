"""Which ACLs each Kafka request needs and what a denial looks like, as Kafka's KafkaApis/AuthHelper decide
them, sans-IO: a kio request and a principal's ACL view in, a Decision out.

A Decision says what may be served (the request itself, a copy without the topics/groups/ids the principal
may not use, or nothing: then ``response`` is the complete answer) and how to finish the served request's
response (``finish``: the denied entries added with their error code, lists filtered to what the principal
may describe, *_authorized_operations recomputed for the principal). The proxy's ACL filter uses it for every
API it forwards, the broker's dispatch for the APIs in its SHARED_ACL_CHECKS (the others, Produce and Fetch
on the hot path among them, check in their handlers); nothing here knows where the response comes from.

Kafka's rules, per API (error codes: TOPIC_ 29, GROUP_ 30, CLUSTER_ 31, TRANSACTIONAL_ID_AUTHORIZATION_FAILED 53):
- Produce: a transactional one needs TRANSACTIONAL_ID WRITE (else every partition 53), then TOPIC WRITE;
  Fetch: TOPIC READ (a replica's fetch CLUSTER_ACTION); ListOffsets, OffsetForLeaderEpoch: TOPIC DESCRIBE.
- Metadata: TOPIC DESCRIBE (a listing shows only those), auto-creation CREATE on the cluster or the topic.
- Groups: FindCoordinator GROUP/TRANSACTIONAL_ID DESCRIBE; JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
  ConsumerGroupHeartbeat and ShareGroupHeartbeat GROUP READ + TOPIC DESCRIBE on the topics subscribed by name;
  OffsetCommit GROUP READ + TOPIC READ; OffsetFetch GROUP DESCRIBE + TOPIC DESCRIBE; DescribeGroups,
  ConsumerGroupDescribe, ShareGroupDescribe GROUP DESCRIBE; the other share-group APIs: share_group_acls.py;
  ListGroups only the groups it may describe
  (all with CLUSTER DESCRIBE); DeleteGroups GROUP DELETE; OffsetDelete GROUP DELETE + TOPIC READ.
- Transactions: InitProducerId TRANSACTIONAL_ID WRITE, or without an id CLUSTER IDEMPOTENT_WRITE or WRITE on
  some topic (KIP-679, else 31); AddPartitionsToTxn TRANSACTIONAL_ID WRITE + TOPIC WRITE (one denied topic
  fails the request: the others get OPERATION_NOT_ATTEMPTED); AddOffsetsToTxn TRANSACTIONAL_ID WRITE + GROUP
  READ; EndTxn TRANSACTIONAL_ID WRITE; TxnOffsetCommit TRANSACTIONAL_ID WRITE + GROUP READ + TOPIC READ;
  DescribeTransactions TRANSACTIONAL_ID DESCRIBE; ListTransactions only the ids it may describe.
- Admin: CreateTopics CREATE on the cluster or the topic (configs only with DESCRIBE_CONFIGS); DeleteTopics
  TOPIC DELETE; CreatePartitions TOPIC ALTER; DeleteRecords TOPIC DELETE; DescribeProducers TOPIC READ;
  DescribeConfigs DESCRIBE_CONFIGS and AlterConfigs/IncrementalAlterConfigs ALTER_CONFIGS on the topic, group
  or (broker, logger, client metrics) cluster; DescribeTopicPartitions TOPIC DESCRIBE.
- Cluster: DescribeAcls, DescribeLogDirs, ListPartitionReassignments, DescribeUserScramCredentials CLUSTER
  DESCRIBE; CreateAcls, DeleteAcls, AlterReplicaLogDirs, ElectLeaders, AlterPartitionReassignments,
  AlterUserScramCredentials, UpdateFeatures CLUSTER ALTER; DescribeClientQuotas, ListConfigResources CLUSTER
  DESCRIBE_CONFIGS; AlterClientQuotas CLUSTER ALTER_CONFIGS; DescribeCluster none (its authorized operations
  are the principal's).

An API without a rule here is not served under ACLs (the proxy does not advertise it): fail closed.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from logway.server.security.acl_bindings import creation_binding, request_filter
from logway.server.security.authorizer import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    Authorizer,
    Operation,
    ResourceType,
    operations_bitfield,
)
from logway.server.security.share_group_acls import RULES as SHARE_RULES  # imports this module back
from logway.wire.errors import ErrorCode
from logway.wire.protocol import _entity_of, response_type

TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
OPERATIONS_OMITTED = -(2**31)  # Kafka's AUTHORIZED_OPERATIONS_OMITTED
# The last versions that name topics (later ones name them by id, which an ACL check cannot read), the last
# client versions of AddPartitionsToTxn (v4+ is the brokers' verification API), and none of ShareFetch and
# ShareAcknowledge, which name topics by id only (the broker checks their TOPIC READ once it has the names).
VERSION_CAPS = {0: 12, 1: 12, 8: 9, 9: 9, 24: 3, 78: -1, 79: -1}


class Acl:
    """One principal's view of the authorizer (``allowed`` is Kafka's AuthHelper.authorize)."""

    def __init__(self, authorizer: Authorizer | None, principal: str, host: str) -> None:
        self.authorizer, self.principal, self.host = authorizer, principal, host

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str | None) -> bool:
        if self.authorizer is None:
            return True
        if name is None:  # a resource named by id only: nothing to check an ACL against
            return self.principal in self.authorizer.super_users
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def cluster(self, operation: Operation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def any_allowed(self, operation: Operation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType."""
        return self.authorizer is None or self.authorizer.any_allowed(self.principal, self.host, operation,
                                                                      resource_type)

    def operations(self, resource_type: ResourceType, name: str) -> int:
        """Kafka's AuthHelper.authorizedOperations bitfield."""
        if self.authorizer is None:
            return operations_bitfield(SUPPORTED_OPERATIONS[resource_type])
        return self.authorizer.authorized_operations(self.principal, self.host, resource_type, name)


def _keep(response: Any) -> Any:
    return response


@dataclass
class Decision:
    """What to serve of a request and how to finish its response (see the module docstring)."""

    request: Any | None
    response: Any | None = None
    finish: Callable[[Any], Any] = _keep

    @property
    def changes_response(self) -> bool:
        return self.finish is not _keep


_AS_IS = object()  # a rule returns Decision(_AS_IS) when the request and its response pass unchanged

# --- building responses: Kafka's getErrorResponse defaults ------------------------------------------------


def make(cls: type, data: dict[str, Any]) -> Any:
    """A kio message of ``cls`` from ``data`` (nested dicts and lists included); every field ``data`` lacks gets
    Kafka's error-response default: -1 for numbers, "" (null if nullable) for strings, empty arrays."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        hint, kind = hints[f.name], f.metadata.get("kafka_type", "")
        entity = _entity_of(hint)
        value = data.get(f.name, dataclasses.MISSING)
        if value is dataclasses.MISSING:
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            kwargs[f.name] = _default(hint, kind, entity)
        elif entity is not None and isinstance(value, dict):
            kwargs[f.name] = make(entity, value)
        elif entity is not None and isinstance(value, (list, tuple)):
            kwargs[f.name] = tuple(make(entity, v) if isinstance(v, dict) else v for v in value)
        else:
            kwargs[f.name] = _scalar(value, kind)
    return cls(**kwargs)


def _default(hint: Any, kind: str, entity: type | None) -> Any:
    if typing.get_origin(hint) is tuple:
        return ()
    if type(None) in typing.get_args(hint):
        return None
    if entity is not None:
        return make(entity, {})
    if kind == "error_code":
        return ErrorCode.none
    if kind.startswith(("int", "uint", "float")):
        return -1 if kind.startswith("int") else 0
    if kind.startswith("timedelta"):
        return datetime.timedelta(milliseconds=-1)
    if kind.startswith("datetime"):
        return datetime.datetime.fromtimestamp(0, datetime.UTC)
    return {"string": "", "bool": False, "bytes": b"", "records": b"", "uuid": uuid.UUID(int=0)}.get(kind, None)


def _scalar(value: Any, kind: str) -> Any:
    if kind == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    if kind.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kind.startswith("datetime") and isinstance(value, int):
        return datetime.datetime.fromtimestamp(max(value, 0) / 1000, datetime.UTC)
    return value


def answer(api_key: int, version: int, data: dict[str, Any]) -> Decision:
    """A request answered wholly with ``data`` (the error code and the entries it names)."""
    return Decision(None, make(response_type(api_key, version), {"throttle_time": 0, **data}))


def _append(field: str, entries: list[dict], version_cls: type) -> Callable[[Any], Any]:
    entity = _entity_of(typing.get_type_hints(version_cls)[field])

    def finish(response: Any) -> Any:
        extra = tuple(make(entity, e) for e in entries)
        return dataclasses.replace(response, **{field: getattr(response, field) + extra})
    return finish


def _chain(*steps: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    steps = tuple(s for s in steps if s is not None)
    if not steps:
        return _keep

    def finish(response: Any) -> Any:
        for step in steps:
            response = step(response)
        return response
    return finish


# --- the common shapes ------------------------------------------------------------------------------------


def _split(api_key: int, version: int, request: Any, field: str, allowed: Callable[[Any], bool],
           denied_entry: Callable[[Any], dict], response_field: str, all_denied: dict | None = None) -> Decision:
    """Entries of ``request.<field>`` the principal may use are served; the others get ``denied_entry`` in the
    response's ``response_field`` (the proxy answers alone when none is left)."""
    entries = getattr(request, field) or ()
    kept = [e for e in entries if allowed(e)]
    if len(kept) == len(entries):
        return Decision(request)
    denied = [denied_entry(e) for e in entries if not allowed(e)]
    if not kept:
        return answer(api_key, version, {**(all_denied or {}), response_field: denied})
    cls = response_type(api_key, version)
    return Decision(dataclasses.replace(request, **{field: tuple(kept)}), finish=_append(response_field, denied, cls))


def _topic_split(api_key: int, version: int, request: Any, operation: Operation, acl: Acl, field: str = "topics",
                 name: str = "name", parts: str = "partitions", index: str = "partition_index",
                 response_field: str = "topics", entry_name: str = "name", entry_parts: str = "partitions",
                 entry_index: str = "partition_index", error: ErrorCode = TOPIC_DENIED, **partition: Any) -> Decision:
    """Per topic: served with ``operation`` on it, else each of its partitions gets ``error``."""

    def denied(topic: Any) -> dict:
        indexes = [p if isinstance(p, int) else getattr(p, index) for p in getattr(topic, parts)]
        return {entry_name: getattr(topic, name), entry_parts: [
            {entry_index: i, "error_code": error, **partition} for i in indexes]}
    return _split(api_key, version, request, field,
                  lambda t: acl.allowed(operation, ResourceType.TOPIC, getattr(t, name)), denied, response_field)


def _all_partitions(request: Any, error: ErrorCode, field: str = "topics", name: str = "name",
                    parts: str = "partitions", index: str = "partition_index", entry_name: str = "name",
                    entry_parts: str = "partitions", entry_index: str = "partition_index", **partition: Any) -> list:
    """Every partition of the request with ``error`` (a whole request refused per partition)."""
    return [{entry_name: getattr(t, name), entry_parts: [
        {entry_index: p if isinstance(p, int) else getattr(p, index), "error_code": error, **partition}
        for p in getattr(t, parts)]} for t in getattr(request, field) or ()]


def _single(api_key: int, version: int, allowed: bool, error: ErrorCode, **data: Any) -> Decision:
    return Decision(_AS_IS) if allowed else answer(api_key, version, {"error_code": error, **data})


def _cluster(operation: Operation, **data: Any) -> Callable:
    def rule(api_key: int, version: int, request: Any, acl: Acl) -> Decision:
        return _single(api_key, version, acl.cluster(operation), CLUSTER_DENIED, **data)
    return rule


def _group(operation: Operation, field: str = "group_id", **data: Any) -> Callable:
    def rule(api_key: int, version: int, request: Any, acl: Acl) -> Decision:
        allowed = acl.allowed(operation, ResourceType.GROUP, getattr(request, field))
        return _single(api_key, version, allowed, GROUP_DENIED, **data)
    return rule


def _filter_list(field: str, keep: Callable[[Any], bool]) -> Callable[[Any], Any]:
    def finish(response: Any) -> Any:
        entries = getattr(response, field)
        kept = tuple(e for e in entries if keep(e))
        return response if len(kept) == len(entries) else dataclasses.replace(response, **{field: kept})
    return finish


def _set_operations(field: str, resource_type: ResourceType, name: str, ops_field: str,
                    acl: Acl) -> Callable[[Any], Any]:
    """*_authorized_operations of the served entries recomputed for the principal (the upstream computed them
    for the proxy's own user)."""
    def finish(response: Any) -> Any:
        return dataclasses.replace(response, **{field: tuple(
            dataclasses.replace(e, **{ops_field: acl.operations(resource_type, getattr(e, name))})
            if getattr(e, "error_code", 0) == 0 else e for e in getattr(response, field))})
    return finish


# --- the rules, per API key --------------------------------------------------------------------------------


def _produce(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if request.transactional_id is not None and not acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                                request.transactional_id):
        return answer(k, v, {"responses": _all_partitions(request, TXN_DENIED, "topic_data", parts="partition_data",
                                                          index="index", entry_parts="partition_responses",
                                                          entry_index="index")})
    return _topic_split(k, v, request, Operation.WRITE, acl, "topic_data", parts="partition_data", index="index",
                        response_field="responses", entry_parts="partition_responses", entry_index="index")


def _fetch(k: int, v: int, request: Any, acl: Acl) -> Decision:
    replica = getattr(request, "replica_id", -1)
    state = getattr(request, "replica_state", None)
    if state is not None:
        replica = state.replica_id
    if replica >= 0 and not acl.cluster(Operation.CLUSTER_ACTION):  # a follower's fetch
        return answer(k, v, {"error_code": 0, "responses": _all_partitions(
            request, TOPIC_DENIED, name="topic", entry_name="topic", index="partition",
            high_watermark=-1, last_stable_offset=-1, log_start_offset=-1, records=None)})
    return _topic_split(k, v, request, Operation.READ, acl, name="topic", index="partition",
                        response_field="responses", entry_name="topic", high_watermark=-1, last_stable_offset=-1,
                        log_start_offset=-1, records=None)


def _list_offsets(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return _topic_split(k, v, request, Operation.DESCRIBE, acl, timestamp=-1, offset=-1)


def _offset_for_leader_epoch(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if getattr(request, "replica_id", -1) >= 0 and not acl.cluster(Operation.CLUSTER_ACTION):
        return answer(k, v, {"topics": _all_partitions(request, TOPIC_DENIED, name="topic", index="partition",
                                                       entry_name="topic", entry_index="partition")})
    return _topic_split(k, v, request, Operation.DESCRIBE, acl, name="topic", index="partition",
                        entry_name="topic", entry_index="partition")


def _metadata(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """Named topics it may not describe are never sent upstream (so not auto-created); topics it may describe
    but not create are not auto-created (TOPIC_AUTHORIZATION_FAILED if they do not exist, as Kafka answers);
    a listing shows only what it may describe."""
    describable = lambda name: acl.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)  # noqa: E731
    named = request.topics
    served = request
    denied_names: list[dict] = []
    if named is not None:
        kept = [t for t in named if t.name is None or describable(t.name)]
        denied_names = [{"name": t.name, "error_code": TOPIC_DENIED, "is_internal": False}
                        for t in named if t not in kept]
        if denied_names:
            served = dataclasses.replace(served, topics=tuple(kept))
    uncreatable: set[str] = set()
    if named and getattr(served, "allow_auto_topic_creation", True) and not acl.cluster(Operation.CREATE):
        uncreatable = {t.name for t in served.topics if t.name is not None
                       and not acl.allowed(Operation.CREATE, ResourceType.TOPIC, t.name)}
        if uncreatable and v >= 4:
            served = dataclasses.replace(served, allow_auto_topic_creation=False)

    def finish(response: Any) -> Any:
        topics = []
        for t in response.topics:
            if t.name is not None and not describable(t.name):
                if named is None:
                    continue  # a listing: not shown
                # asked for by id: Kafka gives the error and no name (v12+, where names may be null)
                t = dataclasses.replace(t, error_code=TOPIC_DENIED, partitions=(), name=None if v >= 12 else t.name)
            elif t.name in uncreatable and t.error_code == ErrorCode.unknown_topic_or_partition:
                t = dataclasses.replace(t, error_code=TOPIC_DENIED)
            elif getattr(request, "include_topic_authorized_operations", False) and t.error_code == 0:
                t = dataclasses.replace(t, topic_authorized_operations=acl.operations(ResourceType.TOPIC, t.name))
            topics.append(t)
        entity = _entity_of(typing.get_type_hints(type(response))["topics"])
        topics += [make(entity, d) for d in denied_names]
        response = dataclasses.replace(response, topics=tuple(topics))
        if getattr(request, "include_cluster_authorized_operations", False):
            ops = acl.operations(ResourceType.CLUSTER, CLUSTER_NAME) if acl.cluster(Operation.DESCRIBE) else 0
            response = dataclasses.replace(response, cluster_authorized_operations=ops)
        return response
    return Decision(served, finish=finish)


def _offset_commit(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if not acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return answer(k, v, {"topics": _all_partitions(request, GROUP_DENIED)})
    return _topic_split(k, v, request, Operation.READ, acl)


def _txn_offset_commit(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if not acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return answer(k, v, {"topics": _all_partitions(request, TXN_DENIED)})
    if not acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return answer(k, v, {"topics": _all_partitions(request, GROUP_DENIED)})
    return _topic_split(k, v, request, Operation.READ, acl)


def _offset_delete(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if not acl.allowed(Operation.DELETE, ResourceType.GROUP, request.group_id):
        return answer(k, v, {"error_code": GROUP_DENIED})
    return _topic_split(k, v, request, Operation.READ, acl)


def _offset_fetch_topics(request_topics: Any, acl: Acl) -> tuple[Any, list[dict], Callable | None]:
    """A group's topics: the named ones it may not describe refused per partition (offset -1); a request for
    all of the group's topics answered with only those it may describe."""
    if request_topics is None:
        keep = lambda t: acl.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.name)  # noqa: E731
        return None, [], keep
    kept = tuple(t for t in request_topics if acl.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.name))
    denied = [{"name": t.name, "partitions": [{"partition_index": p, "committed_offset": -1, "metadata": "",
                                                "error_code": TOPIC_DENIED} for p in t.partition_indexes]}
              for t in request_topics if t not in kept]
    return kept, denied, None


def _offset_fetch(k: int, v: int, request: Any, acl: Acl) -> Decision:
    cls = response_type(k, v)
    if v < 8:
        if not acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, request.group_id):
            if v >= 2:
                return answer(k, v, {"error_code": GROUP_DENIED})
            return answer(k, v, {"topics": [{"name": t.name, "partitions": [
                {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": GROUP_DENIED}
                for p in t.partition_indexes]} for t in request.topics or ()]})
        kept, denied, keep = _offset_fetch_topics(request.topics, acl)
        if keep is not None:
            return Decision(request, finish=_filter_list("topics", keep))
        if not denied:
            return Decision(request)
        return Decision(dataclasses.replace(request, topics=kept), finish=_append("topics", denied, cls))
    groups, denied_groups, per_group = [], [], {}
    for g in request.groups:
        if not acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, g.group_id):
            denied_groups.append({"group_id": g.group_id, "error_code": GROUP_DENIED})
            continue
        kept, denied, keep = _offset_fetch_topics(g.topics, acl)
        per_group[g.group_id] = (denied, keep)
        groups.append(g if kept is None or (not denied) else dataclasses.replace(g, topics=kept))
    if not groups:
        return answer(k, v, {"groups": denied_groups})
    if not denied_groups and not any(denied or keep for denied, keep in per_group.values()):
        return Decision(request)
    group_entity = _entity_of(typing.get_type_hints(cls)["groups"])
    topic_entity = _entity_of(typing.get_type_hints(group_entity)["topics"])

    def finish(response: Any) -> Any:
        out = []
        for g in response.groups:
            denied, keep = per_group.get(g.group_id, ([], None))
            if g.error_code == 0 and (denied or keep):
                topics = tuple(t for t in g.topics if keep is None or keep(t))
                g = dataclasses.replace(g, topics=topics + tuple(make(topic_entity, d) for d in denied))
            out.append(g)
        return dataclasses.replace(response, groups=tuple(out) + tuple(make(group_entity, d) for d in denied_groups))
    unchanged = len(groups) == len(request.groups) and all(a is b for a, b in zip(groups, request.groups, strict=True))
    return Decision(request if unchanged else dataclasses.replace(request, groups=tuple(groups)), finish=finish)


_COORDINATOR_RESOURCE = {0: (ResourceType.GROUP, GROUP_DENIED), 1: (ResourceType.TRANSACTIONAL_ID, TXN_DENIED)}


def _find_coordinator(k: int, v: int, request: Any, acl: Acl) -> Decision:
    key_type = getattr(request, "key_type", 0)
    if key_type not in _COORDINATOR_RESOURCE:
        return Decision(_AS_IS)  # the upstream answers INVALID_REQUEST (share groups are not served)
    resource, error = _COORDINATOR_RESOURCE[key_type]
    no_node = {"node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": None}
    if v < 4:
        return _single(k, v, acl.allowed(Operation.DESCRIBE, resource, request.key), error, **no_node)

    def denied(key: str) -> dict:
        return {"key": key, **no_node}
    return _split(k, v, request, "coordinator_keys", lambda key: acl.allowed(Operation.DESCRIBE, resource, key),
                  denied, "coordinators")


def _describe_groups(k: int, v: int, request: Any, acl: Acl) -> Decision:
    def denied(group: str) -> dict:
        return {"group_id": group, "error_code": GROUP_DENIED, "authorized_operations": OPERATIONS_OMITTED}
    decision = _split(k, v, request, "groups", lambda g: acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, g),
                      denied, "groups")
    if decision.request is not None and getattr(request, "include_authorized_operations", False):
        decision.finish = _chain(_set_operations("groups", ResourceType.GROUP, "group_id", "authorized_operations",
                                                 acl), decision.finish)
    return decision


def _consumer_group_describe(k: int, v: int, request: Any, acl: Acl) -> Decision:
    def denied(group: str) -> dict:
        return {"group_id": group, "error_code": GROUP_DENIED, "authorized_operations": OPERATIONS_OMITTED}
    decision = _split(k, v, request, "group_ids", lambda g: acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, g),
                      denied, "groups")
    if decision.request is not None and request.include_authorized_operations:
        decision.finish = _chain(_set_operations("groups", ResourceType.GROUP, "group_id", "authorized_operations",
                                                 acl), decision.finish)
    return decision


def _list_groups(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.DESCRIBE):
        return Decision(_AS_IS)
    return Decision(request, finish=_filter_list(
        "groups", lambda g: acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, g.group_id)))


def _delete_groups(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return _split(k, v, request, "groups_names", lambda g: acl.allowed(Operation.DELETE, ResourceType.GROUP, g),
                  lambda g: {"group_id": g, "error_code": GROUP_DENIED}, "results")


def _init_producer_id(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if request.transactional_id is not None:
        allowed = acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        return _single(k, v, allowed, TXN_DENIED)
    allowed = acl.cluster(Operation.IDEMPOTENT_WRITE) or acl.any_allowed(Operation.WRITE, ResourceType.TOPIC)
    return _single(k, v, allowed, CLUSTER_DENIED)


def _add_partitions_to_txn(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """v0-3 (clients): one denied topic refuses the whole request, the others OPERATION_NOT_ATTEMPTED."""
    if v >= 4:  # the brokers' verification API
        return _single(k, v, acl.cluster(Operation.CLUSTER_ACTION), CLUSTER_DENIED)
    topics = request.v3_and_below_topics
    if not acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        errors = {t.name: TXN_DENIED for t in topics}
    else:
        denied = {t.name for t in topics if not acl.allowed(Operation.WRITE, ResourceType.TOPIC, t.name)}
        if not denied:
            return Decision(_AS_IS)
        errors = {t.name: TOPIC_DENIED if t.name in denied else ErrorCode.operation_not_attempted for t in topics}
    return answer(k, v, {"results_by_topic_v3_and_below": [{"name": t.name, "results_by_partition": [
        {"partition_index": p, "partition_error_code": errors[t.name]} for p in t.partitions]} for t in topics]})


def _add_offsets_to_txn(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if not acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return answer(k, v, {"error_code": TXN_DENIED})
    return _single(k, v, acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id), GROUP_DENIED)


def _end_txn(k: int, v: int, request: Any, acl: Acl) -> Decision:
    allowed = acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    return _single(k, v, allowed, TXN_DENIED)


def _describe_transactions(k: int, v: int, request: Any, acl: Acl) -> Decision:
    describable = lambda t: acl.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.topic)  # noqa: E731

    def without_hidden_topics(response: Any) -> Any:  # Kafka leaves out the topics it may not describe
        return dataclasses.replace(response, transaction_states=tuple(
            dataclasses.replace(s, topics=tuple(t for t in s.topics if describable(t))) for s in
            response.transaction_states))
    decision = _split(k, v, request, "transactional_ids",
                      lambda t: acl.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t),
                      lambda t: {"transactional_id": t, "error_code": TXN_DENIED, "transaction_state": "",
                                 "transaction_timeout": 0, "transaction_start_time": -1}, "transaction_states")
    if decision.request is not None:
        decision.finish = _chain(without_hidden_topics, decision.finish)
    return decision


def _list_transactions(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return Decision(request, finish=_filter_list(
        "transaction_states", lambda s: acl.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                    s.transactional_id)))


def _create_topics(k: int, v: int, request: Any, acl: Acl) -> Decision:
    cluster_create = acl.cluster(Operation.CREATE)
    decision = _split(k, v, request, "topics",
                      lambda t: cluster_create or acl.allowed(Operation.CREATE, ResourceType.TOPIC, t.name),
                      lambda t: {"name": t.name, "error_code": TOPIC_DENIED, "error_message": "Authorization failed.",
                                 "topic_config_error_code": TOPIC_DENIED if not acl.allowed(
                                     Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name) else 0,
                                 "topic_id": None, "num_partitions": -1, "replication_factor": -1,
                                 "configs": None}, "topics")
    if decision.request is None or v < 5:
        return decision

    def hide_configs(response: Any) -> Any:  # configs only with DESCRIBE_CONFIGS on the topic
        return dataclasses.replace(response, topics=tuple(
            t if acl.allowed(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name)
            else dataclasses.replace(t, topic_config_error_code=TOPIC_DENIED, configs=None)
            for t in response.topics))
    decision.finish = _chain(hide_configs, decision.finish)
    return decision


def _delete_topics(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if v < 6:
        return _split(k, v, request, "topic_names", lambda n: acl.allowed(Operation.DELETE, ResourceType.TOPIC, n),
                      lambda n: {"name": n, "error_code": TOPIC_DENIED}, "responses")
    return _split(k, v, request, "topics", lambda t: acl.allowed(Operation.DELETE, ResourceType.TOPIC, t.name),
                  lambda t: {"name": t.name, "topic_id": t.topic_id, "error_code": TOPIC_DENIED,
                             "error_message": None}, "responses")


def _create_partitions(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return _split(k, v, request, "topics", lambda t: acl.allowed(Operation.ALTER, ResourceType.TOPIC, t.name),
                  lambda t: {"name": t.name, "error_code": TOPIC_DENIED,
                             "error_message": "The topic authorization is failed."}, "results")


def _delete_records(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return _topic_split(k, v, request, Operation.DELETE, acl, low_watermark=-1)


def _describe_producers(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return _topic_split(k, v, request, Operation.READ, acl, parts="partition_indexes", error_message=None)


# Config resource types (Kafka's ConfigResource.Type): the ACL resource each is checked on.
_CONFIG_RESOURCE = {2: (ResourceType.TOPIC, TOPIC_DENIED), 32: (ResourceType.GROUP, GROUP_DENIED)}


def _configs(operation: Operation, response_field: str) -> Callable:
    def rule(k: int, v: int, request: Any, acl: Acl) -> Decision:
        def allowed(r: Any) -> bool:
            resource, _ = _CONFIG_RESOURCE.get(r.resource_type, (ResourceType.CLUSTER, CLUSTER_DENIED))
            name = r.resource_name if resource != ResourceType.CLUSTER else CLUSTER_NAME
            return acl.allowed(operation, resource, name)

        def denied(r: Any) -> dict:
            error = _CONFIG_RESOURCE.get(r.resource_type, (None, CLUSTER_DENIED))[1]
            return {"error_code": error, "error_message": None, "resource_type": r.resource_type,
                    "resource_name": r.resource_name}
        return _split(k, v, request, "resources", allowed, denied, response_field)
    return rule


def _describe_topic_partitions(k: int, v: int, request: Any, acl: Acl) -> Decision:
    describable = lambda name: acl.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)  # noqa: E731
    named = [t.name for t in request.topics]
    kept = tuple(t for t in request.topics if describable(t.name))
    denied = [{"name": n, "error_code": TOPIC_DENIED, "topic_id": uuid.UUID(int=0), "is_internal": False,
               "topic_authorized_operations": OPERATIONS_OMITTED} for n in named if not describable(n)]
    if named and not kept:
        return answer(k, v, {"topics": denied, "next_cursor": None})

    def finish(response: Any) -> Any:
        topics = tuple(dataclasses.replace(t, topic_authorized_operations=acl.operations(ResourceType.TOPIC, t.name))
                       for t in response.topics if t.name is None or describable(t.name))
        entity = _entity_of(typing.get_type_hints(type(response))["topics"])
        return dataclasses.replace(response, topics=topics + tuple(make(entity, d) for d in denied))
    return Decision(dataclasses.replace(request, topics=kept) if denied else request, finish=finish)


def _describe_cluster(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if not request.include_cluster_authorized_operations:
        return Decision(_AS_IS)
    ops = acl.operations(ResourceType.CLUSTER, CLUSTER_NAME) if acl.cluster(Operation.DESCRIBE) else 0
    return Decision(request, finish=lambda r: dataclasses.replace(r, cluster_authorized_operations=ops))


def _describe_acls(k: int, v: int, request: Any, acl: Acl) -> Decision:
    request_filter(request)  # Kafka's request parsing refuses UNKNOWN elements before any ACL check
    return _single(k, v, acl.cluster(Operation.DESCRIBE), CLUSTER_DENIED, error_message=None, resources=[])


def _create_acls(k: int, v: int, request: Any, acl: Acl) -> Decision:
    for creation in request.creations:
        creation_binding(creation)
    if acl.cluster(Operation.ALTER):
        return Decision(_AS_IS)
    return answer(k, v, {"results": [{"error_code": CLUSTER_DENIED, "error_message": None} for _ in request.creations]})


def _delete_acls(k: int, v: int, request: Any, acl: Acl) -> Decision:
    for f in request.filters:
        request_filter(f)
    if acl.cluster(Operation.ALTER):
        return Decision(_AS_IS)
    return answer(k, v, {"filter_results": [{"error_code": CLUSTER_DENIED, "error_message": None,
                                             "matching_acls": []} for _ in request.filters]})


def _alter_replica_log_dirs(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER):
        return Decision(_AS_IS)
    results = [{"topic_name": t.name, "partitions": [{"partition_index": p, "error_code": CLUSTER_DENIED}
                                                     for p in t.partitions]} for d in request.dirs for t in d.topics]
    return answer(k, v, {"results": results})


def _elect_leaders(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER):
        return Decision(_AS_IS)
    results = [{"topic": t.topic, "partition_result": [
        {"partition_id": p, "error_code": CLUSTER_DENIED, "error_message": "Cluster authorization failed."}
        for p in t.partitions]} for t in request.topic_partitions or ()]
    return answer(k, v, {"error_code": CLUSTER_DENIED, "replica_election_results": results})


def _alter_partition_reassignments(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER):
        return Decision(_AS_IS)
    message = "Cluster authorization failed."
    return answer(k, v, {"error_code": CLUSTER_DENIED, "error_message": message,
                         "allow_replication_factor_change": getattr(request, "allow_replication_factor_change", True),
                         "responses": [{"name": t.name, "partitions": [
                             {"partition_index": p.partition_index, "error_code": CLUSTER_DENIED,
                              "error_message": message} for p in t.partitions]} for t in request.topics]})


def _alter_client_quotas(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER_CONFIGS):
        return Decision(_AS_IS)
    return answer(k, v, {"entries": [
        {"error_code": CLUSTER_DENIED, "error_message": None,
         "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]}
        for entry in request.entries]})


def _alter_user_scram_credentials(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER):
        return Decision(_AS_IS)
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return answer(k, v, {"results": [{"user": u, "error_code": CLUSTER_DENIED, "error_message": None}
                                     for u in users]})


def _update_features(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER):
        return Decision(_AS_IS)
    return answer(k, v, {"error_code": CLUSTER_DENIED, "results": [
        {"feature": f.feature, "error_code": CLUSTER_DENIED, "error_message": None} for f in request.feature_updates]})


def _consumer_group_heartbeat(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """ConsumerGroupHeartbeat and ShareGroupHeartbeat: GROUP READ, and DESCRIBE on every topic subscribed by name
    (Kafka 4's KafkaApis; a regex resolves only to the topics the principal may DESCRIBE)."""
    if not acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return answer(k, v, {"error_code": GROUP_DENIED, "member_epoch": -1, "heartbeat_interval": 0})
    names = request.subscribed_topic_names or ()
    denied = sorted(n for n in set(names) if not acl.allowed(Operation.DESCRIBE, ResourceType.TOPIC, n))
    if denied:
        return answer(k, v, {"error_code": TOPIC_DENIED, "member_epoch": -1, "heartbeat_interval": 0,
                             "error_message": f"Topic authorization failed for topics {denied}"})
    return Decision(_AS_IS)


def _unrestricted(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """APIs Kafka serves to every authenticated client (client telemetry)."""
    return Decision(_AS_IS)


Rule = Callable[[int, int, Any, Acl], Decision]
RULES: dict[int, Rule] = {
    0: _produce, 1: _fetch, 2: _list_offsets, 3: _metadata, 8: _offset_commit, 9: _offset_fetch,
    10: _find_coordinator,
    11: _group(Operation.READ, generation_id=-1, leader="", member_id="", skip_assignment=False),  # JoinGroup
    12: _group(Operation.READ),  # Heartbeat
    13: _group(Operation.READ),  # LeaveGroup
    14: _group(Operation.READ, assignment=b""),  # SyncGroup
    15: _describe_groups, 16: _list_groups, 19: _create_topics, 20: _delete_topics, 21: _delete_records,
    22: _init_producer_id, 23: _offset_for_leader_epoch, 24: _add_partitions_to_txn, 25: _add_offsets_to_txn,
    26: _end_txn, 28: _txn_offset_commit,
    29: _describe_acls,
    30: _create_acls, 31: _delete_acls,
    32: _configs(Operation.DESCRIBE_CONFIGS, "results"), 33: _configs(Operation.ALTER_CONFIGS, "responses"),
    34: _alter_replica_log_dirs, 35: _cluster(Operation.DESCRIBE, results=[]),  # DescribeLogDirs
    37: _create_partitions, 42: _delete_groups, 43: _elect_leaders,
    44: _configs(Operation.ALTER_CONFIGS, "responses"),
    45: _alter_partition_reassignments,
    46: _cluster(Operation.DESCRIBE, error_message="Cluster authorization failed.", topics=None),
    47: _offset_delete,
    48: _cluster(Operation.DESCRIBE_CONFIGS, error_message=None, entries=None),  # DescribeClientQuotas
    49: _alter_client_quotas,
    50: _cluster(Operation.DESCRIBE, error_message=None, results=[]),  # DescribeUserScramCredentials
    51: _alter_user_scram_credentials, 57: _update_features, 60: _describe_cluster, 61: _describe_producers,
    65: _describe_transactions, 66: _list_transactions, 68: _consumer_group_heartbeat,
    69: _consumer_group_describe, 71: _unrestricted, 72: _unrestricted,
    76: _consumer_group_heartbeat, 77: _consumer_group_describe, **SHARE_RULES,
    74: _cluster(Operation.DESCRIBE_CONFIGS, config_resources=[]),  # ListConfigResources
    75: _describe_topic_partitions,
}


UNRESTRICTED = frozenset(k for k, rule in RULES.items() if rule is _unrestricted)


def authorize_request(api_key: int, version: int, request: Any, acl: Acl) -> Decision:
    """The decision for one request (``api_key`` must be in RULES). An unchanged request comes back as the same
    object, with no ``finish`` when its response needs nothing either."""
    decision = RULES[api_key](api_key, version, request, acl)
    if decision.request is _AS_IS and decision.response is None:
        decision.request = request
    return decision

