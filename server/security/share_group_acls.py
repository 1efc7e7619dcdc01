"""The ACL rules of KIP-932's share-group APIs, as Kafka 4.3's KafkaApis applies them (part of request_acls' RULES;
the shapes of a decision are acl_decisions').

- ShareFetch (78), ShareAcknowledge (79): GROUP READ, else the whole request is refused. Their topics are named
  by id: TOPIC READ is the broker's check once it has the names (gateway/apis/share_fetch.denied_topic_ids).
- DescribeShareGroupOffsets (90): GROUP DESCRIBE per group; within a group, a named topic the principal may not
  DESCRIBE answers each partition TOPIC_AUTHORIZATION_FAILED (start offset and lag -1, topic id zero); asked
  for every topic, those it may not DESCRIBE are left out of the answer.
- AlterShareGroupOffsets (91): GROUP READ, else the whole request; a topic without TOPIC READ answers each
  partition TOPIC_AUTHORIZATION_FAILED, ahead of the served topics (Kafka's response builder's order).
- DeleteShareGroupOffsets (92): GROUP DELETE, else the whole request; a topic without TOPIC READ answers
  TOPIC_AUTHORIZATION_FAILED, ahead of the served topics.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

from logway.server.security.acl_decisions import AS_IS, GROUP_DENIED, TOPIC_DENIED, Acl, Decision, answer, may
from logway.server.security.authorizer import Operation, ResourceType
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, field_entity, response_type

DENIED_MESSAGE = "Topic authorization failed."  # Errors.TOPIC_AUTHORIZATION_FAILED.message


def share_fetch(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """ShareFetch and ShareAcknowledge: GROUP READ."""
    if request.group_id is None or acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return Decision(AS_IS)
    return answer(k, v, {"error_code": GROUP_DENIED, "responses": [], "acquisition_lock_timeout": 0})


def describe_offsets(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """DescribeShareGroupOffsets: groups by GROUP DESCRIBE, then their topics by TOPIC DESCRIBE."""
    topic_ok = may(acl, Operation.DESCRIBE)
    kept = [g for g in request.groups if acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    denied_groups = [{"group_id": g.group_id, "topics": [], "error_code": GROUP_DENIED}
                     for g in request.groups if g not in kept]
    if not kept:
        return answer(k, v, {"groups": denied_groups})
    served, extras = [], []  # per served group: the denied topics' entries, or None (every topic: filter)
    for group in kept:
        if group.topics is None:
            served.append(group)
            extras.append(None)
            continue
        served.append(dataclasses.replace(group, topics=tuple(t for t in group.topics if topic_ok(t.topic_name))))
        extras.append([{"topic_name": t.topic_name, "topic_id": uuid.UUID(int=0), "partitions": [
            {"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": TOPIC_DENIED,
             "error_message": DENIED_MESSAGE} for p in t.partitions]}
            for t in group.topics if not topic_ok(t.topic_name)])
    if not denied_groups and all(extra == [] for extra in extras):
        return Decision(AS_IS)  # nothing denied, no listing to filter
    cls = response_type(k, v)
    group_cls = field_entity(cls, "groups")
    topic_cls = field_entity(group_cls, "topics")
    changed = bool(denied_groups) or any(extras)

    def finish(response: Any) -> Any:
        groups = list(response.groups)
        for i, extra in enumerate(extras[:len(groups)]):
            group = groups[i]
            if group.error_code != ErrorCode.none:
                continue
            if extra is None:
                groups[i] = dataclasses.replace(group, topics=tuple(t for t in group.topics if topic_ok(t.topic_name)))
            elif extra:
                groups[i] = dataclasses.replace(group, topics=group.topics + tuple(
                    build(topic_cls, e) for e in extra))
        groups += [build(group_cls, g) for g in denied_groups]
        return dataclasses.replace(response, groups=tuple(groups))
    return Decision(dataclasses.replace(request, groups=tuple(served)) if changed else request, finish=finish)


def _denied_first(k: int, v: int, request: Any, acl: Acl, entry: Callable[[Any], dict]) -> Decision:
    """The topics without TOPIC READ are not served; their entries go ahead of the served ones (unless the
    answer is a request-wide error)."""
    readable = may(acl, Operation.READ)
    denied = [t for t in request.topics if not readable(t.topic_name)]
    if not denied:
        return Decision(AS_IS)
    topic_cls = field_entity(response_type(k, v), "responses")
    entries = [entry(t) for t in denied]

    def finish(response: Any) -> Any:
        if response.error_code != ErrorCode.none:
            return response
        return dataclasses.replace(response, responses=tuple(build(topic_cls, e) for e in entries)
                                   + tuple(response.responses))
    kept = tuple(t for t in request.topics if t not in denied)
    return Decision(dataclasses.replace(request, topics=kept), finish=finish)


def alter_offsets(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """AlterShareGroupOffsets: GROUP READ, then TOPIC READ per topic."""
    if not acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return answer(k, v, {"error_code": GROUP_DENIED, "error_message": "Group authorization failed.",
                         "responses": []})
    return _denied_first(k, v, request, acl, lambda t: {
        "topic_name": t.topic_name, "topic_id": uuid.UUID(int=0), "partitions": [
            {"partition_index": p.partition_index, "error_code": TOPIC_DENIED, "error_message": DENIED_MESSAGE}
            for p in t.partitions]})


def delete_offsets(k: int, v: int, request: Any, acl: Acl) -> Decision:
    """DeleteShareGroupOffsets: GROUP DELETE, then TOPIC READ per topic."""
    if not acl.allowed(Operation.DELETE, ResourceType.GROUP, request.group_id):
        return answer(k, v, {"error_code": GROUP_DENIED, "error_message": "Group authorization failed.",
                         "responses": []})
    return _denied_first(k, v, request, acl, lambda t: {
        "topic_name": t.topic_name, "topic_id": uuid.UUID(int=0), "error_code": TOPIC_DENIED,
        "error_message": DENIED_MESSAGE})


RULES = {78: share_fetch, 79: share_fetch, 90: describe_offsets, 91: alter_offsets, 92: delete_offsets}
