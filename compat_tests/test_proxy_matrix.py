"""The client matrix through `logway proxy` (issue 11), in front of (a) a Logway broker process: every cell
passes through the proxy (the direct matrix, compat_tests/matrix, passes them all), and (b) a Tansu 0.6
broker process: no cell that passes direct fails through the proxy. Cells that pass only through the proxy
(kcat cannot parse Tansu's own ApiVersions answer, it can the proxy's) are reported, not failed.

``make test`` runs the scenarios in ``SCENARIOS``; `make proxy-matrix` runs every scenario (the Java Spark
job, a minute or more per broker, is left to it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ and compat_tests/ as packages
from compat_tests.proxy_matrix import run_cells  # noqa: E402

# Every scenario but spark (compat_tests/matrix/report.py SCENARIOS); idempotent_restart needs a private
# Logway process, so it skips against an external broker.
SCENARIOS = os.environ.get("LOGWAY_PROXY_MATRIX_SCENARIOS", "admin roundtrip idempotent offsets").split()
K = f"({' or '.join(f'test_{s}' for s in SCENARIOS)}) and not test_idempotent_restart"


def _cells(kind: str, tmp_path) -> dict[tuple[str, str], str]:
    cells = run_cells(kind, ["-k", K], tmp_path / f"{kind}.xml")
    assert cells, f"the matrix ran no cell against {kind}"
    return cells


def test_every_cell_passes_through_the_proxy_in_front_of_logway(tmp_path):
    cells = _cells("logway", tmp_path)
    failed = sorted(cell for cell, outcome in cells.items() if outcome == "fail")
    assert not failed, f"cells failing through the proxy in front of Logway: {failed}"
    skipped = sorted(cell for cell, outcome in cells.items() if outcome == "skip")
    assert not skipped, f"cells skipped through the proxy (a client missing? compat_tests/setup.sh): {skipped}"


def test_cells_in_front_of_tansu_are_no_worse_than_direct(tmp_path, record_property):
    direct = _cells("tansu-direct", tmp_path)
    proxied = _cells("tansu", tmp_path)
    assert set(direct) == set(proxied)
    worse = sorted(c for c in direct if direct[c] == "pass" and proxied[c] != "pass")
    better = sorted(c for c in direct if direct[c] != "pass" and proxied[c] == "pass")
    record_property("better_through_proxy", better)
    print(f"cells passing through the proxy only (Tansu direct fails them): {better}")
    assert not worse, f"cells passing direct to Tansu but not through the proxy: {worse}"
