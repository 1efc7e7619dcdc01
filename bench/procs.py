"""Broker processes under test (Logway, Tansu and Apache Kafka) on free loopback ports, with /proc CPU and memory readings."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_block(size: int) -> int:
    """A port P with P..P+size-1 free now (a proxy's bootstrap port and the broker ports after it)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + size > 65535:
            continue
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


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from a blocking socket (the raw-protocol probes); ConnectionError if it closes first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime 14 and stime 15 (1-based in proc(5)).
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) of a process in MB, from /proc/<pid>/status."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    return out


def wait_listening(port: int, proc: subprocess.Popen, timeout: float) -> None:
    """Block until 127.0.0.1:port accepts connections; fail if the process exits or the deadline passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout:.0f} s")


class Broker:
    """One broker process we started; stopped only through its own PID."""

    name = "broker"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 120.0) -> float:
        """Start the process and return seconds until its port accepts connections."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.workdir / f"{self.name}.log", "ab")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.command(), cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        wait_listening(self.port, self.proc, timeout)
        return time.monotonic() - t0

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def settle(self) -> None:
        """Let the broker's freshly written data reach its resting state before a read is timed."""

    def memory_mb(self) -> dict[str, float]:
        return memory_mb(self.pid)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (a clean shutdown) and wait; SIGKILL if it does not exit in time."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._close_log()

    def kill(self) -> None:
        """SIGKILL, as a crash: no flush, no clean-shutdown marker."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def cleanup(self) -> None:
        """Stop the process and delete its working directory (data and log)."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def fsync_tree(root: Path) -> None:
    """fsync every file under root, so the kernel's writeback of a just-written backlog does not compete with
    the read being timed (the write's cost belongs to the produce that made it)."""
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


class Logway(Broker):
    """Logway via `python -m logway.cli serve`, data on disk in its temp dir."""

    name = "logway"

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None) -> None:
        super().__init__(workdir)
        self.overrides = overrides or {}

    def settle(self) -> None:
        fsync_tree(self.workdir / "data")

    def listeners(self) -> str:
        """Its listeners (and advertised listeners): PLAINTEXT on its port."""
        return f"PLAINTEXT://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        listeners = self.listeners()
        cmd = [sys.executable, "-m", "logway.cli", "serve", "--listeners", listeners,
               "--advertised-listeners", listeners, "--log-dirs", str(self.workdir / "data"),
               "--log-level", "WARNING"]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd


class Tansu(Broker):
    """Tansu with its in-memory storage engine (its fastest)."""

    name = "tansu"

    def __init__(self, workdir: Path, binary: Path) -> None:
        super().__init__(workdir)
        self.binary = binary

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]


# What bin/kafka-server-start.sh and kafka-run-class.sh give the broker JVM when KAFKA_HEAP_OPTS and
# KAFKA_JVM_PERFORMANCE_OPTS are unset: a 1 GiB heap and G1 with a 20 ms pause goal.
KAFKA_SERVER_JVM = ("-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                    "-Djava.awt.headless=true")
# compat_tests' launcher shortens the group join delay and the offsets topic for its tests; the bench
# puts Kafka's defaults back, so every broker setting is Kafka's own except the loopback listeners.
KAFKA_DEFAULTS = {"group.initial.rebalance.delay.ms": "3000", "offsets.topic.num.partitions": "50",
                  "num.partitions": "1"}


class Kafka(Broker):
    """Apache Kafka 4 (one KRaft broker+controller) via compat_tests' launcher, with kafka-server-start's JVM."""

    name = "kafka"

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None) -> None:
        from compat_tests.kafka.cluster import KafkaCluster  # the one Kafka launcher; no Logway code

        self.workdir = workdir
        self.cluster = KafkaCluster(workdir, nodes=1, config={**KAFKA_DEFAULTS, **(overrides or {})},
                                    jvm_flags=KAFKA_SERVER_JVM)
        self.port = self.cluster.port
        self._log = None

    @property
    def proc(self) -> subprocess.Popen | None:  # type: ignore[override]
        return self.cluster.nodes[0].proc

    @proc.setter
    def proc(self, value: subprocess.Popen | None) -> None:
        self.cluster.nodes[0].proc = value

    def start(self, timeout: float = 180.0) -> float:
        """Format (first time only), start, and return seconds until Metadata lists the broker."""
        t0 = time.monotonic()
        self.cluster.start(timeout)
        return time.monotonic() - t0

    def settle(self) -> None:
        fsync_tree(self.cluster.nodes[0].data_dir)

    def stop(self, timeout: float = 60.0) -> None:
        self.cluster.stop(timeout)


def scratch_dir(label: str) -> Path:
    """A fresh temp directory for one broker instance."""
    return Path(tempfile.mkdtemp(prefix=f"logway-bench-{label}-"))
