"""`python -m bench.cold_read`: a tailing client's end-to-end latency while another consumer reads a cold backlog.

Issue 15, "Cold reads off the loop": a consumer reading data that is not in the page cache must not stall the
event loop, so a client tailing another topic keeps its latency. Each broker gets a backlog topic (one
partition, ``--backlog-mb`` MiB over several segments), written and fsynced once. Then, in runs that rotate
the order, three cases per broker while a paced producer (``--rate`` msg/s of 128 B) and a tailing consumer
measure per-message end-to-end latency on a fresh topic:

- ``none``: no reader;
- ``warm``: a librdkafka consumer reads the whole backlog from offset 0 with its files in the page cache;
- ``cold``: the same after ``posix_fadvise(DONTNEED)`` on every file of the backlog partition (the
  benchmark opens the files itself).

The page-cache residency of the backlog just before the read is checked with ``preadv(RWF_NOWAIT)`` (a read
that would block returns short or EAGAIN), and the reader's MB/s is reported beside it, so a reader can tell
whether eviction worked on this disk. ``--baseline DIR`` also runs Logway from another source tree (e.g.
``git archive`` of the commit before a change) in the same alternated runs; ``--latest`` replaces the
"## Cold reads" section of bench/LATEST.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.admin import create_topic, wait_high_watermark
from bench.driver import run_load
from bench.procs import Broker, Logway, scratch_dir
from bench.report import git_revision, machine
from bench.request_cost import BaselineLogway

log = logging.getLogger("bench.cold_read")
LATEST = Path(__file__).resolve().parent / "LATEST.md"
SECTION = "## Cold reads"
BACKLOG = "cold-backlog"
CASES = ("none", "warm", "cold")
CHUNK = 1 << 20


def partition_files(broker: Broker) -> list[Path]:
    """The segment and index files of the backlog's partition 0."""
    return sorted(p for p in (broker.workdir / "data" / f"{BACKLOG}-0").iterdir() if p.is_file())


def resident_fraction(paths: list[Path]) -> float:
    """The share of the files' bytes in the page cache, probed 1 MiB at a time with preadv(RWF_NOWAIT)."""
    buf = bytearray(CHUNK)
    total = cached = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            for offset in range(0, size, CHUNK):
                want = min(CHUNK, size - offset)
                total += want
                try:
                    cached += os.preadv(fd, [memoryview(buf)[:want]], offset, os.RWF_NOWAIT)
                except BlockingIOError:
                    pass
        finally:
            os.close(fd)
    return cached / total if total else 1.0


