"""Client quotas with real clients and Kafka's own tool, against a Logway process (issue 28).

`kafka-configs` (Kafka's ConfigCommand) and the Java AdminClient set, describe and delete quotas, which survive a
restart; then librdkafka, the Java client and kafka-python produce and consume flat out under a client id with
``producer_byte_rate`` / ``consumer_byte_rate``, beside a client id without quotas: the quota'd one is held near its
rate and is told its throttle time, the other runs more than ten times faster. The broker samples rates over 3
windows of 1 s (``quota.window.num=3``) so that a client's burst, ``(num - 1) x quota``, passes within these short
runs; `python -m bench.quotas` measures Kafka's default 11 windows for 15 s beside Apache Kafka.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import uuid
from collections.abc import Iterator

import pytest

from compat_tests.kafka.cluster import java
from compat_tests.kafka.conftest import GatewayProcess
from compat_tests.kafka.quota_clients import (
    java_quotas,
    kafka_python_produce,
    rdkafka_consume,
    rdkafka_produce,
)

CONFIGS = "kafka.admin.ConfigCommand"
# Bytes a second. A Fetch is capped at (num - 1) windows of it (Kafka's getMaxValueInQuotaWindow) but always
# carries its first batch (KIP-74): the quota must allow the producers' 1 MB batches within that, or, as in Kafka, a
# consumer's every fetch would be over it and be answered without data.
RATE = 1024 * 1024
WINDOWS = 3
SECONDS = 4


def held_bytes(seconds: float, rate: int = RATE, request: int = 1024 * 1024) -> float:
    """The most a client held to ``rate`` may move in ``seconds``: its burst, the rate over the time, one last
    request's worth (a batch or a fetch) and a tenth for the clock edges."""
    return 1.1 * rate * ((WINDOWS - 1) + seconds) + request


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path_factory.mktemp("quotas") / "data",
                        extra_args=("--override", f"quota.window.num={WINDOWS}")).start()
    try:
        yield gw
    finally:
        gw.stop()


