"""`logway` command line: `logway serve --config FILE --listeners ... --advertised-listeners ... --log-dirs ...`."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

import trio

from logway.cli import health, kms
from logway.cli.proxy import add_parser as add_proxy_parser
from logway.cli.tools.commands import TOOL_COMMANDS
from logway.cli.tools.commands import add_parsers as add_tool_parsers
from logway.cli.tools.commands import run as run_tool
from logway.gateway.config import BrokerConfig, environment_properties
from logway.server.config import ConfigError, command_line_properties
from logway.server.security.credentials import CredentialStore
from logway.server.security.scram import MECHANISMS
from logway.storage.errors import LogDirLocked

LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")


def _version() -> str:
    try:
        return importlib.metadata.version("logway")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="logway", description="A Kafka-wire-compatible broker")
    parser.add_argument("--version", action="version", version=f"logway {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", help="a Kafka server.properties file")
    serve.add_argument("--listeners", help="e.g. PLAINTEXT://127.0.0.1:9092 (Kafka's `listeners`)")
    serve.add_argument("--advertised-listeners", help="what clients are told to connect to (`advertised.listeners`)")
    serve.add_argument("--log-dirs", help="comma-separated data directories (`log.dirs`)")
    serve.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE",
        help="any broker property, as kafka-server-start's --override; repeatable",
    )
    serve.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS,
                       help="INFO: topics, recovery, retention and compaction; DEBUG adds group rebalances")
    imp = sub.add_parser("import-kafka-logdir",
                         help="make a stopped Kafka broker's log dir a Logway log dir (copy, or --in-place)")
    imp.add_argument("src", metavar="SRC", help="a log dir of a stopped Apache Kafka broker (has meta.properties)")
    imp.add_argument("dest", metavar="DEST", nargs="?", help="a new or empty directory for Logway's log.dirs")
    imp.add_argument("--in-place", action="store_true",
                     help="adopt SRC itself (Kafka-only files are moved into SRC/.kafka-only) instead of copying")
    users = sub.add_parser("users", help="SCRAM users (stored salted and hashed in the first log dir)")
    users.add_argument("action", choices=("add", "delete", "list"))
    users.add_argument("--config", help="the broker's server.properties (for log.dirs)")
    users.add_argument("--log-dirs", help="the broker's log.dirs (instead of --config)")
    users.add_argument("--virtual-cluster", metavar="NAME",
                       help="a virtual cluster of the proxy whose --config is given: its own users")
    users.add_argument("--user", help="the user name (add, delete)")
    users.add_argument("--password", help="the password (add); read from stdin when omitted")
    users.add_argument("--mechanism", action="append", choices=sorted(MECHANISMS),
                       help="SCRAM-SHA-256 and/or SCRAM-SHA-512 (repeatable; default both)")
    users.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations (4096-16384)")
    users.add_argument("--log-level", default="WARNING", type=str.upper, choices=LOG_LEVELS)
    add_tool_parsers(sub)
    health.add_parser(sub)
    kms.add_parser(sub)
    add_proxy_parser(sub)
    return parser


def import_kafka_logdir(args: argparse.Namespace) -> int:
    """`logway import-kafka-logdir SRC DEST | SRC --in-place`: one line per warning, one line on error."""
    from logway.storage.kafka_import import NotAKafkaLogDir, import_kafka_logdir

    if args.in_place == (args.dest is not None):
        print("logway: import-kafka-logdir: give either DEST or --in-place", file=sys.stderr)
        return 2
    try:
        report = import_kafka_logdir(Path(args.src), args.dest and Path(args.dest), in_place=args.in_place)
    except (NotAKafkaLogDir, OSError) as exc:
        print(f"logway: import-kafka-logdir: {exc}", file=sys.stderr)
        return 1
    where = args.src if args.in_place else args.dest
    counts = ", ".join(f"{topic} ({n})" for topic, n in sorted(report.partitions.items())) or "none"
    print(f"imported {report.source} into {where}: {sum(report.partitions.values())} partitions of {counts}")
    for topic, configs in sorted(report.configs.items()):
        print(f"topic {topic}: configs " + ", ".join(f"{k}={v}" for k, v in sorted(configs.items())))
    for skipped in report.skipped:
        print(f"skipped {skipped}")
    for warning in report.warnings:
        print(f"warning: {warning}")
    return 0


def users_command(args: argparse.Namespace) -> int:
    """`logway users add|delete|list`: Kafka's kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]', offline."""
    directory = _users_directory(args)
    store = CredentialStore(directory)
    if args.action == "list":
        for user, mechanisms in sorted(store.users().items()):
            described = ", ".join(f"{m} (iterations={c.iterations})" for m, c in sorted(mechanisms.items()))
            print(f"{user}: {described}")
        return 0
    if not args.user:
        raise ConfigError(f"users {args.action}: --user is required")
    if args.action == "delete":
        mechanisms = args.mechanism or [None]
        found = [store.delete(args.user, m) for m in mechanisms]
        if not any(found):
            print(f"logway: no SCRAM credentials for user {args.user!r}", file=sys.stderr)
            return 1
        return 0
    password = args.password if args.password is not None else sys.stdin.readline().rstrip("\n")
    if not password:
        raise ConfigError("users add: empty password")
    directory.mkdir(parents=True, exist_ok=True)
    for mechanism in args.mechanism or sorted(MECHANISMS):
        try:
            store.set(args.user, mechanism, password, args.iterations)
        except ValueError as exc:
            raise ConfigError(f"users add: {exc}") from None
    return 0


def _users_directory(args: argparse.Namespace) -> Path:
    """Where the SCRAM users live: the broker's first log dir, or a proxy's virtual cluster's own directory."""
    overrides = environment_properties(os.environ)
    if args.log_dirs:
        overrides["log.dirs"] = args.log_dirs
    if args.virtual_cluster is None:
        return Path(BrokerConfig.load(args.config, overrides).log_dirs[0])
    from logway.proxy.config import ProxyConfig

    if args.config is None:
        raise ConfigError("users --virtual-cluster: --config (the proxy's properties file) is required")
    proxy = ProxyConfig.load(args.config, {k: v for k, v in overrides.items() if k == "log.dirs"})
    clusters = {c.name: c for c in proxy.virtual_clusters.values()}
    if args.virtual_cluster not in clusters:
        raise ConfigError(f"users --virtual-cluster {args.virtual_cluster!r}: not in proxy.virtual.clusters "
                          f"({', '.join(sorted(clusters)) or 'none'})")
    return proxy.realm_dir(clusters[args.virtual_cluster])


