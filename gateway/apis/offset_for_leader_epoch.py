"""OffsetForLeaderEpoch (key 23), v2-v4.

Consumers (the Java client validating its position after a metadata change, KIP-320) ask for the end
offset of a leader epoch. Every partition here has had one leader epoch, 0, since its creation: epoch 0
ends at the log end offset; a later epoch is unknown (UNDEFINED epoch -1 and offset -1, Kafka's answer);
a current_leader_epoch above ours is UNKNOWN_LEADER_EPOCH, below ours FENCED_LEADER_EPOCH.
v2: current_leader_epoch; v3: replica_id; v4: flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.storage.errors import UnknownTopicOrPartition
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest
    from kio.schema.offset_for_leader_epoch.v4.response import OffsetForLeaderEpochResponse

    from logway.gateway.context import RequestContext

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4

LEADER_EPOCH = 0


def _answer(plog, p) -> dict:
    out = {"partition": p.partition, "error_code": ErrorCode.none, "leader_epoch": -1, "end_offset": -1}
    if p.current_leader_epoch > LEADER_EPOCH:
        out["error_code"] = ErrorCode.unknown_leader_epoch
    elif 0 <= p.current_leader_epoch < LEADER_EPOCH:
        out["error_code"] = ErrorCode.fenced_leader_epoch
    elif p.leader_epoch <= LEADER_EPOCH:
        out.update(leader_epoch=LEADER_EPOCH, end_offset=plog.log_end_offset)
    return out


async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            try:
                partitions.append(_answer(ctx.broker.partition(t.topic, p.partition), p))
            except UnknownTopicOrPartition as exc:
                partitions.append({"partition": p.partition, "error_code": exc.error_code,
                                   "leader_epoch": -1, "end_offset": -1})
        topics.append({"topic": t.topic, "partitions": partitions})
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "topics": topics})
