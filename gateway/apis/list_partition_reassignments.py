"""ListPartitionReassignments (key 46), v0 (flexible): a one-broker cluster never has a reassignment in
progress, so the answer is always an empty list (for all partitions, named ones and unknown topics alike,
as Kafka's controller answers). Needs DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
    from kio.schema.list_partition_reassignments.v0.response import ListPartitionReassignmentsResponse

    from logway.gateway.context import RequestContext

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    return build(response_type(API_KEY, 0), {"throttle_time": 0, "error_code": ErrorCode.none,
                                             "error_message": None, "topics": []})
