"""Which ACLs each Kafka request needs and what a denial looks like, as Kafka's KafkaApis/AuthHelper decide
them, sans-IO: a kio request and a principal's ACL view in, a Decision out.

A Decision (acl_decisions.py) says what may be served (the request itself, a copy without the topics/groups/ids
the principal may not use, or nothing: then ``response`` is the complete answer) and how to finish the served
request's response (``finish``: the denied entries added with their error code, lists filtered to what the
principal may describe, *_authorized_operations recomputed for the principal). It is the one ACL path of both processes:
the proxy's ACL filter uses it for every API it forwards, the broker's dispatch for every API it serves. Produce
and Fetch, which the broker reads with hand-written decoders on its hot path, are decided by name
(``produce_denials``, ``fetch_denials``): their rules here and the broker's handlers call the same functions.
A broker answering the request itself passes its topics (``LocalTopics``): topic ids are then resolved and
partitions checked as KafkaApis does, which a proxy cannot do for the cluster behind it.

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
import uuid
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from logway.server.security.acl_bindings import creation_binding, request_filter
from logway.server.security.acl_decisions import (
    AS_IS,
    CLUSTER_DENIED,
    GROUP_DENIED,
    OPERATIONS_OMITTED,
    TOPIC_DENIED,
    TXN_DENIED,
    Acl,
    Decision,
    all_partitions,
    answer,
    append,
    chain,
    cluster,
    filter_list,
    group,
    may,
    set_operations,
    single,
    split,
    topic_split,
)
from logway.server.security.authorizer import (
    CLUSTER_NAME,
    Operation,
    ResourceType,
)
from logway.server.security.share_group_acls import RULES as SHARE_RULES
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, field_entity, response_type

# The last versions that name topics (later ones name them by id, which an ACL check cannot read), the last
# client versions of AddPartitionsToTxn (v4+ is the brokers' verification API), and none of ShareFetch and
# ShareAcknowledge, which name topics by id only (the broker checks their TOPIC READ once it has the names).
VERSION_CAPS = {0: 12, 1: 12, 8: 9, 9: 9, 24: 3, 78: -1, 79: -1}

# --- the rules, per API key --------------------------------------------------------------------------------


class ProduceDenials(NamedTuple):
    transactional_id: bool  # the request's transactional id is denied TRANSACTIONAL_ID WRITE
    topics: frozenset[str]  # the topics without TOPIC WRITE


def produce_denials(acl: Acl, transactional_id: str | None, topics: Iterable[str]) -> ProduceDenials:
    """KafkaApis.handleProduceRequest's checks, by name: TRANSACTIONAL_ID WRITE on the transactional id (its
    transactional records are refused with 53 without it), TOPIC WRITE per topic (29 for its partitions)."""
    denied_id = transactional_id is not None and not acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                                 transactional_id)
    writable = may(acl, Operation.WRITE)
    return ProduceDenials(denied_id, frozenset(n for n in set(topics) if not writable(n)))


def _produce(k: int, v: int, request: Any, acl: Acl) -> Decision:
    denials = produce_denials(acl, request.transactional_id, (t.name for t in request.topic_data))
    if denials.transactional_id:
        return answer(k, v, {"responses": all_partitions(request, TXN_DENIED, "topic_data", parts="partition_data",
                                                          index="index", entry_parts="partition_responses",
                                                          entry_index="index")})
    return topic_split(k, v, request, lambda name: name not in denials.topics, "topic_data", parts="partition_data",
                        index="index", response_field="responses", entry_parts="partition_responses",
                        entry_index="index")


class FetchDenials(NamedTuple):
    follower: bool  # a follower's fetch without CLUSTER_ACTION: every partition is refused
    topics: frozenset[str]  # the topics refused (all of them for such a follower)


def fetch_denials(acl: Acl, replica_id: int, topics: Iterable[str]) -> FetchDenials:
    """KafkaApis.handleFetchRequest's checks, by name: a follower's fetch (replica_id >= 0) needs CLUSTER_ACTION,
    a consumer's TOPIC READ per topic; the partitions of a refused topic get TOPIC_AUTHORIZATION_FAILED."""
    names = frozenset(topics)
    if replica_id >= 0 and not acl.cluster(Operation.CLUSTER_ACTION):
        return FetchDenials(True, names)
    readable = may(acl, Operation.READ)
    return FetchDenials(False, frozenset(n for n in names if not readable(n)))


