"""`logway proxy`: Logway in front of an existing Kafka-compatible cluster (flags or a properties file)."""

from __future__ import annotations

import argparse
import sys

import trio

from logway.server.config import ConfigError, command_line_properties


def add_parser(sub) -> None:
    """The `proxy` subcommand's flags (registered by cli/main.py)."""
    proxy = sub.add_parser("proxy", help="run as a proxy in front of an existing Kafka cluster")
    proxy.add_argument("--config", help="a properties file: listeners, security and proxy.* keys")
    proxy.add_argument("--upstream-bootstrap-servers", help="host:port,... of the upstream cluster "
                       "(proxy.upstream.bootstrap.servers)")
    proxy.add_argument("--listeners", help="e.g. PLAINTEXT://127.0.0.1:9192; broker N is on port + 1 + N")
    proxy.add_argument("--advertised-listeners", help="what clients are told to connect to")
    proxy.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="any proxy or listener property; repeatable")
    proxy.add_argument("--log-level", default="INFO", type=str.upper,
                       choices=("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG"))


def config_from_args(args: argparse.Namespace):
    from logway.proxy.config import ProxyConfig

    overrides = command_line_properties(args.override, {
        "listeners": args.listeners, "advertised.listeners": args.advertised_listeners,
        "proxy.upstream.bootstrap.servers": args.upstream_bootstrap_servers})
    return ProxyConfig.load(args.config, overrides)


def main(args: argparse.Namespace) -> int:
    import logging

    from logway.proxy.server import serve_proxy
    from logway.server.listeners import StartupError

    try:
        config = config_from_args(args)
    except ConfigError as exc:
        print(f"logway: configuration error: {exc}", file=sys.stderr)
        return 2
    for warning in config.warnings:
        logging.getLogger("logway.proxy").warning("%s", warning)
    try:
        trio.run(serve_proxy, config)
    except ConfigError as exc:  # a filter's setting found wrong as it is built (an audit file it cannot open)
        print(f"logway: configuration error: {exc}", file=sys.stderr)
        return 2
    except StartupError as exc:
        print(f"logway: start-up error: {exc}", file=sys.stderr)
        return 1
    return 0
