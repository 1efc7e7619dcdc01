"""The operator tools' `logway` subcommands: their arguments, and running one with a one-line error on failure.

Only argparse is imported here; a tool's module (and the Kafka client it uses) is imported when that tool
runs, so `logway serve` starts no slower for the tools being there.
"""

from __future__ import annotations

import argparse
import importlib
import sys

TOOL_COMMANDS = ("topics", "groups", "configs", "dump-log")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add `topics`, `groups`, `configs` (Kafka-protocol clients) and `dump-log` (reads segment files)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="a broker to connect to (any Kafka-compatible broker)")
    common.add_argument("--command-config", metavar="FILE",
                        help="client properties, e.g. security.protocol, sasl.mechanism, sasl.jaas.config")
    common.add_argument("--output", choices=("table", "json"), default="table")
    common.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to wait for the broker (default 10)")
    _topics(sub, common)
    _groups(sub, common)
    _configs(sub, common)
    _dump_log(sub)


def _topics(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    topics = sub.add_parser("topics", help="list, describe, create, delete topics; alter a topic's configs")
    actions = topics.add_subparsers(dest="action", required=True)
    lst = actions.add_parser("list", parents=[common], help="topic names")
    lst.add_argument("--include-internal", action="store_true", help="also __consumer_offsets and other __ topics")
    lst.set_defaults(run="topics:list_topics")
    desc = actions.add_parser("describe", parents=[common], help="partitions, leaders, ISR and non-default configs")
    desc.add_argument("--topic", action="append", help="a topic (repeatable; default every topic)")
    desc.set_defaults(run="topics:describe_topics")
    create = actions.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=int, default=-1,
                        help="default: the broker's default.replication.factor")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config (repeatable)")
    create.set_defaults(run="topics:create_topic")
    delete = actions.add_parser("delete", parents=[common], help="delete topics")
    delete.add_argument("--topic", action="append", required=True, help="a topic (repeatable)")
    delete.set_defaults(run="topics:delete_topic")
    alter = actions.add_parser("alter-config", parents=[common], help="set or remove a topic's configs")
    alter.add_argument("--topic", required=True)
    _config_changes(alter)
    alter.set_defaults(run="topics:alter_topic_config")


def _groups(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    groups = sub.add_parser("groups", help="consumer groups: list, describe (members, offsets, lag), delete, "
                                           "reset-offsets")
    actions = groups.add_subparsers(dest="action", required=True)
    lst = actions.add_parser("list", parents=[common], help="groups and their states")
    lst.set_defaults(run="groups:list_groups")
    desc = actions.add_parser("describe", parents=[common],
                              help="per partition: committed offset, log end offset, lag and the owning member")
    desc.add_argument("--group", action="append", help="a group (repeatable; default every group)")
    desc.add_argument("--members", action="store_true", help="one row per member with its assignment")
    desc.set_defaults(run="groups:describe_groups")
    delete = actions.add_parser("delete", parents=[common], help="delete empty groups and their offsets")
    delete.add_argument("--group", action="append", required=True, help="a group (repeatable)")
    delete.set_defaults(run="groups:delete_groups")
    reset = actions.add_parser("reset-offsets", parents=[common],
                               help="move an inactive group's committed offsets (a dry run unless --execute)")
    reset.add_argument("--group", required=True)
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P1,P2]", help="repeatable")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has committed")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-current", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--shift-by", type=int, metavar="N", help="may be negative")
    to.add_argument("--to-datetime", metavar="ISO", help="e.g. 2026-11-23T10:00:00.000Z (local time without zone)")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show the plan (the default)")
    reset.set_defaults(run="groups:reset_offsets")


def _configs(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    configs = sub.add_parser("configs", help="describe or alter topic and broker configs")
    actions = configs.add_subparsers(dest="action", required=True)
    for action, text in (("describe", "the entity's dynamic configs (--all: every config)"),
                         ("alter", "set (--add-config) or remove (--delete-config) configs")):
        p = actions.add_parser(action, parents=[common], help=text)
        p.add_argument("--entity-type", required=True, choices=("topics", "brokers"))
        p.add_argument("--entity-name", required=True, help="a topic name or a broker id")
        if action == "describe":
            p.add_argument("--all", action="store_true", help="every config, defaults included")
        else:
            _config_changes(p)
        p.set_defaults(run=f"configs:{action}_command")


def _config_changes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=[A,B]]",
                        help="configs to set, as kafka-configs (square brackets around values holding commas)")
    parser.add_argument("--delete-config", action="append", default=[], metavar="KEY", help="a config to remove")


def _dump_log(sub: argparse._SubParsersAction) -> None:
    dump = sub.add_parser("dump-log", help="print segment files (.log, .index, .timeindex) as kafka-dump-log does")
    dump.add_argument("paths", nargs="+", metavar="PATH", help="segment files (Kafka's --files, space-separated)")
    dump.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    dump.add_argument("--print-data", "--print-data-log", action="store_true",
                      help="print keys and values as UTF-8 (implies --deep-iteration)")
    dump.add_argument("--index-sanity-check", action="store_true",
                      help="for index files, only the start-up sanity check, not the entries")
    dump.add_argument("--verify-index-only", action="store_true",
                      help="for index files, check against the log without printing the entries")
    dump.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024, metavar="BYTES",
                      help="largest batch an index entry may point at (default 5 MiB, as Kafka)")
    dump.set_defaults(run="dump_log:dump_log_command", action=None)


def run(args: argparse.Namespace) -> int:
    """Run the chosen tool; a ToolError (unknown topic, broker down, bad input) is one line and exit 1."""
    module_name, _sep, function = args.run.partition(":")
    module = importlib.import_module(f"logway.cli.tools.{module_name}")
    from logway.cli.tools.errors import ToolError

    name = " ".join(part for part in (args.command, args.action) if part)
    try:
        if args.command == "dump-log":
            return getattr(module, function)(args)
        from logway.cli.tools.admin_client import Admin

        return getattr(module, function)(Admin(args.bootstrap_server, args.command_config, args.timeout), args)
    except ToolError as exc:
        print(f"logway: {name}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `logway ... | head`
        return 0
    except KeyboardInterrupt:
        return 130
