"""Metadata (key 3), v0-v12.

v0: an empty topic list means all topics; v1+: null means all, empty means none; v1 adds controller_id,
is_internal and rack; v2 cluster_id; v3 throttle_time_ms; v4 allow_auto_topic_creation (earlier
versions always allow it); v5 offline_replicas; v7 leader_epoch; v8 authorized operations (when asked for:
the operations the principal may do, every supported one without an authorizer, as Kafka's AuthHelper); v9 flexible; v10 topic ids (a request may name topics by id: unknown
ids get UNKNOWN_TOPIC_ID); v11 drops cluster authorized operations; v12 allows null topic names in the
response for id lookups (a topic with a non-zero id is looked up by id, whatever its name: KIP-848 consumers
resolve the topic ids of their assignment this way). Auto-creation follows auto.create.topics.enable with
num.partitions, and an auto-created topic is answered at once (this broker is its own controller, nothing to
wait for). Under ACLs request_acls decides what the principal may see and create (Kafka's DESCRIBE and CREATE
rules) around this.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from logway.server.security.authorizer import CLUSTER_NAME, ResourceType
from logway.storage.errors import UnknownTopicOrPartition
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.metadata.v12.response import MetadataResponse

    from logway.gateway.context import RequestContext

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 12

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
ZERO_UUID = uuid.UUID(int=0)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def topic_entry(broker, name: str, error: int = ErrorCode.none, topic_id: uuid.UUID | None = None) -> dict:
    topic = broker.logs.topics.get(name) if error == ErrorCode.none else None
    partitions = []
    if topic is not None:
        node = broker.node_id
        for index in range(len(topic.partitions)):
            partitions.append({
                "error_code": ErrorCode.none, "partition_index": index, "leader_id": node, "leader_epoch": 0,
                "replica_nodes": (node,), "isr_nodes": (node,), "offline_replicas": (),
            })
    return {
        "error_code": error,
        "name": name,
        "topic_id": topic.topic_id if topic is not None else (topic_id or ZERO_UUID),
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _lookup(ctx: RequestContext, name: str, allow_create: bool) -> dict:
    """A named topic's entry, auto-created if asked and allowed (KafkaApis.handleTopicMetadataRequest). Under ACLs
    a topic the principal may not create is not (request_acls answers it TOPIC_AUTHORIZATION_FAILED)."""
    broker = ctx.broker
    if name in broker.logs.creating:
        # A CreateTopics still making its partitions: Kafka answers LEADER_NOT_AVAILABLE until leaders exist.
        return topic_entry(broker, name, ErrorCode.leader_not_available)
    if name not in broker.logs.topics:
        uncreatable = ctx.decision.uncreatable if ctx.decision is not None else ()
        if not (allow_create and broker.config.auto_create_topics) or name in uncreatable:
            return topic_entry(broker, name, ErrorCode.unknown_topic_or_partition)
        try:
            broker.auto_create_topic(name)
        except KafkaError as exc:
            if name not in broker.logs.topics:
                return topic_entry(broker, name, exc.error_code)
    return topic_entry(broker, name)


def invalid_request(ctx: RequestContext, topics: tuple[MetadataRequestTopic, ...]) -> MetadataResponse:
    """Kafka's MetadataRequest.getErrorResponse for INVALID_REQUEST: every topic asked for gets the error (a
    null name becomes "", which v10-v11 responses cannot carry), and no brokers."""
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "brokers": [], "topics": [
        {"error_code": ErrorCode.invalid_request, "name": t.name or "", "topic_id": t.topic_id or ZERO_UUID,
         "is_internal": False, "partitions": [], "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
        for t in topics]})


def _by_id(broker, topic_id: uuid.UUID | None, by_id: dict[uuid.UUID, str]) -> dict:
    """The entry of a topic asked for by id (an unknown id: UNKNOWN_TOPIC_ID, no name; under ACLs request_acls
    refuses a found one the principal may not describe)."""
    found = by_id.get(topic_id)
    if found is None:
        return {**topic_entry(broker, "", ErrorCode.unknown_topic_id, topic_id), "name": None}
    return topic_entry(broker, found)


def _named(ctx: RequestContext, topics: tuple[MetadataRequestTopic, ...], allow_create: bool) -> list[dict]:
    """The entries of the topics asked for, by name or (v12+) by id."""
    broker = ctx.broker
    by_id = {t.topic_id: t.name for t in broker.logs.topics.values()} if ctx.version >= 10 else {}
    # Kafka's KafkaApis: when any topic has a non-zero id, the request is an id lookup (names are ignored). The
    # Java client's MetadataRequest.Builder.forTopicIds leaves each name at its schema default "", not null.
    ids_only = ctx.version >= 12 and any(t.topic_id is not None for t in topics)
    entries = []
    for t in topics:
        if ids_only or t.name is None:
            if t.topic_id is not None or t.name is None:
                entries.append(_by_id(broker, t.topic_id, by_id))
            continue
        try:
            entries.append(_lookup(ctx, t.name, allow_create))
        except UnknownTopicOrPartition:
            entries.append(topic_entry(broker, t.name, ErrorCode.unknown_topic_or_partition))
    return entries


def _cluster_operations(ctx: RequestContext, request: MetadataRequest) -> int:
    """v8-v10: the cluster's authorized operations when asked for (request_acls gives the principal's)."""
    if 8 <= ctx.version <= 10 and request.include_cluster_authorized_operations:
        return ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
    return AUTHORIZED_OPERATIONS_OMITTED


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    topics = request.topics
    if 10 <= ctx.version < 12 and topics and any(t.name is None or t.topic_id is not None for t in topics):
        # KafkaApis: "Topic IDs are not supported for versions 10 and 11. Topic names can not be null in
        # these versions" -> InvalidRequestException, answered as an INVALID_REQUEST error response.
        return invalid_request(ctx, topics)
    if topics is None or (ctx.version == 0 and not topics):  # every topic (under ACLs: those it may describe)
        entries = [topic_entry(broker, name) for name in sorted(broker.logs.topics)]
    else:
        entries = _named(ctx, topics, ctx.version < 4 or request.allow_auto_topic_creation)
    if ctx.version >= 8 and request.include_topic_authorized_operations:
        for entry in entries:
            if entry["error_code"] == ErrorCode.none:
                entry["topic_authorized_operations"] = ctx.authorized_operations(ResourceType.TOPIC, entry["name"])
    adv = ctx.advertised
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0,
        "brokers": [{"node_id": broker.node_id, "host": adv.host or "127.0.0.1", "port": adv.port, "rack": None}],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": entries,
        "cluster_authorized_operations": _cluster_operations(ctx, request),
    })
