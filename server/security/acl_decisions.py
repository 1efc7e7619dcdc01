"""The shape of an ACL decision and the ways Kafka answers a denial, for the per-API rules of
request_acls.py: a principal's view of the authorizer (Acl), what to serve and how to finish the response
(Decision), and the common answers (entries split into served and refused, every partition refused, one error
for the whole request, listings filtered, *_authorized_operations recomputed). Sans-IO: kio messages in and out.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from logway.server.security.authorizer import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    Authorizer,
    Operation,
    ResourceType,
    operations_bitfield,
)
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, field_entity, response_type

TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
OPERATIONS_OMITTED = -(2**31)  # Kafka's AUTHORIZED_OPERATIONS_OMITTED


class LocalTopics(Protocol):
    """The topics of a server that answers requests itself (the broker), for the rules that need them."""

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id, None if there is none."""

    def has_partition(self, name: str, index: int) -> bool:
        """Whether the topic exists with that partition."""

    @property
    def auto_create(self) -> bool:
        """Whether Metadata creates topics it is asked for (auto.create.topics.enable)."""


Denial = tuple[Operation, ResourceType, "str | None"]
"""An ACL check a principal failed: the operation, the resource type and name (None: named by id)."""


class Acl:
    """One principal's view of the authorizer (``allowed`` is Kafka's AuthHelper.authorize), and the topics of
    the server answering when that is this process (``local``; None at a proxy).

    While a request is decided, the checks it fails are recorded for the audit log (``take_denials``), as
    Kafka's authorizer logs the checks made with logIfDenied: a ``probe`` (a cluster-wide check tried before
    the resource's own, auto-creation's CREATE) is not a denial. Checks made after ``take_denials`` (when a
    response is finished: listings filtered, configs hidden) are not recorded, as Kafka's filtering is not."""

    def __init__(self, authorizer: Authorizer | None, principal: str, host: str,
                 local: LocalTopics | None = None) -> None:
        self.authorizer, self.principal, self.host, self.local = authorizer, principal, host, local
        self.denials: dict[Denial, None] | None = {}  # in the order found, each once

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str | None,
                probe: bool = False) -> bool:
        """May the principal do ``operation`` on the resource? Always without an authorizer."""
        if self.authorizer is None:
            return True
        if name is None:  # a resource named by id only: nothing to check an ACL against
            allowed = self.principal in self.authorizer.super_users
        else:
            allowed = self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)
        if not allowed and not probe:
            self.deny(operation, resource_type, name)
        return allowed

    def cluster(self, operation: Operation, probe: bool = False) -> bool:
        """May the principal do ``operation`` on the cluster?"""
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME, probe)

    def deny(self, operation: Operation, resource_type: ResourceType, name: str | None) -> None:
        """Record a denial (while the request is being decided)."""
        if self.denials is not None:
            self.denials[(operation, resource_type, name)] = None

    def take_denials(self) -> list[Denial]:
        """The checks the request failed; later checks are not recorded."""
        denials, self.denials = self.denials, None
        return list(denials or ())

    def any_allowed(self, operation: Operation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType."""
        return self.authorizer is None or self.authorizer.any_allowed(self.principal, self.host, operation,
                                                                      resource_type)

    def operations(self, resource_type: ResourceType, name: str) -> int:
        """Kafka's AuthHelper.authorizedOperations bitfield."""
        if self.authorizer is None:
            return operations_bitfield(SUPPORTED_OPERATIONS[resource_type])
        return self.authorizer.authorized_operations(self.principal, self.host, resource_type, name)


def keep(response: Any) -> Any:
    """The finish of a response that passes unchanged."""
    return response


@dataclass
class Decision:
    """What to serve of a request (``request``: itself, a copy without what the principal may not use, or None:
    then ``response`` is the whole answer) and how to finish the served request's response (``finish``)."""

    request: Any | None
    response: Any | None = None
    finish: Callable[[Any], Any] = keep
    # Metadata: named topics the principal may describe but not create, which must not be auto-created (a
    # local server leaves them out of auto-creation; for a proxy the rule turns auto-creation off instead).
    uncreatable: frozenset[str] = frozenset()
    # A listing the server pages (DescribeTopicPartitions): the topics the principal may see. A local server
    # pages only those; a proxy's finish can only filter the upstream's page.
    visible: Callable[[str], bool] | None = None

    @property
    def changes_response(self) -> bool:
        """Whether the response needs finishing (a proxy decodes it only then)."""
        return self.finish is not keep


AS_IS = object()  # a rule returns Decision(AS_IS) when the request and its response pass unchanged

# --- building responses (wire.protocol.build gives the fields left out Kafka's defaults) ---------------


def answer(api_key: int, version: int, data: dict[str, Any]) -> Decision:
    """A request answered wholly with ``data`` (the error code and the entries it names)."""
    return Decision(None, build(response_type(api_key, version), {"throttle_time": 0, **data}))


def append(field: str, entries: list[dict], version_cls: type) -> Callable[[Any], Any]:
    """A finish adding ``entries`` (the refused ones) to the response's list ``field``."""
    entity = field_entity(version_cls, field)

    def finish(response: Any) -> Any:
        extra = tuple(build(entity, e) for e in entries)
        return dataclasses.replace(response, **{field: getattr(response, field) + extra})
    return finish


def chain(*steps: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """One finish running ``steps`` in order (None steps skipped)."""
    steps = tuple(s for s in steps if s is not None)
    if not steps:
        return keep

    def finish(response: Any) -> Any:
        for step in steps:
            response = step(response)
        return response
    return finish


# --- the common shapes ------------------------------------------------------------------------------------


def split(api_key: int, version: int, request: Any, field: str, allowed: Callable[[Any], bool],
           denied_entry: Callable[[Any], dict], response_field: str, all_denied: dict | None = None) -> Decision:
    """Entries of ``request.<field>`` the principal may use are served; the others get ``denied_entry`` in the
    response's ``response_field`` (the proxy answers alone when none is left)."""
    entries = getattr(request, field) or ()
    kept = [e for e in entries if allowed(e)]
    if len(kept) == len(entries):
        return Decision(request)
    denied = [denied_entry(e) for e in entries if not allowed(e)]
    if not kept:
        return answer(api_key, version, {**(all_denied or {}), response_field: denied})
    cls = response_type(api_key, version)
    return Decision(dataclasses.replace(request, **{field: tuple(kept)}), finish=append(response_field, denied, cls))


def may(acl: Acl, operation: Operation, probe: bool = False) -> Callable[[str | None], bool]:
    """Whether the principal may do ``operation`` on a topic, by name."""
    return lambda name: acl.allowed(operation, ResourceType.TOPIC, name, probe)


def topic_split(api_key: int, version: int, request: Any, allowed: Callable[[str | None], bool],
                 field: str = "topics", name: str = "name", parts: str = "partitions", index: str = "partition_index",
                 response_field: str = "topics", entry_name: str = "name", entry_parts: str = "partitions",
                 entry_index: str = "partition_index", error: ErrorCode = TOPIC_DENIED, **partition: Any) -> Decision:
    """Per topic: served if ``allowed`` its name, else each of its partitions gets ``error``."""

    def denied(topic: Any) -> dict:
        indexes = [p if isinstance(p, int) else getattr(p, index) for p in getattr(topic, parts)]
        return {entry_name: getattr(topic, name), entry_parts: [
            {entry_index: i, "error_code": error, **partition} for i in indexes]}
    return split(api_key, version, request, field, lambda t: allowed(getattr(t, name)), denied, response_field)


def all_partitions(request: Any, error: ErrorCode, field: str = "topics", name: str = "name",
                    parts: str = "partitions", index: str = "partition_index", entry_name: str = "name",
                    entry_parts: str = "partitions", entry_index: str = "partition_index", **partition: Any) -> list:
    """Every partition of the request with ``error`` (a whole request refused per partition)."""
    return [{entry_name: getattr(t, name), entry_parts: [
        {entry_index: p if isinstance(p, int) else getattr(p, index), "error_code": error, **partition}
        for p in getattr(t, parts)]} for t in getattr(request, field) or ()]


def single(api_key: int, version: int, allowed: bool, error: ErrorCode, **data: Any) -> Decision:
    """Served as it is if ``allowed``, else answered with ``error`` at the top (and ``data``)."""
    return Decision(AS_IS) if allowed else answer(api_key, version, {"error_code": error, **data})


def cluster(operation: Operation, **data: Any) -> Callable:
    """The rule of an API that needs ``operation`` on the cluster (else CLUSTER_AUTHORIZATION_FAILED)."""
    def rule(api_key: int, version: int, request: Any, acl: Acl) -> Decision:
        return single(api_key, version, acl.cluster(operation), CLUSTER_DENIED, **data)
    return rule


def group(operation: Operation, field: str = "group_id", **data: Any) -> Callable:
    """The rule of an API that needs ``operation`` on the group it names (else GROUP_AUTHORIZATION_FAILED)."""
    def rule(api_key: int, version: int, request: Any, acl: Acl) -> Decision:
        allowed = acl.allowed(operation, ResourceType.GROUP, getattr(request, field))
        return single(api_key, version, allowed, GROUP_DENIED, **data)
    return rule


def filter_list(field: str, keep: Callable[[Any], bool]) -> Callable[[Any], Any]:
    """A finish keeping only the entries of the response's list ``field`` that ``keep`` accepts (listings)."""
    def finish(response: Any) -> Any:
        entries = getattr(response, field)
        kept = tuple(e for e in entries if keep(e))
        return response if len(kept) == len(entries) else dataclasses.replace(response, **{field: kept})
    return finish


def set_operations(field: str, resource_type: ResourceType, name: str, ops_field: str,
                    acl: Acl) -> Callable[[Any], Any]:
    """*_authorized_operations of the served entries recomputed for the principal (the upstream computed them
    for the proxy's own user)."""
    def finish(response: Any) -> Any:
        return dataclasses.replace(response, **{field: tuple(
            dataclasses.replace(e, **{ops_field: acl.operations(resource_type, getattr(e, name))})
            if getattr(e, "error_code", 0) == 0 else e for e in getattr(response, field))})
    return finish
