"""Kafka 4.3.1's own Java clients driven from a test: ``java/Kafka4Client.java`` as a child process.

``Kafka4Client.start("consume", bootstrap, group, topic, "group.protocol=consumer")`` starts a KafkaConsumer
(or, with "share", a KafkaShareConsumer) that prints one line per event; a reader thread collects them, and the
test waits for conditions on them (``wait_for``), never for a fixed time. ``stop()`` closes the client, which
leaves its group as Kafka's clients do. The class is compiled against the reference jars in lib/ on first use.
"""

from __future__ import annotations

import fcntl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from compat_tests.kafka.cluster import HERE, JVM_FLAGS, classpath

SOURCE = HERE / "java" / "Kafka4Client.java"


def ensure_compiled(source: Path = SOURCE) -> Path:
    """lib/classes/ with ``source`` (a Java file with no package) compiled against the reference jars,
    recompiled when the source is newer. A file lock makes concurrent callers (`make test`'s workers) compile
    once and wait for it, so none starts a JVM on a half-written class."""
    cp = classpath()
    classes = HERE / "lib" / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    target = classes / f"{source.stem}.class"
    with open(classes / ".compile.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
            subprocess.run(["javac", "-d", str(classes), "-cp", cp, str(source)], check=True, timeout=180,
                           capture_output=True)
    return classes


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    delivery_count: int | None
    value: str
    ack: str = ""


class Kafka4Client:
    """One running client and the lines it printed."""

    def __init__(self, proc: subprocess.Popen, log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, mode: str, bootstrap: str, group: str, topic: str, *config: str, log_dir: Path) -> Kafka4Client:
        classes = ensure_compiled()
        log_path = log_dir / f"{mode}-{group}-{time.monotonic_ns()}.log"
        cmd = ["java", *JVM_FLAGS, f"-Dlog4j2.configurationFile={HERE / 'log4j2-tools.properties'}",
               "-cp", f"{classes}:{classpath()}", "Kafka4Client", mode, bootstrap, group, topic, *config]
        with open(log_path, "wb") as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        return cls(proc, log_path)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.lines)

    def records(self) -> list[Record]:
        out = []
        for line in self.snapshot():
            if line.startswith("RECORD "):
                parts = line.split(" ")
                count = None if parts[4] == "-" else int(parts[4])
                out.append(Record(parts[1], int(parts[2]), int(parts[3]), count, parts[5],
                                  parts[6] if len(parts) > 6 else ""))
        return out

    def committed(self) -> list[str]:
        """The values of the records whose acknowledgements a share consumer's commitSync confirmed, in order."""
        out: list[str] = []
        for line in self.snapshot():
            if line.startswith("COMMITTED "):
                out += [v for v in line.removeprefix("COMMITTED ").split(",") if v]
        return out

    def assignment(self) -> set[str]:
        """The partitions of the last ASSIGNED line (empty before the first)."""
        assigned = [line for line in self.snapshot() if line.startswith("ASSIGNED")]
        if not assigned:
            return set()
        return {p for p in assigned[-1].removeprefix("ASSIGNED").strip().split(",") if p}

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
        """Wait until ``condition()`` holds; fail naming ``what``, with the client's output, if it does not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{what}: not after {timeout}s (exit {self.proc.poll()}); output:\n"
                             + "\n".join(self.snapshot()[-30:]) + "\n" + self.log_path.read_text()[-3000:])

    def stop(self, timeout: float = 60.0) -> None:
        """Close the client (it leaves its group) and wait for it to exit."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
