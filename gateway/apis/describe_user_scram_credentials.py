"""DescribeUserScramCredentials (key 50), v0 (flexible).

users null or empty: every user with a SCRAM credential; else each named user once; both sorted by name, as
Kafka 4 answers. Kafka's errors and messages: a user without credentials (the empty name included)
RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE. Each user lists its mechanisms (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) and iterations; never
salts or keys. Needs DESCRIBE on the cluster when an authorizer is configured (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from logway.server.security.scram import MECHANISM_IDS
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest
    from kio.schema.describe_user_scram_credentials.v0.response import DescribeUserScramCredentialsResponse

    from logway.gateway.context import RequestContext

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0

_IDS = {name: i for i, name in MECHANISM_IDS.items()}


def _described(user: str, mechanisms: dict) -> dict:
    infos = [{"mechanism": _IDS[m], "iterations": c.iterations} for m, c in sorted(mechanisms.items(), key=lambda x: _IDS[x[0]])]
    return {"user": user, "error_code": ErrorCode.none, "error_message": None, "credential_infos": infos}


async def handle(ctx: RequestContext,
                 request: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    users = ctx.realm.credentials.users()
    names = [u.name for u in request.users or ()]
    if not names:
        results = [_described(user, mechs) for user, mechs in sorted(users.items())]
    else:
        counts = Counter(names)
        results = []
        for name in sorted(set(names)):  # Kafka 4 answers in user-name order
            if counts[name] > 1:
                results.append({"user": name, "error_code": ErrorCode.duplicate_resource, "error_message":
                                f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"})
            elif name not in users:
                results.append({"user": name, "error_code": ErrorCode.resource_not_found, "error_message":
                                f"Attempt to describe a user credential that does not exist: {name}"})
            else:
                results.append(_described(name, users[name]))
    return build(response_type(API_KEY, ctx.version),
                 {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": results})
