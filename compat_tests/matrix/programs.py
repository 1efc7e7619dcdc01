"""Run the non-Python clients (Java program, kafkajs program, kcat) as bounded subprocesses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from records import Output, parse_output

HERE = Path(__file__).parent
JAVA_DIR = HERE / "java"
NODE_DIR = HERE / "node"


class ClientFailed(AssertionError):
    """A client program exited non-zero or timed out; the message carries the client's own error text."""


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run(cmd: list[str], timeout: float, stdin: str | None = None) -> str:
    """Run a client to completion within `timeout` seconds and return its stdout, or fail with its error output."""
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise ClientFailed(f"{cmd[0]} timed out after {timeout}s\n--- stdout\n{_tail(out)}\n--- stderr\n{_tail(err)}") from None
    if proc.returncode != 0:
        raise ClientFailed(
            f"{Path(cmd[0]).name} exited {proc.returncode}{_headline(proc.stdout, proc.stderr)}\n"
            f"--- stdout\n{_tail(proc.stdout)}\n--- stderr\n{_client_error(proc.stderr)}"
        )
    return proc.stdout


def _headline(stdout: str, stderr: str) -> str:
    """" at STEP x: <root cause>", so the matrix shows the client's own error on one line."""
    steps = [line[5:] for line in stdout.splitlines() if line.startswith("STEP ")]
    errors = [line.strip() for line in stderr.splitlines()
              if line.strip() and not line.lstrip().startswith(("SLF4J", "at ", "{", "..."))]
    causes = [e for e in errors if e.startswith("Caused by:")]
    cause = (causes or errors or [""])[-1 if causes else 0].removeprefix("Caused by: ")
    return (f" at STEP {steps[-1]}" if steps else "") + (f": {cause}" if cause else "")


def _client_error(stderr: str) -> str:
    """The stack trace without the SLF4J no-binding noise."""
    kept = [line for line in stderr.splitlines() if not line.startswith("SLF4J")]
    return "\n".join(kept[:40])


def java_cmd(*args: str) -> list[str]:
    """Command line for one scenario of the Java program (compiled by setup.sh)."""
    if not (JAVA_DIR / "classes" / "Compat.class").exists():
        pytest.fail("Java program not compiled: run compat_tests/setup.sh")
    cp = f"{JAVA_DIR / 'classes'}:{JAVA_DIR / 'lib'}/*"
    return ["java", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", cp, "Compat", *args]


def java(*args: str, timeout: float = 90) -> Output:
    """Run one Java scenario and parse its output."""
    return parse_output(run(java_cmd(*args), timeout))


def node(*args: str, timeout: float = 90) -> Output:
    """Run one kafkajs scenario and parse its output."""
    if not (NODE_DIR / "node_modules" / "kafkajs").exists():
        pytest.fail("kafkajs not installed: run compat_tests/setup.sh")
    return parse_output(run(["node", str(NODE_DIR / "compat.js"), *args], timeout))


def kcat(*args: str, timeout: float = 30, stdin: str | None = None) -> str:
    """Run kcat with the given arguments."""
    if shutil.which("kcat") is None:
        pytest.fail("kcat not installed: run compat_tests/setup.sh")
    return run(["kcat", *args], timeout, stdin)
