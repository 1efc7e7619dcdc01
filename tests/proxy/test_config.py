"""The proxy's configuration: a properties file or flags, and start-up errors as one line."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from logway.proxy.config import ProxyConfig
from logway.server.config import ConfigError


def test_properties_file_gives_listeners_upstream_and_addressing(tmp_path):
    path = tmp_path / "proxy.properties"
    path.write_text("listeners=PLAINTEXT://0.0.0.0:9192\n"
                    "advertised.listeners=PLAINTEXT://gw.example:19192\n"
                    "proxy.upstream.bootstrap.servers=kafka1:9092, kafka2:9093\n"
                    "proxy.upstream.security.protocol=SASL_PLAINTEXT\n"
                    'proxy.upstream.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule '
                    'required username="proxy" password="pw";\n'
                    "proxy.broker.port.offset=10\nproxy.node.id.range=1-5\n"
                    "proxy.broker.address.pattern=broker$(nodeId).gw.example\n")
    config = ProxyConfig.load(path)
    assert config.upstream_bootstrap == [("kafka1", 9092), ("kafka2", 9093)]
    assert (config.upstream.protocol, config.upstream.username, config.upstream.password) == (
        "SASL_PLAINTEXT", "proxy", "pw")
    addressing = config.addressing["PLAINTEXT"]
    assert addressing.listen_port(5) == 9192 + 10 + 5
    assert addressing.advertised(5) == ("broker5.gw.example", 19192 + 10 + 5)
    assert config.warnings == []


@pytest.mark.parametrize(("props", "message"), [
    ({}, "proxy.upstream.bootstrap.servers is required"),
    ({"proxy.upstream.bootstrap.servers": "kafka1"}, "'kafka1' is not host:port"),
    ({"proxy.upstream.bootstrap.servers": "k:1", "proxy.node.id.range": "5-1"}, "proxy.node.id.range"),
    ({"proxy.upstream.bootstrap.servers": "k:1", "listeners": "PLAINTEXT://127.0.0.1:65500"}, "leaves 1-65535"),
    ({"proxy.upstream.bootstrap.servers": "k:1", "listeners": "PLAINTEXT://127.0.0.1:100",
      "proxy.broker.port.offset": "-200"}, "leaves 1-65535"),
    ({"proxy.upstream.bootstrap.servers": "k:1", "proxy.upstream.security.protocol": "SASL_PLAINTEXT",
      "proxy.upstream.sasl.mechanism": "GSSAPI"}, "expected one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
])
def test_bad_settings_are_config_errors(props, message):
    with pytest.raises(ConfigError, match=message):
        ProxyConfig(props)


def _proxy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logway.cli", "proxy", *args], capture_output=True, text=True,
                          timeout=30)


def test_startup_errors_are_one_line():
    missing = _proxy("--listeners", "PLAINTEXT://127.0.0.1:9192")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "logway: configuration error: proxy.upstream.bootstrap.servers is required "
        "(--upstream-bootstrap-servers host:port,...)"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = _proxy("--upstream-bootstrap-servers", "127.0.0.1:1", "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
                      "--override", "proxy.node.id.range=0-2")
    assert busy.returncode == 1
    assert busy.stderr.strip().splitlines()[-1].startswith(f"logway: start-up error: listeners=PLAINTEXT://127.0.0.1:{port}: "
                                                          "cannot listen")


_TENANTS = {"proxy.upstream.bootstrap.servers": "k:1",
            "listeners": "A://127.0.0.1:9300,B://127.0.0.1:9500",
            "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
            "proxy.virtual.clusters": "a,b",
            "proxy.virtual.cluster.a.listener": "A", "proxy.virtual.cluster.a.topic.prefix": "tenant-a.",
            "proxy.virtual.cluster.b.listener": "B", "proxy.virtual.cluster.b.topic.prefix": "tenant-b."}


def test_virtual_clusters_by_listener():
    config = ProxyConfig(_TENANTS)
    assert {n: (c.name, c.topic_prefix) for n, c in config.virtual_clusters.items()} == {
        "A": ("a", "tenant-a."), "B": ("b", "tenant-b.")}
    assert config.warnings == []


@pytest.mark.parametrize(("props", "message"), [
    ({"proxy.virtual.cluster.b.listener": "C"}, "proxy.virtual.cluster.b.listener='C': expected one of"),
    ({"proxy.virtual.cluster.b.listener": "A"}, "one virtual cluster per listener"),
    ({"proxy.virtual.cluster.b.topic.prefix": ""}, "proxy.virtual.cluster.b.topic.prefix: topic.prefix ''"),
    ({"proxy.virtual.cluster.b.topic.prefix": "tenant a"}, "must be 1-248 characters"),
    ({"proxy.virtual.cluster.b.topic.prefix": "tenant-a.b."}, "tenants would overlap"),
    ({"proxy.virtual.clusters": "a,a"}, "'a' is listed twice"),
])
def test_virtual_cluster_errors_are_one_line(props, message):
    with pytest.raises(ConfigError, match=message) as err:
        ProxyConfig({**_TENANTS, **props})
    assert "\n" not in str(err.value)


def test_a_virtual_cluster_not_listed_is_a_warning():
    config = ProxyConfig({**_TENANTS, "proxy.virtual.clusters": "a"})
    assert list(config.virtual_clusters) == ["A"]
    assert config.warnings == ["proxy.virtual.cluster.b.listener: b is not in proxy.virtual.clusters, ignored",
                               "proxy.virtual.cluster.b.topic.prefix: b is not in proxy.virtual.clusters, ignored"]


def test_quotas_of_every_principal_and_of_a_virtual_cluster():
    config = ProxyConfig({**_TENANTS, "proxy.quota.producer_byte_rate": "1048576",
                          "proxy.virtual.cluster.a.quota.consumer_byte_rate": "2048",
                          "proxy.virtual.cluster.a.quota.request_percentage": "12.5",
                          "proxy.virtual.cluster.a.quota.shared": "true"})
    assert (dict(config.quota.values), config.quota.shared) == ({"producer_byte_rate": 1048576.0}, False)
    quota = config.virtual_clusters["A"].quota
    assert (dict(quota.values), quota.shared) == ({"consumer_byte_rate": 2048.0, "request_percentage": 12.5}, True)
    assert dict(config.virtual_clusters["B"].quota.values) == {}
    assert config.warnings == []


@pytest.mark.parametrize(("props", "message"), [
    ({"proxy.quota.producer_byte_rate": "1.5"}, "producer_byte_rate cannot be a fractional value"),
    ({"proxy.virtual.cluster.a.quota.consumer_byte_rate": "0"}, "Quota consumer_byte_rate must be greater than 0"),
    ({"proxy.virtual.cluster.a.quota.request_percentage": "lots"}, "expected a number"),
    ({"proxy.virtual.cluster.a.quota.shared": "yes"}, "expected true or false"),
])
def test_quota_errors_are_one_line(props, message):
    with pytest.raises(ConfigError, match=message) as err:
        ProxyConfig({**_TENANTS, **props})
    assert "\n" not in str(err.value)
