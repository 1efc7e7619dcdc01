"""DeleteAcls (key 31), v1-v3 (Kafka 4 removed v0, KIP-896).

v1: pattern_type_filter; v2: flexible; v3: the USER resource type. Kafka's AclApis.handleDeleteAcls: CLUSTER
ALTER is needed (else every filter gets CLUSTER_AUTHORIZATION_FAILED); without an authorizer every filter gets
SECURITY_DISABLED; otherwise each filter deletes and lists the ACLs it matches (MATCH included, as Kafka's
AclControlManager.deleteAcls does), and the change is persisted before the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.server.security.acl_bindings import binding_fields, request_filter
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.delete_acls.v3.request import DeleteAclsRequest
    from kio.schema.delete_acls.v3.response import DeleteAclsResponse

    from logway.gateway.context import RequestContext

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3


def _answer(ctx: RequestContext, results: list[dict]) -> object:
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "filter_results": results})


def _failed(filters, error: ErrorCode, message: str | None) -> list[dict]:
    return [{"error_code": error, "error_message": message, "matching_acls": []} for _ in filters]


async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    filters = [request_filter(f) for f in request.filters]
    authorizer = ctx.authorizer
    if authorizer is None:
        return _answer(ctx, _failed(filters, ErrorCode.security_disabled, "No Authorizer is configured."))
    results = []
    deleted = False
    for acl_filter in filters:
        matched = authorizer.matching(acl_filter)
        for acl in matched:
            authorizer.remove(acl)
        deleted = deleted or bool(matched)
        results.append({"error_code": ErrorCode.none, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None, **binding_fields(acl)} for acl in matched]})
    if deleted:
        await ctx.realm.save_acls()
    return _answer(ctx, results)
