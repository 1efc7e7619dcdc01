"""Processes for the proxy's end-to-end tests: `logway proxy` children in front of upstream brokers."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # bench/ as a package, as compat_tests/test_proxy_matrix.py does
from bench.procs import free_port_block  # noqa: E402  (after the path above)
from compat_tests.gateway_process import GatewayProcess, wait_for_port  # noqa: E402


class ProxyProcess:
    """A `logway proxy` child process on a block of free ports (bootstrap P, node N on P + 1 + N)."""

    def __init__(self, workdir: Path, upstream: str, extra: tuple[str, ...] = (), max_node_id: int = 9) -> None:
        self.workdir = workdir
        self.upstream = upstream
        self.extra = extra
        self.max_node_id = max_node_id
        self.port = free_port_block(max_node_id + 2)
        self.proc: subprocess.Popen | None = None
        self.log_path = workdir / "proxy.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def node_port(self, node_id: int) -> int:
        return self.port + 1 + node_id

    def start(self) -> ProxyProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        listener = f"PLAINTEXT://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "logway.cli", "proxy", "--upstream-bootstrap-servers", self.upstream,
               "--listeners", listener, "--override", f"log.dirs={self.workdir / 'state'}",
               "--override", f"proxy.node.id.range=0-{self.max_node_id}",
               "--override", "proxy.metadata.refresh.interval.ms=1000", *self.extra]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        wait_for_port(self.port, self.proc)
        return self

    def wait_node_port(self, node_id: int, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.node_port(node_id)), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"the proxy opened no port for node {node_id}; see {self.log_path}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def add_scram_users(props: Path, users: dict[str, tuple[str, str]]) -> None:
    """`logway users add --virtual-cluster` for each tenant's (user, password), SCRAM-SHA-256, before the proxy
    reading ``props`` starts."""
    for tenant, (user, password) in users.items():
        subprocess.run([sys.executable, "-m", "logway.cli", "users", "add", "--config", str(props),
                        "--virtual-cluster", tenant, "--user", user, "--password", password,
                        "--mechanism", "SCRAM-SHA-256"], check=True, timeout=60)


@contextmanager
def proxy_from_properties(workdir: Path, properties: str, ports: list[int]) -> Iterator[subprocess.Popen]:
    """`logway proxy --config` with ``properties`` (written to ``workdir``), running until the block ends; waits
    for every port in ``ports`` first."""
    path = workdir / "proxy.properties"
    path.write_text(properties)
    with open(workdir / "proxy.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "logway.cli", "proxy", "--config", str(path)],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        for port in ports:
            wait_for_port(port, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def logway_upstream(tmp_path_factory) -> Iterator[GatewayProcess]:
    """A Logway broker process (node.id 1) as the proxy's upstream."""
    gw = GatewayProcess(tmp_path_factory.mktemp("upstream") / "data",
                        extra_args=("--override", "node.id=1", "--override", "group.initial.rebalance.delay.ms=0"))
    gw.start()
    try:
        yield gw
    finally:
        gw.stop("KILL")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, logway_upstream) -> Iterator[ProxyProcess]:
    p = ProxyProcess(tmp_path_factory.mktemp("proxy"), logway_upstream.bootstrap).start()
    p.wait_node_port(1)
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def processes(tmp_path) -> Iterator[dict]:
    """Makers of private upstream and proxy processes, all stopped at the end of the test."""
    started: list = []

    def gateway(name: str = "data", *extra: str) -> GatewayProcess:
        gw = GatewayProcess(tmp_path / name, extra_args=extra)
        started.append(gw)
        return gw

    def proxy(upstream: str, *extra: str) -> ProxyProcess:
        p = ProxyProcess(tmp_path / f"proxy-{len(started)}", upstream, extra)
        started.append(p)
        return p

    try:
        yield {"gateway": gateway, "proxy": proxy}
    finally:
        for process in reversed(started):
            process.stop(*(("KILL",) if isinstance(process, GatewayProcess) else ()))


_names = iter(range(1_000_000))


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique within the test session."""
    return f"{request.node.name.split('[')[0][:40]}-{next(_names)}".replace("_", "-")


@pytest.fixture(scope="session")
def proxy_process_type() -> type[ProxyProcess]:
    """The ProxyProcess class, for module fixtures elsewhere in tests/proxy."""
    return ProxyProcess
