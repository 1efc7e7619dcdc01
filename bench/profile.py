"""py-spy profiles of the Logway process under produce and consume load, summarised as hot functions."""

from __future__ import annotations

import collections
import logging
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from bench.cases import KIB, Bench, new_topic
from bench.driver import run_load
from bench.settings import MB

log = logging.getLogger("bench")
FRAME_LINE = re.compile(r":\d+\)$")
OWN_CODE = re.compile(r"\((server|gateway|proxy|storage|wire|coordinator|cli)/")
ENTRY_POINTS = re.compile(r"\((cli/(__main__|main)|gateway/run|server/listeners)\.py\)")
# Leaf frames that are waiting, not working: trio's epoll wait and an idle trio worker thread's lock wait
# (py-spy's idle detection misses both here).
IDLE = re.compile(r"^(EpollIOManager\.get_events|WorkerThread\._work) ")


def py_spy() -> str:
    """The py-spy next to this interpreter (pip install py-spy into the venv), else one on PATH."""
    local = Path(sys.executable).with_name("py-spy")
    found = str(local) if local.exists() else shutil.which("py-spy")
    if not found:
        raise RuntimeError("py-spy not found: pip install py-spy")
    return found


def summarize(raw: Path, top: int = 15) -> dict:
    """Self and inclusive shares of the busy samples per function, from py-spy's collapsed-stack (raw) output."""
    self_counts: collections.Counter[str] = collections.Counter()
    total_counts: collections.Counter[str] = collections.Counter()
    samples = idle = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [FRAME_LINE.sub(")", f) for f in stack.split(";")]
        if IDLE.match(frames[-1]):
            idle += n
            continue
        samples += n
        self_counts[frames[-1]] += n
        for frame in set(frames):
            total_counts[frame] += n

    def rows(counter: collections.Counter[str]) -> list[dict]:
        return [{"function": f, "self_pct": 100 * self_counts[f] / max(1, samples),
                 "total_pct": 100 * total_counts[f] / max(1, samples)} for f, _ in counter.most_common(top)]

    # Inclusive shares only for Logway's own code below the entry points, where a fix would go.
    ours = collections.Counter({f: n for f, n in total_counts.items()
                                if OWN_CODE.search(f) and not ENTRY_POINTS.search(f)})
    return {"samples": samples, "idle_samples": idle, "top": rows(self_counts), "top_total": rows(ours)}


def record(bench: Bench, out_dir: Path) -> list[dict]:
    """Profile Logway under the reference produce load, a full consume of it, and 100 producer connections."""
    profiles = []
    out_dir.mkdir(parents=True, exist_ok=True)
    count = max(bench.s.produce_mb * 2, bench.s.consume_mb) * MB // KIB
    with bench.brokers(("logway",)) as (broker,):
        topic = new_topic(broker, 8, "profile")
        many = new_topic(broker, 8, "profile-conns")
        loads = [
            ("produce 1 KiB, 8 partitions, none, acks=all (librdkafka)", "produce",
             [{"mode": "rdkafka.produce", "topic": topic, "count": count, "size": KIB, "acks": "all",
               "round_robin": 8}]),
            ("consume the same log from earliest (librdkafka)", "consume",
             [{"mode": "rdkafka.consume", "topic": topic, "assign": list(range(8)),
               "ends": [count // 8 + (p < count % 8) for p in range(8)], "size": KIB}]),
            ("produce 1 KiB, 8 partitions, acks=1 from 100 connections in 2 processes (librdkafka)", "conns",
             [{"mode": "rdkafka.produce", "topic": many, "count": count // 8, "size": KIB, "acks": "1",
               "producers": 50} for _ in range(2)]),
        ]
        for i, (label, short, specs) in enumerate(loads):
            raw = out_dir / f"pyspy-{i}-{short}.txt"
            log.info("profile / %s", label)
            spy = subprocess.Popen([py_spy(), "record", "--pid", str(broker.pid), "--format", "raw", "--rate", "200",
                                    "-o", str(raw)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                run = run_load(broker, specs, timeout=600)
            finally:
                spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
                try:
                    spy.wait(60)
                except subprocess.TimeoutExpired:
                    spy.kill()
                    spy.wait(10)
            summary = summarize(raw) if raw.exists() else {"samples": 0, "idle_samples": 0, "top": [], "top_total": []}
            mb_s = run.total("bytes") / run.span_s / 1e6
            profiles.append({"load": f"{label}, {mb_s:.0f} MB/s while profiled", "seconds": run.span_s,
                             "raw": str(raw), **summary})
    return profiles
