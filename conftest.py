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


# --- `make test` in parallel: pytest-xdist, whole modules per worker, the longest first --------------------------
# A module runs on one worker (its module fixtures are started once), and so does every module that uses one of
# these session fixtures, each a process that costs a JVM start or an image build (a second worker would start a
# second one). MODULE_GROUPS comes first: the Spark tests are two groups of about 2 minutes each (a SparkSession
# each), and the packaging tests join the image builds, which build from the same tree (setuptools writes build/
# and *.egg-info there).
# `side` (compat_tests/kafka/conftest.py) asks for `kafka` by getfixturevalue, so `kafka` is not among the fixture
# names of a test that takes only `side`.
SHARED_SESSION_FIXTURES = {"kafka": "apache-kafka", "side": "apache-kafka", "spark_session": "spark",
                           "podman": "image-builds"}
MODULE_GROUPS = {"tests/packaging/test_wheel.py": "image-builds",
                 **{f"tests/spark/test_spark_{name}.py": "spark-streaming"
                    for name in ("streaming", "sink", "latency", "read_committed")}}
# Groups in the order workers take them: the longest first (seconds in a serial run of main at load average 8-17),
# so that none starts last; the other modules follow in collection order.
LONGEST_FIRST = ("apache-kafka",                        # ~225 s (load 4): Kafka 4.3.1, conformance cases (86 s), the
                                                        # Java KIP-848 groups (75 s), share groups (44 s),
                                                        # transaction version 2 (11 s)
                 "compat_tests/test_proxy_matrix.py",   # 187 s: 9 client-matrix shards at once
                 "spark",                               # 172 s and a SparkSession (local[2]): batch, pipeline
                 "spark-streaming",                     # 119 s and another: streaming, sink
                 "image-builds",                        # 121 s: podman builds, the wheel and sdist
                 "tests/spark/test_spark_standalone.py",  # 95-135 s: a master, two workers, the pipeline twice
                 "compat_tests/ecosystem/test_mirror_maker.py",  # ~80 s: its own Kafka 4.3.1, MM2 twice
                 "compat_tests/ecosystem/test_kafka_streams.py",  # ~45 s
                 "tests/proxy/test_adversarial.py",     # 40-95 s: the sweep, without and with ACLs
                 "compat_tests/ecosystem/test_kafka_connect.py",  # ~30 s
                 "compat_tests/kafka/test_tools.py",    # 110 s: a JVM per Kafka tool run
                 "tests/gateway/test_security_clients.py",  # 97 s: Java, kcat and Python clients on 8 listeners
                 "compat_tests/kafka/test_security_tools.py",  # 51 s
                 "tests/proxy/test_kafka_cluster_upstream.py",  # 41 s
                 "tests/wire/test_request_check.py",    # 39 s
                 "compat_tests/test_consumer_group_processes.py",  # 33 s
                 "compat_tests/kafka/test_import_logdir.py",  # 32 s
                 "tests/gateway/test_transactions.py")  # 32 s


def _group_of_modules(items: list[pytest.Item]) -> dict[str, str]:
    groups: dict[str, str] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        shared = next((SHARED_SESSION_FIXTURES[f] for f in item.fixturenames if f in SHARED_SESSION_FIXTURES), None)
        if module in MODULE_GROUPS:
            groups[module] = MODULE_GROUPS[module]
        elif shared or module not in groups:
            groups[module] = shared or module
    return groups


@pytest.hookimpl(wrapper=True)  # around every other implementation: xdist's reads the marks (tryfirst was not enough)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Under `--dist loadgroup`: each module's group as its xdist_group mark (read by xdist's own hook, which
    runs after this one), and the items ordered so the longest groups are handed out first."""
    # In the workers, where the marks are read, xdist sets dist to "no" and keeps `--dist loadgroup` as loadgroup.
    if not (getattr(config.option, "loadgroup", False) or getattr(config.option, "dist", "no") == "loadgroup"):
        return (yield)
    groups = _group_of_modules(items)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid.split("::", 1)[0]]))
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(groups[item.nodeid.split("::", 1)[0]], len(rank)))  # stable
    return (yield)


@pytest.hookimpl(optionalhook=True)  # without xdist (-p no:xdist) the hook does not exist
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN201 - xdist's scheduler protocol
    """xdist's loadgroup scheduler, except that a worker is given its next group only when one test of its
    current group is left (xdist's own waits for two or fewer), so a long group of two tests (the proxy
    matrix) does not keep another group queued behind it while other workers are idle."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class OneGroupAhead(LoadGroupScheduling):
        def _reschedule(self, node) -> None:  # noqa: ANN001
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) <= 1:
                self._assign_work_unit(node)

    return OneGroupAhead(config, log)


# --- The flaky-test guard: `make test` runs a failed test once more (pytest-rerunfailures, --reruns 1) --------
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # noqa: ARG001
    """Name every test that failed and then passed on its retry (a flaky test, which `make test` must not have),
    with how its first attempt failed."""
    failures = {report.nodeid: report for report in terminalreporter.stats.get("rerun", [])}
    if not failures:
        return
    passed = {report.nodeid for report in terminalreporter.stats.get("passed", []) if report.when == "call"}
    flaky = sorted(set(failures) & passed)
    terminalreporter.write_sep("=", f"{len(flaky)} test(s) passed only on retry (flaky)", red=True, bold=True)
    for nodeid in flaky:
        crash = getattr(failures[nodeid].longrepr, "reprcrash", None)
        first = crash.message if crash is not None else str(failures[nodeid].longrepr)
        terminalreporter.write_line(f"FLAKY {nodeid} ({failures[nodeid].when}): {first[:1500]}")
