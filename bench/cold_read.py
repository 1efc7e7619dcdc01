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

The page-cache residency of the backlog just before the read is checked with util-linux ``fincore`` (which
reads nothing: a ``preadv(RWF_NOWAIT)`` probe would start readahead of the pages it finds missing), and the
reader's MB/s and the bytes the broker read from disk are reported beside it, so a reader can tell whether
eviction worked on this disk. ``--baseline DIR`` also runs Logway from another source tree (e.g.
``git archive`` of the commit before a change) in the same alternated runs; ``--latest`` replaces the
"## Cold reads" section of bench/LATEST.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.admin import create_topic, wait_high_watermark
from bench.driver import run_load
from bench.latest import LATEST, write_section
from bench.procs import Broker, Logway, scratch_dir
from bench.report import git_revision, machine
from bench.request_cost import BaselineLogway

log = logging.getLogger("bench.cold_read")
SECTION = "## Cold reads"
BACKLOG = "cold-backlog"
CASES = ("none", "warm", "cold")
CHUNK = 1 << 20
# x86-64 numbers of the syscalls the loop reads files with (as /proc/<pid>/task/<tid>/syscall shows them).
READ_SYSCALLS = {b"0", b"17", b"19", b"40", b"295", b"327"}  # read, pread64, readv, sendfile, preadv, preadv2


def partition_files(broker: Broker) -> list[Path]:
    """The segment and index files of the backlog's partition 0."""
    return sorted(p for p in (broker.workdir / "data" / f"{BACKLOG}-0").iterdir() if p.is_file())


def resident_fraction(paths: list[Path]) -> float | None:
    """The share of the files' bytes in the page cache, from util-linux `fincore` (mincore/cachestat: it reads
    nothing; a preadv(RWF_NOWAIT) probe would start readahead of what it finds missing). None without fincore."""
    if shutil.which("fincore") is None:
        return None
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE", *map(str, paths)],
                         capture_output=True, text=True, check=True).stdout
    rows = [tuple(map(int, line.split())) for line in out.splitlines() if line.strip()]
    size = sum(total for _, total in rows)
    return sum(min(res, total) for res, total in rows) / size if size else 1.0


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


def disk_read_bytes(pid: int, tid: int | None = None) -> int:
    """Bytes a process (or one of its threads) has caused to be read from storage (/proc/.../io read_bytes)."""
    path = f"/proc/{pid}/task/{tid}/io" if tid is not None else f"/proc/{pid}/io"
    with open(path) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("read_bytes:"))


