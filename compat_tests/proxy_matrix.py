"""The client matrix (compat_tests/matrix) through `logway proxy` in front of a Logway or a Tansu broker:
python -m compat_tests.proxy_matrix logway|tansu|tansu-direct [pytest args] (tansu-direct: the same cells
without the proxy, for comparison). Writes compat_tests/matrix/MATRIX-proxy-<kind>.md.
compat_tests/test_proxy_matrix.py runs it in `make test` and compares the cells (``run_cells``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.peer import tansu_binary
from bench.procs import Logway, Tansu
from bench.proxy import LogwayProxy

HERE = Path(__file__).resolve().parent
Cells = dict[tuple[str, str], str]  # (client test file stem, scenario) -> "pass" | "fail" | "skip"


def run(kind: str, pytest_args: list[str], *, report: bool = True) -> int:
    """Run the matrix against ``kind`` (logway, tansu: through the proxy; logway-direct, tansu-direct: not)."""
    work = Path(tempfile.mkdtemp(prefix=f"proxy-matrix-{kind}-"))
    upstream = Logway(work / "upstream") if kind.startswith("logway") else Tansu(work / "upstream", tansu_binary())
    upstream.start()
    proxy = LogwayProxy(work / "proxy", upstream)
    try:
        if not kind.endswith("-direct"):
            proxy.start()
        target = upstream if kind.endswith("-direct") else proxy
        env = {**os.environ, "LOGWAY_TEST_BOOTSTRAP": target.bootstrap}
        code = subprocess.call([sys.executable, "-m", "pytest", "-q", str(HERE / "matrix"),
                                *pytest_args], env=env, cwd=HERE.parent)
        matrix_md = HERE / "matrix" / "MATRIX.md"
        if report and matrix_md.exists():
            shutil.copy(matrix_md, HERE / "matrix" / f"MATRIX-proxy-{kind}.md")
        return code
    finally:
        proxy.cleanup()
        upstream.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def run_cells(kind: str, pytest_args: list[str], junit: Path) -> Cells:
    """The matrix's cells against ``kind``, from pytest's JUnit XML report."""
    run(kind, [*pytest_args, f"--junitxml={junit}"], report=False)
    return parse_junit(junit)


def parse_junit(path: Path) -> Cells:
    cells: Cells = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        client = case.get("classname", "").rsplit(".", 1)[-1]
        scenario = case.get("name", "").removeprefix("test_").split("[")[0]
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "fail"
        elif case.find("skipped") is not None:
            outcome = "skip"
        else:
            outcome = "pass"
        # A teardown error is a second testcase entry for the same cell: the worse outcome wins.
        if cells.get((client, scenario)) != "fail":
            cells[(client, scenario)] = outcome
    return cells


def main(argv: list[str]) -> int:
    kind, *pytest_args = argv or ["logway"]
    return run(kind, pytest_args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
