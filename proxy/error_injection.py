"""Errors made up for fault injection (proxy/filters/fault.py), sans-IO: a request refused with a chosen Kafka
error before it reaches the upstream, or the upstream's answer given that error afterwards.

Before the upstream (``refuse``): the shape of a refusal is the ACL rules' (server/security/request_acls.py
knows, for every API, how a refused topic, group, transactional id or the whole request is answered, entry by
entry). The request is decided under an Acl that refuses what the fault targets (every resource, or the topics
whose client-visible names match), and the authorization errors of that refusal become the chosen error: the
whole request answered, or the targeted topics taken out of what is forwarded and added to the upstream's
answer. A request the rules cannot answer so (a listing, topics named by id) returns None: the caller fails
the upstream's answer instead.

After the upstream (``fail_answer``): every entry of the answer for a targeted topic (by name, or by id through
the ids Metadata answers taught) gets the error in its deepest error codes (each partition), its records
dropped; an answer without topic entries gets it at the top. The upstream did the work: the client is told it
failed (an acknowledgement lost on its way back, which an idempotent producer's retry must not duplicate).
"""

from __future__ import annotations

import dataclasses
import typing
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any

from logway.server.security.acl_decisions import (
    CLUSTER_DENIED,
    GROUP_DENIED,
    TOPIC_DENIED,
    TXN_DENIED,
    Acl,
    Decision,
)
from logway.server.security.authorizer import Operation, ResourceType
from logway.server.security.request_acls import RULES, VERSION_CAPS, authorize_request
from logway.wire.errors import ErrorCode
from logway.wire.protocol import field_entity_of

Targets = Callable[[str], bool] | None
"""Whether a topic (by its upstream name) is targeted; None: every resource of the request is."""

_REFUSALS = frozenset({TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED})
_ERROR_FIELDS = ("error_code", "partition_error_code", "topic_config_error_code")
_TOPIC_FIELDS = ("name", "topic", "topic_id")
# The lists of a request or answer where topic entries are found (at any depth: OffsetFetch's groups).
_TOPIC_LISTS = frozenset({"topics", "topic_data", "responses", "results", "groups"})


class _Refusing(Acl):
    """An Acl that refuses what a fault targets."""

    def __init__(self, targets: Targets) -> None:
        super().__init__(None, "User:ANONYMOUS", "")
        self.targets = targets

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str | None,
                probe: bool = False) -> bool:
        if self.targets is None:
            return False
        return not (resource_type == ResourceType.TOPIC and name is not None and self.targets(name))

    def any_allowed(self, operation: Operation, resource_type: ResourceType) -> bool:
        return self.targets is not None


def refuse(api_key: int, version: int, request: Any, targets: Targets, error: ErrorCode) -> Decision | None:
    """The request with what ``targets`` names refused with ``error``: a Decision whose ``response`` is the
    whole answer, or whose ``request`` is what to forward and ``finish`` adds the refused entries to the
    upstream's answer. The request itself (nothing targeted) comes back unchanged; None when the ACL rules
    cannot refuse it entry by entry."""
    if api_key not in RULES or version > VERSION_CAPS.get(api_key, version):
        return None
    decision = authorize_request(api_key, version, request, _Refusing(targets))
    if decision.request is None:
        decision.response = _with_error(decision.response, error)
        return decision
    if decision.request is request:
        return decision if not decision.changes_response else None  # (a listing filtered: not a refusal)
    finish = decision.finish

    def with_error(response: Any) -> Any:
        return _new_entries_with_error(finish(response), response, error)
    decision.finish = with_error
    return decision