class LoopStates:
    """Samples the scheduler state of the broker's event-loop thread (/proc/<pid>/task/<pid>/stat) every
    ``interval`` s in a thread: the share of samples in D (uninterruptible sleep) inside a read syscall is the
    share of time the loop waited for the disk to read, whatever the load on the machine."""

    def __init__(self, pid: int, interval: float = 0.0005) -> None:
        self.path, self.interval = f"/proc/{pid}/task/{pid}/stat", interval
        self.samples = self.blocked = self.other = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with open(self.path, "rb") as f, open(self.path.replace("/stat", "/syscall"), "rb") as call:
            while not self._stop.wait(self.interval):
                f.seek(0)
                state = f.read().rsplit(b")", 1)[1][1:2]
                self.samples += 1
                if state == b"D":
                    # Which syscall it waits in: a read (sendfile, pread64, preadv2) or something else
                    # (a write throttled by the other jobs' dirty pages, ...).
                    call.seek(0)
                    number = call.read().split(b" ", 1)[0]
                    self.blocked += number in READ_SYSCALLS
                    self.other += number not in READ_SYSCALLS

    def __enter__(self) -> LoopStates:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def share(self, count: int) -> float:
        return count / self.samples if self.samples else 0.0


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
    reading = case != "none"
    tail = f"cold-tail-{case}-{n}"
    create_topic(broker.bootstrap, tail, 1)
    specs = [{"mode": "rdkafka.e2e_consume", "topic": tail, "partitions": 1, "count": args.rate * args.seconds,
              "size": 128},
             {"mode": "rdkafka.e2e_produce", "topic": tail, "rate": args.rate, "duration": args.seconds, "size": 128}]
    if case != "none":
        specs.append({"mode": "rdkafka.consume", "topic": BACKLOG, "assign": [0], "ends": [count], "size": args.size})
    # The event loop is the broker's main thread: its own disk reads are the ones that can stall it.
    io0 = disk_read_bytes(broker.pid, broker.pid), disk_read_bytes(broker.pid)
    with LoopStates(broker.pid) as states:
        run = run_load(broker, specs)
    io1 = disk_read_bytes(broker.pid, broker.pid), disk_read_bytes(broker.pid)
    latency = run.results[0]
    out = {"p50_ms": latency["p50_ms"], "p99_ms": latency["p99_ms"], "max_ms": latency["max_ms"],
           "broker_cpu_s": run.broker_cpu_s, "loop_d_ms": states.share(states.blocked) * run.wall_s * 1000,
           "loop_d_other_ms": states.share(states.other) * run.wall_s * 1000,
           "errors": run.total("errors") + (args.rate * args.seconds - latency["received"])}
    log.info("%s: tailer's worst latency by second %s", case, latency.get("worst_ms_by_second"))
    if reading:
        if resident is not None:
            out["resident_pct"] = resident * 100
        out["loop_disk_mb"], out["disk_mb"] = (io1[0] - io0[0]) / 1e6, (io1[1] - io0[1]) / 1e6
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
             f"share of the backlog's bytes in the page cache just before the read (util-linux fincore). "
             f"Medians (min-max) over runs."
             + (f" `baseline` is Logway from `{args.baseline}` (the tree before a change), run beside this tree's "
                f"`logway` in the same alternated runs." if args.baseline else ""), "",
             "`disk MB` is what the broker read from storage during the run (/proc/<pid>/io read_bytes), `by loop` "
             "the part its event-loop thread read itself (/proc/<pid>/task/<pid>/io: sync reads it waited for, and "
             "the async readahead its sendfile calls start without waiting); the rest was read by worker threads. "
             "`loop read-wait ms` is how long the event-loop thread was in uninterruptible sleep inside a read "
             "syscall (sendfile, pread64, ...: waiting for the disk to read), from its scheduler state and "
             "current syscall sampled every 0.5 ms (/proc/<pid>/task/<pid>/stat and syscall) over the run; `other "
             "D ms` is the rest of its uninterruptible sleep (writes throttled by dirty pages, ...). "
             "Unlike the latencies, these three do not depend on how busy the shared machine is.", "",
             "| broker | case | tailer p50 ms | tailer p99 ms | tailer max ms | reader MB/s | cached % | disk MB | "
             "by loop | loop read-wait ms | other D ms | broker CPU s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, cases in results.items():
        for case in CASES:
            rows = cases.get(case, [])
            if not rows:
                continue
            lines.append(f"| {name} | {case} | {spread([r['p50_ms'] for r in rows])} | "
                         f"{spread([r['p99_ms'] for r in rows])} | {spread([r['max_ms'] for r in rows], 1)} | "
                         f"{spread([r['reader_mb_s'] for r in rows if 'reader_mb_s' in r], 0)} | "
                         f"{spread([r['resident_pct'] for r in rows if 'resident_pct' in r], 0)} | "
                         f"{spread([r['disk_mb'] for r in rows if 'disk_mb' in r], 0)} | "
                         f"{spread([r['loop_disk_mb'] for r in rows if 'loop_disk_mb' in r], 0)} | "
                         f"{spread([r['loop_d_ms'] for r in rows], 0)} | "
                         f"{spread([r['loop_d_other_ms'] for r in rows], 0)} | "
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
        write_section(section, LATEST)
        log.info("wrote the Cold reads section of %s", LATEST)
    return 0


if __name__ == "__main__":
    sys.exit(main())
