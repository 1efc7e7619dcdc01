"""CreateAcls (key 30), v1-v3 (Kafka 4 removed v0, KIP-896).

v1: resource_pattern_type (LITERAL, PREFIXED); v2: flexible; v3: the USER resource type. Kafka's
AclApis.handleCreateAcls and AclControlManager: CLUSTER ALTER is needed (else every creation gets
CLUSTER_AUTHORIZATION_FAILED); without an authorizer every creation gets SECURITY_DISABLED; an invalid binding
(ANY type or operation, MATCH/ANY pattern, empty name, a CLUSTER not named kafka-cluster, a principal without
"Type:") gets INVALID_REQUEST; the rest are added (an existing ACL is no error) and persisted before the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.server.security.acl_bindings import creation_binding
from logway.server.security.authorizer import AclError
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.create_acls.v3.request import CreateAclsRequest
    from kio.schema.create_acls.v3.response import CreateAclsResponse

    from logway.gateway.context import RequestContext

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3


def _answer(ctx: RequestContext, results: list[dict]) -> object:
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "results": results})


async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    bindings = [creation_binding(c) for c in request.creations]
    authorizer = ctx.authorizer
    if authorizer is None:
        return _answer(ctx, [{"error_code": ErrorCode.security_disabled, "error_message": "No Authorizer is configured."}
                             for _ in bindings])
    results = []
    for binding in bindings:
        try:
            binding.validate()
        except AclError as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
            continue
        authorizer.add(binding)
        results.append({"error_code": ErrorCode.none, "error_message": None})
    if any(r["error_code"] == ErrorCode.none for r in results):
        await ctx.realm.save_acls()
    return _answer(ctx, results)
