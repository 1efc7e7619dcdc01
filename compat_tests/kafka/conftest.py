"""Session fixtures: the reference Apache Kafka (one KRaft node) and a Logway process configured alike."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# --import-mode=importlib does not put the repository root on sys.path; compat_tests.kafka is imported from it.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compat_tests.gateway_process import GatewayProcess  # noqa: E402
from compat_tests.kafka.cluster import COMMON_CONFIG, KafkaCluster  # noqa: E402


def _require_java() -> None:
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the Apache Kafka reference needs {' and '.join(missing)} on PATH")


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One Apache Kafka node (broker + controller), started once per session."""
    _require_java()
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka"), nodes=1).start()
    print(f"\nApache Kafka ready in {cluster.start_seconds:.1f}s at {cluster.bootstrap}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def logway_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A Logway process with the same non-default settings as the reference Kafka (COMMON_CONFIG)."""
    overrides: list[str] = []
    # node.id as the reference's server.properties sets it (so both report it as a static config).
    for key, value in {**COMMON_CONFIG, "node.id": "1"}.items():
        overrides += ["--override", f"{key}={value}"]
    gw = GatewayProcess(tmp_path_factory.mktemp("logway-ref") / "data", extra_args=tuple(overrides)).start()
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture(params=("kafka", "logway"))
def side(request: pytest.FixtureRequest) -> tuple[str, int]:
    """(bootstrap, port) of the reference Kafka or of the Logway configured alike: a test taking it runs on
    each. Only the one asked for is started (`-k logway` starts no JVM); the root conftest groups the modules
    that take it with the ones that take `kafka`, so `make test` starts the reference once."""
    broker = request.getfixturevalue("kafka" if request.param == "kafka" else "logway_ref")
    return broker.bootstrap, broker.port
