"""The proxy's own client quotas, in front of a Logway upstream that has none: the clients of a virtual cluster
whose quota is shared (proxy.virtual.cluster.t.quota.*, .quota.shared=true) are held together near its rate and
told their throttle time, while a client on the proxy's other listener runs unthrottled, more than ten times
faster; the proxy's metrics show the tenant's budget; a share consumer's ShareFetch answers count as a Fetch's.
Rates are sampled over 3 windows of 1 s (quota.window.num=3), so the burst a fresh budget allows, (num - 1) x
quota, passes within these short runs."""

from __future__ import annotations

import datetime
import multiprocessing
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.kafka.quota_clients import rdkafka_consume, rdkafka_produce
from logway.proxy.frames import decode_response, encode_response_frame
from logway.proxy.quotas import ProxyQuotas, QuotaSettings
from logway.server.quota_sensors import Windows
from logway.wire.protocol import build, response_type
from tests.proxy.prometheus_text import sample, scrape

NODE = 1  # the upstream's node.id (tests/proxy/conftest.py)
SPAN = 12  # ports per listener: the bootstrap port, then node N on + 1 + N (node ids 0-9)
RATE = 1024 * 1024
WINDOWS = 3
SECONDS = 4


def held_bytes(seconds: float) -> float:
    """The most one budget of RATE moves in ``seconds``: its burst, the rate over the time, the last answer of
    each of two clients (up to 1 MiB each) and a tenth for the clock edges."""
    return 1.1 * RATE * ((WINDOWS - 1) + seconds) + 2 * 1024 * 1024


@pytest.fixture(scope="module")
def quota_proxy(tmp_path_factory, logway_upstream) -> Iterator[tuple[str, str, int]]:
    """(the tenant listener's bootstrap, the plain listener's bootstrap, the metrics port)."""
    from compat_tests.gateway_process import free_port  # noqa: PLC0415
    from tests.proxy.conftest import free_port_block, proxy_from_properties  # noqa: PLC0415

    base = free_port_block(2 * SPAN)
    metrics_port = free_port()
    tenant, plain = base, base + SPAN
    properties = (
        f"listeners=TENANT://127.0.0.1:{tenant},PLAINTEXT://127.0.0.1:{plain}\n"
        "listener.security.protocol.map=TENANT:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
        f"log.dirs={tmp_path_factory.mktemp('quota-proxy-state')}\n"
        f"proxy.upstream.bootstrap.servers={logway_upstream.bootstrap}\n"
        f"proxy.node.id.range=0-9\nmetrics.port={metrics_port}\nquota.window.num={WINDOWS}\n"
        "proxy.virtual.clusters=t\nproxy.virtual.cluster.t.listener=TENANT\nproxy.virtual.cluster.t.topic.prefix=t.\n"
        f"proxy.virtual.cluster.t.quota.producer_byte_rate={RATE}\n"
        f"proxy.virtual.cluster.t.quota.consumer_byte_rate={RATE}\n"
        "proxy.virtual.cluster.t.quota.shared=true\n")
    with proxy_from_properties(tmp_path_factory.mktemp("quota-proxy"), properties,
                               [tenant, tenant + 1 + NODE, plain, plain + 1 + NODE]):
        yield f"127.0.0.1:{tenant}", f"127.0.0.1:{plain}", metrics_port


def _topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # (kept: the future needs its client alive)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def _at_once(*calls) -> list[tuple[int, int]]:
    """Each (client function, args) in its own process at once: the bytes each moved and its longest throttle."""
    with multiprocessing.get_context("spawn").Pool(len(calls)) as pool:
        jobs = [pool.apply_async(fn, args) for fn, args in calls]
        runs = [job.get(timeout=120) for job in jobs]
    return [(sum(run["per_second"]), run["max_throttle_ms"]) for run in runs]


def test_a_tenants_clients_share_its_quota_and_other_clients_run_free(quota_proxy, logway_upstream):
    tenant, plain, metrics_port = quota_proxy
    topic = f"shared-{uuid.uuid4().hex[:6]}"
    _topic(tenant, topic)
    _topic(plain, topic)
    (one, one_throttle), (two, two_throttle), (free, free_throttle) = _at_once(
        (rdkafka_produce, (tenant, topic, "tenant-app-1", SECONDS)),
        (rdkafka_produce, (tenant, topic, "tenant-app-2", SECONDS)),
        (rdkafka_produce, (plain, topic, "other-app", SECONDS)))
    assert RATE * WINDOWS / 2 < one + two <= held_bytes(SECONDS), (one, two)  # one budget for both
    assert one_throttle > 0 and two_throttle > 0
    assert free > 10 * (one + two) and free_throttle == 0
    metrics = scrape(metrics_port)
    labels = {"virtualCluster": "t", "resource": "Produce", "user": "t"}
    assert sample(metrics, "kafka_server_quota_throttle_time", **labels) > 0
    # The tenant's consumer is held too, in front of an upstream that has no quota for it.
    (read, read_throttle), (free_read, free_read_throttle) = _at_once(
        (rdkafka_consume, (tenant, topic, "tenant-reader", SECONDS)),
        (rdkafka_consume, (plain, topic, "other-reader", SECONDS)))
    assert RATE * WINDOWS / 2 < read <= held_bytes(SECONDS), read
    assert read_throttle > 0
    assert free_read > 10 * read and free_read_throttle == 0


class _Client:
    """What SessionQuota reads of a client connection: its principal, and the mute it is given."""

    principal = "User:ANONYMOUS"
    muted_ms = 0

    def throttle(self, delay_ms: int) -> None:
        self.muted_ms = max(self.muted_ms, delay_ms)


def test_a_share_consumers_answers_count_against_the_tenants_consumer_byte_rate():
    # Kafka 4.3 counts a ShareFetch answer against consumer_byte_rate as a Fetch's (processShareFetchResponse).
    quotas = ProxyQuotas(None, {"TENANT": ("t", QuotaSettings({"consumer_byte_rate": 1000.0}, shared=True))},
                         Windows(WINDOWS, 1000))
    session = quotas.for_listener("TENANT")
    topic_id = uuid.uuid4()
    records = b"r" * 100_000
    answer = build(response_type(78, 1), {
        "throttle_time": 0, "error_code": 0, "acquisition_lock_timeout": 30_000, "responses": [
            {"topic_id": topic_id, "partitions": [{
                "partition_index": 0, "error_code": 0, "acknowledge_error_code": 0,
                "current_leader": {"leader_id": 1, "leader_epoch": 0}, "records": records,
                "acquired_records": [{"first_offset": 0, "last_offset": 9, "delivery_count": 1}]}]}]})
    client = _Client()
    got = decode_response(78, 1, bytes(session.answer(client, 78, 1, encode_response_frame(78, 1, 7, answer), 0,
                                                      "share-reader")))
    # 100 kB against 1000 B/s over 2 windows: told to wait, muted as long, the records still given.
    assert got.throttle_time > datetime.timedelta(seconds=1)
    assert client.muted_ms == got.throttle_time.total_seconds() * 1000
    assert got.responses[0].partitions[0].records == records
