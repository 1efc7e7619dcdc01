"""DescribeAcls (key 29), v1-v3 (Kafka 4 removed v0, KIP-896).

v1: pattern_type_filter (PREFIXED, MATCH, ANY); v2: flexible; v3: the USER resource type. Kafka's
AclApis.handleDescribeAcls: CLUSTER DESCRIBE is needed (else CLUSTER_AUTHORIZATION_FAILED); without an
authorizer the answer is SECURITY_DISABLED; otherwise the ACLs the filter matches, grouped by resource pattern.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.server.security.acl_bindings import request_filter
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest
    from kio.schema.describe_acls.v3.response import DescribeAclsResponse

    from logway.gateway.context import RequestContext

API_KEY = 29
MIN_VERSION = 1
MAX_VERSION = 3


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None, resources: list) -> object:
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0, "error_code": error, "error_message": message, "resources": resources})


async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    acl_filter = request_filter(request)
    authorizer = ctx.authorizer
    if authorizer is None:
        return _answer(ctx, ErrorCode.security_disabled, "No Authorizer is configured on the broker", [])
    grouped: dict[tuple, list] = {}
    for acl in authorizer.matching(acl_filter):
        grouped.setdefault((acl.resource_type, acl.name, acl.pattern_type), []).append(
            {"principal": acl.principal, "host": acl.host, "operation": acl.operation, "permission_type": acl.permission})
    resources = [{"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": acls}
                 for (rt, name, pt), acls in grouped.items()]
    return _answer(ctx, ErrorCode.none, None, resources)
