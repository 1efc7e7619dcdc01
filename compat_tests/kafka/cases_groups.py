"""Conformance cases for Kafka 4's KIP-848 consumer group APIs: ConsumerGroupHeartbeat, ConsumerGroupDescribe, and
what they change in the older group APIs (member epochs in OffsetCommit/OffsetFetch v9, group types in
ListGroups, DescribeGroups v6, a Metadata lookup by topic id as KIP-848 consumers send it).

Assignments are compared by what does not depend on the order a broker walks its members in (Kafka's are
hash-map orders): how many partitions each member gets, epochs, error codes. Member ids and topic ids are
masked by the harness (normalise.py).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from compat_tests.kafka.cases import NO_ID, Steps, _commit, _find_coordinator, _joined, case
from compat_tests.kafka.sides import Side


def _heartbeat(side: Side, v: int, group: str, member: str, epoch: int, *, names: list[str] | None = None,
               regex: str | None = None, owned: list[dict] | None = None, rebalance_ms: int = -1,
               instance: str | None = None, assignor: str | None = None) -> Any:
    return side.call(68, v, {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": instance,
                             "rack_id": None, "rebalance_timeout": rebalance_ms, "subscribed_topic_names": names,
                             "subscribed_topic_regex": regex, "server_assignor": assignor, "topic_partitions": owned})


def _join(side: Side, v: int, group: str, member: str, topics: list[str] | None = None, *, regex: str | None = None,
          instance: str | None = None, assignor: str | None = None) -> Any:
    return _heartbeat(side, v, group, member, 0, names=topics, regex=regex, owned=[], rebalance_ms=30_000,
                      instance=instance, assignor=assignor)


def _owned(resp: Any) -> list[dict]:
    """The assignment of a heartbeat answer as the owned partitions of the next heartbeat."""
    if resp.assignment is None:
        return []
    return [{"topic_id": t.topic_id, "partitions": list(t.partitions)} for t in resp.assignment.topic_partitions]


def _count(resp: Any) -> int | None:
    """How many partitions an answer assigns (None when it sends no assignment)."""
    if resp.assignment is None:
        return None
    return sum(len(t.partitions) for t in resp.assignment.topic_partitions)


def _summary(resp: Any) -> dict:
    return {"error": resp.error_code, "epoch": resp.member_epoch, "partitions": _count(resp),
            "interval": resp.heartbeat_interval}


def _new_member(v: int) -> str:
    """A member id: a client-generated one from v1; v0 asks the coordinator for one (an empty id)."""
    return str(uuid.uuid4()) if v >= 1 else ""


def _group(side: Side, topic: str, partitions: int = 4) -> str:
    side.create_topic(topic, partitions)
    _find_coordinator(side, 4, topic)
    return topic


@case(68, "join, heartbeat, owned partitions, leave, heartbeat after leaving")
def consumer_heartbeat_lifecycle(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic)
    joined = _join(side, v, group, _new_member(v), [topic])
    member = joined.member_id
    again = _heartbeat(side, v, group, member, joined.member_epoch)
    owned = _heartbeat(side, v, group, member, joined.member_epoch, owned=_owned(joined))
    left = _heartbeat(side, v, group, member, -1)
    after = _heartbeat(side, v, group, member, joined.member_epoch)
    return {"joined": _summary(joined), "again": _summary(again), "with owned": _summary(owned),
            "left": _summary(left), "after leaving": _summary(after)}


@case(68, "invalid requests")
def consumer_heartbeat_invalid(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic, 1)
    member = str(uuid.uuid4())
    out = {
        "no rebalance timeout": _heartbeat(side, v, group, member, 0, names=[topic], owned=[]),
        "owned partitions on join": _heartbeat(side, v, group, member, 0, names=[topic], rebalance_ms=30_000,
                                               owned=[{"topic_id": uuid.uuid4(), "partitions": [0]}]),
        "null owned partitions on join": _heartbeat(side, v, group, member, 0, names=[topic], rebalance_ms=30_000),
        "neither names nor regex": _heartbeat(side, v, group, member, 0, owned=[], rebalance_ms=30_000),
        "unknown assignor": _join(side, v, group, member, [topic], assignor="sticky"),
        "epoch -3": _heartbeat(side, v, group, member, -3),
        "blank group": _join(side, v, " ", member, [topic]),
        "blank instance id": _join(side, v, group, member, [topic], instance=" "),
        "unknown group, epoch 5": _heartbeat(side, v, group + "-none", member, 5),
        "unknown member, epoch 5": _heartbeat(side, v, group, "nobody-" + member, 5),
    }
    if v >= 1:
        out["empty member id"] = _join(side, v, group, "", [topic])
    return {name: {"error": r.error_code, "epoch": r.member_epoch} for name, r in out.items()}


@case(68, "fenced epochs: ahead, behind, the previous epoch with a subset")
def consumer_heartbeat_fenced(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic)
    first = _join(side, v, group, _new_member(v), [topic])
    member, epoch = first.member_id, first.member_epoch
    second = _join(side, v, group, _new_member(v), [topic])
    moved = _heartbeat(side, v, group, member, epoch, owned=_owned(first))  # revokes half
    return {
        "ahead": _summary(_heartbeat(side, v, group, member, epoch + 5)),
        "behind": _summary(_heartbeat(side, v, group, member, epoch - 1)),
        "second joins": _summary(second),
        "first revokes": _summary(moved),
        "first, previous epoch": _summary(_heartbeat(side, v, group, member, moved.member_epoch - 1,
                                                     owned=_owned(moved))),
    }


@case(68, "two members: revocation, then the released partitions move")
def consumer_heartbeat_rebalance(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic)
    a = _join(side, v, group, _new_member(v), [topic])
    b = _join(side, v, group, _new_member(v), [topic])
    a_revoking = _heartbeat(side, v, group, a.member_id, a.member_epoch, owned=_owned(a))
    b_waiting = _heartbeat(side, v, group, b.member_id, b.member_epoch, owned=[])
    a_done = _heartbeat(side, v, group, a.member_id, a_revoking.member_epoch, owned=_owned(a_revoking))
    b_gets = _heartbeat(side, v, group, b.member_id, b_waiting.member_epoch, owned=[])
    described = side.call(69, 0, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
    return {"a": _summary(a), "b joins": _summary(b), "a revokes": _summary(a_revoking),
            "b waits": _summary(b_waiting), "a done": _summary(a_done), "b gets": _summary(b_gets),
            "group": {"state": described.group_state, "epoch": described.group_epoch,
                      "assignment epoch": described.assignment_epoch,
                      "members": sorted(sum(len(t.partitions) for t in m.assignment.topic_partitions)
                                        for m in described.members)}}


@case(68, "static member: leaves with -2, rejoins with a new member id; unreleased and fenced instance ids")
def consumer_heartbeat_static(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic, 2)
    first = _join(side, v, group, _new_member(v), [topic], instance="instance-1")
    member = first.member_id
    taken = _join(side, v, group, str(uuid.uuid4()), [topic], instance="instance-1")
    wrong = _heartbeat(side, v, group, "other-" + str(uuid.uuid4()), first.member_epoch, instance="instance-1")
    leaves = _heartbeat(side, v, group, member, -2, instance="instance-1")
    back = _join(side, v, group, str(uuid.uuid4()), [topic], instance="instance-1")
    return {"first": _summary(first), "instance taken": _summary(taken), "fenced instance": _summary(wrong),
            "leaves for now": _summary(leaves), "back": _summary(back)}


def _settled(side: Side, v: int, group: str, joined: Any) -> Any:
    """Heartbeat until the member has an assignment (Kafka resolves a regex in the background: its first
    answers may not have the matched topics yet)."""
    resp, deadline = joined, time.monotonic() + 20
    while (_count(resp) or 0) == 0 and time.monotonic() < deadline and resp.error_code.name == "none":
        time.sleep(0.2)
        resp = _heartbeat(side, v, group, joined.member_id, resp.member_epoch, owned=_owned(resp))
    return resp


@case(68, "regex subscription: resolved, invalid RE2J syntax", min_version=1)
def consumer_heartbeat_regex(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic, 3)
    joined = _join(side, v, group, str(uuid.uuid4()), [], regex=f"{topic}|nothing-matches-.*")
    settled = _settled(side, v, group, joined)
    bad = {pattern: _join(side, v, group + "-" + str(i), str(uuid.uuid4()), regex=pattern).error_code
           for i, pattern in enumerate([r"(?=x)y", r"(\w+)\1", "[unclosed", "a{1001}"])}
    described = side.call(69, 0, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
    return {"settled": {"error": settled.error_code, "partitions": _count(settled)}, "invalid": bad,
            "regex": [m.subscribed_topic_regex for m in described.members]}


@case(69, "consumer group, classic group, unknown group")
def consumer_group_describe(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic, 2)
    joined = _join(side, 1, group, str(uuid.uuid4()), [topic], assignor="range")
    _heartbeat(side, 1, group, joined.member_id, joined.member_epoch, owned=_owned(joined))
    _joined(side, topic + "-classic")
    resp = side.call(69, v, {"group_ids": [group, topic + "-classic", topic + "-none"],
                             "include_authorized_operations": True})
    return {"describe": resp}


@case(16, "consumer and classic groups, filtered by type", min_version=5)
def list_groups_types(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic, 1)
    _join(side, 1, group, str(uuid.uuid4()), [topic])
    _joined(side, topic + "-classic")

    def listed(types: list[str]) -> list:
        resp = side.call(16, v, {"states_filter": [], "types_filter": types})
        return sorted((g.group_id.removeprefix(topic), g.group_type, g.protocol_type, g.group_state)
                      for g in resp.groups if g.group_id.startswith(topic))
    return {"all": listed([]), "consumer": listed(["consumer"]), "classic": listed(["Classic"]),
            "share": listed(["share"])}


@case(15, "a consumer group is not a classic group")
def describe_groups_consumer_group(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic, 1)
    _join(side, 1, group, str(uuid.uuid4()), [topic])
    return {"describe": side.call(15, v, {"groups": [group], "include_authorized_operations": False})}


@case(8, "commit with member epochs: current, newer, unknown member, older client", min_version=8)
def offset_commit_member_epochs(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic, 1)
    joined = _join(side, 1, group, str(uuid.uuid4()), [topic])
    member, epoch = joined.member_id, joined.member_epoch
    return {"current epoch": _commit(side, v, group, topic, member, epoch, 5),
            "newer epoch": _commit(side, v, group, topic, member, epoch + 1, 6),
            "unknown member": _commit(side, v, group, topic, "nobody", epoch, 7),
            "no member, into a group with members": _commit(side, v, group, topic, "", -1, 8),
            "unknown group with a generation": _commit(side, v, group + "-none", topic, "m", 3, 9)}


@case(9, "fetch with member epochs: current, stale, unknown member, none", min_version=9)
def offset_fetch_member_epochs(side: Side, v: int, topic: str) -> Steps:
    group = _group(side, topic, 1)
    joined = _join(side, 1, group, str(uuid.uuid4()), [topic])
    member, epoch = joined.member_id, joined.member_epoch
    _commit(side, 9, group, topic, member, epoch, 4)

    def fetch(member_id: str | None, member_epoch: int) -> Any:
        return side.call(9, v, {"groups": [{"group_id": group, "member_id": member_id, "member_epoch": member_epoch,
                                            "topics": [{"name": topic, "partition_indexes": [0]}]}],
                                "require_stable": False}).groups[0]
    return {"current": fetch(member, epoch), "stale": fetch(member, epoch + 1), "unknown": fetch("nobody", epoch),
            "no member": fetch(None, -1)}


@case(3, "by topic id with an empty name (KIP-848 consumers), unknown id", min_version=12)
def metadata_by_topic_id(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic, partitions=2)
    topic_id = side.topic_id(topic)
    resp = side.call(3, v, {"topics": [{"name": "", "topic_id": topic_id}, {"name": "", "topic_id": uuid.uuid4()},
                                       {"name": topic, "topic_id": NO_ID}],
                            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    return {"topics": sorted(((t.name or "") == topic, t.error_code.name, len(t.partitions)) for t in resp.topics)}


# Kafka's GroupCoordinatorService answers a describe of several groups by coordinator partition, in the order of
# the HashMap it groups them in (Logway: coordinator.partitioning.kafka_describe_order), not in the request's.
ORDER_GROUPS = 16


def _order_groups(side: Side, topic: str) -> list[str]:
    """The group ids, each one's coordinator partition loaded (else Kafka answers it NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS while __consumer_offsets is new)."""
    ids = [f"{topic}-{i}" for i in range(ORDER_GROUPS)]
    for group in ids:
        _find_coordinator(side, 3, group)
    return ids


