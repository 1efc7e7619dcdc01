"""ACLs at the proxy: the gateway's authorizer (Kafka's StandardAuthorizer semantics) on the principal the
client authenticated as at the proxy, for every API the proxy forwards under ACLs, with Kafka's rules and
error codes per topic, group, transactional id and partition (``server/security/request_acls.py``).

What the principal may not use never reaches the upstream: a request naming only denied resources is
answered by the proxy; one naming some is forwarded without them, and their errors are added to the
upstream's answer. Listings (Metadata, ListGroups, ListTransactions, OffsetFetch of all topics, ...) show only
what the principal may describe, and *_authorized_operations are the principal's, not the proxy's user's.
APIs without a rule are not advertised, and Produce, Fetch, OffsetCommit and OffsetFetch are advertised up
to the last versions that name topics (``VERSION_CAPS``). A response is decoded only when the decision on its
request changes it (``needs_response``): Produce and Fetch responses only when a topic was denied. The checks
a principal fails go to the audit log of the connection's chain (proxy/filters/audit.py), if it has one.
"""

from __future__ import annotations

from typing import Any

from logway.proxy.filters.audit import audit_client
from logway.proxy.filters.base import Answer, ClientInfo, Filter, every_version
from logway.server.audit import NO_AUDIT, Audit, denials
from logway.server.security.authorizer import Authorizer
from logway.server.security.request_acls import (
    RULES,
    UNRESTRICTED,
    VERSION_CAPS,
    Acl,
    Decision,
    authorize_request,
)
from logway.server.stats import request_label

__all__ = ["AclFilter", "RULES", "VERSION_CAPS", "acl_filter_factory"]
PRODUCE = 0


class AclFilter(Filter):
    """One client connection's ACL checks, in the authenticated principal's name."""

    requests = responses = every_version(frozenset(RULES) - UNRESTRICTED)  # (telemetry: every principal's)

    def __init__(self, authorizer: Authorizer, client: ClientInfo, audit: Audit = NO_AUDIT) -> None:
        self.authorizer = authorizer
        self.client = client
        self.audit = audit  # where the checks it fails are recorded
        # How to finish each forwarded request's response, by the id of the request object forwarded
        # (requests are pipelined; the proxy keeps that object until its response comes).
        self._decisions: dict[int, Decision] = {}

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        acl = Acl(self.authorizer, client.principal, client.host)
        decision = authorize_request(api_key, api_version, request, acl)
        denied = acl.take_denials()
        if denied and self.audit.enabled:
            denials(self.audit, audit_client(client), request_label(api_key), denied)
        if decision.request is None:
            raise Answer(decision.response)
        if decision.changes_response and not (api_key == PRODUCE and decision.request.acks == 0):
            self._decisions[id(decision.request)] = decision
        return decision.request

    def needs_response(self, api_key: int, api_version: int, request: Any) -> bool:
        """Whether the response must be finished (denied entries to add, lists to filter)."""
        return id(request) in self._decisions

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        decision = self._decisions.pop(id(request), None)
        return response if decision is None else decision.finish(response)


def acl_filter_factory(authorizer: Authorizer, audit: Audit = NO_AUDIT):
    """A filter factory for the chain: one AclFilter per client connection, its denials recorded in ``audit``."""
    return lambda client: AclFilter(authorizer, client, audit)
