"""What the ecosystem tests share: the endpoint they run against (Logway direct, `logway proxy` in front of it,
or LOGWAY_TEST_BOOTSTRAP's endpoint under `make compat`) and the child processes they drive (a processor, a JVM),
waited on for conditions, never for a time."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.procs import Logway
from bench.proxy import LogwayProxy

EXTERNAL = os.environ.get("LOGWAY_TEST_BOOTSTRAP")
ENDPOINTS = ["external"] if EXTERNAL else ["direct", "proxy"]  # the params of an endpoint fixture


@contextmanager
def logway(workdir: Path) -> Iterator[Logway]:
    """A Logway process (rebalances start at once, as the tests' groups are formed one member at a time)."""
    broker = Logway(workdir, {"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    try:
        yield broker
    finally:
        broker.cleanup()


@contextmanager
def endpoint(kind: str, broker: Callable[[], Logway], workdir: Path) -> Iterator[str]:
    """host:port of the endpoint ``kind`` (one of ENDPOINTS) names; ``broker()`` gives the Logway process, asked
    for only when it is used (under `make compat` none is started)."""
    if kind == "external":
        yield EXTERNAL
        return
    if kind == "direct":
        yield broker().bootstrap
        return
    proxy = LogwayProxy(workdir / "proxy", broker())
    proxy.start()
    try:
        yield proxy.bootstrap
    finally:
        proxy.cleanup()


def start_logway(kind: str, workdir: Path, stack: ExitStack) -> str:
    """The bootstrap of endpoint ``kind`` (one of ENDPOINTS) for one test: a fresh Logway broker in ``workdir``
    (and a proxy in front of it for "proxy"), stopped when ``stack`` closes; the external one under `make compat`."""
    if kind not in ENDPOINTS:
        raise ValueError(f"kind must be one of {ENDPOINTS}, not {kind!r}")
    return stack.enter_context(endpoint(kind, lambda: stack.enter_context(logway(workdir / "logway")), workdir))


class Child:
    """A child process with its stderr (and, unless ``parse`` is given, its stdout) in ``log``; with ``parse``,
    a thread collects its stdout lines, parsed, in ``lines``. stdin is a pipe the test may close."""

    def __init__(self, cmd: list[str], log: Path, parse: Callable[[str], Any] | None = None) -> None:
        self.log = log
        self.lines: list[Any] = []
        with log.open("w") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=err, text=True,
                                         stdout=subprocess.PIPE if parse else err)
        self._reader = None
        if parse is not None:
            self._reader = threading.Thread(target=self._read, args=(parse,), daemon=True)
            self._reader.start()

    def _read(self, parse: Callable[[str], Any]) -> None:
        for line in self.proc.stdout:
            self.lines.append(parse(line.rstrip("\n")))

    def failure(self, what: str) -> str:
        return f"waiting for {what}: {self.lines[-5:]}\n{self.log.read_text()[-3000:]}"

    def wait_for(self, what: str, predicate: Callable[[], Any], timeout: float = 120,
                 failed: Callable[[], bool] = lambda: False, every: float = 0.05) -> Any:
        """``predicate()``'s first truthy result, asked ``every`` seconds; AssertionError if the process exits,
        says it ``failed()``, or ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while not (result := predicate()):
            if self.proc.poll() is not None or failed():
                raise AssertionError(f"{self.log.stem} failed (exit {self.proc.returncode}) {self.failure(what)}")
            assert time.monotonic() < deadline, f"{self.log.stem}: nothing after {timeout} s {self.failure(what)}"
            time.sleep(every)
        return result

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        self.proc.kill()
        self.proc.wait(10)
        if self._reader is not None:
            self._reader.join(5)

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM, as a deployment stops it; AssertionError if it is still running after ``timeout`` s."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.log.stem} did not stop on SIGTERM {self.failure('its exit')}") from None
