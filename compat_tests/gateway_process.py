"""A `logway serve` child process on a free loopback port, and the port helpers around it: what the root
conftest.py's fixtures, tests/proxy, tests/spark and compat_tests/kafka start their brokers with (imported by
module name, so no test imports a conftest.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
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
