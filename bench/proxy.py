"""Proxy benchmark: produce and consume MB/s and end-to-end latency through `logway proxy` vs direct to the
same Logway broker, alternated runs (python -m bench.proxy [--rounds N] [--count N] [--size BYTES]).

The proxy's CPU is read like a broker's (LoadRun.broker_cpu_s is the proxy's alone when it is the target).
"""

from __future__ import annotations

import argparse
import logging
import socket
import statistics
import sys
from pathlib import Path

from bench.admin import create_topic, wait_high_watermark
from bench.driver import run_load
from bench.procs import Broker, Logway, scratch_dir

log = logging.getLogger("bench.proxy")


def free_port_block(size: int) -> int:
    """A port P with P..P+size-1 free now (the proxy's bootstrap port and its broker ports)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        socks = []
        try:
            for port in range(base, base + size):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError("no block of free ports")


# The node id each upstream kind reports (Logway's node.id default; Tansu's fixed id).
NODE_IDS = {"logway": 1, "tansu": 111, "kafka": 1}


class LogwayProxy(Broker):
    """`logway proxy` in front of ``upstream`` (one broker): its node on the port after the bootstrap port
    (proxy.broker.port.offset = 1 - node id, so a node id of 111 needs no block of 113 free ports)."""

    name = "logway-proxy"

    def __init__(self, workdir: Path, upstream: Broker) -> None:
        super().__init__(workdir)
        self.upstream = upstream
        self.node_id = NODE_IDS.get(upstream.name, 1)
        self.port = free_port_block(2)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "logway.gateway", "proxy", "--upstream-bootstrap-servers",
                self.upstream.bootstrap, "--listeners", f"PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.workdir / 'state'}",
                "--override", f"proxy.node.id.range={self.node_id}-{self.node_id}",
                "--override", f"proxy.broker.port.offset={1 - self.node_id}", "--log-level", "WARNING"]


def one_round(target: Broker, upstream: Broker, args: argparse.Namespace, n: int) -> dict[str, float]:
    topic = f"proxy-bench-{target.name}-{n}"
    create_topic(upstream.bootstrap, topic, args.partitions)
    produce = run_load(target, [{"mode": "rdkafka.produce", "topic": topic, "count": args.count, "size": args.size,
                                 "round_robin": args.partitions}])
    wait_high_watermark(upstream.bootstrap, topic, 30)
    ends = [args.count // args.partitions + (1 if p < args.count % args.partitions else 0)
            for p in range(args.partitions)]
    consume = run_load(target, [{"mode": "rdkafka.consume", "topic": topic, "assign": list(range(args.partitions)),
                                 "ends": ends, "size": args.size}])
    e2e_topic = f"proxy-e2e-{target.name}-{n}"
    create_topic(upstream.bootstrap, e2e_topic, 1)
    count = args.e2e_rate * args.e2e_seconds
    e2e = run_load(target, [
        {"mode": "rdkafka.e2e_consume", "topic": e2e_topic, "partitions": 1, "count": count, "size": 128},
        {"mode": "rdkafka.e2e_produce", "topic": e2e_topic, "rate": args.e2e_rate, "duration": args.e2e_seconds,
         "size": 128}])
    latency = next(r for r in e2e.results if "p99_ms" in r)
    return {"produce_mb_s": produce.total("bytes") / produce.span_s / 1e6,
            "consume_mb_s": consume.total("bytes") / consume.span_s / 1e6,
            "e2e_p50_ms": latency["p50_ms"], "e2e_p99_ms": latency["p99_ms"],
            "target_cpu_s": produce.broker_cpu_s + consume.broker_cpu_s,
            "errors": produce.total("errors") + consume.total("errors")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.proxy")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--e2e-rate", type=int, default=2000)
    parser.add_argument("--e2e-seconds", type=int, default=5)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    upstream = Logway(scratch_dir("proxy-upstream"))
    upstream.start()
    proxy = LogwayProxy(scratch_dir("proxy"), upstream)
    try:
        proxy.start()
        results: dict[str, list[dict[str, float]]] = {"direct": [], "proxy": []}
        for n in range(args.rounds):
            for label, target in (("direct", upstream), ("proxy", proxy)):
                result = one_round(target, upstream, args, n)
                log.info("round %d %s: %s", n, label, {k: round(v, 2) for k, v in result.items()})
                results[label].append(result)
    finally:
        proxy.cleanup()
        upstream.cleanup()
    med = {label: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for label, rs in results.items()}
    d, p = med["direct"], med["proxy"]
    print(f"\n{args.rounds} alternated rounds, {args.count} x {args.size} B over {args.partitions} partitions "
          f"(rdkafka), e2e {args.e2e_rate} msg/s for {args.e2e_seconds} s; medians\n")
    print("| | direct to Logway | through logway proxy | proxy / direct |")
    print("|---|---|---|---|")
    for key, label in (("produce_mb_s", "produce MB/s"), ("consume_mb_s", "consume MB/s"),
                       ("e2e_p50_ms", "e2e p50 ms"), ("e2e_p99_ms", "e2e p99 ms")):
        print(f"| {label} | {d[key]:.2f} | {p[key]:.2f} | {p[key] / d[key]:.2f}x |")
    print(f"\np50 / p99 added by the proxy: {p['e2e_p50_ms'] - d['e2e_p50_ms']:+.2f} / "
          f"{p['e2e_p99_ms'] - d['e2e_p99_ms']:+.2f} ms; CPU-s per round (produce + consume) of the proxy alone: "
          f"{p['target_cpu_s']:.2f}, of the broker when direct: {d['target_cpu_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