def fetch_replica_id(request: Any) -> int:
    """The replica id of a kio Fetch request: a field up to v14, in the replica_state tagged field from v15."""
    state = getattr(request, "replica_state", None)
    return state.replica_id if state is not None else getattr(request, "replica_id", -1)


def _fetch(k: int, v: int, request: Any, acl: Acl) -> Decision:
    denials = fetch_denials(acl, fetch_replica_id(request), (t.topic for t in request.topics))
    refused = {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1, "records": None}
    if denials.follower:
        return answer(k, v, {"error_code": 0, "responses": all_partitions(
            request, TOPIC_DENIED, name="topic", entry_name="topic", index="partition", **refused)})
    return topic_split(k, v, request, lambda name: name not in denials.topics, name="topic", index="partition",
                        response_field="responses", entry_name="topic", **refused)


def _list_offsets(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return topic_split(k, v, request, may(acl, Operation.DESCRIBE), timestamp=-1, offset=-1)


def _offset_for_leader_epoch(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if getattr(request, "replica_id", -1) >= 0 and not acl.cluster(Operation.CLUSTER_ACTION):
        return answer(k, v, {"topics": all_partitions(request, TOPIC_DENIED, name="topic", index="partition",
                                                       entry_name="topic", entry_index="partition")})
    return topic_split(k, v, request, may(acl, Operation.DESCRIBE), name="topic", index="partition",
                        entry_name="topic", entry_index="partition")


def _metadata(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """KafkaApis.handleTopicMetadataRequest: named topics it may not describe are refused and never served (so
    not auto-created); topics it may describe but not create are not auto-created (TOPIC_AUTHORIZATION_FAILED
    if they do not exist); a listing shows only what it may describe; topics asked for by id are refused
    after the lookup. A proxy cannot tell the upstream which topics not to create: it turns auto-creation
    off for the request (v4+) when some may not be created."""
    named = request.topics
    if named and 10 <= v < 12 and any(t.name is None or t.topic_id is not None for t in named):
        return Decision(AS_IS)  # Kafka refuses the whole request (INVALID_REQUEST) before any ACL check
    listing = named is None or (v == 0 and not named)  # v0: an empty list is every topic
    # v12+: when any topic has an id, the request is an id lookup and its names are ignored (KafkaApis; the
    # Java client's forTopicIds sends "" names): refused after the lookup, like every topic asked for by id.
    by_name = not listing and not (v >= 12 and any(t.topic_id is not None for t in named))
    describable = may(acl, Operation.DESCRIBE)
    served, denied = request, []
    if by_name:
        kept = tuple(t for t in named if t.name is None or describable(t.name))
        denied = [{"name": t.name, "error_code": TOPIC_DENIED, "is_internal": False} for t in named if t not in kept]
        if denied:
            served = dataclasses.replace(served, topics=kept)
    uncreatable = frozenset(_uncreatable(served, acl)) if by_name else frozenset()
    if uncreatable and v >= 4 and acl.local is None:
        served = dataclasses.replace(served, allow_auto_topic_creation=False)
    finish = chain(_metadata_topics(v, request, acl, listing, uncreatable, denied), _cluster_operations(request, acl))
    return Decision(served, finish=finish, uncreatable=uncreatable)


def _uncreatable(request: Any, acl: Acl) -> list[str]:
    """The named topics auto-creation would need CREATE for and the principal lacks (CLUSTER CREATE or TOPIC
    CREATE on each, as Kafka checks)."""
    if (not getattr(request, "allow_auto_topic_creation", True) or (acl.local is not None and not acl.local.auto_create)
            or acl.cluster(Operation.CREATE, probe=True)):
        return []
    creatable = may(acl, Operation.CREATE, probe=True)  # (asked of existing topics too: not a denial)
    return [t.name for t in request.topics if t.name is not None and not creatable(t.name)]


def _metadata_topics(v: int, request: Any, acl: Acl, listing: bool, uncreatable: frozenset[str],
                     denied: list[dict]) -> Callable[[Any], Any]:
    """The served topics as the principal may see them, and the refused named ones after them."""
    describable = may(acl, Operation.DESCRIBE)
    with_operations = getattr(request, "include_topic_authorized_operations", False)

    def finish(response: Any) -> Any:
        topics = []
        for t in response.topics:
            if t.name is not None and not describable(t.name):
                if listing:
                    continue  # not shown
                # asked for by id: Kafka gives the error and no name (v12+, where names may be null)
                t = _replace_present(t, error_code=TOPIC_DENIED, partitions=(), name=None if v >= 12 else t.name,
                                     is_internal=False, topic_authorized_operations=OPERATIONS_OMITTED)
            elif t.name in uncreatable and t.error_code == ErrorCode.unknown_topic_or_partition:
                t = dataclasses.replace(t, error_code=TOPIC_DENIED)
            elif with_operations and t.error_code == 0:
                t = dataclasses.replace(t, topic_authorized_operations=acl.operations(ResourceType.TOPIC, t.name))
            topics.append(t)
        entity = field_entity(type(response), "topics")
        return dataclasses.replace(response, topics=tuple(topics) + tuple(build(entity, d) for d in denied))
    return finish


def _replace_present(entry: Any, **fields: Any) -> Any:
    """``entry`` with those of ``fields`` its version has replaced."""
    return dataclasses.replace(entry, **{k: v for k, v in fields.items() if hasattr(entry, k)})


def _cluster_operations(request: Any, acl: Acl) -> Callable[[Any], Any] | None:
    """cluster_authorized_operations when asked for: the principal's, listed only with CLUSTER DESCRIBE (else 0),
    as AuthHelper.computeDescribeClusterResponse and handleTopicMetadataRequest give them."""
    if not getattr(request, "include_cluster_authorized_operations", False):
        return None

    def finish(response: Any) -> Any:
        if getattr(response, "error_code", 0) != 0:
            return response
        ops = acl.operations(ResourceType.CLUSTER, CLUSTER_NAME) if acl.cluster(Operation.DESCRIBE) else 0
        return dataclasses.replace(response, cluster_authorized_operations=ops)
    return finish


def _offset_commit(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if not acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return answer(k, v, {"topics": all_partitions(request, GROUP_DENIED)})
    return topic_split(k, v, request, may(acl, Operation.READ))


def _txn_offset_commit(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if not acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return answer(k, v, {"topics": all_partitions(request, TXN_DENIED)})
    if not acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return answer(k, v, {"topics": all_partitions(request, GROUP_DENIED)})
    return topic_split(k, v, request, may(acl, Operation.READ))


def _offset_delete(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if not acl.allowed(Operation.DELETE, ResourceType.GROUP, request.group_id):
        return answer(k, v, {"error_code": GROUP_DENIED})
    return topic_split(k, v, request, may(acl, Operation.READ))


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
    """v0-v7 name one group, v8+ a list of groups (each refused apart: GROUP_AUTHORIZATION_FAILED)."""
    return _offset_fetch_one_group(k, v, request, acl) if v < 8 else _offset_fetch_groups(k, v, request, acl)


def _offset_fetch_one_group(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if not acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, request.group_id):
        if v >= 2:
            return answer(k, v, {"error_code": GROUP_DENIED})
        return answer(k, v, {"topics": [{"name": t.name, "partitions": [
            {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": GROUP_DENIED}
            for p in t.partition_indexes]} for t in request.topics or ()]})
    kept, denied, keep = _offset_fetch_topics(request.topics, acl)
    if keep is not None:
        return Decision(request, finish=filter_list("topics", keep))
    if not denied:
        return Decision(request)
    return Decision(dataclasses.replace(request, topics=kept), finish=append("topics", denied,
                                                                              response_type(k, v)))


def _offset_fetch_groups(k: int, v: int, request: Any, acl: Acl) -> Decision:
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
    unchanged = len(groups) == len(request.groups) and all(a is b for a, b in zip(groups, request.groups, strict=True))
    return Decision(request if unchanged else dataclasses.replace(request, groups=tuple(groups)),
                    finish=_offset_fetch_groups_finish(response_type(k, v), per_group, denied_groups))


def _offset_fetch_groups_finish(cls: type, per_group: dict[str, tuple[list[dict], Callable | None]],
                                denied_groups: list[dict]) -> Callable[[Any], Any]:
    """Each served group's topics filtered and its refused topics added; the refused groups after them."""
    group_entity = field_entity(cls, "groups")
    topic_entity = field_entity(group_entity, "topics")

    def finish(response: Any) -> Any:
        out = []
        for g in response.groups:
            denied, keep = per_group.get(g.group_id, ([], None))
            if g.error_code == 0 and (denied or keep):
                topics = tuple(t for t in g.topics if keep is None or keep(t))
                g = dataclasses.replace(g, topics=topics + tuple(build(topic_entity, d) for d in denied))
            out.append(g)
        return dataclasses.replace(response, groups=tuple(out) + tuple(build(group_entity, d) for d in denied_groups))
    return finish


_COORDINATOR_RESOURCE = {0: (ResourceType.GROUP, GROUP_DENIED), 1: (ResourceType.TRANSACTIONAL_ID, TXN_DENIED)}


def _find_coordinator(k: int, v: int, request: Any, acl: Acl) -> Decision:
    key_type = getattr(request, "key_type", 0)
    if key_type not in _COORDINATOR_RESOURCE:
        return Decision(AS_IS)  # the upstream answers INVALID_REQUEST (share groups are not served)
    resource, error = _COORDINATOR_RESOURCE[key_type]
    no_node = {"node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": None}
    if v < 4:
        return single(k, v, acl.allowed(Operation.DESCRIBE, resource, request.key), error, **no_node)

    def denied(key: str) -> dict:
        return {"key": key, **no_node}
    return split(k, v, request, "coordinator_keys", lambda key: acl.allowed(Operation.DESCRIBE, resource, key),
                  denied, "coordinators")


def _describe_groups(k: int, v: int, request: Any, acl: Acl) -> Decision:
    def denied(group: str) -> dict:
        return {"group_id": group, "error_code": GROUP_DENIED, "authorized_operations": OPERATIONS_OMITTED}
    decision = split(k, v, request, "groups", lambda g: acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, g),
                      denied, "groups")
    if decision.request is not None and getattr(request, "include_authorized_operations", False):
        decision.finish = chain(set_operations("groups", ResourceType.GROUP, "group_id", "authorized_operations",
                                                 acl), decision.finish)
    return decision


def _consumer_group_describe(k: int, v: int, request: Any, acl: Acl) -> Decision:
    def denied(group: str) -> dict:
        return {"group_id": group, "error_code": GROUP_DENIED, "authorized_operations": OPERATIONS_OMITTED}
    decision = split(k, v, request, "group_ids", lambda g: acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, g),
                      denied, "groups")
    if decision.request is not None and request.include_authorized_operations:
        decision.finish = chain(set_operations("groups", ResourceType.GROUP, "group_id", "authorized_operations",
                                                 acl), decision.finish)
    return decision


def _list_groups(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.DESCRIBE, probe=True):
        return Decision(AS_IS)
    return Decision(request, finish=filter_list(
        "groups", lambda g: acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, g.group_id)))


def _delete_groups(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return split(k, v, request, "groups_names", lambda g: acl.allowed(Operation.DELETE, ResourceType.GROUP, g),
                  lambda g: {"group_id": g, "error_code": GROUP_DENIED}, "results")


def _init_producer_id(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if request.transactional_id is not None:
        allowed = acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        return single(k, v, allowed, TXN_DENIED)
    allowed = acl.cluster(Operation.IDEMPOTENT_WRITE, probe=True) or acl.any_allowed(Operation.WRITE, ResourceType.TOPIC)
    if not allowed:
        acl.deny(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
    return single(k, v, allowed, CLUSTER_DENIED)


def _add_partitions_to_txn(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """v0-3 (clients): one denied topic refuses the whole request: its partitions TOPIC_AUTHORIZATION_FAILED,
    partitions a local server does not have UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED."""
    if v >= 4:  # the brokers' verification API
        return single(k, v, acl.cluster(Operation.CLUSTER_ACTION), CLUSTER_DENIED)
    topics = request.v3_and_below_topics
    if not acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        error = {t.name: lambda p: TXN_DENIED for t in topics}
    else:
        denied = {t.name for t in topics if not acl.allowed(Operation.WRITE, ResourceType.TOPIC, t.name)}
        if not denied:
            return Decision(AS_IS)
        error = {t.name: _not_attempted(acl, t.name, t.name in denied) for t in topics}
    return answer(k, v, {"results_by_topic_v3_and_below": [{"name": t.name, "results_by_partition": [
        {"partition_index": p, "partition_error_code": error[t.name](p)} for p in t.partitions]} for t in topics]})


def _not_attempted(acl: Acl, topic: str, denied: bool) -> Callable[[int], ErrorCode]:
    """A partition's error when AddPartitionsToTxn is refused for another topic's sake (KafkaApis order)."""
    if denied:
        return lambda p: TOPIC_DENIED
    local = acl.local
    if local is None:
        return lambda p: ErrorCode.operation_not_attempted
    return lambda p: (ErrorCode.operation_not_attempted if local.has_partition(topic, p)
                      else ErrorCode.unknown_topic_or_partition)


def _add_offsets_to_txn(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if not acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return answer(k, v, {"error_code": TXN_DENIED})
    return single(k, v, acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id), GROUP_DENIED)


def _end_txn(k: int, v: int, request: Any, acl: Acl) -> Decision:
    allowed = acl.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    return single(k, v, allowed, TXN_DENIED)


def _describe_transactions(k: int, v: int, request: Any, acl: Acl) -> Decision:
    describable = lambda t: acl.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.topic)  # noqa: E731

    def without_hidden_topics(response: Any) -> Any:  # Kafka leaves out the topics it may not describe
        return dataclasses.replace(response, transaction_states=tuple(
            dataclasses.replace(s, topics=tuple(t for t in s.topics if describable(t))) for s in
            response.transaction_states))
    # A refused id's start time is the epoch (0), not Kafka's -1: kio-based clients cannot read a negative one.
    decision = split(k, v, request, "transactional_ids",
                      lambda t: acl.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t),
                      lambda t: {"transactional_id": t, "error_code": TXN_DENIED, "transaction_state": "",
                                 "transaction_timeout": 0, "transaction_start_time": 0}, "transaction_states")
    if decision.request is not None:
        decision.finish = chain(without_hidden_topics, decision.finish)
    return decision


def _list_transactions(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return Decision(request, finish=filter_list(
        "transaction_states", lambda s: acl.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                    s.transactional_id)))


def _create_topics(k: int, v: int, request: Any, acl: Acl) -> Decision:
    cluster_create = acl.cluster(Operation.CREATE, probe=True)
    decision = split(k, v, request, "topics",
                      lambda t: cluster_create or acl.allowed(Operation.CREATE, ResourceType.TOPIC, t.name),
                      lambda t: {"name": t.name, "error_code": TOPIC_DENIED, "error_message": "Authorization failed.",
                                 "topic_config_error_code": TOPIC_DENIED if not acl.allowed(
                                     Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name, probe=True) else 0,
                                 "topic_id": None, "num_partitions": -1, "replication_factor": -1,
                                 "configs": None}, "topics")
    if decision.request is None or v < 5:
        return decision

    def hide_configs(response: Any) -> Any:  # configs only with DESCRIBE_CONFIGS on the topic
        return dataclasses.replace(response, topics=tuple(
            t if acl.allowed(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name)
            else dataclasses.replace(t, topic_config_error_code=TOPIC_DENIED, configs=None)
            for t in response.topics))
    decision.finish = chain(hide_configs, decision.finish)
    return decision


def _delete_topics(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """TOPIC DELETE per topic. v6 may name a topic by id: a local server resolves it (an unknown id is left to
    it: UNKNOWN_TOPIC_ID) and needs DESCRIBE on it too, else the name is not revealed; a proxy cannot resolve
    ids, so only a super user may delete by id through it."""
    deletable = may(acl, Operation.DELETE)
    if v < 6:
        return split(k, v, request, "topic_names", deletable, lambda n: {"name": n, "error_code": TOPIC_DENIED},
                      "responses")
    describable = may(acl, Operation.DESCRIBE)

    def name_of(t: Any) -> str | None:
        return acl.local.name_of(t.topic_id) if t.name is None and acl.local is not None else t.name

    def allowed(t: Any) -> bool:
        name = name_of(t)
        if t.name is None and acl.local is not None:
            return name is None or (describable(name) and deletable(name))
        return deletable(name)

    def denied(t: Any) -> dict:
        name = name_of(t)
        shown = name if t.name is not None or (name is not None and describable(name)) else None
        return {"name": shown, "topic_id": t.topic_id, "error_code": TOPIC_DENIED, "error_message": None}
    return split(k, v, request, "topics", allowed, denied, "responses")


def _create_partitions(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return split(k, v, request, "topics", lambda t: acl.allowed(Operation.ALTER, ResourceType.TOPIC, t.name),
                  lambda t: {"name": t.name, "error_code": TOPIC_DENIED,
                             "error_message": "The topic authorization is failed."}, "results")


def _delete_records(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return topic_split(k, v, request, may(acl, Operation.DELETE), low_watermark=-1)


def _describe_producers(k: int, v: int, request: Any, acl: Acl) -> Decision:
    return topic_split(k, v, request, may(acl, Operation.READ), parts="partition_indexes", error_message=None)


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
        return split(k, v, request, "resources", allowed, denied, response_field)
    return rule


def _describe_topic_partitions(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """DescribeTopicPartitionsRequestHandler: a listing shows what the principal may describe; named topics (at or
    after the cursor's, deduplicated) it may not describe are refused after the others, in name order; every
    served topic carries the principal's authorized operations. A request whose cursor Kafka refuses
    (INVALID_REQUEST for every topic) is served as it is."""
    describable = may(acl, Operation.DESCRIBE)
    def ops(t: Any) -> Any:
        return dataclasses.replace(t, topic_authorized_operations=acl.operations(ResourceType.TOPIC, t.name))
    if not request.topics:  # a listing
        return Decision(request, finish=lambda r: dataclasses.replace(r, topics=tuple(
            ops(t) for t in r.topics if t.name is None or describable(t.name))), visible=describable)
    cursor = request.cursor
    start = cursor.topic_name if cursor is not None else ""
    names = {t.name for t in request.topics if t.name >= start}
    if cursor is not None and (cursor.topic_name not in names or cursor.partition_index < 0):
        return Decision(AS_IS)
    denied = [{"name": n, "error_code": TOPIC_DENIED, "topic_id": uuid.UUID(int=0), "is_internal": False,
               "topic_authorized_operations": OPERATIONS_OMITTED} for n in sorted(names) if not describable(n)]
    if not denied:
        return Decision(request, finish=lambda r: dataclasses.replace(r, topics=tuple(ops(t) for t in r.topics)))
    kept = tuple(t for t in request.topics if t.name in names and describable(t.name))
    if not kept:
        return answer(k, v, {"topics": denied, "next_cursor": None})
    # A refused cursor topic is skipped: the others start at partition 0, as they would after it.
    served = dataclasses.replace(request, topics=kept, cursor=cursor if cursor is None or describable(start) else None)

    def finish(response: Any) -> Any:
        entity = field_entity(type(response), "topics")
        return dataclasses.replace(response, topics=tuple(ops(t) for t in response.topics) + tuple(
            build(entity, d) for d in denied))
    return Decision(served, finish=finish)


def _describe_cluster(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """Anyone may describe the cluster; its authorized operations are the principal's."""
    operations = _cluster_operations(request, acl)
    return Decision(AS_IS) if operations is None else Decision(request, finish=operations)


def _describe_acls(k: int, v: int, request: Any, acl: Acl) -> Decision:
    request_filter(request)  # Kafka's request parsing refuses UNKNOWN elements before any ACL check
    return single(k, v, acl.cluster(Operation.DESCRIBE), CLUSTER_DENIED, error_message=None, resources=[])


def _create_acls(k: int, v: int, request: Any, acl: Acl) -> Decision:
    for creation in request.creations:
        creation_binding(creation)
    if acl.cluster(Operation.ALTER):
        return Decision(AS_IS)
    return answer(k, v, {"results": [{"error_code": CLUSTER_DENIED, "error_message": None} for _ in request.creations]})


def _delete_acls(k: int, v: int, request: Any, acl: Acl) -> Decision:
    for f in request.filters:
        request_filter(f)
    if acl.cluster(Operation.ALTER):
        return Decision(AS_IS)
    return answer(k, v, {"filter_results": [{"error_code": CLUSTER_DENIED, "error_message": None,
                                             "matching_acls": []} for _ in request.filters]})


def _alter_replica_log_dirs(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER):
        return Decision(AS_IS)
    results = [{"topic_name": t.name, "partitions": [{"partition_index": p, "error_code": CLUSTER_DENIED}
                                                     for p in t.partitions]} for d in request.dirs for t in d.topics]
    return answer(k, v, {"results": results})


def _elect_leaders(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER):
        return Decision(AS_IS)
    results = [{"topic": t.topic, "partition_result": [
        {"partition_id": p, "error_code": CLUSTER_DENIED, "error_message": "Cluster authorization failed."}
        for p in t.partitions]} for t in request.topic_partitions or ()]
    return answer(k, v, {"error_code": CLUSTER_DENIED, "replica_election_results": results})


def _alter_partition_reassignments(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER):
        return Decision(AS_IS)
    message = "Cluster authorization failed."
    return answer(k, v, {"error_code": CLUSTER_DENIED, "error_message": message,
                         "allow_replication_factor_change": getattr(request, "allow_replication_factor_change", True),
                         "responses": [{"name": t.name, "partitions": [
                             {"partition_index": p.partition_index, "error_code": CLUSTER_DENIED,
                              "error_message": message} for p in t.partitions]} for t in request.topics]})


def _alter_client_quotas(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER_CONFIGS):
        return Decision(AS_IS)
    return answer(k, v, {"entries": [
        {"error_code": CLUSTER_DENIED, "error_message": None,
         "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]}
        for entry in request.entries]})


def _alter_user_scram_credentials(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER):
        return Decision(AS_IS)
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return answer(k, v, {"results": [{"user": u, "error_code": CLUSTER_DENIED, "error_message": None}
                                     for u in users]})


def _update_features(k: int, v: int, request: Any, acl: Acl) -> Decision:
    if acl.cluster(Operation.ALTER):
        return Decision(AS_IS)
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
    return Decision(AS_IS)


def _unrestricted(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """APIs Kafka serves to every authenticated client (client telemetry)."""
    return Decision(AS_IS)


Rule = Callable[[int, int, Any, Acl], Decision]
RULES: dict[int, Rule] = {
    0: _produce, 1: _fetch, 2: _list_offsets, 3: _metadata, 8: _offset_commit, 9: _offset_fetch,
    10: _find_coordinator,
    11: group(Operation.READ, generation_id=-1, leader="", member_id="", skip_assignment=False),  # JoinGroup
    12: group(Operation.READ),  # Heartbeat
    13: group(Operation.READ),  # LeaveGroup
    14: group(Operation.READ, assignment=b""),  # SyncGroup
    15: _describe_groups, 16: _list_groups, 19: _create_topics, 20: _delete_topics, 21: _delete_records,
    22: _init_producer_id, 23: _offset_for_leader_epoch, 24: _add_partitions_to_txn, 25: _add_offsets_to_txn,
    26: _end_txn, 28: _txn_offset_commit,
    29: _describe_acls,
    30: _create_acls, 31: _delete_acls,
    32: _configs(Operation.DESCRIBE_CONFIGS, "results"), 33: _configs(Operation.ALTER_CONFIGS, "responses"),
    34: _alter_replica_log_dirs, 35: cluster(Operation.DESCRIBE, results=[]),  # DescribeLogDirs
    37: _create_partitions, 42: _delete_groups, 43: _elect_leaders,
    44: _configs(Operation.ALTER_CONFIGS, "responses"),
    45: _alter_partition_reassignments,
    46: cluster(Operation.DESCRIBE, error_message="Cluster authorization failed.", topics=[]),
    47: _offset_delete,
    48: cluster(Operation.DESCRIBE_CONFIGS, error_message=None, entries=None),  # DescribeClientQuotas
    49: _alter_client_quotas,
    50: cluster(Operation.DESCRIBE, error_message=None, results=[]),  # DescribeUserScramCredentials
    51: _alter_user_scram_credentials, 57: _update_features, 60: _describe_cluster, 61: _describe_producers,
    65: _describe_transactions, 66: _list_transactions, 68: _consumer_group_heartbeat,
    69: _consumer_group_describe, 71: _unrestricted, 72: _unrestricted,
    76: _consumer_group_heartbeat, 77: _consumer_group_describe, **SHARE_RULES,
    74: cluster(Operation.DESCRIBE_CONFIGS, config_resources=[]),  # ListConfigResources
    75: _describe_topic_partitions,
}


UNRESTRICTED = frozenset(k for k, rule in RULES.items() if rule is _unrestricted)
# ApiVersions, SaslHandshake, SaslAuthenticate: sent before a client is authenticated; Kafka checks no ACL.
NO_ACL = frozenset({17, 18, 36})


def authorize_request(api_key: int, version: int, request: Any, acl: Acl) -> Decision:
    """The decision for one request (``api_key`` must be in RULES). An unchanged request comes back as the same
    object, with no ``finish`` when its response needs nothing either."""
    decision = RULES[api_key](api_key, version, request, acl)
    if decision.request is AS_IS and decision.response is None:
        decision.request = request
    return decision

