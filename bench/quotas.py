"""Issue 28's check: a client id held to its byte-rate quota beside an unthrottled client, on Logway and Kafka.

`python -m bench.quotas` (about 3 minutes per broker): for each broker (Apache Kafka 4.3.1 and Logway; with
`--proxy`, also Logway's proxy in front of a Logway broker that has no quotas, the quota set on the proxy's
virtual cluster instead) it creates a topic, gives client id ``slow`` ``producer_byte_rate`` and
``consumer_byte_rate`` of ``--rate`` bytes a second with Kafka's own ``kafka-configs`` (the proxy: its
``proxy.virtual.cluster.<name>.quota.*`` settings), then runs, ``--seconds`` each:

- produce: client ids ``slow`` and ``fast`` at once (through the proxy: ``slow`` on the virtual cluster's listener,
  ``fast`` on another), each a librdkafka producer sending 16 KiB values flat out
  (acks=1, linger.ms=5);
- consume: ``slow`` and ``fast`` at once, each a librdkafka consumer reading the topic from its start.

`--overhead` measures instead what the accounting costs clients it does not throttle (see `overhead`).

It prints each client's MiB/s over the last 10 s (after Kafka's burst: a fresh client may take
``(quota.window.num - 1) x quota`` bytes at once) and over the whole run, the throttle time the client was told
(librdkafka's throttle_cb: the throttle times reported, each change once, and the longest), and the fast/slow ratio.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

from bench.procs import Kafka, Logway, free_port_block, scratch_dir
from compat_tests.kafka.quota_clients import VALUE, rdkafka_consume, rdkafka_produce

TOPIC = "quota-bench"
MiB = 1024 * 1024


def _run_pair(fn, bootstraps: dict[str, str], seconds: int) -> dict[str, dict]:
    """``fn`` (compat_tests/kafka/quota_clients.py) for client ids slow and fast at once, each on its own endpoint
    and in its own process."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        jobs = {cid: pool.apply_async(fn, (bootstrap, TOPIC, cid, seconds)) for cid, bootstrap in bootstraps.items()}
        return {cid: job.get(timeout=seconds + 120) for cid, job in jobs.items()}


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if meta is not None and meta.error is None and meta.partitions and meta.partitions[0].leader >= 0:
            return
        time.sleep(0.2)


def set_quota_with_kafka_configs(bootstrap: str, client_id: str, rate: int) -> None:
    """``kafka-configs --alter --add-config producer_byte_rate=...,consumer_byte_rate=... --entity-type clients``."""
    from compat_tests.kafka.cluster import java

    proc = java("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--alter", "--add-config",
                f"producer_byte_rate={rate},consumer_byte_rate={rate}", "--entity-type", "clients",
                "--entity-name", client_id)
    if proc.returncode != 0:
        raise RuntimeError(f"kafka-configs failed: {proc.stdout}{proc.stderr}")


def _summary(result: dict, seconds: int) -> dict:
    per_second = result["per_second"]
    tail = per_second[-10:] if seconds >= 10 else per_second
    return {"last10_mib_s": sum(tail) / len(tail) / MiB, "all_mib_s": sum(per_second) / seconds / MiB,
            "throttled": result["throttled"], "max_throttle_ms": result["max_throttle_ms"],
            "per_second_mib": [round(b / MiB, 2) for b in per_second]}


