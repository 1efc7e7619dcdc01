"""ACLs at the proxy: the gateway's authorizer (Kafka's StandardAuthorizer semantics) on the principal the
client authenticated as at the proxy, for every API the proxy forwards under ACLs, with Kafka's rules and
error codes per topic, group, transactional id and partition (``server/security/request_acls.py``).

What the principal may not use never reaches the upstream: a request naming only denied resources is
answered by the proxy; one naming some is forwarded without them, and their errors are added to the
upstream's answer. Listings (Metadata, ListGroups, ListTransactions, OffsetFetch of all topics, ...) show only
what the principal may describe, and *_authorized_operations are the principal's, not the proxy's user's.
APIs without a rule are not advertised, and Produce, Fetch, OffsetCommit and OffsetFetch are advertised up
to the last versions that name topics (``VERSION_CAPS``). Produce and Fetch responses are decoded only when
a topic was denied.
"""

from __future__ import annotations

from typing import Any

from logway.proxy.filters.base import Answer, ClientInfo
from logway.server.security.authorizer import Authorizer
from logway.server.security.request_acls import (
    RULES,
    UNRESTRICTED,
    VERSION_CAPS,
    Acl,
    Decision,
    authorize_request,
)

__all__ = ["AclFilter", "RULES", "VERSION_CAPS", "acl_filter_factory"]
PRODUCE = 0


class AclFilter:
    api_keys = frozenset(RULES) - UNRESTRICTED  # (client telemetry is served to every principal, undecoded)

    def __init__(self, authorizer: Authorizer, client: ClientInfo) -> None:
        self.authorizer = authorizer
        self.client = client
        # How to finish each forwarded request's response, by the id of the request object forwarded
        # (requests are pipelined; the proxy keeps that object until its response comes).
        self._decisions: dict[int, Decision] = {}
        self._wants_response = True

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        decision = authorize_request(api_key, api_version, request, Acl(self.authorizer, client.principal,
                                                                        client.host))
        if decision.request is None:
            raise Answer(decision.response)
        self._wants_response = decision.changes_response
        if decision.changes_response and not (api_key == PRODUCE and decision.request.acks == 0):
            self._decisions[id(decision.request)] = decision
        return decision.request

    def wants_response(self, api_key: int, api_version: int) -> bool:
        """Whether the request just seen needs its response decoded (denied entries to add, lists to filter)."""
        return self._wants_response

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        decision = self._decisions.pop(id(request), None)
        return response if decision is None else decision.finish(response)


def acl_filter_factory(authorizer: Authorizer):
    """A filter factory for the chain: one AclFilter per client connection."""
    return lambda client: AclFilter(authorizer, client)
