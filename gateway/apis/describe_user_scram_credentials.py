"""DescribeUserScramCredentials (key 50), v0 (flexible): the broker's realm's SCRAM users, answered by
server/security/scram_admin.py (which says what Kafka answers). Needs DESCRIBE on the cluster when an
authorizer is configured (CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.server.security.scram_admin import DESCRIBE_USER_SCRAM_CREDENTIALS, describe_users

if TYPE_CHECKING:
    from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest
    from kio.schema.describe_user_scram_credentials.v0.response import DescribeUserScramCredentialsResponse

    from logway.gateway.context import RequestContext

API_KEY = DESCRIBE_USER_SCRAM_CREDENTIALS
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext,
                 request: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    return describe_users(ctx.realm.credentials, ctx.version, request)
