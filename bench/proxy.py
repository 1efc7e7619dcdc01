"""Proxy benchmark: produce and consume MB/s and end-to-end latency through `logway proxy` and `tansu proxy`,
each beside the upstream broker it fronts, in alternated rounds (the order rotates every round):

- Logway broker: direct, and through `logway proxy`;
- Tansu broker (memory engine): direct, through `tansu proxy`, and through `logway proxy` (same Tansu process),
  so the two proxies are compared on the same upstream.

    python -m bench.proxy [--rounds N] [--count N] [--size BYTES] [--upstreams logway,tansu] [--metrics] [--latest]

``--metrics`` adds `logway proxy` with metrics.port set (its per-client metrics served) in front of the same Logway.
``--encryption`` adds `logway proxy` with the record-encryption filter (file KMS) in front of the same Logway, twice:
encrypting every topic, and configured for topics the load never names (the cost of the filter's bytes-only look).
``--raw`` replaces the librdkafka load by a plain socket sending pre-built Produce requests (--count of them, 4
partitions x --raw-kb KB record sets each, 4 in flight) and Fetch v16 requests for the same bytes, Logway upstream
only: the client costs next to nothing, so the proxy's CPU-s/GB is steadier on a shared machine.

`make bench` runs it after bench.tls; `--latest` replaces the "## Proxy" section of bench/LATEST.md with the
table. A proxy's CPU is read like a broker's (LoadRun.broker_cpu_s is the proxy process's alone).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.admin import create_topic, wait_high_watermark
from bench.driver import run_load
from bench.latest import LATEST, write_section
from bench.peer import TANSU_VERSION, tansu_binary
from bench.procs import Broker, Logway, Tansu, free_port, free_port_block, recv_exact, scratch_dir
from bench.profile import py_spy, summarize
from bench.report import git_revision, machine
from logway.wire.protocol import build, encode_body, entity_reader, request_type, response_type
from logway.wire.records import build_batch

log = logging.getLogger("bench.proxy")
METRICS = (("produce_mb_s", "produce MB/s"), ("consume_mb_s", "consume MB/s"),
           ("e2e_p50_ms", "e2e p50 ms"), ("e2e_p99_ms", "e2e p99 ms"), ("target_cpu_s", "CPU s (produce+consume)"),
           ("produce_cpu_s_per_gb", "produce CPU s/GB"), ("consume_cpu_s_per_gb", "consume CPU s/GB"))


# The node id each upstream kind reports (Logway's node.id default; Tansu's fixed id).
NODE_IDS = {"logway": 1, "tansu": 111, "kafka": 1}
METERED = "logway proxy +metrics -> Logway"
ENCRYPTING = "logway proxy +encryption -> Logway"
ENCRYPTING_OTHERS = "logway proxy +encryption (other topics) -> Logway"
PLAIN = "logway proxy -> Logway"


class LogwayProxy(Broker):
    """`logway proxy` in front of ``upstream`` (one broker): its node on the port after the bootstrap port
    (proxy.broker.port.offset = 1 - node id, so a node id of 111 needs no block of 113 free ports)."""

    name = "logway-proxy"

    def __init__(self, workdir: Path, upstream: Broker, metrics: bool = False, encrypt: str | None = None) -> None:
        super().__init__(workdir)
        self.upstream = upstream
        self.node_id = NODE_IDS.get(upstream.name, 1)
        self.port = free_port_block(2)
        self.metrics_port = free_port() if metrics else None  # per-client metrics served (metrics.port)
        self.encrypt = encrypt  # the record-encryption filter's topics regex, if any

    def command(self) -> list[str]:
        metrics = ["--override", f"metrics.port={self.metrics_port}"] if self.metrics_port else []
        if self.encrypt is not None:
            metrics += [arg for setting in ("proxy.filters=enc", "proxy.filter.enc.type=record-encryption",
                                            f"proxy.filter.enc.topics={self.encrypt}")
                        for arg in ("--override", setting)]
        return [sys.executable, "-m", "logway.cli", "proxy", "--upstream-bootstrap-servers",
                self.upstream.bootstrap, "--listeners", f"PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.workdir / 'state'}",
                "--override", f"proxy.node.id.range={self.node_id}-{self.node_id}",
                "--override", f"proxy.broker.port.offset={1 - self.node_id}", *metrics, "--log-level", "WARNING"]


class TansuProxy(Broker):
    """`tansu proxy` (single origin, no filters) in front of ``upstream``; it advertises its own listener."""

    name = "tansu-proxy"

    def __init__(self, workdir: Path, upstream: Broker, binary: Path) -> None:
        super().__init__(workdir)
        self.upstream = upstream
        self.binary = binary

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [str(self.binary), "proxy", "--listener-url", url, "--advertised-listener-url", url,
                "--origin-url", f"tcp://{self.upstream.bootstrap}"]


@dataclass
class Target:
    """One way of reaching an upstream: the broker itself or a proxy in front of it."""

    label: str
    endpoint: Broker
    upstream: Broker


def one_round(target: Target, args: argparse.Namespace, n: int) -> dict[str, float]:
    """Produce a fixed count, consume it back from earliest, then tail at a fixed rate for e2e latency."""
    endpoint, upstream = target.endpoint, target.upstream
    slug = re.sub(r"[^a-z0-9]+", "-", target.label.lower()).strip("-")
    topic = f"proxy-bench-{slug}-{n}"
    create_topic(upstream.bootstrap, topic, args.partitions)
    produce = run_load(endpoint, [{"mode": "rdkafka.produce", "topic": topic, "count": args.count,
                                   "size": args.size, "round_robin": args.partitions}])
    wait_high_watermark(upstream.bootstrap, topic, 30)
    ends = [args.count // args.partitions + (1 if p < args.count % args.partitions else 0)
            for p in range(args.partitions)]
    # fetch.queue.backoff.ms: librdkafka's default pauses fetching for 1 s whenever its 64 MiB prefetch queue
    # fills, which a fast broker makes it do 0-3 times per 200 MB (bench/LATEST.md "Consume investigation"):
    # the figure would count those pauses, not the path between client and broker. Every target gets the same.
    consume = run_load(endpoint, [{"mode": "rdkafka.consume", "topic": topic, "assign": list(range(args.partitions)),
                                   "ends": ends, "size": args.size,
                                   "config": {"fetch.queue.backoff.ms": args.fetch_queue_backoff_ms}}])
    e2e_topic = f"proxy-e2e-{slug}-{n}"
    create_topic(upstream.bootstrap, e2e_topic, 1)
    count = args.e2e_rate * args.e2e_seconds
    e2e = run_load(endpoint, [
        {"mode": "rdkafka.e2e_consume", "topic": e2e_topic, "partitions": 1, "count": count, "size": 128},
        {"mode": "rdkafka.e2e_produce", "topic": e2e_topic, "rate": args.e2e_rate, "duration": args.e2e_seconds,
         "size": 128}])
    latency = next(r for r in e2e.results if "p99_ms" in r)
    return {"produce_mb_s": produce.total("bytes") / produce.span_s / 1e6,
            "consume_mb_s": consume.total("bytes") / consume.span_s / 1e6,
            "e2e_p50_ms": latency["p50_ms"], "e2e_p99_ms": latency["p99_ms"],
            "target_cpu_s": produce.broker_cpu_s + consume.broker_cpu_s,
            "produce_cpu_s_per_gb": produce.broker_cpu_s / (produce.total("bytes") / 1e9),
            "consume_cpu_s_per_gb": consume.broker_cpu_s / (consume.total("bytes") / 1e9),
            "errors": produce.total("errors") + consume.total("errors")}


def _raw_frame(key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", key, version, correlation_id, 5) + b"bench" + b"\x00"  # (flexible versions)
    return struct.pack(">i", len(header) + len(body)) + header + body


def _raw_read(sock: socket.socket) -> bytes:
    return recv_exact(sock, struct.unpack(">i", recv_exact(sock, 4))[0])


def _raw_topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    body = encode_body(build(request_type(3, 12), {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False}))
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(_raw_frame(3, 12, 1, body))
        answer = _raw_read(sock)  # correlation id, header tags (none), the body
        return entity_reader(response_type(3, 12))(answer, 5)[0].topics[0].topic_id


def raw_round(target: Target, args: argparse.Namespace, n: int) -> dict[str, float]:
    """--raw: ``args.count`` Produce v9 requests of 4 record sets (one batch of ``args.raw_kb`` 1 KB records each)
    to node 1 through ``target``, then Fetch v16 requests reading the same bytes back; MB/s and the target
    process's CPU-s/GB of each."""
    topic = f"proxy-raw-{re.sub(r'[^a-z0-9]+', '-', target.label.lower()).strip('-')}-{n}"
    create_topic(target.upstream.bootstrap, topic, 4)
    batch = build_batch([(None, os.urandom(1024), ())] * args.raw_kb)
    body = encode_body(build(request_type(0, 9), {
        "transactional_id": None, "acks": 1, "timeout": timedelta(seconds=30),
        "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch} for p in range(4)]}]}))
    node = target.endpoint.port + 1 if isinstance(target.endpoint, LogwayProxy) else target.endpoint.port
    out: dict[str, float] = {"errors": 0}
    with socket.create_connection(("127.0.0.1", node)) as sock:
        cpu, t0, sent = target.endpoint.cpu_seconds(), time.monotonic(), 0
        for i in range(args.count):
            sock.sendall(_raw_frame(0, 9, i, body))
            sent += len(body)
            if i >= 3:
                _raw_read(sock)  # (4 in flight)
        for _ in range(min(args.count, 3)):
            _raw_read(sock)
        out |= _rates("produce", sent, time.monotonic() - t0, target.endpoint.cpu_seconds() - cpu)
    # (asked of the target: an encrypting proxy learns the topic's id from the Metadata answers it forwards)
    topic_id, offsets, got = _raw_topic_id(target.endpoint.bootstrap, topic), [0] * 4, 0
    with socket.create_connection(("127.0.0.1", node)) as sock:
        cpu, t0 = target.endpoint.cpu_seconds(), time.monotonic()
        for i in range(args.count // 4):  # (each answer holds a record set of every partition: 4 requests' worth)
            fetch = encode_body(build(request_type(1, 16), {
                "max_wait": 0, "min_bytes": 1, "max_bytes": 8 << 20, "isolation_level": 0, "session_id": 0,
                "session_epoch": -1, "rack_id": "", "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition": p, "fetch_offset": offsets[p], "partition_max_bytes": len(batch),
                     "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}
                    for p in range(4)]}]}))
            sock.sendall(_raw_frame(1, 16, i, fetch))
            got += len(_raw_read(sock))
            offsets = [offset + args.raw_kb for offset in offsets]
        out |= _rates("consume", got, time.monotonic() - t0, target.endpoint.cpu_seconds() - cpu)
    return out


def _rates(what: str, nbytes: int, seconds: float, cpu: float) -> dict[str, float]:
    return {f"{what}_mb_s": nbytes / seconds / 1e6, f"{what}_cpu_s_per_gb": cpu / (nbytes / 1e9)}


def raw_markdown(results: dict[str, list[dict]], args: argparse.Namespace, load: tuple[str, str]) -> str:
    """The --raw table: per-target medians (min-max), and each proxy's ratios to the proxy without metrics."""
    keys = (("produce_mb_s", "produce MB/s"), ("consume_mb_s", "consume MB/s"),
            ("produce_cpu_s_per_gb", "produce CPU s/GB"), ("consume_cpu_s_per_gb", "consume CPU s/GB"))
    lines = [f"## Proxy, raw load (`python -m bench.proxy {' '.join(sys.argv[1:])}`, git {git_revision()})", "",
             f"{args.rounds} rounds of {args.count} Produce v9 requests (4 record sets of {args.raw_kb} KB, 4 in "
             f"flight) and the same bytes fetched back (Fetch v16, 4 partitions an answer), a plain socket as the "
             f"client. CPU s/GB is the target process's. Load average {load[0]} at start, {load[1]} at end.", "",
             "| target | " + " | ".join(label for _, label in keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for label, rows in results.items():
        lines.append(f"| {label} | " + " | ".join(spread([r[k] for r in rows]) for k, _ in keys) + " |")
    for other in (METERED, ENCRYPTING, ENCRYPTING_OTHERS):
        if other in results:
            lines += ["", f"{other} / {PLAIN}, per round: produce MB/s "
                      f"{spread(ratios(results, other, PLAIN, 'produce_mb_s'))}x, consume MB/s "
                      f"{spread(ratios(results, other, PLAIN, 'consume_mb_s'))}x, produce CPU "
                      f"{spread(ratios(results, other, PLAIN, 'produce_cpu_s_per_gb'))}x, consume "
                      f"CPU {spread(ratios(results, other, PLAIN, 'consume_cpu_s_per_gb'))}x."]
    return "\n".join(lines + [""])


def profile_round(target: Target, args: argparse.Namespace, out: Path) -> str:
    """One more round on ``target`` with py-spy recording its process (200 Hz); the functions with the most
    self samples, as markdown lines."""
    spy = subprocess.Popen([py_spy(), "record", "--pid", str(target.endpoint.pid), "--format", "raw", "--rate",
                            "200", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        result = one_round(target, args, 99)
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            spy.wait(60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait(10)
    summary = summarize(out, top=12)
    lines = [f"### py-spy of `{target.label}` over one round (produce {result['produce_mb_s']:.0f} MB/s, consume "
             f"{result['consume_mb_s']:.0f} MB/s, e2e p99 {result['e2e_p99_ms']:.2f} ms while profiled; "
             f"{summary['samples']} busy samples, {summary['idle_samples']} idle)", "",
             "| self % | total % | function |", "|---|---|---|"]
    for row in summary["top"]:
        lines.append(f"| {row['self_pct']:.1f} | {row['total_pct']:.1f} | `{row['function']}` |")
    return "\n".join(lines + [""])


def spread(values: list[float], digits: int = 2) -> str:
    """Median and min-max of per-round values."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def ratios(results: dict[str, list[dict]], num: str, den: str, key: str) -> list[float]:
    """Per-round ratios of two targets measured in the same round."""
    return [a[key] / b[key] for a, b in zip(results[num], results[den], strict=True)]


def added(results: dict[str, list[dict]], proxy: str, direct: str, key: str) -> list[float]:
    """Per-round latency a proxy adds over direct to its upstream, in the same round."""
    return [a[key] - b[key] for a, b in zip(results[proxy], results[direct], strict=True)]


def verdict(met: bool) -> str:
    return "met" if met else "missed"


def markdown(results: dict[str, list[dict]], args: argparse.Namespace, load: tuple[str, str], minutes: float) -> str:
    """The "## Proxy" section: per-target medians (min-max), the ratios and added latency, the issue's goals."""
    stamp, info = datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"), machine()
    lines = [f"## Proxy — {stamp} (`python -m bench.proxy`, a step of `make bench`)", "",
             f"Command: `python -m bench.proxy {' '.join(sys.argv[1:])}` · git {git_revision()} · {minutes:.1f} min · "
             f"{args.rounds} rounds, the order of the targets rotating every round. Load average at start "
             f"{load[0]}, at end {load[1]} (the machine is shared with other jobs).", "",
             f"Machine: {info['cpu']}, {info['cores']} cores, Linux {info['kernel']}, Python {info['python']}, "
             f"librdkafka {info['librdkafka']}.", "",
             f"Each round per target: {args.count} x {args.size} B produced over {args.partitions} partitions "
             f"(librdkafka, linger.ms=5), the same read back from earliest (fetch.queue.backoff.ms="
             f"{args.fetch_queue_backoff_ms}: librdkafka's 1 s default pause when its queue fills made this bimodal), then e2e latency of 128 B messages at "
             f"{args.e2e_rate} msg/s for {args.e2e_seconds} s (tailing consumer). Upstreams: a Logway broker (data "
             f"on disk) and Tansu {TANSU_VERSION} (memory engine); `tansu proxy` and `logway proxy` front the "
             f"same Tansu process. Figures are medians over rounds, (min-max) across rounds; ratios and added "
             f"latency are computed per round between targets of the same round. CPU s is the process reached "
             f"(proxy alone when a proxy) during produce + consume."
             + (" Pinned (--pin): the brokers and proxies ran on one CPU, the load generators on the other(s)."
                if args.pin else ""), "",
             "| target | " + " | ".join(label for _, label in METRICS) + " |",
             "|---" * (len(METRICS) + 1) + "|"]
    for label, rows in results.items():
        lines.append(f"| {label} | " + " | ".join(spread([r[k] for r in rows]) for k, _ in METRICS) + " |")
    lines += ["", "| comparison | produce | consume | p50 added ms | p99 added ms |", "|---|---|---|---|---|"]
    pairs = [("logway proxy -> Logway", "Logway direct"), (METERED, "Logway direct"),
             (METERED, "logway proxy -> Logway"), (ENCRYPTING, PLAIN), (ENCRYPTING_OTHERS, PLAIN), ("logway proxy -> Tansu", "Tansu direct"),
             ("tansu proxy -> Tansu", "Tansu direct"), ("logway proxy -> Tansu", "tansu proxy -> Tansu")]
    for num, den in pairs:
        if num not in results or den not in results:
            continue
        through = ratios(results, num, den, "produce_mb_s"), ratios(results, num, den, "consume_mb_s")
        lat = added(results, num, den, "e2e_p50_ms"), added(results, num, den, "e2e_p99_ms")
        lines.append(f"| {num} / {den} | {spread(through[0])}x | {spread(through[1])}x | "
                     f"{spread(lat[0])} | {spread(lat[1])} |")
    lines += ["", "| goal (issue 11) | verdict | figure (median of per-round values) |", "|---|---|---|"]
    med = statistics.median
    if "logway proxy -> Logway" in results:
        for key, what in (("produce_mb_s", "produce"), ("consume_mb_s", "consume")):
            r = med(ratios(results, "logway proxy -> Logway", "Logway direct", key))
            lines.append(f"| {what} MB/s through logway proxy >= 0.8x direct (Logway upstream) | "
                         f"{verdict(r >= 0.8)} | {r:.2f}x |")
    if "tansu proxy -> Tansu" in results:
        for key, what in (("produce_mb_s", "produce"), ("consume_mb_s", "consume")):
            r = med(ratios(results, "logway proxy -> Tansu", "Tansu direct", key))
            lines.append(f"| {what} MB/s through logway proxy >= 0.8x direct (Tansu upstream) | "
                         f"{verdict(r >= 0.8)} | {r:.2f}x |")
            r = med(ratios(results, "logway proxy -> Tansu", "tansu proxy -> Tansu", key))
            lines.append(f"| {what} MB/s logway proxy >= 1.2x tansu proxy (same Tansu) | {verdict(r >= 1.2)} | "
                         f"{r:.2f}x |")
    for proxy, direct in (("logway proxy -> Logway", "Logway direct"), ("logway proxy -> Tansu", "Tansu direct")):
        if proxy in results:
            p99 = med(added(results, proxy, direct, "e2e_p99_ms"))
            lines.append(f"| e2e p99 added by logway proxy <= 1 ms ({direct.split()[0]} upstream) | "
                         f"{verdict(p99 <= 1.0)} | {p99:+.2f} ms |")
    errors = sum(r["errors"] for rows in results.values() for r in rows)
    lines += ["", f"Client-reported errors over all runs: {errors:.0f}.", ""]
    return "\n".join(lines)


def start_targets(upstreams: list[str], stack: list[Broker], pin: int | None = None,
                  metrics: bool = False, encryption: bool = False) -> list[Target]:
    """Start each upstream and the proxies in front of it (with ``metrics``, also a `logway proxy` serving its
    per-client metrics in front of Logway); every process started is appended to ``stack`` (and kept on CPU
    ``pin`` if given)."""
    targets = []

    def started(broker: Broker) -> Broker:
        stack.append(broker)
        broker.start()
        if pin is not None:
            # Every thread of the process, so a proxy's or broker's worker threads stay off the clients' core.
            subprocess.run(["taskset", "-a", "-p", "-c", str(pin), str(broker.pid)], check=True,
                           stdout=subprocess.DEVNULL)
        return broker

    if "logway" in upstreams:
        lw = started(Logway(scratch_dir("proxy-upstream")))
        targets += [Target("Logway direct", lw, lw),
                    Target("logway proxy -> Logway", started(LogwayProxy(scratch_dir("proxy"), lw)), lw)]
        if metrics:
            targets.append(Target(METERED, started(LogwayProxy(scratch_dir("proxy-m"), lw, metrics=True)), lw))
        if encryption:
            targets += [Target(ENCRYPTING, started(LogwayProxy(scratch_dir("proxy-e"), lw, encrypt=".*")), lw),
                        Target(ENCRYPTING_OTHERS, started(LogwayProxy(scratch_dir("proxy-eo"), lw,
                                                                      encrypt="not-benchmarked-.*")), lw)]
    if "tansu" in upstreams:
        binary = tansu_binary()
        tansu = started(Tansu(scratch_dir("proxy-tansu"), binary))
        targets += [Target("Tansu direct", tansu, tansu),
                    Target("tansu proxy -> Tansu", started(TansuProxy(scratch_dir("tansu-proxy"), tansu, binary)),
                           tansu),
                    Target("logway proxy -> Tansu", started(LogwayProxy(scratch_dir("proxy-t"), tansu)), tansu)]
    return targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.proxy")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--fetch-queue-backoff-ms", type=int, default=10,
                        help="the consumers' fetch.queue.backoff.ms (librdkafka's default is 1000)")
    parser.add_argument("--e2e-rate", type=int, default=2000)
    parser.add_argument("--e2e-seconds", type=int, default=5)
    parser.add_argument("--upstreams", default="logway,tansu", help="comma-separated: logway, tansu")
    parser.add_argument("--latest", action="store_true", help="replace the Proxy section of bench/LATEST.md")
    parser.add_argument("--pin", action="store_true",
                        help="brokers and proxies on the last CPU, the load generators on the others (how much of a "
                             "proxy's cost comes out of the clients' CPU on a small machine)")
    parser.add_argument("--metrics", action="store_true",
                        help="also `logway proxy` with metrics.port set (per-client metrics) in front of Logway")
    parser.add_argument("--encryption", action="store_true",
                        help="also `logway proxy` with the record-encryption filter in front of Logway (every topic "
                             "encrypted, and no topic matching)")
    parser.add_argument("--raw", action="store_true",
                        help="a plain socket's pre-built Produce and Fetch requests instead of librdkafka (Logway only)")
    parser.add_argument("--raw-kb", type=int, default=240, help="--raw: KB per record set (4 per request)")
    parser.add_argument("--profile", action="store_true",
                        help="then one more round through logway proxy -> Logway under py-spy (pip install py-spy)")
    args = parser.parse_args(argv)
    upstreams = [u.strip() for u in args.upstreams.split(",") if u.strip()]
    if not upstreams or set(upstreams) - {"logway", "tansu"}:
        raise SystemExit(f"unknown upstreams: {args.upstreams}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    load0, t0 = " ".join(f"{x:.2f}" for x in os.getloadavg()), time.monotonic()
    stack: list[Broker] = []
    try:
        pin = None
        if args.pin:
            cpus = sorted(os.sched_getaffinity(0))
            if len(cpus) < 2:
                raise SystemExit("--pin needs at least 2 CPUs")
            pin = cpus[-1]
            os.sched_setaffinity(0, cpus[:-1])  # the load generators are children of this process
        targets = start_targets(upstreams, stack, pin, args.metrics and "logway" in upstreams,
                                args.encryption and "logway" in upstreams)
        results: dict[str, list[dict[str, float]]] = {t.label: [] for t in targets}
        if args.raw:
            targets = [t for t in targets if t.upstream.name == "logway"]
            results = {t.label: [] for t in targets}
        for n in range(args.rounds):
            for target in targets[n % len(targets):] + targets[:n % len(targets)]:
                result = (raw_round if args.raw else one_round)(target, args, n)
                log.info("round %d %s: %s", n, target.label, {k: round(v, 2) for k, v in result.items()})
                results[target.label].append(result)
        if args.profile:
            proxied = next(t for t in targets if t.label.startswith("logway proxy"))
            profile = profile_round(proxied, args, Path(tempfile.mkdtemp(prefix="proxy-pyspy-")) / "raw.txt")
    finally:
        for broker in reversed(stack):
            broker.cleanup()
    load1 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if args.raw:
        print("\n" + raw_markdown(results, args, (load0, load1)))
        return 0
    section = markdown(results, args, (load0, load1), (time.monotonic() - t0) / 60)
    if args.profile:
        section += "\n" + profile
    print("\n" + section)
    if args.latest:
        write_section(section, LATEST)
        log.info("wrote the Proxy section of %s", LATEST)
    return 0


if __name__ == "__main__":
    sys.exit(main())
