"""ACLs at the proxy: the gateway's authorizer (Kafka's StandardAuthorizer semantics) on the principal the
client authenticated as at the proxy, for topics in Metadata (DESCRIBE), Produce (WRITE) and Fetch (READ).

As Kafka's KafkaApis does: a Produce or Fetch naming a topic the principal may not use gets
TOPIC_AUTHORIZATION_FAILED for that topic's partitions while the other topics are forwarded; a Metadata
request naming such a topic gets that error for it (and the upstream never sees the name, so it is not
auto-created); a Metadata request for all topics lists only the topics the principal may describe.
With ACLs on, the proxy advertises Produce and Fetch up to v12, the last versions that name topics (v13+
name them by id only).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from logway.gateway.security.authorizer import Authorizer, Operation, ResourceType
from logway.proxy.filters.base import Answer, ClientInfo
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

PRODUCE, FETCH, METADATA = 0, 1, 3
VERSION_CAPS = {PRODUCE: 12, FETCH: 12}
_DENIED = ErrorCode.topic_authorization_failed


class AclFilter:
    api_keys = frozenset({PRODUCE, FETCH, METADATA})

    def __init__(self, authorizer: Authorizer, client: ClientInfo) -> None:
        self.authorizer = authorizer
        self.client = client
        # What each forwarded request lost (topic, partitions), by the id of the request object forwarded
        # (requests are pipelined; the proxy keeps that object until its response comes).
        self._denied: dict[int, list[tuple[str, tuple[int, ...]]]] = {}

    def _allowed(self, client: ClientInfo, operation: Operation, topic: str | None) -> bool:
        return topic is not None and self.authorizer.authorize(client.principal, client.host, operation,
                                                               ResourceType.TOPIC, topic)

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        if api_key == PRODUCE:
            return self._split(client, api_key, api_version, request, "topic_data", "name", Operation.WRITE,
                               lambda t: tuple(p.index for p in t.partition_data))
        if api_key == FETCH:
            return self._split(client, api_key, api_version, request, "topics", "topic", Operation.READ,
                               lambda t: tuple(p.partition for p in t.partitions))
        if request.topics is None:
            return request
        kept = [t for t in request.topics if self._allowed(client, Operation.DESCRIBE, t.name)]
        return self._forward(request, "topics", kept, [(t.name, ()) for t in request.topics if t not in kept])

    def _forward(self, request: Any, field: str, kept: list, denied: list) -> Any:
        if not denied:
            return request
        forwarded = dataclasses.replace(request, **{field: tuple(kept)})
        self._denied[id(forwarded)] = denied
        return forwarded

    def _split(self, client, api_key, api_version, request, field, name, operation, partitions) -> Any:
        topics = getattr(request, field)
        kept = [t for t in topics if self._allowed(client, operation, getattr(t, name))]
        denied = [(getattr(t, name), partitions(t)) for t in topics if t not in kept]
        if denied and not kept:
            raise Answer(self._denied_response(api_key, api_version, denied))
        return self._forward(request, field, kept, denied)

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        if api_key == METADATA and request.topics is None:
            topics = tuple(t for t in response.topics if self._allowed(client, Operation.DESCRIBE, t.name))
            return dataclasses.replace(response, topics=topics) if len(topics) != len(response.topics) else response
        denied = self._denied.pop(id(request), None)
        if not denied:
            return response
        extra = self._denied_response(api_key, api_version, denied)
        field = "topics" if api_key == METADATA else "responses"
        return dataclasses.replace(response, **{field: getattr(response, field) + getattr(extra, field)})

    def _denied_response(self, api_key: int, api_version: int, denied: list) -> Any:
        cls = response_type(api_key, api_version)
        if api_key == PRODUCE:
            return build(cls, {"throttle_time": 0, "responses": [
                {"name": topic, "partition_responses": [
                    {"index": p, "error_code": _DENIED, "base_offset": -1, "log_append_time": -1,
                     "log_start_offset": -1, "error_message": None} for p in parts]}
                for topic, parts in denied]})
        if api_key == FETCH:
            return build(cls, {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [
                {"topic": topic, "partitions": [
                    {"partition_index": p, "error_code": _DENIED, "high_watermark": -1, "last_stable_offset": -1,
                     "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1,
                     "records": None} for p in parts]}
                for topic, parts in denied]})
        return build(cls, {"throttle_time": 0, "error_code": 0, "brokers": [], "cluster_id": None,
                           "controller_id": -1, "topics": [
                               {"error_code": _DENIED, "name": topic, "topic_id": None, "is_internal": False,
                                "partitions": []} for topic, _ in denied]})


def acl_filter_factory(authorizer: Authorizer):
    """A filter factory for the chain: one AclFilter per client connection."""
    return lambda client: AclFilter(authorizer, client)