def measure(name: str, bootstraps: dict[str, str], set_quota, seconds: int, top_up=None) -> dict:
    """The produce and consume phases, client ids slow and fast each on its endpoint (``bootstraps``), after the
    topic is created on each and the quota set by ``set_quota``; ``top_up`` adds data for the slow reader."""
    for bootstrap in set(bootstraps.values()):
        _create_topic(bootstrap)
    set_quota()
    time.sleep(1)  # Kafka applies a quota change through its metadata log: let it arrive
    out = {}
    for phase, fn in (("produce", rdkafka_produce), ("consume", rdkafka_consume)):
        if phase == "consume" and top_up is not None:
            top_up()
        results = _run_pair(fn, bootstraps, seconds)
        out[phase] = {cid: _summary(r, seconds) for cid, r in results.items()}
        slow, fast = out[phase]["slow"], out[phase]["fast"]
        ratio = fast["last10_mib_s"] / max(slow["last10_mib_s"], 1e-9)
        print(f"{name} {phase}: slow {slow['last10_mib_s']:.2f} MiB/s over the last 10 s ({slow['all_mib_s']:.2f} "
              f"over {seconds} s, {slow['throttled']} throttle times reported, max {slow['max_throttle_ms']} ms); "
              f"fast {fast['last10_mib_s']:.1f} MiB/s ({fast['throttled']} throttled); fast/slow {ratio:.1f}x",
              flush=True)
        print(f"  slow per second: {slow['per_second_mib']}", flush=True)
    return out


def run_broker(kind: type[Kafka] | type[Logway], args: argparse.Namespace) -> dict:
    """One broker (Apache Kafka or Logway), the quota set with kafka-configs."""
    broker = kind(scratch_dir(kind.name))
    broker.start()
    try:
        return measure(kind.name, {"slow": broker.bootstrap, "fast": broker.bootstrap},
                       lambda: set_quota_with_kafka_configs(broker.bootstrap, "slow", args.rate), args.seconds)
    finally:
        broker.cleanup()


class TenantProxy(Logway):
    """`logway proxy` in front of ``upstream`` with two listeners: PLAINTEXT, and TENANT, the listener of virtual
    cluster ``t`` (topics under ``t-``) whose clients share ``rate`` bytes a second each way."""

    name = "logway-proxy"

    def __init__(self, workdir: Path, upstream: Logway, rate: int) -> None:
        super().__init__(workdir)
        self.upstream = upstream
        self.rate = rate
        self.port = free_port_block(2)
        self.tenant_port = free_port_block(2)

    @property
    def tenant_bootstrap(self) -> str:
        return f"127.0.0.1:{self.tenant_port}"

    def command(self) -> list[str]:
        settings = {
            "log.dirs": str(self.workdir / "state"), "proxy.node.id.range": "1-1", "proxy.broker.port.offset": "0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,TENANT:PLAINTEXT",
            "proxy.virtual.clusters": "t", "proxy.virtual.cluster.t.listener": "TENANT",
            "proxy.virtual.cluster.t.topic.prefix": "t-", "proxy.virtual.cluster.t.quota.shared": "true",
            "proxy.virtual.cluster.t.quota.producer_byte_rate": str(self.rate),
            "proxy.virtual.cluster.t.quota.consumer_byte_rate": str(self.rate),
        }
        cmd = [sys.executable, "-m", "logway.cli", "proxy", "--upstream-bootstrap-servers", self.upstream.bootstrap,
               "--listeners", f"PLAINTEXT://127.0.0.1:{self.port},TENANT://127.0.0.1:{self.tenant_port}",
               "--log-level", "WARNING"]
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd


