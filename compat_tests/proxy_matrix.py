"""The client matrix (compat_tests/matrix) through `logway proxy` in front of a Logway or a Tansu broker:
python -m compat_tests.proxy_matrix logway|tansu|tansu-direct [pytest args] (tansu-direct: the same cells
without the proxy, for comparison). Writes compat_tests/matrix/MATRIX-proxy-<kind>.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.peer import tansu_binary
from bench.procs import Logway, Tansu
from bench.proxy import LogwayProxy

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    kind, *pytest_args = argv or ["logway"]
    work = Path(tempfile.mkdtemp(prefix=f"proxy-matrix-{kind}-"))
    upstream = Logway(work / "upstream") if kind == "logway" else Tansu(work / "upstream", tansu_binary())
    upstream.start()
    proxy = LogwayProxy(work / "proxy", upstream)
    try:
        if not kind.endswith("-direct"):
            proxy.start()
        target = upstream if kind.endswith("-direct") else proxy
        env = {**os.environ, "LOGWAY_TEST_BOOTSTRAP": target.bootstrap}
        code = subprocess.call([sys.executable, "-m", "pytest", "-q", str(HERE / "matrix"), *pytest_args], env=env)
        report = HERE / "matrix" / "MATRIX.md"
        if report.exists():
            shutil.copy(report, HERE / "matrix" / f"MATRIX-proxy-{kind}.md")
        return code
    finally:
        proxy.cleanup()
        upstream.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
