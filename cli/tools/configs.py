"""`logway configs describe|alter`: kafka-configs.sh for topics and brokers (DescribeConfigs, IncrementalAlterConfigs)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from logway.cli.tools.admin_client import Admin, parse_config_list
from logway.cli.tools.errors import ToolError
from logway.cli.tools.output import emit, print_json

RESOURCE_TYPES = {"topic": ResourceType.TOPIC, "broker": ResourceType.BROKER}
# Without --all kafka-configs shows only the dynamic configs of the entity (ConfigCommand's configSourceFilter).
DYNAMIC_SOURCE = {"topic": ConfigSource.DYNAMIC_TOPIC_CONFIG, "broker": ConfigSource.DYNAMIC_BROKER_CONFIG}


def describe(admin: Admin, kind: str, names: Iterable[str]) -> dict[str, list[ConfigEntry]]:
    """Every config entry of each entity, sorted by name."""
    resources = [ConfigResource(RESOURCE_TYPES[kind], name) for name in names]
    if not resources:
        return {}
    futures = admin.client.describe_configs(resources, **admin.options())
    return {resource.name: sorted(admin.wait(future, f"describe configs of {kind} {resource.name!r}").values(),
                                  key=lambda e: e.name)
            for resource, future in futures.items()}


def non_default_configs(admin: Admin, kind: str, names: Iterable[str]) -> dict[str, dict[str, str | None]]:
    """name -> {config: value} for the configs set on each entity itself."""
    return {name: {e.name: e.value for e in entries if ConfigSource(e.source) == DYNAMIC_SOURCE[kind]}
            for name, entries in describe(admin, kind, names).items()}


def alter_configs(admin: Admin, kind: str, name: str, add: Mapping[str, str], delete: Iterable[str]) -> None:
    """Set ``add`` and remove ``delete`` in one IncrementalAlterConfigs request (KIP-339)."""
    delete = list(delete)
    if not add and not delete:
        raise ToolError("nothing to change: give --add-config and/or --delete-config")
    both = set(add) & set(delete)
    if both:
        raise ToolError(f"configs both added and deleted: {', '.join(sorted(both))}")
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in add.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    resource = ConfigResource(RESOURCE_TYPES[kind], name, incremental_configs=entries)
    futures = admin.client.incremental_alter_configs([resource], **admin.options())
    for future in futures.values():
        admin.wait(future, f"alter configs of {kind} {name!r}")


def describe_command(admin: Admin, args: argparse.Namespace) -> int:
    kind = _kind(args.entity_type)
    if kind == "topic":
        admin.metadata()  # a broker that is down fails here with one line, before per-entity calls
    entries = describe(admin, kind, [args.entity_name])[args.entity_name]
    if not args.all:
        entries = [e for e in entries if ConfigSource(e.source) == DYNAMIC_SOURCE[kind]]
    headers = ("NAME", "VALUE", "SOURCE", "SENSITIVE", "READ-ONLY")
    rows = [(e.name, e.value, ConfigSource(e.source).name, str(e.is_sensitive).lower(), str(e.is_read_only).lower())
            for e in entries]
    if args.output == "json":
        print_json({"entity_type": args.entity_type, "entity_name": args.entity_name, "configs": [
            {"name": e.name, "value": e.value, "source": ConfigSource(e.source).name, "sensitive": e.is_sensitive,
             "read_only": e.is_read_only} for e in entries]})
    else:
        emit(args, headers, rows)
    return 0


def alter_command(admin: Admin, args: argparse.Namespace) -> int:
    kind = _kind(args.entity_type)
    alter_configs(admin, kind, args.entity_name, parse_config_list(args.add_config), args.delete_config)
    noun = "topic" if kind == "topic" else "broker"
    if args.output == "json":
        print_json({"altered": {"entity_type": args.entity_type, "entity_name": args.entity_name}})
    else:
        print(f"Completed updating config for {noun} {args.entity_name}.")
    return 0


def _kind(entity_type: str) -> str:
    return entity_type.rstrip("s")

