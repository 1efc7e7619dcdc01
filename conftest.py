"""Fixtures shared by compat_tests/ and tests/spark/: a real gateway process on a free port.

Set LOGWAY_TEST_BOOTSTRAP=host:port to point them at a broker you started yourself (e.g. a peer broker
to compare behaviour); otherwise each session starts `python -m logway.cli serve` with a temporary data dir.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


class GatewayProcess:
    """A `logway serve` child process; restartable on the same port and data dir."""

    def __init__(self, data_dir: Path, port: int | None = None, extra_args: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.extra_args = extra_args
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-gateway.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, wait: bool = True) -> GatewayProcess:
        """Start the process; with ``wait`` (the default) return once it listens."""
        listener = f"PLAINTEXT://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "logway.cli", "serve", "--listeners", listener,
               "--advertised-listeners", listener, "--log-dirs", str(self.data_dir), *self.extra_args]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).parent)
        log.close()
        if wait:
            wait_for_port(self.port, self.proc)
        return self

    def stop(self, sig: str = "TERM", timeout: float = 20.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            (self.proc.kill if sig == "KILL" else self.proc.terminate)()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@pytest.fixture(scope="session")
def broker_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """host:port of a running broker shared by the whole session."""
    external = os.environ.get("LOGWAY_TEST_BOOTSTRAP")
    if external:
        yield external
        return
    gw = GatewayProcess(tmp_path_factory.mktemp("broker") / "data").start()
    try:
        yield gw.bootstrap
    finally:
        gw.stop()


@pytest.fixture
def gateway_process(tmp_path: Path) -> Iterator[GatewayProcess]:
    """A private gateway process for tests that stop and restart it."""
    gw = GatewayProcess(tmp_path / "data")
    try:
        yield gw
    finally:
        gw.stop("KILL")
