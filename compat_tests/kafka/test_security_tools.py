"""Apache Kafka's own console tools (the Java client, the reference) against a Logway process with SASL_SSL and
SSL listeners configured with Kafka's settings: SCRAM-SHA-512 and PLAIN produce and consume with a group, and
a wrong password gets Kafka's SaslAuthenticationException message."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.gateway_process import GatewayProcess
from compat_tests.kafka.cluster import KafkaUnavailable, ensure_jars, java

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "gateway"))
from tls_certs import make_certs  # noqa: E402

PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
TOPICS = "org.apache.kafka.tools.TopicCommand"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret" user_bob="bob-secret";')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[tuple[GatewayProcess, dict, dict[str, int]]]:
    try:
        ensure_jars()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    base = tmp_path_factory.mktemp("secured")
    certs = make_certs(base)
    data = base / "data"
    subprocess.run([sys.executable, "-m", "logway.cli", "users", "add", "--log-dirs", str(data), "--user",
                    "alice", "--password", "alice-secret"], check=True)
    gw = GatewayProcess(data)
    ports = {"SASL_SSL": free_port(), "SSL": free_port(), "MTLS": free_port()}
    listeners = (f"PLAINTEXT://127.0.0.1:{gw.port},SASL_SSL://127.0.0.1:{ports['SASL_SSL']},"
                 f"SSL://127.0.0.1:{ports['SSL']},MTLS://127.0.0.1:{ports['MTLS']}")
    overrides = {"ssl.keystore.type": "PEM", "ssl.keystore.location": certs["server"],
                 "ssl.truststore.type": "PEM", "ssl.truststore.location": certs["ca"],
                 "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
                 "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
                 "group.initial.rebalance.delay.ms": "0",
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,MTLS:SSL",
                 "listener.name.mtls.ssl.client.auth": "required"}
    args = ["--listeners", listeners, "--advertised-listeners", listeners]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    gw.extra_args = tuple(args)
    gw.start()
    try:
        yield gw, certs, ports
    finally:
        gw.stop()


def _client_config(path: Path, certs: dict, protocol: str, mechanism: str | None, user: str = "",
                   password: str = "", keystore: str | None = None) -> str:
    lines = [f"security.protocol={protocol}", "ssl.truststore.type=PEM", f"ssl.truststore.location={certs['ca']}"]
    if keystore:
        lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={certs[keystore]}", "ssl.key.password=key-secret"]
    if mechanism:
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        lines += [f"sasl.mechanism={mechanism}",
                  f'sasl.jaas.config={module} required username="{user}" password="{password}";']
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize(("protocol", "mechanism", "user", "password"), [
    ("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-secret"),
    ("SASL_SSL", "PLAIN", "bob", "bob-secret"),
    ("SSL", None, "", ""),
])
def test_console_tools_over_tls_and_sasl(secured, tmp_path, protocol, mechanism, user, password):
    _, certs, ports = secured
    bootstrap = f"127.0.0.1:{ports[protocol]}"
    config = _client_config(tmp_path / "client.properties", certs, protocol, mechanism, user, password)
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    lines = [f"line-{i}" for i in range(5)]
    produced = java(PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic, "--command-config", config,
                    stdin="".join(f"{line}\n" for line in lines))
    assert produced.returncode == 0, produced.stderr[-3000:]
    consumed = java(CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning", "--group",
                    f"g-{topic}", "--max-messages", "5", "--timeout-ms", "30000", "--command-config", config)
    assert consumed.returncode == 0, consumed.stderr[-3000:]
    assert consumed.stdout.splitlines() == lines


def test_wrong_password_gets_kafkas_authentication_error(secured, tmp_path):
    _, certs, ports = secured
    config = _client_config(tmp_path / "client.properties", certs, "SASL_SSL", "SCRAM-SHA-512", "alice", "wrong")
    out = java(TOPICS, "--bootstrap-server", f"127.0.0.1:{ports['SASL_SSL']}", "--list", "--command-config", config)
    assert out.returncode != 0
    assert ("SaslAuthenticationException: Authentication failed during authentication due to invalid credentials "
            "with SASL mechanism SCRAM-SHA-512") in out.stdout + out.stderr


def test_kafka_configs_adds_a_scram_user_who_can_then_authenticate(secured, tmp_path):
    gw, certs, ports = secured
    user = f"dave-{uuid.uuid4().hex[:6]}"
    added = java("kafka.admin.ConfigCommand", "--bootstrap-server", gw.bootstrap, "--alter", "--add-config",
                 "SCRAM-SHA-512=[iterations=8192,password=dave-secret]", "--entity-type", "users",
                 "--entity-name", user)
    assert added.returncode == 0, added.stdout[-2000:] + added.stderr[-2000:]
    config = _client_config(tmp_path / "client.properties", certs, "SASL_SSL", "SCRAM-SHA-512", user, "dave-secret")
    listed = java(TOPICS, "--bootstrap-server", f"127.0.0.1:{ports['SASL_SSL']}", "--list", "--command-config", config)
    assert listed.returncode == 0, listed.stderr[-3000:]


@pytest.mark.parametrize(("keystore", "ok"), [("client_keystore", True), ("untrusted_keystore", False), (None, False)])
def test_java_client_certificates_on_a_required_mtls_listener(secured, tmp_path, keystore, ok):
    _, certs, ports = secured
    config = _client_config(tmp_path / "client.properties", certs, "SSL", None, keystore=keystore)
    out = java(TOPICS, "--bootstrap-server", f"127.0.0.1:{ports['MTLS']}", "--list", "--command-config", config,
               timeout=60)
    assert (out.returncode == 0) == ok, out.stdout[-2000:] + out.stderr[-2000:]
    if not ok:
        assert "SslAuthenticationException" in out.stdout + out.stderr
