"""The broker the ecosystem tests run against: a Logway process per module, reached direct and through
`logway proxy` in front of it (each test runs once per way). With LOGWAY_TEST_BOOTSTRAP=host:port (`make compat
BOOTSTRAP=host:port`) they run once, against that endpoint, and start no broker or proxy of their own."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ and compat_tests/ as packages (--import-mode=importlib)

from bench.procs import Logway  # noqa: E402
from compat_tests.ecosystem.harness import ENDPOINTS, endpoint, logway  # noqa: E402


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logway]:
    with logway(tmp_path_factory.mktemp("ecosystem-broker")) as broker:
        yield broker


@pytest.fixture(params=ENDPOINTS)
def bootstrap(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with endpoint(request.param, lambda: request.getfixturevalue("upstream"), tmp_path) as bootstrap:
        yield bootstrap
