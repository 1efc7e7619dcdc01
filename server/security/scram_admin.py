"""Kafka's SCRAM user admin APIs over a realm's credential store, sans-IO: DescribeUserScramCredentials (key 50)
and AlterUserScramCredentials (key 51), answered by the broker for its realm and by the proxy for a virtual
cluster's own (each virtual cluster's users are its own).

DescribeUserScramCredentials:
users null or empty: every user with a SCRAM credential; else each named user once; both in java.util.HashMap order, as
Kafka 4 answers. Kafka's errors and messages: a user without credentials (the empty name included)
RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE. Each user lists its mechanisms (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) and iterations; never
salts or keys. Needs DESCRIBE on the cluster when an authorizer is configured (CLUSTER_AUTHORIZATION_FAILED).

AlterUserScramCredentials:
Upsertions carry the client-salted password (salt, PBKDF2 output, iterations); the broker stores only the
StoredKey and ServerKey derived from it. Deletions name (user, mechanism). One result per user, with Kafka's
errors and messages: an empty name UNACCEPTABLE_CREDENTIAL "Username must not be empty", an unknown
mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside 4096-16384 UNACCEPTABLE_CREDENTIAL ("Too few/many
iterations"), a (user, mechanism) named twice DUPLICATE_RESOURCE, deleting a credential that does not exist
RESOURCE_NOT_FOUND; a user with any error is left unchanged. Valid changes are written in one atomic write.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from logway.server.security.credentials import CredentialStore
from logway.server.security.scram import MAX_ITERATIONS, MECHANISM_IDS, MIN_ITERATIONS, credential_from_salted_password
from logway.wire.errors import ErrorCode
from logway.wire.java_hash import java_hash_map_order
from logway.wire.protocol import build, response_type

DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51

_IDS = {name: i for i, name in MECHANISM_IDS.items()}


def _described(user: str, mechanisms: dict) -> dict:
    infos = [{"mechanism": _IDS[m], "iterations": c.iterations} for m, c in sorted(mechanisms.items(), key=lambda x: _IDS[x[0]])]
    return {"user": user, "error_code": ErrorCode.none, "error_message": None, "credential_infos": infos}


def describe_users(store: CredentialStore, version: int, request: Any) -> Any:
    """The DescribeUserScramCredentials response for ``request``."""
    users = store.users()
    names = [u.name for u in request.users or ()]
    if not names:
        results = [_described(user, users[user]) for user in java_hash_map_order(sorted(users))]
    else:
        counts = Counter(names)
        results = []
        for name in java_hash_map_order(names):  # Kafka 4's ScramImage.describe answers from a HashMap
            if counts[name] > 1:
                results.append({"user": name, "error_code": ErrorCode.duplicate_resource, "error_message":
                                f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"})
            elif name not in users:
                results.append({"user": name, "error_code": ErrorCode.resource_not_found, "error_message":
                                f"Attempt to describe a user credential that does not exist: {name}"})
            else:
                results.append(_described(name, users[name]))
    return build(response_type(DESCRIBE_USER_SCRAM_CREDENTIALS, version),
                 {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": results})


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


def alter_users(store: CredentialStore, version: int, request: Any) -> Any:
    """Apply ``request``'s valid changes in one write; the AlterUserScramCredentials response."""
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
    return build(response_type(ALTER_USER_SCRAM_CREDENTIALS, version), {"throttle_time": 0, "results": results})
