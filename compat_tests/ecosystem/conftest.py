"""The broker the ecosystem tests run against: a Logway process per module, reached direct and through
`logway proxy` in front of it (each test runs once per way). With LOGWAY_TEST_BOOTSTRAP=host:port (`make compat
BOOTSTRAP=host:port`) they run once, against that endpoint, and start no broker or proxy of their own."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ and compat_tests/ as packages (--import-mode=importlib)

from bench.procs import Logway  # noqa: E402
from bench.proxy import LogwayProxy  # noqa: E402

EXTERNAL = os.environ.get("LOGWAY_TEST_BOOTSTRAP")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logway]:
    broker = Logway(tmp_path_factory.mktemp("ecosystem-broker"), {"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    try:
        yield broker
    finally:
        broker.cleanup()


@pytest.fixture(params=["external"] if EXTERNAL else ["direct", "proxy"])
def bootstrap(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "external":
        yield EXTERNAL
        return
    broker: Logway = request.getfixturevalue("upstream")
    if request.param == "direct":
        yield broker.bootstrap
        return
    proxy = LogwayProxy(tmp_path / "proxy", broker)
    proxy.start()
    try:
        yield proxy.bootstrap
    finally:
        proxy.cleanup()
