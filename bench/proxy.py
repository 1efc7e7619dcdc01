"""Proxy benchmark: produce and consume MB/s and end-to-end latency through `logway proxy` and `tansu proxy`,
each beside the upstream broker it fronts, in alternated rounds (the order rotates every round):

- Logway broker: direct, and through `logway proxy`;
- Tansu broker (memory engine): direct, through `tansu proxy`, and through `logway proxy` (same Tansu process),
  so the two proxies are compared on the same upstream.

    python -m bench.proxy [--rounds N] [--count N] [--size BYTES] [--upstreams logway,tansu] [--metrics] [--latest]

``--metrics`` adds `logway proxy` with metrics.port set (its per-client metrics served) in front of the same Logway.

`make bench` runs it after bench.tls; `--latest` replaces the "## Proxy" section of bench/LATEST.md with the
table. A proxy's CPU is read like a broker's (LoadRun.broker_cpu_s is the proxy process's alone).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.admin import create_topic, wait_high_watermark
from bench.driver import run_load
from bench.latest import LATEST, write_section
from bench.peer import TANSU_VERSION, tansu_binary
from bench.procs import Broker, Logway, Tansu, free_port, free_port_block, scratch_dir
from bench.profile import py_spy, summarize
from bench.report import git_revision, machine

log = logging.getLogger("bench.proxy")
METRICS = (("produce_mb_s", "produce MB/s"), ("consume_mb_s", "consume MB/s"),
           ("e2e_p50_ms", "e2e p50 ms"), ("e2e_p99_ms", "e2e p99 ms"), ("target_cpu_s", "CPU s (produce+consume)"),
           ("produce_cpu_s_per_gb", "produce CPU s/GB"), ("consume_cpu_s_per_gb", "consume CPU s/GB"))


# The node id each upstream kind reports (Logway's node.id default; Tansu's fixed id).
NODE_IDS = {"logway": 1, "tansu": 111, "kafka": 1}
METERED = "logway proxy +metrics -> Logway"


class LogwayProxy(Broker):
    """`logway proxy` in front of ``upstream`` (one broker): its node on the port after the bootstrap port
    (proxy.broker.port.offset = 1 - node id, so a node id of 111 needs no block of 113 free ports)."""

    name = "logway-proxy"

    def __init__(self, workdir: Path, upstream: Broker, metrics: bool = False) -> None:
        super().__init__(workdir)
        self.upstream = upstream
        self.node_id = NODE_IDS.get(upstream.name, 1)
        self.port = free_port_block(2)
        self.metrics_port = free_port() if metrics else None  # per-client metrics served (metrics.port)

    def command(self) -> list[str]:
        metrics = ["--override", f"metrics.port={self.metrics_port}"] if self.metrics_port else []
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
             (METERED, "logway proxy -> Logway"), ("logway proxy -> Tansu", "Tansu direct"),
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
                  metrics: bool = False) -> list[Target]:
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
        targets = start_targets(upstreams, stack, pin, args.metrics and "logway" in upstreams)
        results: dict[str, list[dict[str, float]]] = {t.label: [] for t in targets}
        for n in range(args.rounds):
            for target in targets[n % len(targets):] + targets[:n % len(targets)]:
                result = one_round(target, args, n)
                log.info("round %d %s: %s", n, target.label, {k: round(v, 2) for k, v in result.items()})
                results[target.label].append(result)
        if args.profile:
            proxied = next(t for t in targets if t.label.startswith("logway proxy"))
            profile = profile_round(proxied, args, Path(tempfile.mkdtemp(prefix="proxy-pyspy-")) / "raw.txt")
    finally:
        for broker in reversed(stack):
            broker.cleanup()
    load1 = " ".join(f"{x:.2f}" for x in os.getloadavg())
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
