"""ShareFetch (key 78), v1-v2: records of a share group's partitions, acquired for the member (KIP-932).

The share session (epoch 0 opens it, each request moves it on, -1 closes it) names the partitions; the
acknowledgements the request carries are applied first (each partition's acknowledge_error_code), then up to
``max_records`` records are acquired from the session's partitions (whole log batches; ``acquired_records``
says which offsets this member holds, and how often each was delivered), long-polling ``max_wait_ms`` when
nothing is there. v2: share_acquire_mode and renew acknowledgements (KIP-1206, KIP-1222: with is_renew_ack the
request may only renew locks: max_bytes, min_bytes, max_records and max_wait_ms must be 0). Top-level errors:
INVALID_REQUEST (no group id or member id; acknowledgements when opening a session), SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED. Per partition: UNKNOWN_TOPIC_ID,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_RECORD_STATE (an acknowledgement of a record the member does not hold).
GROUP READ is dispatch's shared check; TOPIC READ is checked here once the topic ids have names (a denied
topic's partitions answer TOPIC_AUTHORIZATION_FAILED, records and acknowledgements alike).
"""

from __future__ import annotations

from logway.gateway.share_sessions import SessionError
from logway.server.security.acl_decisions import may
from logway.server.security.authorizer import Operation
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 2


def acks_of(topics) -> dict:
    """The acknowledgement batches of a ShareFetch or ShareAcknowledge request, by (topic id, partition)."""
    out: dict = {}
    for t in topics:
        for p in t.partitions:
            batches = [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches]
            if batches:
                out.setdefault((t.topic_id, p.partition_index), []).extend(batches)
    return out


def denied_topic_ids(ctx, topic_ids) -> frozenset:
    """The ids of the topics the principal may not READ (KafkaApis checks TOPIC READ once it has the names)."""
    if ctx.authorizer is None:
        return frozenset()
    readable = may(ctx.acl, Operation.READ)
    names = {t.topic_id: t.name for t in ctx.broker.logs.topics.values()}
    return frozenset(i for i in set(topic_ids) if i in names and not readable(names[i]))


def error_response(ctx, code: ErrorCode, message: str | None = None):
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": code,
                                                       "error_message": message, "responses": [],
                                                       "acquisition_lock_timeout": 0})


def _renew_problem(request) -> str | None:
    """KafkaApis: a renew-only request (v2) fetches nothing."""
    if not getattr(request, "is_renew_ack", False):
        return None
    wrong = [name for name, value in (("maxBytes", request.max_bytes), ("minBytes", request.min_bytes),
                                      ("maxRecords", request.max_records),
                                      ("maxWaitMs", int(request.max_wait.total_seconds() * 1000))) if value != 0]
    return ", ".join(f"{name} must be set to 0" for name in wrong) + " if isRenewAck is true." if wrong else None


async def handle(ctx, request):
    if request.group_id is None:
        return error_response(ctx, ErrorCode.invalid_request, "Invalid group id in the request.")
    if not request.member_id:
        return error_response(ctx, ErrorCode.invalid_request, "Invalid member id in the request.")
    problem = _renew_problem(request)
    if problem:
        return error_response(ctx, ErrorCode.invalid_request, problem)
    shares = ctx.broker.shares
    partitions = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forget = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    renew = getattr(request, "is_renew_ack", False)
    try:
        answers = await shares.fetch(
            request.group_id, request.member_id, request.share_session_epoch, partitions, forget,
            acks_of(request.topics), max_wait_ms=0 if renew else int(request.max_wait.total_seconds() * 1000),
            max_bytes=0 if renew else request.max_bytes, max_records=0 if renew else request.max_records,
            denied=denied_topic_ids(ctx, [t.topic_id for t in request.topics]), connection=ctx.connection)
    except SessionError as exc:
        return error_response(ctx, exc.code, str(exc))
    node = {"leader_id": ctx.broker.node_id, "leader_epoch": 0}
    by_topic: dict = {}
    for (topic_id, partition), a in answers.items():
        by_topic.setdefault(topic_id, []).append({
            "partition_index": partition, "error_code": a.error, "acknowledge_error_code": a.ack_error or 0,
            "current_leader": node, "records": bytes(a.records),  # never null from v1 on
            "acquired_records": [{"first_offset": f, "last_offset": last, "delivery_count": c}
                                 for f, last, c in a.acquired]})
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0, "error_code": ErrorCode.none,
        "acquisition_lock_timeout": shares.limits(request.group_id).lock_duration_ms,
        "responses": [{"topic_id": t, "partitions": parts} for t, parts in by_topic.items()]})
