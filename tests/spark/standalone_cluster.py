"""A Spark standalone cluster on loopback for tests: one master and N workers, JVMs started from PySpark's own jars.

The pip-installed PySpark carries the whole runtime (pyspark/jars, bin/spark-class) but not sbin/start-master.sh,
so the daemons are started as that script starts them, in the foreground: `bin/spark-class
org.apache.spark.deploy.master.Master` and `...deploy.worker.Worker spark://host:port` (spark-class execs the JVM,
so the child's PID is the daemon's). SPARK_HOME points at the PySpark folder (a worker builds its executors'
command line from it); every file a daemon writes (the workers' application folders) goes to a temporary
folder, so a read-only site-packages is fine. Every process is ours and is stopped by its PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from bench.procs import free_port

# For JVMs that live a minute or two: the client compiler only and the serial collector. Measured on this test
# (tests/spark/test_spark_standalone.py, both runs, children's CPU from `time`): 61 CPU-s with them, 107 without.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def pyspark_home() -> Path:
    """The installed PySpark's folder: SPARK_HOME of a pip install (jars/, bin/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    """A master and ``workers`` workers (each ``worker_cores`` cores, ``worker_memory`` for executors) on 127.0.0.1."""

    def __init__(self, workdir: Path, workers: int = 2, worker_cores: int = 1, worker_memory: str = "1g",
                 daemon_heap: str = "256m", env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.home = pyspark_home()
        self.port = free_port()
        self.ui_port = free_port()
        self.procs: list[subprocess.Popen] = []
        # Daemons and the executors they fork bind and advertise loopback only (Spark's SPARK_LOCAL_IP);
        # SPARK_DAEMON_MEMORY and _JAVA_OPTS are the master's and workers' own (spark-class's default heap is 1g).
        self.env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_DAEMON_MEMORY": daemon_heap, "SPARK_DAEMON_JAVA_OPTS": SHORT_LIVED_JVM, **(env or {})}

    @property
    def url(self) -> str:
        """The master URL a driver connects to."""
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, main_class: str, *args: str) -> subprocess.Popen:
        command = [str(self.home / "bin" / "spark-class"), main_class, *args]
        with open(self.workdir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(command, env=self.env, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        """Start the master, then the workers; return once the master lists them all ALIVE."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._spawn("master", MASTER, "--host", "127.0.0.1", "--port", str(self.port),
                    "--webui-port", str(self.ui_port))
        self.wait(lambda state: state is not None, timeout, "the master's web UI to answer")
        for n, work in enumerate(self.worker_dirs()):
            work.mkdir(exist_ok=True)
            self._spawn(f"worker-{n}", WORKER, self.url, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                        "--cores", str(self.worker_cores), "--memory", self.worker_memory, "--work-dir", str(work))
        self.wait(lambda state: len(alive_workers(state)) == self.workers, timeout,
                  f"{self.workers} ALIVE workers")
        return self

    def worker_dirs(self) -> list[Path]:
        """Each worker's --work-dir: a folder per application it ran an executor for (its stdout and stderr)."""
        return [self.workdir / f"worker-{n}" for n in range(self.workers)]

    def state(self) -> dict | None:
        """The master's state as its web UI serves it at /json/ (workers, active and completed apps); None if down
        or not serving it yet (a UI that is starting answers with an empty page)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as answer:
                return json.load(answer)
        except (OSError, ValueError):  # (json.JSONDecodeError is a ValueError)
            return None

    def wait(self, condition: Callable[[dict | None], bool], timeout: float, what: str) -> dict:
        """Poll the master's state until ``condition(state)``; fail if a daemon exits or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while True:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {proc.returncode}: see {self.workdir}/*.log")
            state = self.state()
            if condition(state):
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {what}; master state: {state}")
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the workers, then the master (each by its PID, as stop-worker.sh does); SIGKILL stragglers."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()


def alive_workers(state: dict | None) -> list[dict]:
    """The workers the master lists as ALIVE."""
    return [w for w in (state or {}).get("workers", []) if w.get("state") == "ALIVE"]
