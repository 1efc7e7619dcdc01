"""Kafka Connect and MirrorMaker 2 processes for the ecosystem tests: JVMs started from the Maven jars of
connect/pom.xml (Kafka 4.3.1's connect-runtime, connect-file, connect-json and connect-mirror, resolved into
connect/lib/ on first use), their REST API, and bounded waits that show the JVM's log when they fail.

`ConnectWorker` is one distributed worker (`org.apache.kafka.connect.cli.ConnectDistributed`), restartable on the
same REST port and configuration, so a SIGKILLed worker comes back as the same worker. `MirrorMakerProcess` is
MirrorMaker 2 in dedicated mode (`org.apache.kafka.connect.mirror.MirrorMaker`): one JVM for every replication flow.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.procs import free_port
from compat_tests.kafka.cluster import HERE as KAFKA_DIR
from compat_tests.kafka.cluster import JVM_FLAGS, KafkaUnavailable, class_data_sharing, ensure_jars

CONNECT_DIR = Path(__file__).parent / "connect"
LOG4J = KAFKA_DIR / "log4j2-server.properties"  # INFO to stdout, which goes to the process's log file

# What both kinds of process are told about their Kafka clients: short metadata refreshes and reconnects, so a
# process that started before a topic existed, or lost its broker for a moment, catches up within a second.
FAST_CLIENTS = {"metadata.max.age.ms": "1000", "reconnect.backoff.max.ms": "500"}
# Plugins found from their ServiceLoader manifests only: the default (hybrid_warn) also scans every class on the
# class path by reflection, 6-7 s of each JVM start here, to find the same plugins (Kafka's jars all have manifests).
PLUGIN_DISCOVERY = {"plugin.discovery": "service_load"}


def connect_classpath() -> str:
    """connect/lib/* (Maven resolves connect/pom.xml into it on first use; KafkaUnavailable if it cannot)."""
    return str(ensure_jars(pom=CONNECT_DIR / "pom.xml", lib=CONNECT_DIR / "lib") / "*")


def require_connect_jars() -> None:
    """Skip the calling test when Java, Maven or the jars are not to be had (as compat_tests/kafka does)."""
    try:
        connect_classpath()
    except KafkaUnavailable as error:
        pytest.skip(str(error))


def properties(values: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values.items())


class JavaProcess:
    """One JVM running ``main`` with a properties file, its output in ``<workdir>/<name>.log``."""

    main = ""

    def __init__(self, workdir: Path, name: str, config: dict[str, str]) -> None:
        self.workdir = workdir
        self.name = name
        self.config = config
        self.proc: subprocess.Popen | None = None
        self.log_path = workdir / f"{name}.log"
        self.properties_path = workdir / f"{name}.properties"

    def start(self) -> JavaProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text(properties(self.config))
        classpath = connect_classpath()  # first: it creates lib/, where the class-data-sharing archive goes
        cmd = ["java", *JVM_FLAGS, *class_data_sharing(self.main, CONNECT_DIR / "lib"),
               f"-Dlog4j2.configurationFile={LOG4J}", "-cp", classpath, self.main, str(self.properties_path)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash: no clean leave of its group, no last offset commit."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.proc = None

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a clean shutdown) by PID; SIGKILL if it is still there after ``timeout``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_for(self, condition: Callable[[], object], what: str, timeout: float = 90.0) -> object:
        """Poll ``condition`` until it returns something true (returned); AssertionError with the log's tail if
        the deadline passes first or the JVM exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode} while waiting for {what}; "
                                     f"{self.log_path}:\n{self.log_tail()}")
            result = condition()
            if result:
                return result
            time.sleep(0.2)
        raise AssertionError(f"no {what} after {timeout:.0f} s; {self.log_path}:\n{self.log_tail()}")


class ConnectWorker(JavaProcess):
    """A Kafka Connect worker in distributed mode whose group and internal topics live on ``bootstrap``."""

    main = "org.apache.kafka.connect.cli.ConnectDistributed"

    def __init__(self, workdir: Path, bootstrap: str, group: str = "connect-cluster") -> None:
        self.rest_port = free_port()
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            # The three internal topics, created by the worker on first start: configs and offsets compacted, one
            # partition for configs (Connect requires it), the replication Logway has (one broker).
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "3",
            "status.storage.partitions": "1",
            # connect-json, as Kafka's connect-distributed.properties configures it.
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "offset.flush.interval.ms": "500",
            "listeners": f"http://127.0.0.1:{self.rest_port}",
            # A restarted worker rejoins while its killed self is still a member: the group drops the dead member
            # after session.timeout.ms (Kafka's group.min.session.timeout.ms is 6 s), and the leader hands the
            # dead member's connectors and tasks out again at once instead of after the default 5 minutes (KIP-415).
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000",
            "scheduled.rebalance.max.delay.ms": "0",
            # The same for the sink task's consumer group: the killed worker's consumer holds the partition until
            # its session expires (the consumer's default is 45 s).
            "consumer.session.timeout.ms": "6000",
            "consumer.heartbeat.interval.ms": "1000",
            **FAST_CLIENTS,
            **PLUGIN_DISCOVERY,
        }
        super().__init__(workdir, "connect-worker", config)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def rest(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        """One REST call: (HTTP status, decoded JSON body); (0, None) while nothing answers on the port."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
                return response.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                return error.code, json.loads(raw)
            except ValueError:
                return error.code, raw.decode(errors="replace")
        except (OSError, ValueError):
            return 0, None

    def put_connector(self, name: str, config: dict[str, str], timeout: float = 90.0) -> None:
        """Create or update connector ``name``, retried while the worker is still joining its group (409/503)."""
        def created() -> bool:
            status, _ = self.rest("PUT", f"/connectors/{name}/config", {"name": name, **config})
            return status in (200, 201)
        self.wait_for(created, f"connector {name} accepted by the REST API", timeout)

    def running(self, name: str, tasks: int = 1) -> bool:
        """True once connector ``name`` and ``tasks`` tasks of it are RUNNING."""
        status, body = self.rest("GET", f"/connectors/{name}/status")
        if status != 200 or body["connector"]["state"] != "RUNNING":
            return False
        states = [task["state"] for task in body["tasks"]]
        if "FAILED" in states:
            failed = [task.get("trace", "") for task in body["tasks"] if task["state"] == "FAILED"]
            raise AssertionError(f"connector {name} has a failed task:\n{failed[0][:3000]}")
        return states.count("RUNNING") == tasks

    def offsets(self, name: str) -> list[dict]:
        """The connector's committed offsets (KIP-875's GET /connectors/<name>/offsets); [] while unknown."""
        status, body = self.rest("GET", f"/connectors/{name}/offsets")
        return body["offsets"] if status == 200 else []


class MirrorMakerProcess(JavaProcess):
    """MirrorMaker 2 in dedicated mode (connect-mirror-maker.sh): ``config`` is its mm2.properties."""

    main = "org.apache.kafka.connect.mirror.MirrorMaker"

    def __init__(self, workdir: Path, config: dict[str, str]) -> None:
        super().__init__(workdir, "mirror-maker", config)
