"""The bench's Apache Kafka wrapper: a real KRaft node from compat_tests' jars, measured like the others."""

import shutil
import sys

import pytest

from bench.admin import create_topic
from bench.procs import REPO, Kafka, scratch_dir

# --import-mode=importlib leaves the repository root off sys.path; `python -m bench` runs from it.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

pytestmark = pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                                reason="needs Java and Maven for Apache Kafka")


def test_kafka_broker_runs_with_server_defaults_and_reports_its_cost():
    workdir = scratch_dir("kafka-test")
    broker = None
    try:
        broker = Kafka(workdir)
        broker.start()
        create_topic(broker.bootstrap, "t", 2)
        cmdline = open(f"/proc/{broker.pid}/cmdline").read().split("\0")
        assert "-Xmx1G" in cmdline and "-XX:+UseG1GC" in cmdline and "kafka.Kafka" in cmdline
        assert "-XX:TieredStopAtLevel=1" not in cmdline  # not the test JVM's client-compiler-only flags
        assert broker.cpu_seconds() > 0.5
        assert broker.memory_mb()["VmHWM"] > 100
        broker.settle()
    finally:
        if broker is not None:
            broker.cleanup()
        else:  # the wrapper could not even be built
            shutil.rmtree(workdir, ignore_errors=True)
    assert broker.proc is None and not workdir.exists()
