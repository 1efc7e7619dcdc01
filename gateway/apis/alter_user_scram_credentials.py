"""AlterUserScramCredentials (key 51), v0 (flexible).

Upsertions carry the client-salted password (salt, PBKDF2 output, iterations); the broker stores only the
StoredKey and ServerKey derived from it. Deletions name (user, mechanism). One result per user, with Kafka's
errors and messages: an empty name UNACCEPTABLE_CREDENTIAL "Username must not be empty", an unknown
mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside 4096-16384 UNACCEPTABLE_CREDENTIAL ("Too few/many
iterations"), a (user, mechanism) named twice DUPLICATE_RESOURCE, deleting a credential that does not exist
RESOURCE_NOT_FOUND; a user with any error is left unchanged. Valid changes are written in one atomic write.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from logway.server.security.scram import MAX_ITERATIONS, MECHANISM_IDS, MIN_ITERATIONS, credential_from_salted_password
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
    from kio.schema.alter_user_scram_credentials.v0.response import AlterUserScramCredentialsResponse

    from logway.gateway.context import RequestContext

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0


def _invalid(name: str, mechanism: int, iterations: int | None) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISM_IDS:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    return None


async def handle(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    store = ctx.realm.credentials
    errors: dict[str, tuple[ErrorCode, str]] = {}
    changes = [(u.name, u.mechanism, u) for u in request.upsertions] + [(d.name, d.mechanism, None) for d in request.deletions]
    for name, mechanism, upsertion in changes:
        problem = _invalid(name, mechanism, upsertion.iterations if upsertion is not None else None)
        if problem is not None:
            errors.setdefault(name, problem)
    pairs = Counter((name, mechanism) for name, mechanism, _ in changes if name not in errors)
    for (name, _), count in pairs.items():
        if count > 1:
            errors[name] = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")
    users = store.users()
    for d in request.deletions:
        if d.name not in errors and MECHANISM_IDS[d.mechanism] not in users.get(d.name, {}):
            errors[d.name] = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
    upserts = {(u.name, MECHANISM_IDS[u.mechanism]): credential_from_salted_password(
                   MECHANISM_IDS[u.mechanism], bytes(u.salt), bytes(u.salted_password), u.iterations)
               for u in request.upsertions if u.name not in errors}
    deletions = {(d.name, MECHANISM_IDS[d.mechanism]) for d in request.deletions if d.name not in errors}
    if upserts or deletions:
        store.alter(upserts, deletions)
    results = [{"user": name, "error_code": code, "error_message": message} for name, (code, message) in errors.items()]
    done = dict.fromkeys(name for name, _, _ in changes if name not in errors)
    results += [{"user": name, "error_code": ErrorCode.none, "error_message": None} for name in done]
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "results": results})
