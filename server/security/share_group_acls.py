"""The ACL rules of KIP-932's share-group APIs, as Kafka 4.3's KafkaApis applies them (part of request_acls' RULES,
whose helpers these use).

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
import typing
import uuid
from collections.abc import Callable
from typing import Any

from logway.server.security.authorizer import Operation, ResourceType
from logway.wire.errors import ErrorCode
from logway.wire.protocol import _entity_of, response_type

TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
DENIED_MESSAGE = "Topic authorization failed."  # Errors.TOPIC_AUTHORIZATION_FAILED.message


def _entity(cls: type, *path: str) -> type:
    """The message class of the entries of ``cls.<path[0]>.<path[1]>...`` (nested arrays)."""
    for name in path:
        cls = _entity_of(typing.get_type_hints(cls)[name])
    return cls


def share_fetch(k: int, v: int, request: Any, acl: base.Acl) -> base.Decision:
    """ShareFetch and ShareAcknowledge: GROUP READ."""
    if request.group_id is None or acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return base.Decision(base._AS_IS)
    return base.answer(k, v, {"error_code": GROUP_DENIED, "responses": [], "acquisition_lock_timeout": 0})


def describe_offsets(k: int, v: int, request: Any, acl: base.Acl) -> base.Decision:
    """DescribeShareGroupOffsets: groups by GROUP DESCRIBE, then their topics by TOPIC DESCRIBE."""
    def topic_ok(name: str) -> bool:
        return acl.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)

    kept = [g for g in request.groups if acl.allowed(Operation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    denied_groups = [{"group_id": g.group_id, "topics": [], "error_code": GROUP_DENIED}
                     for g in request.groups if g not in kept]
    if not kept:
        return base.answer(k, v, {"groups": denied_groups})
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
        return base.Decision(base._AS_IS)  # nothing denied, no listing to filter
    cls = response_type(k, v)
    group_cls, topic_cls = _entity(cls, "groups"), _entity(cls, "groups", "topics")
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
                    base.make(topic_cls, e) for e in extra))
        groups += [base.make(group_cls, g) for g in denied_groups]
        return dataclasses.replace(response, groups=tuple(groups))
    return base.Decision(dataclasses.replace(request, groups=tuple(served)) if changed else request, finish=finish)


def _denied_first(k: int, v: int, request: Any, acl: base.Acl, entry: Callable[[Any], dict]) -> base.Decision:
    """The topics without TOPIC READ are not served; their entries go ahead of the served ones (unless the
    answer is a request-wide error)."""
    denied = [t for t in request.topics if not acl.allowed(Operation.READ, ResourceType.TOPIC, t.topic_name)]
    if not denied:
        return base.Decision(base._AS_IS)
    topic_cls = _entity(response_type(k, v), "responses")
    entries = [entry(t) for t in denied]

    def finish(response: Any) -> Any:
        if response.error_code != ErrorCode.none:
            return response
        return dataclasses.replace(response, responses=tuple(base.make(topic_cls, e) for e in entries)
                                   + tuple(response.responses))
    kept = tuple(t for t in request.topics if t not in denied)
    return base.Decision(dataclasses.replace(request, topics=kept), finish=finish)


def alter_offsets(k: int, v: int, request: Any, acl: base.Acl) -> base.Decision:
    """AlterShareGroupOffsets: GROUP READ, then TOPIC READ per topic."""
    if not acl.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return base.answer(k, v, {"error_code": GROUP_DENIED, "error_message": "Group authorization failed.",
                                  "responses": []})
    return _denied_first(k, v, request, acl, lambda t: {
        "topic_name": t.topic_name, "topic_id": uuid.UUID(int=0), "partitions": [
            {"partition_index": p.partition_index, "error_code": TOPIC_DENIED, "error_message": DENIED_MESSAGE}
            for p in t.partitions]})


def delete_offsets(k: int, v: int, request: Any, acl: base.Acl) -> base.Decision:
    """DeleteShareGroupOffsets: GROUP DELETE, then TOPIC READ per topic."""
    if not acl.allowed(Operation.DELETE, ResourceType.GROUP, request.group_id):
        return base.answer(k, v, {"error_code": GROUP_DENIED, "error_message": "Group authorization failed.",
                                  "responses": []})
    return _denied_first(k, v, request, acl, lambda t: {
        "topic_name": t.topic_name, "topic_id": uuid.UUID(int=0), "error_code": TOPIC_DENIED,
        "error_message": DENIED_MESSAGE})


RULES = {78: share_fetch, 79: share_fetch, 90: describe_offsets, 91: alter_offsets, 92: delete_offsets}

# Last: request_acls imports RULES from here while it loads (and its helpers are used only once it has).
from logway.server.security import request_acls as base  # noqa: E402
