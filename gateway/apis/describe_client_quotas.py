"""DescribeClientQuotas (key 48), v0-v1 (v1: flexible).

The quotas of the entities the filter matches (server/quotas.py's QuotaFilter, Kafka's ClientQuotasImage.describe):
each component names an entity type (user, client-id, ip) and a match type (0: that exact name, 1: the
<default> entity, 2: any name); ``strict`` leaves out entities with types the filter does not name. A filter
Kafka refuses gets its top-level error (INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown entity type) with
its message and null entries. Needs CLUSTER DESCRIBE_CONFIGS under ACLs (request_acls).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.server.quota_entities import QuotaFilter
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest
    from kio.schema.describe_client_quotas.v1.response import DescribeClientQuotasResponse

    from logway.gateway.context import RequestContext

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    components = [(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        quota_filter = QuotaFilter.of(components, request.strict)
    except KafkaError as exc:
        return build(response_type(API_KEY, ctx.version), {
            "error_code": exc.error_code, "error_message": str(exc), "entries": None})
    entries = [{"entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
                "values": [{"key": key, "value": value} for key, value in values.items()]}
               for entity, values in ctx.broker.quotas.describe(quota_filter)]
    return build(response_type(API_KEY, ctx.version), {"error_code": ErrorCode.none, "entries": entries})
