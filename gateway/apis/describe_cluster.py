"""DescribeCluster (key 60), v0-v1 (KIP-700). v1: endpoint_type (1 = brokers; 2 = controllers is
refused with UNSUPPORTED_ENDPOINT_TYPE, as a broker does)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.server.security.authorizer import CLUSTER_NAME, ResourceType
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
    from kio.schema.describe_cluster.v1.response import DescribeClusterResponse

    from logway.gateway.context import RequestContext

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 1

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
BROKERS_ENDPOINT = 1


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    adv = ctx.advertised
    endpoint_type = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
    error = ErrorCode.none if endpoint_type == BROKERS_ENDPOINT else ErrorCode.unsupported_endpoint_type
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if error == ErrorCode.none and request.include_cluster_authorized_operations:
        # AuthHelper.computeDescribeClusterResponse (under ACLs request_acls gives the principal's operations).
        operations = ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0, "error_code": error, "error_message": None, "endpoint_type": endpoint_type,
        "cluster_id": broker.cluster_id, "controller_id": broker.node_id,
        "brokers": [{"broker_id": broker.node_id, "host": adv.host or "127.0.0.1", "port": adv.port, "rack": None}]
        if error == ErrorCode.none else [],
        "cluster_authorized_operations": operations,
    })
