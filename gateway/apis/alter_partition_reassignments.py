"""AlterPartitionReassignments (key 45), v0-v1, with the answers of a one-broker cluster.

The only valid target is the replica list it already has ([this node]): accepted with nothing to move.
Otherwise INVALID_REPLICA_ASSIGNMENT with the controller's message (an empty list, a broker that is not
registered, a broker named twice: ReplicationControlManager.validateManualPartitionAssignment);
a null list cancels a reassignment, and there is none: NO_REASSIGNMENT_IN_PROGRESS. Unknown topics and
partitions: UNKNOWN_TOPIC_OR_PARTITION. v1: allow_replication_factor_change (KIP-860), echoed; the replication
factor cannot change here anyway. Needs ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.alter_partition_reassignments.v1.request import AlterPartitionReassignmentsRequest
    from kio.schema.alter_partition_reassignments.v1.response import AlterPartitionReassignmentsResponse

    from logway.gateway.context import RequestContext

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1


def _check(broker, topic: str, partition: int, replicas) -> tuple[int, str | None]:
    t = broker.logs.topics.get(topic)
    if t is None:
        return ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}."
    if not 0 <= partition < len(t.partitions):
        return ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic}:{partition}."
    if replicas is None:
        return ErrorCode.no_reassignment_in_progress, None
    if not replicas:
        return ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(replicas):
        if broker_id != broker.node_id:
            return (ErrorCode.invalid_replica_assignment,
                    f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.")
        if broker_id == previous:
            return (ErrorCode.invalid_replica_assignment,
                    f"The manual partition assignment includes the broker {broker_id} more than once.")
        previous = broker_id
    return ErrorCode.none, None


async def handle(ctx: RequestContext,
                 request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    responses = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            error, message = _check(ctx.broker, t.name, p.partition_index, p.replicas)
            partitions.append({"partition_index": p.partition_index, "error_code": error, "error_message": message})
        responses.append({"name": t.name, "partitions": partitions})
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0, "allow_replication_factor_change": getattr(request, "allow_replication_factor_change", True),
        "error_code": ErrorCode.none, "error_message": None, "responses": responses})