def _answer_order(ids: list[str], answered: list[str]) -> list[int]:
    return [ids.index(g) if g in ids else -1 for g in answered]


@case(15, "the answer's order: 16 unknown groups")
def describe_groups_order(side: Side, v: int, topic: str) -> Steps:
    ids = _order_groups(side, topic)
    resp = side.call(15, v, {"groups": ids, "include_authorized_operations": False})
    return {"order": _answer_order(ids, [g.group_id for g in resp.groups])}


def _new_describe_order(side: Side, api_key: int, v: int, topic: str) -> Steps:
    """ConsumerGroupDescribe or ShareGroupDescribe of the groups with an empty id among them (INVALID_GROUP_ID)."""
    ids = _order_groups(side, topic)
    resp = side.call(api_key, v, {"group_ids": [*ids[:5], "", *ids[5:]], "include_authorized_operations": False})
    return {"order": _answer_order(ids, [g.group_id for g in resp.groups]),
            "errors": [g.error_code for g in resp.groups]}


@case(69, "the answer's order: 16 unknown groups and an empty id")
def consumer_group_describe_order(side: Side, v: int, topic: str) -> Steps:
    return _new_describe_order(side, 69, v, topic)


@case(77, "the answer's order: 16 unknown groups and an empty id")
def share_group_describe_order(side: Side, v: int, topic: str) -> Steps:
    return _new_describe_order(side, 77, v, topic)
