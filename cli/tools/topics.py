"""`logway topics list|describe|create|delete|alter-config`: kafka-topics.sh (and kafka-configs for a topic)."""

from __future__ import annotations

import argparse

from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic

from logway.cli.tools.admin_client import Admin, parse_config_list
from logway.cli.tools.configs import alter_configs, non_default_configs
from logway.cli.tools.errors import ToolError
from logway.cli.tools.output import emit, print_json


def list_topics(admin: Admin, args: argparse.Namespace) -> int:
    """Topic names one a line, as kafka-topics.sh --list (internal topics only with --include-internal)."""
    names = sorted(t for t in admin.metadata().topics if args.include_internal or not t.startswith("__"))
    if args.output == "json":
        print_json(names)
    else:
        for name in names:
            print(name)
    return 0


def describe_topics(admin: Admin, args: argparse.Namespace) -> int:
    """Partitions (leader, replicas, ISR) and non-default configs of each topic, as kafka-topics.sh --describe."""
    metadata = admin.metadata()
    wanted = args.topic or sorted(t for t in metadata.topics if not t.startswith("__"))
    missing = [t for t in wanted if t not in metadata.topics or _unknown(metadata.topics[t])]
    if missing:
        raise ToolError(f"unknown topic {', '.join(map(repr, missing))}")
    configs = non_default_configs(admin, "topic", wanted)
    described = []
    for name in wanted:
        topic = metadata.topics[name]
        partitions = [topic.partitions[p] for p in sorted(topic.partitions)]
        described.append({
            "topic": name,
            "partition_count": len(partitions),
            "replication_factor": len(partitions[0].replicas) if partitions else 0,
            "configs": configs[name],
            "partitions": [{"partition": p.id, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs)}
                           for p in partitions],
        })
    if args.output == "json":
        print_json(described)
        return 0
    rows = [(t["topic"], p["partition"], p["leader"], ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])))
            for t in described for p in t["partitions"]]
    for t in described:
        shown = ",".join(f"{k}={v}" for k, v in t["configs"].items())
        print(f"Topic: {t['topic']}\tPartitionCount: {t['partition_count']}\t"
              f"ReplicationFactor: {t['replication_factor']}\tConfigs: {shown}")
    print()
    emit(args, ("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"), rows)
    return 0


def _unknown(topic) -> bool:
    return topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def create_topic(admin: Admin, args: argparse.Namespace) -> int:
    """Create one topic; -1 partitions / replication factor take the broker's defaults (KIP-464)."""
    configs = parse_config_list(args.config)
    new = NewTopic(args.topic, num_partitions=args.partitions, replication_factor=args.replication_factor,
                   config=configs)
    futures = admin.client.create_topics([new], **admin.options())
    admin.wait(futures[args.topic], f"create topic {args.topic!r}")
    _done(args, f"Created topic {args.topic}.", {"created": args.topic})
    return 0


def delete_topic(admin: Admin, args: argparse.Namespace) -> int:
    futures = admin.client.delete_topics(list(args.topic), **admin.options())
    for name, future in futures.items():
        admin.wait(future, f"delete topic {name!r}")
    _done(args, "\n".join(f"Deleted topic {t}." for t in args.topic), {"deleted": list(args.topic)})
    return 0


def alter_topic_config(admin: Admin, args: argparse.Namespace) -> int:
    """kafka-configs --entity-type topics --alter for one topic (--add-config / --delete-config)."""
    topic = admin.metadata().topics.get(args.topic)
    if topic is None or _unknown(topic):
        raise ToolError(f"unknown topic {args.topic!r}")
    alter_configs(admin, "topic", args.topic, parse_config_list(args.add_config), args.delete_config)
    _done(args, f"Completed updating config for topic {args.topic}.", {"altered": args.topic})
    return 0


def _done(args: argparse.Namespace, line: str, value: dict) -> None:
    print_json(value) if args.output == "json" else print(line)

