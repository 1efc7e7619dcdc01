"""Matrix fixtures and the session-end matrix report (see report.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The suite runs with --import-mode=importlib, which does not put test folders on sys.path; the matrix's
# helper modules (records, programs, report) are imported by plain name from this folder.
sys.path.insert(0, str(Path(__file__).parent))

from report import MATRIX_MD, Matrix  # noqa: E402

_matrix = Matrix()


@pytest.fixture
def bootstrap(broker_bootstrap: str) -> str:
    """The shared broker every cell talks to."""
    return broker_bootstrap


@pytest.fixture
def restartable(gateway_process) -> Iterator:
    """A private Logway process the test may kill and restart; only when the matrix runs against Logway."""
    if os.environ.get("LOGWAY_TEST_BOOTSTRAP"):
        pytest.skip("needs a private Logway process (LOGWAY_TEST_BOOTSTRAP points at an external broker)")
    yield gateway_process.start()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _matrix.record(report.nodeid, report.when, report.outcome, str(report.longrepr or ""))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if not _matrix.cells:
        return
    broker = os.environ.get("LOGWAY_TEST_BOOTSTRAP") or "Logway (python -m logway.cli serve)"
    text = _matrix.markdown(broker if broker.startswith("Logway") else f"external broker {broker}")
    # LOGWAY_MATRIX_MD: where a run of compat_tests/proxy_matrix.py writes its own (several run at once).
    path = Path(os.environ.get("LOGWAY_MATRIX_MD") or MATRIX_MD)
    path.write_text(text)
    terminalreporter.write_sep("=", "client compatibility matrix")
    terminalreporter.write_line(text)
    terminalreporter.write_line(f"(written to {path})")
