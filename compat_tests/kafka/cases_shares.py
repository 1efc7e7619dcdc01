"""Conformance cases for KIP-932 share groups: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
ShareAcknowledge, Describe/Alter/DeleteShareGroupOffsets, and the GROUP config resources of DescribeConfigs and
IncrementalAlterConfigs that set a share group's share.* configs.

Kafka 4.3 assigns a share partition only once its state is initialized in __share_group_state (a new member's
first heartbeat answers an empty assignment, a later one the partitions, one group epoch on); Logway writes
that state when the member joins and assigns at once. The cases therefore compare a member's settled
assignment (heartbeats until it holds every partition), not each step's epoch (KAFKA_DIFFERENCES.md).

A share session lives on the connection that opened it, so each case's ShareFetch/ShareAcknowledge sequence
uses one connection. What happens when that connection closes is not compared: Kafka handles the disconnect
asynchronously, and a new session of the same member racing it leaves the records locked until their lock
times out (tests/gateway/test_share_sessions_io.py covers Logway's release on disconnect).
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from compat_tests.kafka.cases import Steps, _find_coordinator, case
from compat_tests.kafka.sides import Side, records

ACCEPT, RELEASE, REJECT = 1, 2, 3


def _heartbeat(side: Side, v: int, group: str, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    return side.call(76, v, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                             "subscribed_topic_names": topics})


def _count(resp: Any) -> int | None:
    if resp.assignment is None:
        return None
    return sum(len(t.partitions) for t in resp.assignment.topic_partitions)


def _settle(side: Side, v: int, group: str, member: str, joined: Any, partitions: int) -> Any:
    """Heartbeats until the member holds ``partitions`` (an answer sends the assignment when it changes)."""
    resp, deadline = joined, time.monotonic() + 20
    while (_count(resp) or 0) < partitions and time.monotonic() < deadline:
        time.sleep(0.1)
        resp = _heartbeat(side, v, group, member, resp.member_epoch)
    return resp


# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: retried by every client.
_RETRIABLE = {14, 15, 16}


def _member(side: Side, v: int, topic: str, partitions: int, group: str | None = None) -> tuple[str, str, Any]:
    """A share group of one settled member on ``topic``: (group, member id, its last heartbeat answer)."""
    group = group or f"{topic}-share"
    _find_coordinator(side, 4, group)
    member = str(uuid.uuid4())
    deadline = time.monotonic() + 30
    while True:  # a coordinator still loading or moving answers the join with an error a client retries
        joined = _heartbeat(side, 1, group, member, 0, [topic])
        if joined.error_code not in _RETRIABLE or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return group, member, _settle(side, 1, group, member, joined, partitions)


def _set_config(side: Side, group: str, name: str, value: str | None) -> Any:
    return side.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": name, "config_operation": 0 if value is not None else 1, "value": value}]}], "validate_only": False})


@case(76, "join, settle, leave, heartbeat after leaving")
def share_heartbeat_lifecycle(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic, 2)
    group = f"{topic}-share"
    _find_coordinator(side, 4, group)
    member = str(uuid.uuid4())
    joined = _heartbeat(side, v, group, member, 0, [topic])
    settled = _settle(side, v, group, member, joined, 2)
    left = _heartbeat(side, v, group, member, -1)
    after = _heartbeat(side, v, group, member, settled.member_epoch)
    return {"joined": {"error": joined.error_code, "assignment sent": joined.assignment is not None,
                       "interval": joined.heartbeat_interval},
            "settled": {"error": settled.error_code, "partitions": _count(settled)},
            "left": {"error": left.error_code, "epoch": left.member_epoch, "assignment": left.assignment},
            "after leaving": after.error_code}


@case(76, "invalid requests, fenced epochs, not a share group")
def share_heartbeat_invalid(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic, 1)
    group, member, settled = _member(side, v, topic, 1)
    epoch = settled.member_epoch
    # A consumer group (KIP-848) of the same broker: its id is no share group's.
    consumer = f"{topic}-consumer"
    _find_coordinator(side, 4, consumer)
    side.call(68, 1, {"group_id": consumer, "member_id": str(uuid.uuid4()), "member_epoch": 0, "instance_id": None,
                      "rack_id": None, "rebalance_timeout": 30_000, "subscribed_topic_names": [topic],
                      "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
    return {
        "empty member id": _heartbeat(side, v, group, "", 0, [topic]).error_code,
        "empty group id": _heartbeat(side, v, "", str(uuid.uuid4()), 0, [topic]).error_code,
        "joining without topics": _heartbeat(side, v, group, str(uuid.uuid4()), 0, None).error_code,
        "epoch -2": _heartbeat(side, v, group, member, -2).error_code,
        "unknown member": _heartbeat(side, v, group, str(uuid.uuid4()), 3).error_code,
        "epoch ahead": _heartbeat(side, v, group, member, epoch + 5).error_code,
        "unknown group": _heartbeat(side, v, f"{topic}-nope", member, 1).error_code,
        "consumer group id": _heartbeat(side, v, consumer, str(uuid.uuid4()), 0, [topic]).error_code,
        "still a member": _heartbeat(side, v, group, member, epoch).error_code,
    }


@case(77, "settled group, unknown group, a consumer group's id")
def share_group_describe(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic, 3)
    group, member, _ = _member(side, v, topic, 3)

    def summary(g: Any) -> dict:
        return {"error": g.error_code, "state": g.group_state, "assignor": g.assignor_name,
                "epochs equal": g.group_epoch == g.assignment_epoch,
                "operations": g.authorized_operations,
                "members": [{"subscribed": m.subscribed_topic_names, "client": m.client_id,
                             "partitions": sorted(p for t in m.assignment.topic_partitions for p in t.partitions),
                             "at the group epoch": m.member_epoch == g.group_epoch} for m in g.members]}
    described = side.call(77, v, {"group_ids": [group, f"{topic}-nope"], "include_authorized_operations": True})
    _heartbeat(side, 1, group, member, -1)
    empty = side.call(77, v, {"group_ids": [group], "include_authorized_operations": False})
    return {"described": [summary(g) for g in described.groups],
            "after the member left": [summary(g) for g in empty.groups]}


def _share_fetch(side: Any, v: int, group: str, member: str, epoch: int, topic_id: Any,
                 acks: list[tuple[int, int, Any]] = (), *, wait_ms: int = 5000, fetch: bool = True,
                 per_offset: bool = False) -> Any:
    """``acks``: (first, last, type), or with ``per_offset`` (first, last, [a type per offset])."""
    return side.call(78, v, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch,
        "max_wait": datetime.timedelta(milliseconds=wait_ms), "min_bytes": 1, "max_bytes": 1 << 20 if fetch else 0,
        "max_records": 500 if fetch else 0, "batch_size": 500,
        "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": last, "acknowledge_types": list(t) if per_offset else [t]}
            for f, last, t in acks]}]}],
        "forgotten_topics_data": []})


def _fetched(resp: Any) -> dict:
    parts = [p for t in resp.responses for p in t.partitions]
    return {"error": resp.error_code, "lock ms": resp.acquisition_lock_timeout,
            "partitions": [{"error": p.error_code, "ack error": p.acknowledge_error_code, "records": p.records,
                            "acquired": [(a.first_offset, a.last_offset, a.delivery_count)
                                         for a in p.acquired_records]} for p in parts]}


@case(78, "acquire, acknowledge (accept, release, reject), redelivery, session epochs, close")
def share_fetch_lifecycle(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic, 1)
    group = f"{topic}-share"
    _set_config(side, group, "share.auto.offset.reset", "earliest")
    side.produce(topic, records(5))
    group, member, _ = _member(side, v, topic, 1, group)
    topic_id = side.topic_id(topic)
    with side.client() as conn:  # a share session lives on the connection that opened it
        first = _share_fetch(conn, v, group, member, 0, topic_id)
        acked = _share_fetch(conn, v, group, member, 1, topic_id, [(0, 1, ACCEPT), (2, 2, RELEASE), (3, 3, REJECT)])
        again = conn.call(79, v, {"group_id": group, "member_id": member, "share_session_epoch": 3, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [ACCEPT]}]}]}]})
        wrong_epoch = _share_fetch(conn, v, group, member, 7, topic_id, wait_ms=0)
        no_session = _share_fetch(conn, v, group, str(uuid.uuid4()), 1, topic_id, wait_ms=0)
        close = _share_fetch(conn, v, group, member, -1, topic_id, [(4, 4, ACCEPT)], fetch=False, wait_ms=0)
    return {"first": _fetched(first), "acknowledged, then fetched": _fetched(acked),
            "an accepted record acknowledged again": [(p.error_code,) for t in again.responses for p in t.partitions],
            "wrong session epoch": _fetched(wrong_epoch), "no session": _fetched(no_session),
            "close": _fetched(close),
            "offsets": _offsets(side, 1, group, [topic])}


@case(78, "share.isolation.level=read_committed: aborted records skipped, an open transaction waits")
def share_fetch_read_committed(side: Side, v: int, topic: str) -> Steps:
    from compat_tests.kafka.cases import _list_offsets, _txn_add, _txn_call, _txn_init

    side.create_topic(topic, 1)
    group = f"{topic}-share"
    _set_config(side, group, "share.auto.offset.reset", "earliest")
    _set_config(side, group, "share.isolation.level", "read_committed")
    init = _txn_init(side, topic)
    pid, epoch_ = init.producer_id, init.producer_epoch
    sequence = 0

    def transaction(count: int, end: bool | None) -> None:
        nonlocal sequence
        _txn_add(side, topic, pid, epoch_, topic)
        batch = records(count, producer_id=pid, producer_epoch=epoch_, base_sequence=sequence, is_transactional=True)
        resp = side.call(0, 9, {"transactional_id": topic, "acks": -1, "timeout": 30_000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        assert resp.responses[0].partition_responses[0].error_code.name == "none", resp
        sequence += count
        if end is not None:
            end_transaction(end)

    def end_transaction(commit: bool) -> None:
        """EndTxn, then until its marker is in the log (Kafka writes the markers after answering)."""
        def latest() -> int:
            return _list_offsets(side, 7, topic, -1).topics[0].partitions[0].offset
        end = latest()
        _txn_call(side, 26, 3, {"transactional_id": topic, "producer_id": pid, "producer_epoch": epoch_,
                                "committed": commit})
        deadline = time.monotonic() + 10
        while latest() <= end and time.monotonic() < deadline:
            time.sleep(0.05)
    side.produce(topic, records(2))  # 0-1
    transaction(3, False)  # 2-4, the abort marker at 5
    transaction(2, True)  # 6-7, the commit marker at 8
    side.produce(topic, records(1))  # 9
    transaction(2, None)  # 10-11, still open: the last stable offset stays at 10
    side.produce(topic, records(1))  # 12
    group, member, _ = _member(side, v, topic, 1, group)
    topic_id = side.topic_id(topic)
    delivered: list[int] = []
    with side.client() as conn:
        epoch, acks = 0, []
        for step in range(12):  # fetch and acknowledge until offset 12 came; the open transaction ends at step 2
            if step == 2:
                end_transaction(True)
            resp = _share_fetch(conn, v, group, member, epoch, topic_id, acks, wait_ms=500, per_offset=True)
            epoch += 1
            acks = []
            for part in (p for t in resp.responses for p in t.partitions):
                data = _data_offsets(part.records)
                for a in part.acquired_records:
                    offsets = range(a.first_offset, a.last_offset + 1)
                    delivered += [o for o in offsets if o in data]
                    acks.append((a.first_offset, a.last_offset, [ACCEPT if o in data else 0 for o in offsets]))
            if 12 in delivered:
                break
        _share_fetch(conn, v, group, member, -1, topic_id, acks, fetch=False, wait_ms=0, per_offset=True)
    # When each record comes differs (KAFKA_DIFFERENCES.md): Kafka acquires a fetch's batches only up to an
    # aborted transaction, and hands out the transaction markers' offsets for the client to acknowledge as gaps.
    # Kafka's start offset may stay behind here (the lag counts only what is not done): the lag is compared.
    lags = [[(p[0], p[2], p[3]) for p in parts] for g in _offsets(side, 1, group, [topic]) for _, parts in g["topics"]]
    return {"records delivered": sorted(delivered), "lags": lags}


def _data_offsets(data: bytes) -> set[int]:
    """The offsets of the records of the non-control batches in ``data``."""
    from logway.wire.batch import BATCH_HEADER_SIZE, parse_header

    out, pos = set(), 0
    while len(data) - pos >= BATCH_HEADER_SIZE:
        header = parse_header(data, pos)
        if not header.is_control:
            out.update(range(header.base_offset, header.last_offset + 1))
        pos += header.size
    return out


@case(78, "invalid requests")
def share_fetch_invalid(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic, 1)
    topic_id = side.topic_id(topic)
    group = f"{topic}-share"
    _find_coordinator(side, 4, group)
    member = str(uuid.uuid4())
    return {"no member id": _fetched(_share_fetch(side, v, group, "", 0, topic_id, wait_ms=0)),
            "acknowledging on opening": _fetched(_share_fetch(side, v, group, member, 0, topic_id,
                                                              [(0, 0, ACCEPT)], wait_ms=0)),
            "unknown topic id": _fetched(_share_fetch(side, v, group, member, 0, uuid.uuid4(), wait_ms=0))}


@case(79, "acknowledge in its own request: accept, release, reject, unknown offsets, epochs")
def share_acknowledge(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic, 1)
    group = f"{topic}-share"
    _set_config(side, group, "share.auto.offset.reset", "earliest")
    side.produce(topic, records(4))
    group, member, _ = _member(side, v, topic, 1, group)
    topic_id = side.topic_id(topic)

    with side.client() as conn:
        def ack(epoch: int, batches: list[tuple[int, int, int]]) -> Any:
            resp = conn.call(79, v, {"group_id": group, "member_id": member, "share_session_epoch": epoch, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": [t]} for f, last, t in batches]}]}]})
            return {"error": resp.error_code, "partitions": [p.error_code for t in resp.responses for p in t.partitions]}
        steps = {"opened": _fetched(_share_fetch(conn, v, group, member, 0, topic_id)),
                 "at epoch 0": ack(0, [(0, 0, ACCEPT)]),
                 "accept, release, reject": ack(1, [(0, 0, ACCEPT), (1, 1, RELEASE), (2, 2, REJECT)]),
                 "beyond the log": ack(2, [(10, 12, ACCEPT)]),
                 "wrong epoch": ack(9, [(3, 3, ACCEPT)]),
                 "close": ack(-1, [(3, 3, ACCEPT)])}
    return {**steps, "offsets": _offsets(side, 1, group, [topic])}


def _offsets(side: Side, v: int, group: str, topics: list[str] | None, partitions: int = 1) -> Any:
    resp = side.call(90, v, {"groups": [{"group_id": group, "topics": None if topics is None else [
        {"topic_name": t, "partitions": list(range(partitions))} for t in topics]}]})
    return [{"error": g.error_code, "topics": [(t.topic_name, [(p.partition_index, p.start_offset, getattr(p, "lag", None),
                                                                p.error_code) for p in t.partitions])
                                               for t in g.topics]} for g in resp.groups]


@case(90, "unknown group, named and all topics, after fetching")
def describe_share_group_offsets(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic, 2)
    group = f"{topic}-share"
    _find_coordinator(side, 4, group)
    unknown = {"named": _offsets(side, v, group, [topic, f"{topic}-nope"], 2), "empty list": _offsets(side, v, group, [])}
    _set_config(side, group, "share.auto.offset.reset", "earliest")
    side.produce(topic, records(3))
    group, member, _ = _member(side, v, topic, 2, group)
    fetched = _share_fetch(side, 1, group, member, 0, side.topic_id(topic))
    _share_fetch(side, 1, group, member, -1, side.topic_id(topic), [(0, 2, ACCEPT)], fetch=False, wait_ms=0)
    return {"unknown group": unknown, "fetched": _fetched(fetched)["partitions"],
            "named": _offsets(side, v, group, [topic], 2), "all": _offsets(side, v, group, None)}


@case(91, "a member present, then empty: start offsets, unknown topics and partitions")
def alter_share_group_offsets(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic, 2)
    side.produce(topic, records(4))
    group, member, _ = _member(side, v, topic, 2)

    def alter(group_id: str, offsets: dict[str, list[tuple[int, int]]]) -> Any:
        resp = side.call(91, v, {"group_id": group_id, "topics": [
            {"topic_name": t, "partitions": [{"partition_index": p, "start_offset": o} for p, o in parts]}
            for t, parts in offsets.items()]})
        return {"error": resp.error_code, "topics": [(t.topic_name, t.topic_id is not None, [
            (p.partition_index, p.error_code) for p in t.partitions]) for t in resp.responses]}
    busy = alter(group, {topic: [(0, 1)]})
    _heartbeat(side, 1, group, member, -1)
    done = alter(group, {topic: [(0, 1), (1, 0)], f"{topic}-nope": [(0, 0)]})
    return {"with a member": busy, "empty": done, "offsets": _offsets(side, 1, group, [topic], 2),
            "out of range partition": alter(group, {topic: [(5, 0)]}),
            "unknown group": alter(f"{topic}-fresh", {topic: [(0, 2)]}),
            "unknown group's offsets": _offsets(side, 1, f"{topic}-fresh", [topic], 1),
            "unknown group listed": sorted((g.group_id, g.group_state, g.group_type) for g in side.call(16, 5, {
                "states_filter": [], "types_filter": ["share"]}).groups if g.group_id.startswith(topic))}


@case(92, "a member present, then empty, unknown topics, unknown group")
def delete_share_group_offsets(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic, 1)
    side.produce(topic, records(2))
    group, member, _ = _member(side, v, topic, 1)
    _share_fetch(side, 1, group, member, 0, side.topic_id(topic), wait_ms=0)

    def delete(group_id: str, topics: list[str]) -> Any:
        resp = side.call(92, v, {"group_id": group_id, "topics": [{"topic_name": t} for t in topics]})
        return {"error": resp.error_code, "topics": [(t.topic_name, t.error_code) for t in resp.responses]}
    busy = delete(group, [topic])
    _heartbeat(side, 1, group, member, -1)
    return {"with a member": busy, "empty": delete(group, [topic, f"{topic}-nope"]),
            "offsets after": _offsets(side, 1, group, None),
            "unknown group": delete(f"{topic}-nope", [topic])}


@case(44, "a share group's configs: set, reset, invalid values, unknown names", min_version=1)
def group_configs_alter(side: Side, v: int, topic: str) -> Steps:
    group = f"{topic}-share"

    def alter(*configs: tuple[str, str | None]) -> Any:
        resp = side.call(44, v, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": n, "config_operation": 0 if value is not None else 1, "value": value} for n, value in configs]}],
            "validate_only": False})
        return [r.error_code for r in resp.responses]

    def describe(names: list[str] | None) -> Any:
        resp = side.call(32, 4, {"resources": [{"resource_type": 32, "resource_name": group,
                                                "configuration_keys": names}],
                                 "include_synonyms": False, "include_documentation": False})
        return [(r.error_code, sorted((c.name, c.value, c.read_only, c.config_source, c.is_sensitive)
                                      for c in r.configs)) for r in resp.results]
    names = ["share.auto.offset.reset", "share.record.lock.duration.ms", "share.isolation.level",
             "share.session.timeout.ms", "share.heartbeat.interval.ms"]
    return {"defaults": describe(names),
            "set": alter(("share.auto.offset.reset", "earliest"), ("share.record.lock.duration.ms", "20000")),
            "after set": describe(names),
            "bad value": alter(("share.auto.offset.reset", "sometimes")),
            "below the broker's minimum": alter(("share.record.lock.duration.ms", "10")),
            "unknown name": alter(("share.nonsense", "1")),
            "reset": alter(("share.auto.offset.reset", None)),
            "after reset": describe(["share.auto.offset.reset"])}
