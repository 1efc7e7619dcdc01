"""AlterUserScramCredentials (key 51), v0 (flexible): the broker's realm's SCRAM users, changed by
server/security/scram_admin.py (which says what Kafka answers). Needs ALTER on the cluster when an authorizer
is configured (CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.server.security.scram_admin import ALTER_USER_SCRAM_CREDENTIALS, alter_users

if TYPE_CHECKING:
    from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
    from kio.schema.alter_user_scram_credentials.v0.response import AlterUserScramCredentialsResponse

    from logway.gateway.context import RequestContext

API_KEY = ALTER_USER_SCRAM_CREDENTIALS
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    return alter_users(ctx.realm.credentials, ctx.version, request)
