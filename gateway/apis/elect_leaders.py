"""ElectLeaders (key 43), v0-v2, with the answers of a one-broker cluster.

Every partition already has its only replica, this broker, as leader: a named partition gets
ELECTION_NOT_NEEDED, an unknown one UNKNOWN_TOPIC_OR_PARTITION ("No such partition as t-7" / "No such topic
as t", the controller's messages). A null partition list means all partitions: Kafka leaves out those that
need no election, so each topic is listed with no partition results. v1: election_type (0 preferred, 1
unclean; another value is INVALID_REQUEST for the request and each partition) and a top-level error code;
v2: flexible. Needs ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
    from kio.schema.elect_leaders.v2.response import ElectLeadersResponse

    from logway.gateway.context import RequestContext

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2

PREFERRED, UNCLEAN = 0, 1


def _partition_result(broker, topic: str, partition: int, error: int | None, message: str | None) -> dict:
    if error is None:
        t = broker.logs.topics.get(topic)
        if t is None:
            error, message = ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}"
        elif not 0 <= partition < len(t.partitions):
            error, message = ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-{partition}"
        else:
            error, message = ErrorCode.election_not_needed, "Leader election not needed for topic partition."
    return {"partition_id": partition, "error_code": error, "error_message": message}


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    broker = ctx.broker
    election_type = getattr(request, "election_type", PREFERRED)
    top, error, message = ErrorCode.none, None, None
    if election_type not in (PREFERRED, UNCLEAN):
        top = error = ErrorCode.invalid_request
        message = f"Unknown election type {election_type}"
    if request.topic_partitions is None:
        results = [{"topic": name, "partition_result": []} for name in sorted(broker.logs.topics)] if error is None else []
    else:
        results = [{"topic": t.topic, "partition_result": [_partition_result(broker, t.topic, p, error, message)
                                                           for p in t.partitions]}
                   for t in request.topic_partitions]
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": top,
                                                       "replica_election_results": results})
