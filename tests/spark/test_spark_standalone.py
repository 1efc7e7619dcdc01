"""The page-view pipeline on a Spark standalone cluster (a master and two 1-core workers on loopback), not local[2]:
once against a Logway gateway process, once through `logway proxy` in front of it.

On a cluster the driver and the executors are separate JVMs: the driver plans offset ranges and ships tasks, each
worker starts an executor that fetches Spark's Kafka connector jars from the driver (spark.jars, local paths) or
runs this package's Python source in its own Python workers, and every executor connects to the broker addresses
Metadata advertises (through the proxy, the proxy's node ports). The driver is `python -m logway.spark.pipeline
--master spark://...` in a child process, as a user runs it: this pytest process already holds the local[2]
SparkContext of tests/spark/conftest.py, and a JVM holds one SparkContext at a time.

The two runs split the formats: Spark's own connector (format "kafka") against the gateway, this package's
"logway-kafka" through the proxy; both formats and both endpoints each run on the cluster once, in two runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.procs import Logway, wait_listening
from bench.proxy import LogwayProxy

from .standalone_cluster import SHORT_LIVED_JVM, StandaloneCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """One master and two workers (1 core, 768 MB for executors each) shared by both runs."""
    spark = StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2, worker_cores=1,
                              worker_memory="768m")
    try:
        yield spark.start()
    finally:
        spark.stop()


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A Logway gateway process and a `logway proxy` process in front of it: name -> bootstrap."""
    work = tmp_path_factory.mktemp("endpoints")
    gateway = Logway(work / "gateway")
    proxy = LogwayProxy(work / "proxy", gateway)
    try:
        gateway.start()
        proxy.start()
        wait_listening(proxy.port + 1, proxy.proc, 30)  # the port it advertises for the gateway's node
        yield {"gateway": gateway.bootstrap, "proxy": proxy.bootstrap}
    finally:
        proxy.stop()
        gateway.stop()


def _rows(output: str, title: str) -> int:
    """The row count the pipeline printed above one of its tables."""
    match = re.search(rf"^{title}.* \((\d+) rows\)$", output, re.MULTILINE)
    assert match, output
    return int(match.group(1))


@pytest.mark.parametrize(("endpoint", "fmt"), [("gateway", "kafka"), ("proxy", "logway-kafka")])
def test_pipeline_on_standalone_cluster(cluster: StandaloneCluster, endpoints: dict[str, str], endpoint: str,
                                        fmt: str, tmp_path: Path) -> None:
    done_before = {app["id"] for app in cluster.state()["completedapps"]}
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}  # the driver on loopback
    run = subprocess.run([sys.executable, "-m", "logway.spark.pipeline", "--bootstrap", endpoints[endpoint],
                          "--master", cluster.url, "--format", fmt, "--events", "900", "--work-dir", str(tmp_path),
                          "--conf", "spark.executor.memory=512m",
                          "--conf", f"spark.executor.extraJavaOptions={SHORT_LIVED_JVM}",
                          "--conf", f"spark.driver.extraJavaOptions={SHORT_LIVED_JVM}"],
                         env=env, capture_output=True, text=True, timeout=900)
    output = run.stdout
    assert run.returncode == 0, output + run.stderr[-5000:]

    # The same checks as the local[2] test (test_spark_pipeline.py), made by the pipeline itself on its output.
    assert "compacted topic equals plain-Python counts: True" in output
    assert "Parquet equals plain-Python counts of windows closed by the watermark: True" in output
    closed, counted = _rows(output, "closed windows in Parquet"), _rows(output, "counts in compacted topic")
    assert 0 < closed < counted  # the last minute is still open: the watermark has not passed it
    dates = sorted(p.name for p in (tmp_path / "parquet").glob("date=*"))
    assert dates == ["date=2024-03-01", "date=2024-03-02"]  # events cross midnight UTC

    # It ran on the cluster: the master lists the application as finished, and both workers ran an executor for it.
    apps = [app for app in cluster.state()["completedapps"] if app["id"] not in done_before]
    assert [(app["name"], app["state"]) for app in apps] == [("logway-pipeline", "FINISHED")]
    assert all((work / apps[0]["id"]).is_dir() for work in cluster.worker_dirs()), apps
