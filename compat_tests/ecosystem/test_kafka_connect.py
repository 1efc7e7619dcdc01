"""Kafka Connect 4.3.1 in distributed mode (ConnectDistributed: connector configs, source offsets and status in
compacted topics, the workers a group of protocol type "connect") with the file source and sink connectors,
against Logway direct and through `logway proxy` (issue 30): lines appended to a file reach another file through
a topic, once each and in order, across a worker restart. The worker stops on SIGTERM as a deployment stops it
(it commits the source's file position and the sink's offsets and leaves its group); the restarted worker reads
its connectors and offsets back from the topics, picks up the lines written while it was down, and repeats none.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from bench.procs import free_port
from compat_tests.ecosystem.exactly_once import create_topics
from compat_tests.ecosystem.harness import Child
from compat_tests.kafka.cluster import HERE, JVM_FLAGS, KafkaUnavailable, classpath

FILE_CONNECTORS = "org.apache.kafka.connect.file"


@pytest.fixture(scope="module")
def connect_classpath() -> str:
    if shutil.which("java") is None:
        pytest.skip("Kafka Connect needs java on PATH")
    try:
        return classpath()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))


class ConnectWorker:
    """One ConnectDistributed JVM and its REST API."""

    def __init__(self, cp: str, bootstrap: str, run: str, workdir: Path, name: str) -> None:
        self.port = free_port()
        props = workdir / f"{name}.properties"
        props.write_text("\n".join(f"{k}={v}" for k, v in {
            "bootstrap.servers": bootstrap, "group.id": f"connect-{run}",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"connect-configs-{run}", "offset.storage.topic": f"connect-offsets-{run}",
            "status.storage.topic": f"connect-status-{run}", "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
            "offset.flush.interval.ms": "500", "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1", "plugin.discovery": "service_load",
        }.items()) + "\n")
        self.child = Child(["java", *JVM_FLAGS, f"-Dlog4j2.configurationFile={HERE / 'log4j2-tools.properties'}",
                            "-cp", cp, "org.apache.kafka.connect.cli.ConnectDistributed", str(props)],
                           workdir / f"{name}.log")

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        """(HTTP status, JSON body) of one REST call; (0, error) while the worker does not answer."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")
        except OSError as exc:
            return 0, str(exc)

    def until(self, what: str, call, timeout: float = 120) -> object:
        """``call()``'s first truthy result, asked every 200 ms while the worker runs, for up to ``timeout`` s."""
        return self.child.wait_for(what, call, timeout, every=0.2)

    def put_connector(self, name: str, config: dict[str, str]) -> None:
        # 409 while the workers rebalance (a fresh worker's first minute); Connect's own advice is to retry.
        self.until(f"connector {name} accepted",
                   lambda: self.request("PUT", f"/connectors/{name}/config", config)[0] in (200, 201))

    def running(self, name: str) -> bool:
        status, body = self.request("GET", f"/connectors/{name}/status")
        return status == 200 and body["connector"]["state"] == "RUNNING" and bool(body["tasks"]) and all(
            task["state"] == "RUNNING" for task in body["tasks"])

    def stop(self) -> None:
        self.child.stop()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_file_source_and_sink_across_a_worker_restart(connect_classpath: str, bootstrap: str, tmp_path: Path
                                                      ) -> None:
    run = uuid.uuid4().hex[:8]
    topic, source, sink = f"connect-lines-{run}", tmp_path / "in.txt", tmp_path / "out.txt"
    create_topics(bootstrap, topic, partitions=1)  # one partition: the sink writes in the source's order
    source.write_text("".join(f"line {i}\n" for i in range(50)))
    worker = ConnectWorker(connect_classpath, bootstrap, run, tmp_path, "worker-1")
    try:
        worker.put_connector("lines-in", {"connector.class": f"{FILE_CONNECTORS}.FileStreamSourceConnector",
                                          "tasks.max": "1", "file": str(source), "topic": topic})
        worker.put_connector("lines-out", {"connector.class": f"{FILE_CONNECTORS}.FileStreamSinkConnector",
                                           "tasks.max": "1", "file": str(sink), "topics": topic})
        worker.until("the first 50 lines in the sink's file", lambda: len(_lines(sink)) >= 50)
    finally:
        worker.stop()
    with source.open("a") as f:
        f.write("".join(f"line {i}\n" for i in range(50, 100)))
    worker = ConnectWorker(connect_classpath, bootstrap, run, tmp_path, "worker-2")
    try:
        worker.until("both connectors running again", lambda: worker.running("lines-in") and
                     worker.running("lines-out"))
        worker.until("100 lines in the sink's file", lambda: len(_lines(sink)) >= 100)
    finally:
        worker.stop()  # its last flush: a line sent twice would be in the file now
    assert _lines(sink) == [f"line {i}" for i in range(100)]
