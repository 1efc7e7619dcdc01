"""Kafka Connect 4.3.1 in distributed mode on Logway, direct and through `logway proxy`: Kafka's FileStreamSource
reads a file into a topic, FileStreamSink writes the topic to another file, and the worker is SIGKILLed and started
again. The worker's group and its three internal topics (configs, offsets, status; compacted) live on Logway, so
the restarted worker finds its connectors, the source's file position and the sink's group offsets there.

What is asserted, and why exactly once: Connect promises at-least-once delivery for these connectors; a record is
delivered again after a crash only if its offset was not committed yet. The test waits, before the SIGKILL, until
both connectors' offsets (GET /connectors/<name>/offsets, KIP-875) cover every line written so far, so a Logway that
keeps those commits makes the sink file end with every source line exactly once and in order; a lost or stale
commit shows as a duplicated line, a lost config as lines that never arrive.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # --import-mode=importlib: bench/ and compat_tests/ import from the repository root
    sys.path.insert(0, str(ROOT))

from compat_tests.ecosystem.connect_worker import ConnectWorker, require_connect_jars  # noqa: E402
from compat_tests.ecosystem.harness import ENDPOINTS, start_logway  # noqa: E402

RUN = uuid.uuid4().hex[:8]  # names of this run's own, so `make compat` can run again against the same endpoint
TOPIC = f"connect-lines-{RUN}"
SOURCE, SINK = f"file-source-{RUN}", f"file-sink-{RUN}"
LINES = 300  # per phase: before the kill, and while the worker is down


@pytest.fixture(params=ENDPOINTS)
def bootstrap(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh Logway broker, and `logway proxy` in front of it for the "proxy" case: the worker's bootstrap."""
    require_connect_jars()
    with ExitStack() as stack:
        yield start_logway(request.param, tmp_path, stack)


def read_lines(path: Path) -> list[str]:
    """The file's complete lines (FileStreamSink writes a line and its newline in two writes)."""
    text = path.read_text() if path.exists() else ""
    return text[:text.rfind("\n") + 1].splitlines()


def append_lines(path: Path, lines: list[str]) -> None:
    with open(path, "a") as f:
        f.writelines(line + "\n" for line in lines)


def source_position(worker: ConnectWorker) -> int:
    """The byte position FileStreamSource committed for its file (-1 before its first commit)."""
    return max((entry["offset"]["position"] for entry in worker.offsets(SOURCE)), default=-1)


def sink_offset(worker: ConnectWorker) -> int:
    """The offset the sink's consumer group committed for the topic's partition (-1 before its first commit)."""
    return max((entry["offset"]["kafka_offset"] for entry in worker.offsets(SINK)), default=-1)


def cleanup_policies(bootstrap: str, topics: list[str]) -> dict[str, str]:
    """cleanup.policy of each topic as DescribeConfigs answers it through ``bootstrap``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in topics])
    return {resource.name: future.result(30)["cleanup.policy"].value for resource, future in futures.items()}


def test_file_source_and_sink_resume_after_the_worker_is_killed(bootstrap: str, tmp_path: Path) -> None:
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    first = [f"before-kill-{i:04d}" for i in range(LINES)]
    second = [f"while-down-{i:04d}" for i in range(LINES)]
    append_lines(source, first)

    worker = ConnectWorker(tmp_path / "worker", bootstrap, group=f"connect-{RUN}").start()
    try:
        worker.put_connector(SOURCE, {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
            "file": str(source), "topic": TOPIC,
            # KIP-158: the worker creates the topic through the admin API with these settings.
            "topic.creation.default.partitions": "1", "topic.creation.default.replication.factor": "1"})
        worker.put_connector(SINK, {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
            "file": str(sink), "topics": TOPIC})
        worker.wait_for(lambda: len(read_lines(sink)) >= LINES, f"{LINES} lines in the sink file")
        assert read_lines(sink) == first

        # Both connectors' offsets cover every line before the crash (see the module docstring).
        worker.wait_for(lambda: source_position(worker) == source.stat().st_size, "the source's position committed")
        worker.wait_for(lambda: sink_offset(worker) == LINES, "the sink's offset committed")
        worker.kill()

        append_lines(source, second)
        worker.start()
        worker.wait_for(lambda: len(read_lines(sink)) >= 2 * LINES, f"{2 * LINES} lines in the sink file",
                        timeout=120)
        worker.wait_for(lambda: sink_offset(worker) == 2 * LINES, "the sink's offset committed after the restart")
        assert read_lines(sink) == first + second
        assert worker.running(SOURCE) and worker.running(SINK)
        internal = [worker.config[key] for key in ("config.storage.topic", "offset.storage.topic",
                                                     "status.storage.topic")]
        assert cleanup_policies(bootstrap, internal) == dict.fromkeys(internal, "compact")
    finally:
        worker.stop()
