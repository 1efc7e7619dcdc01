"""A Kafka Streams 4.3.1 application (java/StreamsEos.java: exactly_once_v2, a RocksDB store of counts per key)
killed with SIGKILL mid-stream and restarted on the same state directory, against Logway direct and through
`logway proxy`: its output holds every input record once, each with the running count per key (issue 30).

A kill lands after the application printed that it processed a record, most often before that record's
transaction committed (commit.interval.ms 100). The restarted instance finds its store unclean (exactly-once
wipes it) and restores it from its changelog topic read_committed; the killed instance's open transaction is
fenced or times out, and until then the restart's OffsetFetch (require_stable) answers UNSTABLE_OFFSET_COMMIT.
LOGWAY_STREAMS_RESTARTS (default 2) sets the kill-and-restart rounds per run.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from compat_tests.ecosystem.exactly_once import assert_exactly_once, committed_output, create_topics, produce
from compat_tests.ecosystem.harness import Child
from compat_tests.kafka.cluster import HERE, JVM_FLAGS, KafkaUnavailable, classpath
from compat_tests.kafka.kafka4_client import ensure_compiled

SOURCE = Path(__file__).with_name("java") / "StreamsEos.java"
RESTARTS = int(os.environ.get("LOGWAY_STREAMS_RESTARTS", "2"))
PER_ROUND = 40


@pytest.fixture(scope="module")
def classes() -> Path:
    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("Kafka Streams needs java and javac on PATH")
    try:
        return ensure_compiled(SOURCE)
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))


def _streams_app(classes: Path, bootstrap: str, app_id: str, topics: dict[str, str], state: Path, log: Path
                 ) -> Child:
    """A StreamsEos JVM; its lines (STATE, PROCESSED, ERROR) in ``lines``."""
    return Child(["java", *JVM_FLAGS, f"-Dlog4j2.configurationFile={HERE / 'log4j2-tools.properties'}",
                  "-cp", f"{classes}:{classpath()}", "StreamsEos", bootstrap, app_id, topics["input"],
                  topics["output"], str(state)], log, parse=str)


def _wait(app: Child, what: str, predicate) -> None:
    app.wait_for(what, predicate, failed=lambda: any(line.startswith("ERROR") for line in app.lines))


def test_kill_and_restart_keeps_exactly_once_output_and_state(classes: Path, bootstrap: str,
                                                                tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topics = {"input": f"streams-in-{run}", "output": f"streams-out-{run}"}
    create_topics(bootstrap, *topics.values())
    app_id, state = f"streams-{run}", tmp_path / "state"
    for round_ in range(RESTARTS):
        produce(bootstrap, topics["input"], round_ * PER_ROUND, PER_ROUND)
        app = _streams_app(classes, bootstrap, app_id, topics, state, tmp_path / f"streams-{round_}.log")
        _wait(app, "a processed record", lambda a=app: any(line.startswith("PROCESSED") for line in a.lines))
        app.kill()
    total = (RESTARTS + 1) * PER_ROUND
    produce(bootstrap, topics["input"], RESTARTS * PER_ROUND, PER_ROUND)
    app = _streams_app(classes, bootstrap, app_id, topics, state, tmp_path / "streams-last.log")
    try:
        _wait(app, "RUNNING", lambda: "STATE RUNNING" in app.lines)
        out = committed_output(bootstrap, topics["output"], total, timeout=120)
    finally:
        app.kill()
    assert_exactly_once(out, total)
