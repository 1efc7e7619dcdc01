"""The distribution as a user gets it: a wheel and an sdist built from the tree, the wheel installed into a
fresh venv, used from outside the repository (import, `logway --version`, serve, produce, consume, stop).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from logway.wire import compression
from tests.packaging.source_tree import copy_source

ROOT = Path(__file__).resolve().parents[2]
TOP_LEVEL = {"wire", "storage", "coordinator", "gateway", "spark"}


def _user_env() -> dict[str, str]:
    """The environment of a user's shell: without the PYTHONPATH a test of the same worker may have set (the Spark
    tests put the repository on it, whose editable-install metadata would make pip think Logway installed)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    source = copy_source(tmp_path_factory.mktemp("source"))  # not the tree itself: see source_tree.py
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(source)],
                   check=True, capture_output=True, timeout=600, env=_user_env())
    return out


def test_wheel_installs_one_import_name(dist: Path) -> None:
    (wheel,) = dist.glob("logway-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    # pyspark_logway: PySpark finds data sources only in top-level pyspark_* modules (spark/pyspark_logway).
    assert tops == {"logway", "pyspark_logway"}, tops
    assert "logway/wire/batch.py" in names and "logway/gateway/apis/produce.py" in names
    assert "logway/server/security/scram.py" in names
    assert "logway/spark/pipeline/job.py" in names
    # Every package folder of the tree is in the wheel (the package list in pyproject.toml is explicit).
    for init in sorted(p for top in TOP_LEVEL for p in (ROOT / top).rglob("__init__.py")):
        rel = init.relative_to(ROOT)
        if "pyspark_logway" not in rel.parts:  # PySpark's discovery hook, installed as its own top-level name
            assert f"logway/{rel.as_posix()}" in names, rel
    assert any(n.startswith("logway/wire/_batch_scan.") and n.endswith(".so") for n in names)  # the C record scanner
    # The native decompression is built wherever its headers are (make installs them); the editable install shows it.
    has_native = any(n.startswith("logway/wire/_decompress_scan.") and n.endswith(".so") for n in names)
    assert has_native == (compression.native is not None)
    assert not any(n.startswith("logway/tests") or "/tests/" in n for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "logway = logway.cli.main:main" in text and "logway = logway.gateway.pytest_plugin" in text


def test_sdist_carries_the_sources(dist: Path) -> None:
    (sdist,) = dist.glob("logway-*.tar.gz")
    names = tarfile.open(sdist).getnames()
    for folder in TOP_LEVEL:
        assert any(f"/{folder}/__init__.py" in n for n in names), folder
    for source in ("_batch_scan.c", "_decompress_scan.c", "_record_scan.h"):
        assert any(n.endswith(f"/wire/{source}") for n in names), source


def test_wheel_in_a_fresh_venv(dist: Path, tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    (wheel,) = dist.glob("logway-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py, logway = env_dir / "bin" / "python", env_dir / "bin" / "logway"
    subprocess.run([py, "-m", "pip", "install", "--quiet", str(wheel)], check=True, timeout=600, cwd=tmp_path,
                   env=_user_env())
    # Outside the repository: only the installed `logway` namespace is importable, not the repo's folders.
    probe = ("import importlib.util, logway.wire.batch, logway.gateway.broker; "
             "from logway.wire.batch_validation import has_compiled_scanner, has_native_decompression; "
             "print(all(importlib.util.find_spec(n) is None for n in ('wire', 'storage', 'gateway', 'spark')), "
             "has_compiled_scanner(), has_native_decompression())")
    probed = subprocess.run([py, "-c", probe], cwd=tmp_path, env=_user_env(), capture_output=True, text=True)
    assert probed.returncode == 0, probed.stderr
    assert probed.stdout.strip() == f"True True {compression.native is not None}"
    version = subprocess.run([logway, "--version"], cwd=tmp_path, env=_user_env(), capture_output=True, text=True,
                             check=True)
    assert version.stdout.strip().startswith("logway ")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    proc = subprocess.Popen([logway, "serve", "--listeners", listener, "--advertised-listeners", listener,
                             "--log-dirs", str(tmp_path / "data")], cwd=tmp_path, env=_user_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for line in proc.stdout:  # the gateway logs "listening on ..." once it accepts connections
            if b"listening on" in line:
                break
        assert proc.poll() is None
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
        for i in range(10):
            producer.send("smoke", key=b"k%d" % i, value=b"v%d" % i)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", consumer_timeout_ms=10_000)
        consumer.assign([TopicPartition("smoke", 0)])
        consumer.seek_to_beginning()
        got = []
        for message in consumer:
            got.append((message.offset, message.key, message.value))
            if len(got) == 10:
                break
        consumer.close()
        assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(10)]
        # The admin tools' Kafka client (confluent-kafka) comes with the wheel's dependencies.
        listed = subprocess.run([logway, "topics", "list", "--bootstrap-server", f"127.0.0.1:{port}"],
                                cwd=tmp_path, env=_user_env(),
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and listed.stdout.split() == ["smoke"], listed.stderr
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out.decode()
    assert b"Traceback" not in out
