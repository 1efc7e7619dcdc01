"""The client matrix (compat_tests/matrix) through `logway proxy` in front of a Logway or a Tansu broker:
python -m compat_tests.proxy_matrix KIND[,KIND...] [pytest args], KIND one of logway, tansu, tansu-direct,
logway-direct (-direct: the same cells without the proxy, for comparison). Writes
compat_tests/matrix/MATRIX-proxy-<kind>.md. compat_tests/test_proxy_matrix.py runs it in `make test` and
compares the cells (``run_cells``).

Every kind's clients are split into shards (``SHARDS``), and every (kind, shard) runs at once: its own
broker process, its own proxy, its own pytest process. Most of a cell's time is waiting (on a group
rebalance, a JVM or a Fetch long-poll), not CPU, so on 2 cores the whole takes about as long as its
slowest shard. A shard's own broker also keeps the cells' results apart: two group cells at once on one
Tansu 0.6 failed cells that pass on a Tansu of their own, direct and proxied alike.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from bench.peer import tansu_binary
from bench.procs import Broker, Logway, Tansu
from bench.proxy import LogwayProxy

HERE = Path(__file__).resolve().parent
MATRIX = HERE / "matrix"
KINDS = ("logway", "logway-direct", "tansu", "tansu-direct")
Cells = dict[tuple[str, str], str]  # (client test file stem, scenario) -> "pass" | "fail" | "skip"
# pytest paths under compat_tests/matrix run by one process; balanced on Tansu, the slowest upstream.
SHARDS: tuple[tuple[str, ...], ...] = (("test_java.py", "test_aiokafka.py"), ("test_kafkajs.py", "test_librdkafka.py"),
                                       ("test_kcat.py", "test_kafka_python.py"))

RUN_TIMEOUT = 900.0  # seconds for one shard; its cells bound themselves well below it


@dataclass
class ShardRun:
    """One pytest process's run of some of the matrix's cells against one kind; its output in ``log``."""

    kind: str
    returncode: int
    log: Path
    junit: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_target(kind: str, work: Path, stack: ExitStack) -> str:
    """Start ``kind``'s upstream (and a proxy in front of it unless -direct) in ``work``; its bootstrap."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    upstream: Broker = (Logway(work / "upstream") if kind.startswith("logway")
                        else Tansu(work / "upstream", tansu_binary()))
    stack.callback(upstream.cleanup)
    upstream.start()
    if kind.endswith("-direct"):
        return upstream.bootstrap
    proxy = LogwayProxy(work / "proxy", upstream)
    stack.callback(proxy.cleanup)
    proxy.start()
    return proxy.bootstrap


def run_shard(kind: str, paths: Sequence[str], pytest_args: list[str], work: Path) -> ShardRun:
    """Run the matrix ``paths`` against a fresh ``kind`` target; returns once its pytest process has exited."""
    work.mkdir(parents=True)
    log, junit = work / "pytest.log", work / "junit.xml"
    with ExitStack() as stack:
        env = {**os.environ, "LOGWAY_TEST_BOOTSTRAP": start_target(kind, work, stack),
               "LOGWAY_MATRIX_MD": str(work / "MATRIX.md")}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(str(MATRIX / p) for p in paths),
               *pytest_args, f"--junitxml={junit}"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, env=env, cwd=HERE.parent, stdout=out, stderr=subprocess.STDOUT)
        try:
            code = proc.wait(RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"the {kind} matrix shard {paths} ran past {RUN_TIMEOUT:.0f} s; see {log}") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return ShardRun(kind, code, log, junit)


def run_all(kinds: Sequence[str], pytest_args: list[str], work: Path,
            shards: Sequence[Sequence[str]] = SHARDS) -> dict[str, list[ShardRun]]:
    """Every shard of every kind at once; kind -> its shards' runs."""
    jobs = [(kind, i, shard) for kind in kinds for i, shard in enumerate(shards)]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [(kind, pool.submit(run_shard, kind, shard, pytest_args, work / f"{kind}-{i}"))
                   for kind, i, shard in jobs]
        runs: dict[str, list[ShardRun]] = {kind: [] for kind in kinds}
        for kind, future in futures:
            runs[kind].append(future.result())
    return runs


def run_cells(kinds: Sequence[str], pytest_args: list[str], work: Path,
              shards: Sequence[Sequence[str]] = SHARDS) -> dict[str, Cells]:
    """The matrix's cells against every kind (all shards at once), from pytest's JUnit XML reports; kind ->
    cells. A shard that wrote no report (pytest itself failed) raises with its output."""
    out: dict[str, Cells] = {}
    for kind, runs in run_all(kinds, pytest_args, work, shards).items():
        out[kind] = {}
        for run in runs:
            if not run.junit.exists():
                raise RuntimeError(f"the {kind} matrix wrote no report; its output:\n{run.output()[-5000:]}")
            out[kind].update(parse_junit(run.junit))
    return out


def cell_path(cell: tuple[str, str]) -> str:
    """The pytest path (under compat_tests/matrix) of one cell."""
    client, scenario = cell
    return f"{client}.py::test_{scenario}"


def parse_junit(path: Path) -> Cells:
    cells: Cells = {}
    for client, scenario, outcome, _ in junit_cases(path):
        # A teardown error is a second testcase entry for the same cell: the worse outcome wins.
        if cells.get((client, scenario)) != "fail":
            cells[(client, scenario)] = outcome
    return cells


def junit_cases(path: Path) -> list[tuple[str, str, str, str]]:
    """(client, scenario, pass|fail|skip, message) of every testcase in a JUnit XML report."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        client = case.get("classname", "").rsplit(".", 1)[-1]
        scenario = case.get("name", "").removeprefix("test_").split("[")[0]
        failed = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if failed is not None:
            out.append((client, scenario, "fail", failed.get("message") or failed.text or ""))
        elif skipped is not None:
            out.append((client, scenario, "skip", "Skipped: " + (skipped.get("message") or "")))
        else:
            out.append((client, scenario, "pass", ""))
    return out


def write_report(kind: str, runs: list[ShardRun]) -> Path:
    """compat_tests/matrix/MATRIX-proxy-<kind>.md from the shards' JUnit reports."""
    sys.path.insert(0, str(MATRIX))
    from report import Matrix  # the matrix's own table (its helpers import by plain name)

    matrix = Matrix()
    for run in runs:
        for client, scenario, outcome, message in junit_cases(run.junit) if run.junit.exists() else []:
            phase = {"pass": "passed", "fail": "failed", "skip": "skipped"}[outcome]
            matrix.record(f"compat_tests/matrix/{client}.py::test_{scenario}", "call", phase, message)
    path = MATRIX / f"MATRIX-proxy-{kind}.md"
    path.write_text(matrix.markdown(f"logway proxy in front of {kind}" if not kind.endswith("-direct")
                                    else kind.removesuffix("-direct")))
    return path


def main(argv: list[str]) -> int:
    kinds, *pytest_args = argv or ["logway"]
    with tempfile.TemporaryDirectory(prefix="proxy-matrix-") as tmp:
        runs = run_all(kinds.split(","), pytest_args, Path(tmp))
        code = 0
        for kind, shard_runs in runs.items():
            for run in shard_runs:
                print(f"===== {kind}: {run.log.parent.name} =====\n{run.output()}", flush=True)
                code = max(code, run.returncode)
            path = write_report(kind, shard_runs)
            print(f"===== {kind}: {path} =====\n{path.read_text()}", flush=True)
        return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
