"""Fixtures shared by compat_tests/ and tests/spark/: a real gateway process on a free port.

Set LOGWAY_TEST_BOOTSTRAP=host:port to point them at a broker you started yourself (e.g. a peer broker
to compare behaviour); otherwise each session starts `python -m logway.cli serve` with a temporary data dir.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:  # --import-mode=importlib puts no folder on sys.path; compat_tests is imported from here
    sys.path.insert(0, str(ROOT))

from compat_tests.gateway_process import GatewayProcess, free_port, wait_for_port  # noqa: E402

__all__ = ["GatewayProcess", "free_port", "wait_for_port"]


@pytest.fixture(scope="session")
def broker_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """host:port of a running broker shared by the whole session."""
    external = os.environ.get("LOGWAY_TEST_BOOTSTRAP")
    if external:
        yield external
        return
    gw = GatewayProcess(tmp_path_factory.mktemp("broker") / "data").start()
    try:
        yield gw.bootstrap
    finally:
        gw.stop()


@pytest.fixture
def gateway_process(tmp_path: Path) -> Iterator[GatewayProcess]:
    """A private gateway process for tests that stop and restart it."""
    gw = GatewayProcess(tmp_path / "data")
    try:
        yield gw
    finally:
        gw.stop("KILL")
