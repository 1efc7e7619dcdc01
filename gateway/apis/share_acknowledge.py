"""ShareAcknowledge (key 79), v1-v2: acknowledge records a share consumer holds, outside a ShareFetch.

ACCEPT (1), RELEASE (2, delivered again, until group.share.delivery.count.limit), REJECT (3), GAP (0: an offset
with no record) and, v2, RENEW (4: keep the acquisition lock, KIP-1222). Each partition's error_code is its
acknowledgement's (INVALID_RECORD_STATE for a record the member does not hold). The session's epoch must be the
current one (-1 closes it, releasing what the member still holds). The answer goes out once the
acknowledgements are written to __share_group_state. GROUP READ is dispatch's shared check, TOPIC READ
ShareFetch's (denied_topic_ids).
"""

from __future__ import annotations

from logway.gateway.apis.share_fetch import acks_of, denied_topic_ids
from logway.gateway.share_sessions import SessionError
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2


def _error(ctx, code: ErrorCode, message: str | None = None):
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": code,
                                                       "error_message": message, "responses": [],
                                                       "acquisition_lock_timeout": 0})


async def handle(ctx, request):
    if request.group_id is None:
        return _error(ctx, ErrorCode.invalid_request, "Invalid group id in the request.")
    if not request.member_id:
        return _error(ctx, ErrorCode.invalid_request, "Invalid member id in the request.")
    shares = ctx.broker.shares
    try:
        answers = await shares.acknowledge(request.group_id, request.member_id, request.share_session_epoch,
                                           acks_of(request.topics),
                                           denied_topic_ids(ctx, [t.topic_id for t in request.topics]))
    except SessionError as exc:
        return _error(ctx, exc.code, str(exc))
    node = {"leader_id": ctx.broker.node_id, "leader_epoch": 0}
    by_topic: dict = {}
    for (topic_id, partition), a in answers.items():
        by_topic.setdefault(topic_id, []).append({"partition_index": partition, "error_code": a.ack_error or 0,
                                                  "current_leader": node})
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0, "error_code": ErrorCode.none,
        "acquisition_lock_timeout": shares.limits(request.group_id).lock_duration_ms,
        "responses": [{"topic_id": t, "partitions": parts} for t, parts in by_topic.items()]})
