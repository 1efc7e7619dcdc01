"""The Java consumer (kafka-clients from compat_tests/matrix/java/lib) as a bench.loadgen mode: `java.consume`.

Compiles bench/java/ConsumeBench.java into bench/.cache/java on first use, starts the JVM and lets it connect
before the driver's start signal, so JVM start-up is outside the timed window. Java's System.nanoTime is
CLOCK_MONOTONIC on Linux, the clock of time.monotonic(), so its start and end compare with Python children's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.loadgen import ready

HERE = Path(__file__).resolve().parent
LIB = HERE.parent / "compat_tests" / "matrix" / "java" / "lib"
CLASSES = HERE / ".cache" / "java"
SOURCE = HERE / "java" / "ConsumeBench.java"


def classpath() -> str:
    """kafka-clients and its jars plus the compiled ConsumeBench (compiled when the source is newer)."""
    target = CLASSES / "ConsumeBench.class"
    jars = ":".join(str(p) for p in sorted(LIB.glob("*.jar")))
    if not target.exists() or target.stat().st_mtime < SOURCE.stat().st_mtime:
        CLASSES.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-cp", jars, "-d", str(CLASSES), str(SOURCE)], check=True, timeout=300)
    return f"{jars}:{CLASSES}"


def consume(spec: dict) -> dict:
    """Read partitions 0..n-1 of `topic` from earliest to `ends` with one KafkaConsumer (assign, no group)."""
    config = [f"{k}={v}" for k, v in spec.get("config", {}).items()]
    cmd = ["java", "-Xmx1G", "-cp", classpath(), "ConsumeBench", spec["bootstrap"], spec["topic"],
           ",".join(str(e) for e in spec["ends"]), *config]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith("READY"):
                break
        ready()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        for line in proc.stdout:
            if line.startswith("RESULT"):
                start_ns, end_ns, messages, fetches, counted = (int(x) for x in line.split()[1:])
                break
        else:
            raise RuntimeError(f"java consumer exited with {proc.wait(30)} without a result")
    finally:
        proc.stdin.close()
        if proc.wait(60) is None:
            proc.kill()
    count = sum(spec["ends"])
    return {"start": start_ns / 1e9, "end": end_ns / 1e9, "messages": messages, "bytes": messages * spec["size"],
            "errors": count - messages, "trace": {"fetch_requests": fetches, "records_counted": counted}}