def _top_up(bootstrap: str, topic: str, megabytes: int) -> None:
    """Write ``megabytes`` more into ``topic`` (so a reader is held by its quota, not by the data there is)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = bytes(range(256)) * (VALUE // 256)
    for _ in range(megabytes * MiB // VALUE):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(60)


def run_proxy(args: argparse.Namespace) -> dict:
    """Logway's proxy in front of a Logway broker without quotas: the slow client on a virtual cluster whose
    clients share the quota (the proxy's), the fast one on the proxy's other listener."""
    upstream = Logway(scratch_dir("upstream"))
    upstream.start()
    proxy = TenantProxy(scratch_dir("proxy"), upstream, args.rate)
    proxy.start()
    try:
        return measure("proxy", {"slow": proxy.tenant_bootstrap, "fast": proxy.bootstrap}, lambda: None, args.seconds,
                       lambda: _top_up(upstream.bootstrap, "t-" + TOPIC, 12 * args.rate * args.seconds // MiB))
    finally:
        proxy.cleanup()
        upstream.cleanup()


def overhead(args: argparse.Namespace) -> dict:
    """What quota accounting costs the requests of clients it does not throttle: two Logway brokers, one without
    quotas and one with producer_byte_rate, consumer_byte_rate and request_percentage set for another client id
    (so every request is recorded, and timed), in alternated runs of the bench's librdkafka produce (1 KiB, 8
    partitions, acks=1) and consume loads: MB/s and broker CPU-s/GB."""
    from bench.cases import KIB, new_topic, throughput
    from bench.driver import run_load
    from compat_tests.kafka.cluster import java

    brokers = {"no quotas": Logway(scratch_dir("plain")), "quotas on": Logway(scratch_dir("quotas"))}
    out: dict[str, list[dict]] = {f"{name} {phase}": [] for name in brokers for phase in ("produce", "consume")}
    try:
        for broker in brokers.values():
            broker.start()
        proc = java("kafka.admin.ConfigCommand", "--bootstrap-server", brokers["quotas on"].bootstrap, "--alter",
                    "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=1048576,request_percentage=50",
                    "--entity-type", "clients", "--entity-name", "someone-else")
        assert proc.returncode == 0, proc.stderr
        count = args.overhead_mb * MiB // KIB
        for i in range(args.runs):
            for name, broker in (list(brokers.items()) if i % 2 == 0 else list(brokers.items())[::-1]):
                topic = new_topic(broker, 8)
                spec = {"mode": "rdkafka.produce", "topic": topic, "count": count, "size": KIB, "acks": "1",
                        "round_robin": 8}
                produced = throughput(run_load(broker, [spec], timeout=900))
                broker.settle()
                spec = {"mode": "rdkafka.consume", "topic": topic, "assign": list(range(8)),
                        "ends": [count // 8] * 8, "size": KIB}
                consumed = throughput(run_load(broker, [spec], timeout=900))
                out[f"{name} produce"].append(produced)
                out[f"{name} consume"].append(consumed)
                print(f"run {i} {name}: produce {produced['mb_s']:.0f} MB/s {produced['cpu_s_per_gb']:.2f} CPU-s/GB; "
                      f"consume {consumed['mb_s']:.0f} MB/s {consumed['cpu_s_per_gb']:.2f} CPU-s/GB", flush=True)
    finally:
        for broker in brokers.values():
            broker.cleanup()
    for key, runs in out.items():
        mb_s = sorted(r["mb_s"] for r in runs)
        cpu = sorted(r["cpu_s_per_gb"] for r in runs)
        print(f"{key}: {mb_s[len(mb_s) // 2]:.0f} MB/s median {[round(x) for x in mb_s]}, "
              f"{cpu[len(cpu) // 2]:.2f} CPU-s/GB median {[round(x, 2) for x in cpu]}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.quotas", description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=int, default=15)
    p.add_argument("--rate", type=int, default=MiB, help="the slow client's byte-rate quotas (bytes a second)")
    p.add_argument("--brokers", default="kafka,logway", help="kafka, logway, proxy (comma-separated)")
    p.add_argument("--json", type=Path, help="write the figures here")
    p.add_argument("--overhead", action="store_true", help="instead: the cost of quota accounting (see overhead)")
    p.add_argument("--overhead-mb", type=int, default=256, help="MiB produced then consumed per overhead run")
    p.add_argument("--runs", type=int, default=3, help="alternated runs per broker (--overhead)")
    args = p.parse_args(argv)
    if args.overhead:
        results = {"overhead": overhead(args)}
    else:
        runners = {"kafka": lambda: run_broker(Kafka, args), "logway": lambda: run_broker(Logway, args),
                   "proxy": lambda: run_proxy(args)}
        results = {name: runners[name]() for name in args.brokers.split(",")}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
