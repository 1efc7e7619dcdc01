"""The Logway a client of the ecosystem tests talks to: a fresh `logway serve` process, directly or through a
`logway proxy` process in front of it (bench/procs.py and bench/proxy.py start both, as the proxy matrix does)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from bench.procs import Logway
from bench.proxy import LogwayProxy

KINDS = ("direct", "proxy")


def start_logway(kind: str, workdir: Path, stack: ExitStack) -> str:
    """Start a Logway broker in ``workdir`` (and a proxy in front of it when ``kind`` is "proxy"), stopped when
    ``stack`` closes; the bootstrap a client should use."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    # No initial rebalance delay (Kafka's default 3 s), as the reference Kafka of compat_tests/kafka has.
    upstream = Logway(workdir / "logway", overrides={"group.initial.rebalance.delay.ms": "0"})
    stack.callback(upstream.stop)
    upstream.start()
    if kind == "direct":
        return upstream.bootstrap
    proxy = LogwayProxy(workdir / "proxy", upstream)
    stack.callback(proxy.stop)
    proxy.start()
    return proxy.bootstrap