def configs(bootstrap: str, *args: str) -> str:
    proc = java(CONFIGS, "--bootstrap-server", bootstrap, *args, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def set_client_quota(bootstrap: str, client_id: str, rate: int = RATE) -> None:
    configs(bootstrap, "--alter", "--add-config", f"producer_byte_rate={rate},consumer_byte_rate={rate}",
            "--entity-type", "clients", "--entity-name", client_id)


def test_kafka_configs_sets_describes_and_deletes_quotas_which_survive_a_restart(broker: GatewayProcess) -> None:
    bs = broker.bootstrap
    configs(bs, "--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
            "--entity-type", "clients", "--entity-name", "app-1")
    configs(bs, "--alter", "--add-config", "request_percentage=50", "--entity-type", "users", "--entity-name",
            "alice", "--entity-type", "clients", "--entity-default")
    configs(bs, "--alter", "--add-config", "connection_creation_rate=100", "--entity-type", "ips",
            "--entity-name", "10.1.2.3")
    out = configs(bs, "--describe", "--entity-type", "clients", "--entity-name", "app-1")
    assert "Quota configs for client-id 'app-1' are" in out
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate=2097152.0" in out
    broker.stop()
    broker.start()
    out = configs(bs, "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                  "--entity-default")
    assert "Quota configs for user-principal 'alice', the default client-id are request_percentage=50.0" in out, out
    assert "connection_creation_rate=100" in configs(bs, "--describe", "--entity-type", "ips", "--entity-name",
                                                     "10.1.2.3")
    configs(bs, "--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "clients", "--entity-name", "app-1")
    out = configs(bs, "--describe", "--entity-type", "clients", "--entity-name", "app-1")
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate" not in out
    bad = java(CONFIGS, "--bootstrap-server", bs, "--alter", "--add-config", "producer_byte_rate=0",
               "--entity-type", "clients", "--entity-name", "app-1", timeout=120)
    assert bad.returncode != 0 and "Quota producer_byte_rate must be greater than 0" in bad.stdout + bad.stderr


def test_the_java_admin_client_validates_then_sets_quotas(broker: GatewayProcess) -> None:
    facts = java_quotas("admin", broker.bootstrap, "java-admin", str(RATE))
    assert facts["after_validate_only"] == "{}"  # validate-only changes nothing
    assert facts["after_alter"] == f"{{consumer_byte_rate={float(RATE)}, producer_byte_rate={float(RATE)}}}"
    assert facts["fractional"] == "InvalidRequestException: producer_byte_rate cannot be a fractional value."


# --- clients held to their quota ---------------------------------------------------------------------------------


def _topic(bootstrap: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"quota-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # (kept: the future needs its client alive)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def _in_processes(*calls) -> list[tuple[int, int]]:
    """Each (function, args) in its own process, all at once (clients that do not share an interpreter): the bytes
    each moved and the longest throttle time it was told."""
    with multiprocessing.get_context("spawn").Pool(len(calls)) as pool:
        jobs = [pool.apply_async(fn, args) for fn, args in calls]
        runs = [job.get(timeout=120) for job in jobs]
    return [(sum(run["per_second"]), run["max_throttle_ms"]) for run in runs]


def assert_held(slow: tuple[int, int], fast: tuple[int, int], rate: int = RATE, request: int = 1024 * 1024,
                faster: int = 10) -> None:
    """The quota'd client moved about its burst and its rate (a last request on top), and was told a throttle
    time; the other moved ``faster`` times as much, never throttled."""
    moved, throttle = slow
    assert rate * WINDOWS / 2 < moved <= held_bytes(SECONDS, rate, request), moved
    assert throttle > 0
    assert fast[0] > faster * moved and fast[1] == 0, fast


@pytest.fixture(scope="module")
def filled(broker: GatewayProcess) -> str:
    """A topic the consume tests read: written by the produce test of librdkafka (slow and fast clients)."""
    return _topic(broker.bootstrap)


def test_librdkafka_producer_is_held_near_its_rate_and_told_its_throttle_time(broker, filled) -> None:
    set_client_quota(broker.bootstrap, "rdkafka-slow")
    assert_held(*_in_processes((rdkafka_produce, (broker.bootstrap, filled, "rdkafka-slow", SECONDS)),
                               (rdkafka_produce, (broker.bootstrap, filled, "rdkafka-fast", SECONDS))))


def test_librdkafka_consumer_is_held_near_its_rate_and_told_its_throttle_time(broker, filled) -> None:
    set_client_quota(broker.bootstrap, "rdkafka-slow-reader")
    assert_held(*_in_processes((rdkafka_consume, (broker.bootstrap, filled, "rdkafka-slow-reader", SECONDS)),
                               (rdkafka_consume, (broker.bootstrap, filled, "rdkafka-fast-reader", SECONDS))))


def test_kafka_python_producer_is_held_near_its_rate_and_told_its_throttle_time(broker) -> None:
    # kafka-python is pure Python (a few MB/s flat out here): a lower quota keeps its unthrottled run well ahead.
    rate = RATE // 8
    topic = _topic(broker.bootstrap)
    set_client_quota(broker.bootstrap, "kafka-python-slow", rate)
    assert_held(*_in_processes((kafka_python_produce, (broker.bootstrap, topic, "kafka-python-slow", SECONDS)),
                               (kafka_python_produce, (broker.bootstrap, topic, "kafka-python-fast", SECONDS))),
                rate, 16 * 1024, faster=3)


def _java_pair(scenario: str, bootstrap: str, topic: str) -> list[tuple[int, int]]:
    """Quotas.java's ``scenario`` for client ids java-slow and java-fast at once."""
    with multiprocessing.pool.ThreadPool(2) as pool:
        runs = [pool.apply_async(java_quotas, (scenario, bootstrap, topic, cid, str(SECONDS)))
                for cid in ("java-slow", "java-fast")]
        facts = [run.get(timeout=180) for run in runs]
    return [(int(f["bytes"]), int(float(f["throttle_time_max"]))) for f in facts]


def test_java_producer_and_consumer_are_held_near_their_rate_and_told_their_throttle_time(broker) -> None:
    topic = _topic(broker.bootstrap)
    set_client_quota(broker.bootstrap, "java-slow")
    assert_held(*_java_pair("produce", broker.bootstrap, topic))
    assert_held(*_java_pair("consume", broker.bootstrap, topic))
