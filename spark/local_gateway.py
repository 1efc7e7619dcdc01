"""A throw-away Logway gateway child process, for the command-line tools run without --bootstrap."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def local_gateway(data_dir: str) -> Iterator[str]:
    """A Logway gateway child process for the run; yields its bootstrap address and stops it afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    log = open(f"{data_dir}-gateway.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "logway.cli", "serve", "--listeners", listener,
                             "--advertised-listeners", listener, "--log-dirs", data_dir],
                            stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {proc.returncode}; see {log.name}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError("gateway did not listen within 30s") from None
                time.sleep(0.1)
        print(f"started Logway gateway on 127.0.0.1:{port} (log {log.name})")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def run_against_broker(bootstrap: str | None, prefix: str, measure: Callable[[str], int]) -> int:
    """``measure(bootstrap)`` against the given broker, or else against a throw-away gateway in a temporary dir."""
    if bootstrap:
        return measure(bootstrap)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp, local_gateway(f"{tmp}/data") as local:
        return measure(local)
