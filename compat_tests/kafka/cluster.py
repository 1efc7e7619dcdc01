"""Apache Kafka (KRaft) on loopback, started from the Maven jars in lib/: the reference Logway is compared with.

`ensure_jars()` resolves the jars with Maven on first use (cached in ~/.m2; skipped while lib/ is newer than
pom.xml). `KafkaCluster(nodes=1)` is one combined broker+controller; `nodes=3` is three combined nodes (ids
1, 2, 5) forming a controller quorum of three. Each node is a `java kafka.Kafka` child process with a small
heap, its data in a temp dir and its log in a file; it is ready when Metadata lists every broker.
"""

from __future__ import annotations

import base64
import fcntl
import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from compat_tests.kafka.wire_client import WireClient

HERE = Path(__file__).parent
LIB = HERE / "lib"
POM = HERE / "pom.xml"
STAMP = LIB / ".resolved"
KAFKA_VERSION = "4.3.1"  # kept equal to <kafka.version> in pom.xml
NODE_IDS = (1, 2, 5)

# Fast start for short-lived test JVMs: small heap, client compiler only, no perf-data file.
JVM_FLAGS = ("-Xmx512m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
             "-Xshare:auto", "-Djava.awt.headless=true")

# Settings shared by the reference Kafka and the Logway it is compared with, so that defaults that only
# matter for speed (the group join delay, the 50 offsets partitions) do not make the two differ.
COMMON_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "num.partitions": "1",
    # KIP-848 members learn of a new assignment at their next heartbeat: 0.5 s instead of 5 s keeps the client tests short.
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
}


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or the jars cannot be resolved: the Kafka reference tests skip."""


def ensure_jars(quiet: bool = True, pom: Path = POM, lib: Path = LIB) -> Path:
    """Resolve ``pom``'s dependencies (by default Kafka's broker and tools) into ``lib`` with Maven (idempotent:
    skipped while lib/.resolved is newer than the pom; ~4 s when ~/.m2 is warm). A file lock makes concurrent
    callers (`make test`'s workers) resolve once and wait for it."""
    stamp = lib / STAMP.name

    def resolved() -> bool:
        return stamp.exists() and stamp.stat().st_mtime >= pom.stat().st_mtime

    if resolved():
        return lib
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            raise KafkaUnavailable(f"{tool} not found on PATH")
    with open(lib.with_name(f".{lib.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not resolved():
            _resolve(quiet, pom, lib)
    return lib


def _resolve(quiet: bool, pom: Path, lib: Path) -> None:
    if lib.exists():
        shutil.rmtree(lib)
    cmd = ["mvn", "-B", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={lib}",
           "-DincludeScope=runtime"]
    if quiet:
        cmd.insert(1, "-q")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise KafkaUnavailable(f"mvn dependency:copy-dependencies failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    (lib / STAMP.name).write_text(KAFKA_VERSION + "\n")


def classpath() -> str:
    return str(ensure_jars() / "*")


def java(main: str, *args: str, timeout: float = 120, stdin: str | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run one of Kafka's tool classes (`org.apache.kafka.tools.TopicCommand`, ...) to completion."""
    cp = classpath()  # first: it creates lib/, where the class-data-sharing archive goes
    archive = LIB / "cds" / f"{main}.jsa"
    written = archive.with_name(f"{archive.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}") if not archive.exists() else None
    cmd = ["java", *JVM_FLAGS, *_class_data_sharing(archive, written),
           f"-Dlog4j2.configurationFile={HERE / 'log4j2-tools.properties'}", "-cp", cp, main, *args]
    try:
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    finally:
        if written is not None and written.exists():
            os.replace(written, archive)  # whole, so a JVM started meanwhile never maps a half-written archive


def class_data_sharing(main: str, lib: Path = LIB) -> list[str]:
    """JVM flags for the class-data-sharing archive of a long-lived JVM (a Connect worker: <lib>/cds/<main>.jsa),
    written in place at its first clean exit; one module at a time starts such a JVM."""
    archive = lib / "cds" / f"{main}.jsa"
    return _class_data_sharing(archive, None if archive.exists() else archive)


def _class_data_sharing(archive: Path, written: Path | None) -> list[str]:
    """JVM flags for a class-data-sharing archive of one tool's classes (lib/cds/<main>.jsa): the tool's
    first run writes it at exit (under its own name, renamed into place by java()), later runs map it and start
    in about 0.8 s instead of 2 s. A stale or foreign archive is ignored by the JVM (-Xshare:auto), silently."""
    quiet = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    if written is None:
        return [f"-XX:SharedArchiveFile={archive}", *quiet]
    archive.parent.mkdir(exist_ok=True)
    return [f"-XX:ArchiveClassesAtExit={written}", *quiet]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_id() -> str:
    """A random Kafka cluster id: a UUID in URL-safe base64 without padding (what `kafka-storage random-uuid` prints).

    Like Kafka's Uuid.randomUuid, never one starting with '-': a command line would read it as an option.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


@dataclass
class Node:
    node_id: int
    port: int
    controller_port: int
    data_dir: Path
    proc: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"kafka-{self.node_id}.log"

    @property
    def properties_path(self) -> Path:
        return self.data_dir.parent / f"server-{self.node_id}.properties"


class KafkaCluster:
    """Apache Kafka nodes in KRaft combined mode on 127.0.0.1 under ``base_dir``; stopped by PID."""

    def __init__(self, base_dir: Path, nodes: int = 1, config: dict[str, str] | None = None,
                 jvm_flags: tuple[str, ...] = JVM_FLAGS) -> None:
        if nodes not in (1, 3):
            raise ValueError("nodes must be 1 or 3")
        self.base_dir = base_dir
        self.jvm_flags = jvm_flags  # the bench passes kafka-server-start's defaults instead of the test JVM's
        self.config = {**COMMON_CONFIG, **(config or {})}
        self.cluster_id = _cluster_id()
        self.nodes = [Node(nid, _free_port(), _free_port(), base_dir / f"node-{nid}" / "data")
                      for nid in NODE_IDS[:nodes]]
        self.start_seconds: float | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def port(self) -> int:
        return self.nodes[0].port

    def _properties(self, node: Node) -> str:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        replication = str(min(3, len(self.nodes)))
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.data_dir),
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": "1",
            **self.config,
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _format(self, node: Node) -> None:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        node.properties_path.write_text(self._properties(node))
        proc = java("kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}", "-c", str(node.properties_path),
                    "--ignore-formatted")
        if proc.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed for node {node.node_id}:\n{proc.stdout}{proc.stderr}")

    def _launch(self, node: Node) -> None:
        cmd = ["java", *self.jvm_flags, f"-Dlog4j2.configurationFile={HERE / 'log4j2-server.properties'}",
               f"-Dkafka.logs.dir={node.data_dir.parent}", "-cp", classpath(), "kafka.Kafka",
               str(node.properties_path)]
        with open(node.log_path, "ab") as log:
            node.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        """Format every node's storage, start them, and wait until Metadata lists every broker."""
        began = time.monotonic()
        ensure_jars()
        for node in self.nodes:
            self._format(node)
        for node in self.nodes:
            self._launch(node)
        try:
            self._wait_ready(began + timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def _wait_ready(self, deadline: float) -> None:
        want = {n.node_id for n in self.nodes}
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.proc is not None and node.proc.poll() is not None:
                    raise RuntimeError(f"Kafka node {node.node_id} exited with {node.proc.returncode}; "
                                       f"see {node.log_path}:\n{_tail(node.log_path)}")
            if all(_metadata_broker_ids(n.port) == want for n in self.nodes):
                return
            time.sleep(0.2)
        raise TimeoutError(f"Kafka not ready after start; see {self.nodes[0].log_path}")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM each node by PID (a controlled shutdown), SIGKILL whoever is still there after ``timeout``."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.terminate()
        for node in self.nodes:
            if node.proc is None:
                continue
            try:
                node.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
            node.proc = None

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _metadata_broker_ids(port: int) -> set[int]:
    """Broker ids a Metadata request to 127.0.0.1:port lists (empty while it does not answer yet)."""
    try:
        with WireClient(port, timeout=2) as client:
            return {b.node_id for b in client.call(3, 1, {"topics": ()}).brokers}
    except OSError:
        return set()