def _with_error(message: Any, error: ErrorCode) -> Any:
    """``message`` with every authorization error in it (at any depth) replaced by ``error``."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        if f.name in _ERROR_FIELDS and value in _REFUSALS:
            changes[f.name] = error
            if hasattr(message, "error_message"):
                changes["error_message"] = None
            if getattr(message, "records", b"") is None:
                changes["records"] = b""  # (the ACL rules' Fetch refusal: see _fail)
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            changes[f.name] = tuple(_with_error(entry, error) for entry in value)
    return dataclasses.replace(message, **changes) if changes else message


def _new_entries_with_error(finished: Any, upstream: Any, error: ErrorCode) -> Any:
    """``finished`` (the upstream's answer with the refused entries added) with the error in the added ones."""
    kept = {id(e) for f in dataclasses.fields(upstream) if isinstance(getattr(upstream, f.name), tuple)
            for e in getattr(upstream, f.name)}
    changes = {}
    for f in dataclasses.fields(finished):
        value = getattr(finished, f.name)
        if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            changes[f.name] = tuple(e if id(e) in kept else _with_error(e, error) for e in value)
    return dataclasses.replace(finished, **changes)


# --- after the upstream -------------------------------------------------------------------------------------


def fail_answer(response: Any, targets: Targets, error: ErrorCode,
                name_of: Callable[[uuid.UUID], str | None]) -> tuple[Any, bool]:
    """The upstream's ``response`` with ``error`` in what ``targets`` names (``name_of``: a topic id's name), and
    whether anything was failed."""
    if targets is None:
        failed = _fail(response, error)
        return failed, failed is not response
    out, hit = _fail_topics(response, targets, error, name_of)
    return out, hit


def _fail_topics(message: Any, targets: Callable[[str], bool], error: ErrorCode,
                 name_of: Callable[[uuid.UUID], str | None]) -> tuple[Any, bool]:
    """The targeted topic entries (at any depth: OffsetFetch's are in groups) failed."""
    changes, hit = {}, False
    for field, value in _topic_lists(message):
        entries = []
        for entry in value:
            name = topic_name(entry, name_of)
            if name is not None:
                targeted = targets(name)
                entries.append(_fail(entry, error) if targeted else entry)
            else:
                entry, targeted = _fail_topics(entry, targets, error, name_of)
                entries.append(entry)
            hit = hit or targeted
        changes[field] = tuple(entries)
    return (dataclasses.replace(message, **changes) if hit else message), hit


def _topic_lists(message: Any) -> list[tuple[str, tuple]]:
    """The lists of ``message`` that may hold topic entries, with their entries."""
    out = []
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        if f.name in _TOPIC_LISTS and isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            out.append((f.name, value))
    return out


def names_target(message: Any, targets: Callable[[str], bool], name_of: Callable[[uuid.UUID], str | None]) -> bool:
    """Whether a request names a targeted topic (at any depth)."""
    for _, entries in _topic_lists(message):
        for entry in entries:
            name = topic_name(entry, name_of)
            if targets(name) if name is not None else names_target(entry, targets, name_of):
                return True
    return False


def topic_name(entry: Any, name_of: Callable[[uuid.UUID], str | None]) -> str | None:
    """The upstream name of a topic entry ("" for an unknown id), None for an entry that is not a topic's."""
    if not any(hasattr(entry, f) for f in _TOPIC_FIELDS):
        return None
    name = getattr(entry, "name", None) or getattr(entry, "topic", None)
    topic_id = getattr(entry, "topic_id", None)
    if not name and isinstance(topic_id, uuid.UUID):
        name = name_of(topic_id)
    return name or ""


def _fail(message: Any, error: ErrorCode) -> Any:
    """``error`` in the deepest error codes of ``message`` (each partition of each topic), its records emptied;
    at its top when its type has no entries that carry errors."""
    nested = _nested_with_errors(type(message))
    if nested:
        return dataclasses.replace(message, **{name: _fail_all(getattr(message, name), error) for name in nested})
    changes: dict[str, Any] = {f: error for f in _ERROR_FIELDS[:2] if hasattr(message, f)}
    if not changes:
        return message
    if hasattr(message, "error_message"):
        changes["error_message"] = None
    if hasattr(message, "records"):
        # Kafka answers an errored partition with MemoryRecords.EMPTY, never null: librdkafka reads a null
        # Fetch record set as "invalid MessageSetSize -1", the Java share consumer closes on a null ShareFetch one.
        changes["records"] = b""
    return dataclasses.replace(message, **changes)


def _fail_all(entries: tuple | None, error: ErrorCode) -> tuple | None:
    return None if entries is None else tuple(_fail(e, error) for e in entries)


@cache
def _nested_with_errors(cls: type) -> tuple[str, ...]:
    """The list fields of a message type whose entries (or theirs) carry error codes."""
    out = []
    for name, hint in typing.get_type_hints(cls).items():
        is_list = any(typing.get_origin(h) is tuple for h in (hint, *typing.get_args(hint)))
        entity = field_entity_of(hint)
        if is_list and entity is not None and _carries_errors(entity):
            out.append(name)
    return tuple(out)


@cache
def _carries_errors(cls: type) -> bool:
    names = {f.name for f in dataclasses.fields(cls)}
    return bool(names & set(_ERROR_FIELDS[:2])) or bool(_nested_with_errors(cls))
