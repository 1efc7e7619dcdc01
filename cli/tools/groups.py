"""`logway groups list|describe|delete|reset-offsets`: kafka-consumer-groups.sh over the Kafka protocol.

describe joins three answers as ConsumerGroupCommand does: the group's members and their assignments
(DescribeGroups), its committed offsets (OffsetFetch) and each partition's log end offset (ListOffsets latest);
LAG is LOG-END-OFFSET - CURRENT-OFFSET, "-" where the group has committed nothing.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec

from logway.cli.tools.admin_client import Admin
from logway.cli.tools.errors import ToolError
from logway.cli.tools.output import emit, print_json, rows_as_dicts

# Kafka's ConsumerGroupState names, as kafka-consumer-groups.sh prints them.
STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
OFFSETS_HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                   "CLIENT-ID")
MEMBERS_HEADERS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
RESET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


def list_groups(admin: Admin, args: argparse.Namespace) -> int:
    admin.metadata()
    result = admin.wait(admin.client.list_consumer_groups(**admin.options()), "list groups")
    rows = sorted((g.group_id, STATE_NAMES.get(g.state, str(g.state))) for g in result.valid)
    emit(args, ("GROUP", "STATE"), rows)
    return 0


def describe_group(admin: Admin, group: str):
    """The group's description (state, members with assignments); state Dead when it does not exist."""
    futures = admin.client.describe_consumer_groups([group], **admin.options())
    return admin.wait(futures[group], f"describe group {group!r}")


