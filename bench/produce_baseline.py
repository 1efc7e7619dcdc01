"""`python -m bench.produce_baseline --baseline DIR`: produce CPU per GB, Logway before/after, beside Tansu.

Logway from the working tree, Logway from another source tree (``--baseline``: `git archive <commit> | tar -x -C
DIR`, plus the built ``wire/_batch_scan*.so``) and Tansu 0.6, each started once per codec and driven in alternated
runs (the order rotates) with the bench's librdkafka produce load: 1 KiB values (half random, half zeros), 8
partitions, acks=all. Prints MB/s and broker CPU-s/GB, median and every run, for each codec: the before/after of a
change to the produce path from one loaded machine (issue 26: compressed batches checked in C).
"""

from __future__ import annotations

import argparse
import logging
import statistics
from pathlib import Path

from bench.cases import KIB, new_topic, throughput
from bench.driver import run_load
from bench.peer import tansu_binary
from bench.procs import Broker, Logway, Tansu, scratch_dir
from bench.request_cost import BaselineLogway
from bench.settings import MB

log = logging.getLogger("bench")


def runs_for(codec: str, baseline: Path, mb: int, runs: int) -> dict[str, list[dict]]:
    """Every run of every broker for one codec, the three brokers alive together and taking turns."""
    brokers: list[Broker] = [Logway(scratch_dir("logway")), BaselineLogway(scratch_dir("baseline"), baseline),
                             Tansu(scratch_dir("tansu"), tansu_binary())]
    out: dict[str, list[dict]] = {b.name: [] for b in brokers}
    try:
        for broker in brokers:
            broker.start()
        for i in range(runs):
            for broker in brokers[i % 3:] + brokers[:i % 3]:
                spec = {"mode": "rdkafka.produce", "topic": new_topic(broker, 8), "count": mb * MB // KIB,
                        "size": KIB, "compression": codec, "acks": "all"}
                result = throughput(run_load(broker, [spec], timeout=900))
                log.info("%s %s run %d: %.0f MB/s, %.2f CPU-s/GB, others %.2f cores", codec, broker.name, i,
                         result["mb_s"], result["cpu_s_per_gb"], result["other_cores"])
                out[broker.name].append(result)
    finally:
        for broker in brokers:
            broker.cleanup()
    return out


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    p = argparse.ArgumentParser(prog="python -m bench.produce_baseline", description=__doc__)
    p.add_argument("--baseline", type=Path, required=True, help="the other source tree (the 'before')")
    p.add_argument("--codecs", default="lz4,zstd,none", help="comma-separated librdkafka compression.type values")
    p.add_argument("--mb", type=int, default=1024, help="payload MiB per run (default 1024)")
    p.add_argument("--runs", type=int, default=3, help="runs per broker per codec (default 3)")
    args = p.parse_args(argv)
    lines = ["| codec | broker | MB/s median (runs) | broker CPU-s/GB median (runs) |", "| --- | --- | --- | --- |"]
    for codec in args.codecs.split(","):
        for name, results in runs_for(codec, args.baseline, args.mb, args.runs).items():
            mb_s = [round(r["mb_s"]) for r in results]
            cpu = [round(r["cpu_s_per_gb"], 2) for r in results]
            lines.append(f"| {codec} | {name} | {statistics.median(mb_s):.0f} {mb_s} | "
                         f"{statistics.median(cpu):.2f} {cpu} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
