"""DescribeShareGroupOffsets (key 90), v0-v1: each share partition's start offset (the first record not yet
done), v1 with its lag (the records after it not yet acknowledged or archived, up to the high watermark).

A partition with no share state yet (never fetched, or its state deleted), or of an unknown topic, has start
offset and lag -1. With
``topics`` null: every partition the group has state for or subscribes to. The ACL checks (GROUP DESCRIBE,
TOPIC DESCRIBE) are the shared ones dispatch applies.
"""

from __future__ import annotations

from logway.coordinator.share_partition import RecordState
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1


def _lag(broker, name: str, partition: int, share_partition) -> int:
    if share_partition is None:
        return -1
    try:
        high = broker.partition(name, partition).high_watermark
    except Exception:  # the topic went away: nothing to say
        return -1
    done = sum(1 for o in range(share_partition.start, share_partition.end)
               if share_partition.state_of(o)[0] in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))
    return max(0, high - share_partition.start - done)


def _wanted(broker, group_id: str, topics) -> dict[str, list[int]]:
    """The partitions to describe, by topic name."""
    if topics is not None:
        return {t.topic_name: list(t.partitions) for t in topics}
    out: dict[str, set[int]] = {}
    by_id = {t.topic_id: t.name for t in broker.logs.topics.values()}
    for _group, topic_id, partition in broker.shares.store.keys_of(group_id):
        if topic_id in by_id:
            out.setdefault(by_id[topic_id], set()).add(partition)
    group = broker.groups.coordinator.group(group_id)
    for name in getattr(group, "subscribed_topics", lambda: ())() if group is not None else ():
        topic = broker.logs.topics.get(name)
        if topic is not None and getattr(group, "group_type", "") == "share":
            out.setdefault(name, set()).update(range(len(topic.partitions)))
    return {name: sorted(parts) for name, parts in sorted(out.items())}


def _describe_group(ctx, group_id: str, topics) -> dict:
    broker = ctx.broker
    out_topics = []
    for name, partitions in _wanted(broker, group_id, topics).items():
        topic = broker.logs.topics.get(name)
        entries = []
        for p in partitions:
            if topic is None or not 0 <= p < len(topic.partitions):
                # GroupCoordinatorService: no data rather than an error (as OffsetFetch answers), topic id zero.
                entries.append({"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1,
                                "error_code": ErrorCode.none})
                continue
            share_partition = broker.shares.start_offset(group_id, topic.topic_id, p)
            entries.append({"partition_index": p, "leader_epoch": 0,
                            "start_offset": -1 if share_partition is None else share_partition.start,
                            "lag": _lag(broker, name, p, share_partition), "error_code": ErrorCode.none})
        out_topics.append({"topic_name": name, "topic_id": topic.topic_id if topic else None, "partitions": entries})
    return {"group_id": group_id, "topics": out_topics, "error_code": ErrorCode.none}


async def handle(ctx, request):
    await ctx.broker.shares.loaded.wait()
    groups = []
    for g in request.groups:
        status = ctx.broker.groups.coordinator.group_status(g.group_id)
        if status is not None:
            groups.append({"group_id": g.group_id, "topics": [], "error_code": status})
        else:
            groups.append(_describe_group(ctx, g.group_id, g.topics))
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "groups": groups})