def evict(paths: list[Path]) -> None:
    """Drop the files' pages from the page cache (they were fsynced, so none is dirty)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm(paths: list[Path]) -> None:
    """Read the files through once so every page is cached."""
    buf = bytearray(CHUNK)
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            while os.readv(fd, [buf]):
                pass
        finally:
            os.close(fd)


def write_backlog(broker: Broker, args: argparse.Namespace) -> int:
    """Produce the backlog (``--backlog-mb`` MiB of ``--size`` B messages) and fsync it; its message count."""
    count = args.backlog_mb * (1 << 20) // args.size
    create_topic(broker.bootstrap, BACKLOG, 1)
    run_load(broker, [{"mode": "rdkafka.produce", "topic": BACKLOG, "count": count, "size": args.size,
                       "acks": "1"}])
    wait_high_watermark(broker.bootstrap, BACKLOG, 30)
    broker.settle()
    return count


def one_run(broker: Broker, case: str, count: int, args: argparse.Namespace, n: int) -> dict[str, float]:
    """Tail a fresh topic at a fixed rate, with no reader or a warm or cold reader of the backlog beside it."""
    files = partition_files(broker)
    if case == "cold":
        evict(files)
    elif case == "warm":
        warm(files)
    resident = resident_fraction(files) if case != "none" else None
    tail = f"cold-tail-{case}-{n}"
    create_topic(broker.bootstrap, tail, 1)
    specs = [{"mode": "rdkafka.e2e_consume", "topic": tail, "partitions": 1, "count": args.rate * args.seconds,
              "size": 128},
             {"mode": "rdkafka.e2e_produce", "topic": tail, "rate": args.rate, "duration": args.seconds, "size": 128}]
    if case != "none":
        specs.append({"mode": "rdkafka.consume", "topic": BACKLOG, "assign": [0], "ends": [count], "size": args.size})
    run = run_load(broker, specs)
    latency = run.results[0]
    out = {"p50_ms": latency["p50_ms"], "p99_ms": latency["p99_ms"], "max_ms": latency["max_ms"],
           "broker_cpu_s": run.broker_cpu_s,
           "errors": run.total("errors") + (args.rate * args.seconds - latency["received"])}
    log.info("%s: tailer's worst latency by second %s", case, latency.get("worst_ms_by_second"))
    if resident is not None:
        out["resident_pct"] = resident * 100
        reader = run.results[2]
        out["reader_mb_s"] = reader["bytes"] / (reader["end"] - reader["start"]) / 1e6
    return out


def spread(values: list[float], digits: int = 2) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def markdown(results: dict[str, dict[str, list[dict]]], args: argparse.Namespace, load: tuple[str, str],
             minutes: float, command: str) -> str:
    stamp, info = datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"), machine()
    lines = [f"{SECTION} — {stamp} (`python -m bench.cold_read`, a step of `make bench`)", "",
             f"Command: `{command}` · git {git_revision()} · {minutes:.1f} min · {args.runs} runs, the order of "
             f"brokers and cases rotating every run. Load average at start {load[0]}, at end {load[1]} (the "
             f"machine is shared with other jobs).", "",
             f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB, Linux {info['kernel']}, "
             f"Python {info['python']}, librdkafka {info['librdkafka']}.", "",
             f"Each run: a paced producer ({args.rate} msg/s of 128 B for {args.seconds} s, linger.ms=0) and a "
             f"tailing librdkafka consumer on a fresh topic measure end-to-end latency per message, beside no reader, "
             f"a warm reader or a cold reader of a {args.backlog_mb} MiB backlog ({args.size} B messages, "
             f"log.segment.bytes={args.segment_mb} MiB, one partition) read from offset 0 by one librdkafka "
             f"consumer. `cold` evicts the partition's files with posix_fadvise(DONTNEED) first; `cached %` is the "
             f"share of the backlog's bytes in the page cache just before the read (preadv RWF_NOWAIT probe). "
             f"Medians (min-max) over runs."
             + (f" `baseline` is Logway from `{args.baseline}` (the tree before a change), run beside this tree's "
                f"`logway` in the same alternated runs." if args.baseline else ""), "",
             "| broker | case | tailer p50 ms | tailer p99 ms | tailer max ms | reader MB/s | cached % | broker CPU s |",
             "|---|---|---|---|---|---|---|---|"]
    for name, cases in results.items():
        for case in CASES:
            rows = cases.get(case, [])
            if not rows:
                continue
            lines.append(f"| {name} | {case} | {spread([r['p50_ms'] for r in rows])} | "
                         f"{spread([r['p99_ms'] for r in rows])} | {spread([r['max_ms'] for r in rows], 1)} | "
                         f"{spread([r['reader_mb_s'] for r in rows if 'reader_mb_s' in r], 0)} | "
                         f"{spread([r['resident_pct'] for r in rows if 'resident_pct' in r], 0)} | "
                         f"{spread([r['broker_cpu_s'] for r in rows])} |")
    lines += ["", "The issue's goal is that the tailer's p99 does not move when the reader is cold: the differences, "
              "paired within each run (median (min-max) over runs, ms):", "",
              "| broker | p99 cold - warm | p99 cold - none | max cold - warm |", "|---|---|---|---|"]
    for name, cases in results.items():
        if not (cases.get("cold") and cases.get("warm")):
            continue

        def paired(key: str, other: str, name: str = name) -> list[float]:
            return [c[key] - o[key] for c, o in zip(results[name]["cold"], results[name].get(other, []), strict=False)]

        lines.append(f"| {name} | {spread(paired('p99_ms', 'warm'))} | {spread(paired('p99_ms', 'none'))} | "
                     f"{spread(paired('max_ms', 'warm'), 1)} |")
    errors = sum(r["errors"] for cases in results.values() for rows in cases.values() for r in rows)
    lines += ["", f"Client-reported errors and tailer messages missing over all runs: {errors:.0f}.", ""]
    return "\n".join(lines)


def replace_section(text: str, section: str) -> str:
    """``text`` with its "## Cold reads" section (up to the next "## " heading) replaced, or appended."""
    match = re.search(r"^## Cold reads\b.*?(?=^## (?!#)|\Z)", text, flags=re.S | re.M)
    if match:
        return text[:match.start()] + section + ("\n" if match.end() < len(text) else "") + text[match.end():]
    return text.rstrip("\n") + "\n\n" + section


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.cold_read", description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--backlog-mb", type=int, default=1024)
    p.add_argument("--segment-mb", type=int, default=256, help="log.segment.bytes of the brokers, in MiB")
    p.add_argument("--size", type=int, default=1024, help="backlog message size")
    p.add_argument("--rate", type=int, default=1000, help="tailer messages per second")
    p.add_argument("--seconds", type=int, default=8, help="tailer duration per run")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--baseline", type=Path, help="also run Logway from this source tree (before/after rows)")
    p.add_argument("--latest", action="store_true", help="replace the Cold reads section of bench/LATEST.md")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args(argv)
    cases = [c for c in args.cases.split(",") if c in CASES]
    overrides = {"log.segment.bytes": str(args.segment_mb << 20)}
    load0, t0 = " ".join(f"{x:.2f}" for x in os.getloadavg()), time.monotonic()
    started: list[Broker] = []
    results: dict[str, dict[str, list[dict]]] = {}
    try:
        candidates: list[Broker] = [Logway(scratch_dir("cold-read"), overrides)]
        if args.baseline:
            candidates.append(BaselineLogway(scratch_dir("cold-read-baseline"), args.baseline, overrides))
        counts = {}
        for broker in candidates:
            started.append(broker)
            broker.start()
            counts[broker.name] = write_backlog(broker, args)
            results[broker.name] = {c: [] for c in cases}
        plan = [(b, c) for b in started for c in cases]
        for n in range(args.runs):
            k = n % len(plan)
            for broker, case in plan[k:] + plan[:k]:
                result = one_run(broker, case, counts[broker.name], args, n)
                log.info("run %d %s %s: %s", n, broker.name, case, {k: round(v, 2) for k, v in result.items()})
                results[broker.name][case].append(result)
    finally:
        for broker in started:
            broker.cleanup()
    load1 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    command = "python -m bench.cold_read " + " ".join(sys.argv[1:] if argv is None else argv)
    section = markdown(results, args, (load0, load1), (time.monotonic() - t0) / 60, command)
    print("\n" + section)
    if args.latest:
        LATEST.write_text(replace_section(LATEST.read_text(), section))
        log.info("wrote the Cold reads section of %s", LATEST)
    return 0


if __name__ == "__main__":
    sys.exit(main())