def committed_offsets(admin: Admin, group: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> committed offset, for every partition the group has committed."""
    futures = admin.client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], **admin.options())
    answer = admin.wait(futures[group], f"committed offsets of group {group!r}")
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def list_offsets(admin: Admin, partitions: list[tuple[str, int]], spec: OffsetSpec) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the offset ListOffsets answers for ``spec`` (-1 when none, e.g. no record that late)."""
    if not partitions:
        return {}
    futures = admin.client.list_offsets({TopicPartition(t, p): spec for t, p in partitions}, **admin.options())
    return {(tp.topic, tp.partition): admin.wait(f, f"list offsets of {tp.topic}-{tp.partition}").offset
            for tp, f in futures.items()}


def offsets_rows(admin: Admin, group: str, description) -> list[tuple]:
    """One row per assigned or committed partition (ConsumerGroupCommand.collectConsumerAssignment)."""
    committed = committed_offsets(admin, group)
    owner: dict[tuple[str, int], object] = {}
    idle_members = []
    for member in description.members:
        assigned = [(tp.topic, tp.partition) for tp in member.assignment.topic_partitions]
        owner.update((tp, member) for tp in assigned)
        if not assigned:
            idle_members.append(member)
    partitions = sorted(set(owner) | set(committed))
    ends = list_offsets(admin, partitions, OffsetSpec.latest())
    rows: list[tuple] = []
    for tp in partitions:
        member = owner.get(tp)
        current, end = committed.get(tp), ends.get(tp)
        lag = end - current if current is not None and end is not None and end >= 0 else None
        rows.append((group, tp[0], tp[1], current, end, lag, *_member_cells(member)))
    # A member with nothing assigned still shows, as in Kafka's output, with "-" for the partition columns.
    rows += [(group, None, None, None, None, None, *_member_cells(m)) for m in idle_members]
    return rows


def _member_cells(member) -> tuple:
    return (member.member_id, member.host, member.client_id) if member is not None else (None, None, None)


def members_rows(group: str, description) -> list[tuple]:
    """One row per member with its assigned partitions (kafka-consumer-groups --describe --members --verbose)."""
    rows = []
    for m in description.members:
        assigned = sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        rows.append((group, m.member_id, m.host, m.client_id, len(assigned), ",".join(f"{t}:{p}" for t, p in assigned)))
    return rows


def describe_groups(admin: Admin, args: argparse.Namespace) -> int:
    """Offsets and lag per partition (or --members: per member) of the named groups, or of every group."""
    admin.metadata()
    groups = args.group or [g.group_id for g in admin.wait(admin.client.list_consumer_groups(**admin.options()),
                                                            "list groups").valid]
    rows: list[tuple] = []
    described = []
    missing = []
    for group in sorted(groups):
        description = describe_group(admin, group)
        state = STATE_NAMES.get(description.state, str(description.state))
        if state == "Dead":
            missing.append(group)
            continue
        group_rows = members_rows(group, description) if args.members else offsets_rows(admin, group, description)
        if state == "Empty" and args.output != "json":
            print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
        elif state in ("PreparingRebalance", "CompletingRebalance") and args.output != "json":
            print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
        described.append({"group": group, "state": state, "coordinator": description.coordinator.id,
                          "assignment_strategy": description.partition_assignor or None,
                          "members": len(description.members), "rows": group_rows})
        rows += group_rows
    headers = MEMBERS_HEADERS if args.members else OFFSETS_HEADERS
    if args.output == "json":
        print_json([{**d, "rows": rows_as_dicts(headers, d["rows"])} for d in described])
    elif described:
        emit(args, headers, rows)
    if missing:
        raise ToolError("; ".join(f"Consumer group '{group}' does not exist." for group in missing))
    return 0


def delete_groups(admin: Admin, args: argparse.Namespace) -> int:
    admin.metadata()
    futures = admin.client.delete_consumer_groups(list(args.group), **admin.options())
    failed = []
    for group, future in futures.items():
        try:
            admin.wait(future, f"group {group!r}")
        except ToolError as exc:
            failed.append(str(exc))
    if failed:
        raise ToolError("Deletion of some consumer groups failed: " + "; ".join(failed))
    if args.output == "json":
        print_json({"deleted": list(args.group)})
    else:
        names = ", ".join(f"'{g}'" for g in args.group)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    return 0


def reset_offsets(admin: Admin, args: argparse.Namespace) -> int:
    """Plan new committed offsets; commit them only with --execute, and only for an inactive group (Kafka)."""
    metadata = admin.metadata()
    description = describe_group(admin, args.group)
    state = STATE_NAMES.get(description.state, str(description.state))
    if state not in ("Empty", "Dead"):
        # ConsumerGroupCommand.resetOffsets: live members would overwrite the new offsets on their next commit.
        raise ToolError(f"Assignments can only be reset if the group '{args.group}' is inactive, "
                        f"but the current state is {state}.")
    committed = committed_offsets(admin, args.group)
    partitions = _partitions_to_reset(args, metadata, committed)
    plan = _new_offsets(admin, args, partitions, committed)
    if args.execute:
        request = ConsumerGroupTopicPartitions(args.group, [TopicPartition(t, p, o) for (t, p), o in plan.items()])
        futures = admin.client.alter_consumer_group_offsets([request], **admin.options())
        admin.wait(futures[args.group], f"commit offsets of group {args.group!r}")
    elif not args.dry_run and args.output != "json":
        print("WARN: No action will be performed as the --execute option is missing. "
              "Add --execute to reset the offsets, or --dry-run to say that only the plan is wanted.",
              file=sys.stderr)
    rows = [(args.group, t, p, o) for (t, p), o in sorted(plan.items())]
    emit(args, RESET_HEADERS, rows, extra={"group": args.group, "executed": bool(args.execute)}
         if args.output == "json" else None)
    return 0


def _partitions_to_reset(args: argparse.Namespace, metadata, committed: dict) -> list[tuple[str, int]]:
    """--topic T / T:0,1 (repeatable) or --all-topics (every partition the group has committed)."""
    if args.all_topics:
        return sorted(committed)
    partitions: list[tuple[str, int]] = []
    for spec in args.topic:
        topic, _sep, numbers = spec.partition(":")
        known = metadata.topics.get(topic)
        if known is None or known.error is not None:
            raise ToolError(f"unknown topic {topic!r}")
        if numbers:
            try:
                wanted = [int(n) for n in numbers.split(",")]
            except ValueError:
                raise ToolError(f"--topic {spec!r}: expected TOPIC or TOPIC:P1,P2,...") from None
            absent = [n for n in wanted if n not in known.partitions]
            if absent:
                raise ToolError(f"topic {topic!r} has no partition {', '.join(map(str, absent))}")
        else:
            wanted = sorted(known.partitions)
        partitions += [(topic, n) for n in wanted]
    return partitions


def _new_offsets(admin: Admin, args: argparse.Namespace, partitions: list[tuple[str, int]],
                 committed: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The offset each partition moves to; --to-offset and --shift-by stay inside [earliest, latest] as in Kafka."""
    latest = list_offsets(admin, partitions, OffsetSpec.latest())
    if args.to_latest:
        return latest
    earliest = list_offsets(admin, partitions, OffsetSpec.earliest())
    if args.to_earliest:
        return earliest
    if args.to_datetime is not None:
        found = list_offsets(admin, partitions, OffsetSpec.for_timestamp(_parse_datetime(args.to_datetime)))
        # No record at or after the time: Kafka falls back to the log end offset.
        return {tp: (found[tp] if found[tp] >= 0 else latest[tp]) for tp in partitions}
    if args.to_current:
        return {tp: committed.get(tp, latest[tp]) for tp in partitions}
    if args.shift_by is not None:
        missing = [f"{t}-{p}" for t, p in partitions if (t, p) not in committed]
        if missing:
            raise ToolError(f"cannot shift offset for partition {', '.join(missing)}: "
                            "the group has no committed offset there")
        targets = {tp: committed[tp] + args.shift_by for tp in partitions}
    else:
        targets = dict.fromkeys(partitions, args.to_offset)
    return {tp: min(max(target, earliest[tp]), latest[tp]) for tp, target in targets.items()}


def _parse_datetime(text: str) -> int:
    """ms since the epoch of an ISO-8601 time ('2026-11-23T10:00:00.000', 'Z' or '+hh:mm'; local when none)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm]") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)

