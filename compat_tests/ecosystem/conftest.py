"""The broker the ecosystem tests run against: a Logway process per module, reached direct and through
`logway proxy` in front of it (each test runs once per way)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ and compat_tests/ as packages (--import-mode=importlib)

from bench.procs import Logway  # noqa: E402
from bench.proxy import LogwayProxy  # noqa: E402


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logway]:
    broker = Logway(tmp_path_factory.mktemp("ecosystem-broker"), {"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    try:
        yield broker
    finally:
        broker.cleanup()


@pytest.fixture(params=["direct", "proxy"])
def bootstrap(request: pytest.FixtureRequest, upstream: Logway, tmp_path: Path) -> Iterator[str]:
    if request.param == "direct":
        yield upstream.bootstrap
        return
    proxy = LogwayProxy(tmp_path / "proxy", upstream)
    proxy.start()
    try:
        yield proxy.bootstrap
    finally:
        proxy.cleanup()
