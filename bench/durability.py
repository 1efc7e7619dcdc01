"""What durability costs: produce with an fsync before every acknowledgement, beside the default page-cache acks.

Logway with its defaults (Kafka's: acknowledged once in the page cache), with log.flush.acks.all.enable=true
(acks=all acknowledged once fsynced, by the group commit) and with a topic's flush.messages=1 (every append
fsynced before it is acknowledged, as in Kafka), and Apache Kafka 4.3.1 (unless ``--peers ''``) with its
defaults and with log.flush.interval.messages=1; all on the same disk, in alternated rounds (the order
rotates every round), 1 KiB records into 8 partitions with acks=all, from one librdkafka producer and from 100
producer connections (2 processes). Printed as a markdown table: medians (min-max) of MB/s and of the broker's
CPU-s/GB, each setting's ratio to its broker's defaults, and the cores other processes kept busy. `make bench`
runs it last; ``--latest`` rewrites the "Durability" section of bench/LATEST.md.

    .venv/bin/python -m bench.durability [--mb 256] [--rounds 3] [--peers kafka] [--connections 1,100] [--latest]
"""

from __future__ import annotations

import argparse
import logging
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bench.admin import create_topic
from bench.cases import throughput
from bench.driver import run_load
from bench.latest import LATEST, replace_section
from bench.procs import Broker, Kafka, Logway, scratch_dir
from bench.report import fmt, machine
from bench.settings import MB

log = logging.getLogger("bench")
KIB = 1024
PARTITIONS = 8


@dataclass
class Setting:
    """One way of running a broker: what it is started with, and the topic configs of each run's topic."""

    label: str
    kind: str  # logway | kafka
    broker: dict[str, str] = field(default_factory=dict)
    topic: dict[str, str] = field(default_factory=dict)
    baseline: str = ""  # the label of the defaults it is compared with ("" for the defaults themselves)


def settings(peers: list[str]) -> list[Setting]:
    out = [Setting("Logway, defaults", "logway"),
           Setting("Logway, log.flush.acks.all.enable=true", "logway", {"log.flush.acks.all.enable": "true"},
                   baseline="Logway, defaults"),
           Setting("Logway, topic flush.messages=1", "logway", topic={"flush.messages": "1"},
                   baseline="Logway, defaults")]
    if "kafka" in peers:
        out += [Setting("Kafka, defaults", "kafka"),
                Setting("Kafka, log.flush.interval.messages=1", "kafka", {"log.flush.interval.messages": "1"},
                        baseline="Kafka, defaults")]
    return out


def start(setting: Setting) -> Broker:
    if setting.kind == "kafka":
        broker: Broker = Kafka(scratch_dir("durability-kafka"), setting.broker)
    else:
        broker = Logway(scratch_dir("durability-logway"), setting.broker)
    broker.start()
    return broker


def run_once(broker: Broker, setting: Setting, mb: int, connections: int, n: int) -> dict:
    topic = f"durability-{n}"
    create_topic(broker.bootstrap, topic, PARTITIONS, config=setting.topic)
    count = mb * MB // KIB
    procs = 1 if connections == 1 else 2
    specs = [{"mode": "rdkafka.produce", "topic": topic, "count": count // procs, "size": KIB, "acks": "all",
              **({"producers": connections // procs} if connections > 1 else {})} for _ in range(procs)]
    return throughput(run_load(broker, specs, timeout=900))


def measure(all_settings: list[Setting], mb: int, rounds: int, connections: int) -> dict[str, list[dict]]:
    """Every setting's runs, alternated: each round starts with the next setting in turn."""
    brokers: dict[str, Broker] = {}
    runs: dict[str, list[dict]] = {s.label: [] for s in all_settings}
    try:
        for s in all_settings:
            key = s.kind + repr(sorted(s.broker.items()))
            brokers.setdefault(key, start(s))
        n = 0
        for r in range(rounds):
            order = all_settings[r % len(all_settings):] + all_settings[:r % len(all_settings)]
            for s in order:
                n += 1
                result = run_once(brokers[s.kind + repr(sorted(s.broker.items()))], s, mb, connections, n)
                log.info("%s, %d connection(s), round %d: %.1f MB/s, %.2f CPU-s/GB, others' load %.2f cores",
                         s.label, connections, r + 1, result["mb_s"], result["cpu_s_per_gb"] or 0,
                         result["other_cores"])
                if result["errors"]:
                    log.warning("%s: %d messages failed", s.label, result["errors"])
                runs[s.label].append(result)
    finally:
        for broker in brokers.values():
            broker.cleanup()
    return runs


def _median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def table(all_settings: list[Setting], results: dict[int, dict[str, list[dict]]]) -> list[str]:
    lines = ["| setting | producer connections | MB/s median (min–max) | vs its defaults | broker CPU-s/GB "
             "median (min–max) | others' load, cores |", "|---|---|---|---|---|---|"]
    for connections, runs in results.items():
        for s in all_settings:
            mine = runs[s.label]
            mb_s = [r["mb_s"] for r in mine]
            cpu = [r["cpu_s_per_gb"] for r in mine if r["cpu_s_per_gb"] is not None]
            ratio = "–"
            if s.baseline:
                base = _median(runs[s.baseline], "mb_s")
                ratio = f"{_median(mine, 'mb_s') / base:.2f}x" if base else "–"
            lines.append(f"| {s.label} | {connections} | {fmt(statistics.median(mb_s))} ({fmt(min(mb_s))}–"
                         f"{fmt(max(mb_s))}) | {ratio} | {fmt(statistics.median(cpu))} ({fmt(min(cpu))}–"
                         f"{fmt(max(cpu))}) | {fmt(_median(mine, 'other_cores'))} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.durability", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=256, help="MiB of 1 KiB records per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peers", default="kafka",
                        help="kafka (the default): also Apache Kafka with and without an fsync per message; '' for none")
    parser.add_argument("--connections", default="1,100", help="producer connections of each case")
    parser.add_argument("--latest", action="store_true", help="rewrite the Durability section of bench/LATEST.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    peers = [p for p in args.peers.split(",") if p]
    if "kafka" in peers:
        from compat_tests.kafka.cluster import KafkaUnavailable, ensure_jars

        try:
            ensure_jars()
        except KafkaUnavailable as exc:
            log.warning("Apache Kafka left out: %s", exc)
            peers.remove("kafka")
    chosen = settings(peers)
    info = machine()
    results = {int(c): measure(chosen, args.mb, args.rounds, int(c)) for c in args.connections.split(",")}
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")
    text = "\n".join([
        f"## Durability — {started} ({args.rounds} alternated rounds of {args.mb} MiB, 1 KiB records, "
        f"{PARTITIONS} partitions, acks=all; {info['cpu']}, {info['cores']} cores, load average at the end "
        f"{' '.join(f'{x:.2f}' for x in info['load_avg'])})", "",
        "Every setting on the same disk, its data in a temp dir; the defaults acknowledge from the page cache. "
        "CPU-s/GB includes the kernel's work of writing the data out, which the fsync settings do in the broker's "
        "own threads and the defaults leave to the kernel's writeback threads (not counted).", "",
        *table(chosen, results), "",
        f"Command: `python -m bench.durability --mb {args.mb} --rounds {args.rounds} --peers '{','.join(peers)}'`", ""])
    print(text)
    if args.latest:
        LATEST.write_text(replace_section(LATEST.read_text(), text))


if __name__ == "__main__":
    main()