def config_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> BrokerConfig:
    """Flags over LOGWAY_* environment settings over the --config file, over Kafka's defaults."""
    overrides = environment_properties(os.environ if environ is None else environ)
    overrides |= command_line_properties(args.override, {
        "listeners": args.listeners, "advertised.listeners": args.advertised_listeners, "log.dirs": args.log_dirs})
    return BrokerConfig.load(args.config, overrides)


def check_log_dirs(config: BrokerConfig) -> None:
    """Each log dir exists (or can be made) as a writable directory; otherwise one ConfigError naming it."""
    key = "log.dirs" if config.properties.get("log.dirs") else "log.dir"
    for d in config.log_dirs:
        path = Path(d)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise ConfigError(f"{key}={d!r}: not a directory") from None
        except OSError as exc:
            raise ConfigError(f"{key}={d!r}: cannot create the directory: {exc.strerror or exc}") from None
        if not path.is_dir():
            raise ConfigError(f"{key}={d!r}: not a directory")
        probe = path / f".logway-write-check-{uuid.uuid4().hex}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise ConfigError(f"{key}={d!r}: not writable: {exc.strerror or exc}") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "import-kafka-logdir":
        return import_kafka_logdir(args)
    if args.command in TOOL_COMMANDS:
        return run_tool(args)
    if args.command == "health":
        return health.health_command(args)
    if args.command == "kms":
        return kms.kms_command(args)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "users":
        try:
            return users_command(args)
        except ConfigError as exc:
            print(f"logway: configuration error: {exc}", file=sys.stderr)
            return 2
    if args.command == "proxy":
        from logway.cli.proxy import main as proxy_main

        return proxy_main(args)
    if args.command == "serve":
        from logway.gateway.run import serve
        from logway.server.listeners import StartupError

        try:
            config = config_from_args(args)
            check_log_dirs(config)
        except ConfigError as exc:
            print(f"logway: configuration error: {exc}", file=sys.stderr)
            return 2
        try:
            trio.run(serve, config)
        except LogDirLocked as exc:  # a second broker on the same log.dirs: one line, no traceback
            print(f"logway: {exc}", file=sys.stderr)
            return 1
        except StartupError as exc:
            print(f"logway: start-up error: {exc}", file=sys.stderr)
            return 1
    return 0
