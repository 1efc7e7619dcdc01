"""Run load-generator processes against a broker: start together, time the window, read the broker's CPU."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass

from bench.procs import CLK_TCK, REPO, Broker, cpu_seconds


def machine_busy_s() -> float:
    """CPU-seconds all processes on the machine have used so far (/proc/stat, idle and iowait excluded)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK


@dataclass
class LoadRun:
    """What one coordinated load produced: each child's result and the broker's CPU seconds in the window."""

    results: list[dict]
    broker_cpu_s: float
    wall_s: float
    machine_busy_s: float

    clients_cpu_s: float
    # The broker's stime in the same window (its kernel work: syscalls, page faults), part of broker_cpu_s.
    broker_kernel_s: float = 0.0

    @property
    def other_cores(self) -> float:
        """Cores kept busy during the window by processes other than this broker and these clients."""
        return max(0.0, self.machine_busy_s - self.broker_cpu_s - self.clients_cpu_s) / self.wall_s

    def total(self, key: str) -> float:
        return sum(r.get(key, 0) for r in self.results)

    @property
    def span_s(self) -> float:
        """From the first child's start to the last child's end (children share CLOCK_MONOTONIC)."""
        return max(r["end"] for r in self.results) - min(r["start"] for r in self.results)


class Child:
    """One `python -m bench.loadgen` process with a line reader that honours deadlines."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.loadgen", json.dumps(spec)], cwd=REPO,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self._buf = b""

    def read_line(self, deadline: float) -> str:
        assert self.proc.stdout is not None
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"load generator {self.spec['mode']} timed out")
            readable, _, _ = select.select([self.proc.stdout], [], [], left)
            if readable:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise RuntimeError(f"load generator {self.spec['mode']} exited with {self.proc.wait(10)}")
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode()

    def expect(self, prefix: str, deadline: float) -> str:
        """Skip stray output lines until one starting with `prefix`; return the rest of it."""
        for _ in range(1000):
            line = self.read_line(deadline)
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        raise RuntimeError(f"load generator {self.spec['mode']} never printed {prefix}")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def finish(self) -> None:
        """Reap the process; kill it (by its own PID) if it lingers."""
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def run_load(broker: Broker, specs: list[dict], timeout: float = 300.0) -> LoadRun:
    """Start every child, wait until all are connected, release them together, and collect their results."""
    children = [Child({"bootstrap": broker.bootstrap, "timeout": timeout, **spec}) for spec in specs]
    try:
        setup_deadline = time.monotonic() + 120
        for child in children:
            child.expect("READY", setup_deadline)
        # All tick-based /proc figures, so they compare with each other; a child that has printed its result
        # and exited stays readable as a zombie until finish() reaps it.
        clients0 = sum(cpu_seconds(child.proc.pid) for child in children)
        cpu0, busy0, t0 = broker.cpu_seconds(), machine_busy_s(), time.monotonic()
        kernel0 = kernel_seconds(broker.pid)
        for child in children:
            child.go()
        deadline = t0 + timeout + 60
        results = [json.loads(child.expect("RESULT", deadline)) for child in children]
        cpu1, busy1, t1 = broker.cpu_seconds(), machine_busy_s(), time.monotonic()
        kernel1 = kernel_seconds(broker.pid)
        clients1 = sum(cpu_seconds(child.proc.pid) for child in children)
    finally:
        for child in children:
            if child.proc.poll() is None and child.proc.stdin is not None:
                child.proc.stdin.close()
            child.finish()
    return LoadRun(results, cpu1 - cpu0, t1 - t0, busy1 - busy0, clients1 - clients0, kernel1 - kernel0)


def kernel_seconds(pid: int) -> float:
    """stime of a process (kernel time: syscalls, page faults), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[12]) / CLK_TCK
