"""TLS and SASL listeners against real clients (confluent-kafka, kafka-python) on an in-process gateway set up
with Kafka's settings: SSL, SASL_SSL and SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256/512, mTLS."""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from logway.gateway.config import BrokerConfig
from logway.gateway.in_process import InProcessGateway
from logway.server.security.credentials import CredentialStore

sys.path.insert(0, str(Path(__file__).parent))
from tls_certs import make_certs  # noqa: E402

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> dict[str, str]:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, certs):
    data = tmp_path_factory.mktemp("data")
    store = CredentialStore(data)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        store.set("scram-user", mechanism, "scram-secret")
    props = {
        "listeners": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                     "PLAINTEXT://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "PLAINTEXT:PLAINTEXT,MTLS:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs["server"],
        "ssl.truststore.type": "PEM", "ssl.truststore.location": certs["ca"],
        "ssl.client.auth": "none",
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "offsets.topic.num.partitions": "1",
    }
    gw = InProcessGateway(data, props).start()
    yield gw
    gw.stop()


def _client_conf(gw, certs, protocol: str, mechanism: str | None = None, password: str | None = None) -> dict:
    listener = {"SSL": "SSL", "SASL_SSL": "SASL_SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "MTLS": "MTLS"}[protocol]
    conf = {"bootstrap.servers": gw.bootstrap_for(listener),
            "security.protocol": "SSL" if protocol == "MTLS" else protocol}
    if "SSL" in conf["security.protocol"]:
        conf["ssl.ca.location"] = certs["ca"]
    if protocol == "MTLS":
        conf["ssl.certificate.location"] = certs["client"]
        conf["ssl.key.location"] = certs["client_key"]
    if mechanism:
        user, secret = ("alice", "alice-secret") if mechanism == "PLAIN" else ("scram-user", "scram-secret")
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password or secret})
    return conf


CASES = [("SSL", None), ("MTLS", None), ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"),
         ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
         ("SASL_PLAINTEXT", "SCRAM-SHA-512")]


@pytest.mark.parametrize(("protocol", "mechanism"), CASES)
def test_confluent_kafka_produce_consume_commit(gateway, certs, protocol, mechanism):
    conf = _client_conf(gateway, certs, protocol, mechanism)
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    producer = Producer({**conf, "linger.ms": 1})
    values = [f"v{i}".encode() * 1000 for i in range(20)]
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(15) == 0
    group = f"g-{topic}"
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    try:
        while len(got) < len(values):
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(got)} of {len(values)} records consumed"
            assert msg.error() is None, msg.error()
            got.append(msg.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=10)
    finally:
        consumer.close()
    assert got == values
    assert [tp.offset for tp in committed] == [len(values)]


KP_CASES = [("SSL", None), ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "SCRAM-SHA-256")]


@pytest.mark.parametrize(("protocol", "mechanism"), KP_CASES)
def test_kafka_python_produce_consume_commit(gateway, certs, protocol, mechanism):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf = _client_conf(gateway, certs, protocol, mechanism)
    kp = {"bootstrap_servers": conf["bootstrap.servers"], "security_protocol": protocol}
    if "SSL" in protocol:
        kp["ssl_cafile"] = certs["ca"]
    if mechanism:
        kp.update(sasl_mechanism=mechanism, sasl_plain_username=conf["sasl.username"],
                  sasl_plain_password=conf["sasl.password"])
    topic = f"sec-kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**kp)
    for i in range(10):
        producer.send(topic, f"m{i}".encode())
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10000, **kp)
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 10:
                break
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, 0)) == 10
    finally:
        consumer.close()
    assert got == [f"m{i}".encode() for i in range(10)]


def _auth_error(conf: dict) -> KafkaError:
    """The client's authentication error (librdkafka reports it through error_cb, served by poll)."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append})
    for _ in range(40):
        producer.poll(0.25)
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if auth:
            return auth[0]
    raise AssertionError(f"no authentication error; got {errors}")


@pytest.mark.parametrize(("protocol", "mechanism", "message"), [
    ("SASL_SSL", "PLAIN", "Authentication failed: Invalid username or password"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "Authentication failed during authentication due to invalid credentials "
                                        "with SASL mechanism SCRAM-SHA-256"),
    ("SASL_SSL", "SCRAM-SHA-512", "Authentication failed during authentication due to invalid credentials "
                                  "with SASL mechanism SCRAM-SHA-512"),
])
def test_wrong_password_is_an_authentication_error(gateway, certs, protocol, mechanism, message):
    error = _auth_error(_client_conf(gateway, certs, protocol, mechanism, password="wrong"))
    assert message in error.str()
    # The gateway goes on serving.
    AdminClient(_client_conf(gateway, certs, protocol, mechanism)).list_topics(timeout=10)


def test_kafka_python_wrong_password(gateway, certs, caplog):
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError as KPError

    caplog.set_level(logging.WARNING, logger="kafka")
    with pytest.raises(KPError):  # kafka-python gives up bootstrapping; the reason is in its log
        KafkaAdminClient(bootstrap_servers=gateway.bootstrap_for("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="nope",
                         request_timeout_ms=3000, bootstrap_timeout_ms=3000)
    assert any("Authentication failed: Invalid username or password" in r.getMessage() for r in caplog.records)


def _frame(api_key: int, version: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, 4) + b"test"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _closed(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def test_request_before_sasl_authentication_closes_the_connection(gateway):
    with socket.create_connection(("127.0.0.1", gateway.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        s.sendall(_frame(3, 1, struct.pack(">i", -1)))  # Metadata v1, all topics
        assert _closed(s)
    with socket.create_connection(("127.0.0.1", gateway.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        s.sendall(_frame(18, 0))  # ApiVersions is answered before authentication
        (size,) = struct.unpack(">i", s.recv(4))
        assert size > 0


def test_large_frame_before_sasl_authentication_closes_the_connection(gateway):
    # sasl.server.max.receive.size (KIP-498, 524288 by default) bounds what an unauthenticated client may send.
    with socket.create_connection(("127.0.0.1", gateway.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        s.sendall(struct.pack(">i", 600_000) + b"\0" * 1000)
        assert _closed(s)


def test_plaintext_client_on_tls_port_and_tls_client_on_plaintext_port(gateway, certs):
    with socket.create_connection(("127.0.0.1", gateway.ports["SSL"]), timeout=5) as s:
        s.sendall(_frame(18, 0))
        assert _closed(s)  # nothing served
    context = ssl.create_default_context(cafile=certs["ca"])
    with socket.create_connection(("127.0.0.1", gateway.ports["PLAINTEXT"]), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
            context.wrap_socket(raw, server_hostname="127.0.0.1")
    # A librdkafka client gets a clear error, and the gateway keeps serving.
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": gateway.bootstrap_for("PLAINTEXT"), "security.protocol": "SSL",
                         "ssl.ca.location": certs["ca"], "error_cb": errors.append})
    for _ in range(40):
        if errors:
            break
        producer.poll(0.25)
    assert errors and errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), errors
    # And a librdkafka PLAINTEXT client on the TLS port: disconnected, told so.
    errors = []
    producer = Producer({"bootstrap.servers": gateway.bootstrap_for("SSL"), "error_cb": errors.append})
    for _ in range(40):
        if errors:
            break
        producer.poll(0.25)
    assert errors and errors[0].code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), errors
    AdminClient(_client_conf(gateway, certs, "SSL")).list_topics(timeout=10)


@pytest.mark.parametrize("cert", ["untrusted", "expired", None])
def test_mtls_refuses_bad_or_missing_client_certificates(gateway, certs, cert, caplog):
    caplog.set_level(logging.INFO, logger="logway.server.tls_connection")
    context = ssl.create_default_context(cafile=certs["ca"])
    if cert:
        context.load_cert_chain(certs[cert], certs[cert + "_key"])
    with socket.create_connection(("127.0.0.1", gateway.ports["MTLS"]), timeout=5) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(_frame(18, 0))
                assert _closed(s)  # TLS 1.3: the server's verdict arrives after the client's handshake
        except (ssl.SSLError, ConnectionResetError):
            pass
    AdminClient(_client_conf(gateway, certs, "MTLS")).list_topics(timeout=10)  # a good certificate still works


def test_mtls_principal_is_the_certificate_subject(gateway, certs, caplog):
    caplog.set_level(logging.DEBUG, logger="logway.server.tls_connection")
    AdminClient(_client_conf(gateway, certs, "MTLS")).list_topics(timeout=10)
    assert any("authenticated as User:CN=alice,OU=Eng,O=Acme,C=US" in r.getMessage() for r in caplog.records)


def test_config_reads_kafka_security_settings_without_warnings(certs, tmp_path):
    config = BrokerConfig({
        "listeners": "SASL_SSL://127.0.0.1:9094", "log.dirs": str(tmp_path),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs["server_encrypted"],
        "ssl.key.password": "key-secret", "ssl.enabled.protocols": "TLSv1.3",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";',
    })
    assert config.warnings == []
    security = config.security["SASL_SSL"]
    assert security.tls and security.sasl and security.plain_users["alice"] == "alice-secret"
    assert security.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize(("props", "message"), [
    ({"ssl.keystore.location": "/nonexistent.pem", "ssl.keystore.type": "PEM"}, "ssl.keystore.location"),
    ({"ssl.keystore.location": "X", "ssl.keystore.type": "JKS"}, "PEM"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "SERVER", "ssl.key.password": "wrong"}, "key"),
])
def test_bad_ssl_settings_are_one_line_errors(certs, tmp_path, props, message):
    from logway.server.config import ConfigError

    props = {k: (certs["server_encrypted"] if v == "SERVER" else v) for k, v in props.items()}
    with pytest.raises(ConfigError, match=message):
        BrokerConfig({"listeners": "SSL://127.0.0.1:9093", "log.dirs": str(tmp_path), **props})


def test_serve_with_an_unreadable_keystore_is_one_line(tmp_path):
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "logway.cli", "serve", "--listeners", "SSL://127.0.0.1:0", "--log-dirs",
         str(tmp_path), "--override", "ssl.keystore.type=PEM", "--override", "ssl.keystore.location=/nonexistent.pem"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("logway: configuration error: ssl.keystore.location=/nonexistent.pem: cannot load")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_alter_and_describe_user_scram_credentials_with_the_admin_client(gateway, certs):
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": gateway.bootstrap_for("PLAINTEXT")})
    user = f"carol-{uuid.uuid4().hex[:6]}"
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                          b"carol-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(10)
    described = admin.describe_user_scram_credentials([user])[user].result(10)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)]
    # The new user authenticates with SCRAM-SHA-256 (and its password is nowhere on disk).
    conf = {"bootstrap.servers": gateway.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": "carol-secret"}
    AdminClient(conf).list_topics(timeout=10)
    assert b"carol-secret" not in (gateway.data_dir / "scram-credentials.json").read_bytes()
    # Kafka's errors: a missing user, a deletion of a credential that does not exist, too few iterations.
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials([f"nobody-{user}"])[f"nobody-{user}"].result(10)
    with pytest.raises(KafkaException, match="Attempt to delete a user credential that does not exist"):
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            user, ScramMechanism.SCRAM_SHA_512)])[user].result(10)
    with pytest.raises(KafkaException, match="Too few iterations"):
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 100), b"x")])[user].result(10)
    for future in admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            user, ScramMechanism.SCRAM_SHA_256)]).values():
        future.result(10)
    assert "SASL mechanism SCRAM-SHA-256" in _auth_error(conf).str()


def _handshake_v0(s: socket.socket, mechanism: bytes) -> None:
    s.sendall(_frame(17, 0, struct.pack(">h", len(mechanism)) + mechanism))
    (size,) = struct.unpack(">i", s.recv(4))
    body = s.recv(size)
    assert struct.unpack_from(">h", body, 4)[0] == 0  # error_code after the correlation id


def test_sasl_handshake_v0_takes_bare_tokens(gateway):
    # SaslHandshake v0 (pre-KIP-152 clients): the PLAIN token follows as a bare size-prefixed frame.
    with socket.create_connection(("127.0.0.1", gateway.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        _handshake_v0(s, b"PLAIN")
        token = b"\0alice\0alice-secret"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert s.recv(4) == struct.pack(">i", 0)  # PLAIN's empty answer
        s.sendall(_frame(3, 1, struct.pack(">i", -1)))  # now Metadata is served
        (size,) = struct.unpack(">i", s.recv(4))
        assert size > 8
    with socket.create_connection(("127.0.0.1", gateway.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        _handshake_v0(s, b"PLAIN")
        token = b"\0alice\0wrong"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert _closed(s)


def test_aiokafka_over_sasl_ssl_scram(gateway, certs):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = f"sec-aio-{uuid.uuid4().hex[:8]}"
    options = dict(bootstrap_servers=gateway.bootstrap_for("SASL_SSL"), security_protocol="SASL_SSL",
                   ssl_context=create_ssl_context(cafile=certs["ca"]), sasl_mechanism="SCRAM-SHA-256",
                   sasl_plain_username="scram-user", sasl_plain_password="scram-secret")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**options)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                                    enable_auto_commit=False, **options)
        await consumer.start()
        try:
            got = [(await asyncio.wait_for(consumer.getone(), 15)).value for _ in range(5)]
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [f"a{i}".encode() for i in range(5)]


def test_idle_connection_mid_tls_handshake_is_closed_quietly(tmp_path, certs, caplog):
    # connections.max.idle.ms applies before the TLS handshake completes, without an internal error.
    caplog.set_level(logging.INFO, logger="logway")
    gw = InProcessGateway(tmp_path / "data", {
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.location": certs["server"],
        "connections.max.idle.ms": "300"}).start()
    try:
        with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
            assert _closed(s)  # the server closes it; the client never sent a ClientHello
    finally:
        gw.stop()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("logway")]


def test_unknown_mechanism_and_authenticate_before_handshake_are_refused(gateway):
    # Kafka answers UNSUPPORTED_SASL_MECHANISM (33) with the enabled mechanisms, then closes.
    with socket.create_connection(("127.0.0.1", gateway.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        s.sendall(_frame(17, 1, struct.pack(">h", 6) + b"GSSAPI"))
        (size,) = struct.unpack(">i", s.recv(4))
        body = s.recv(size)
        error, count = struct.unpack_from(">hi", body, 4)
        assert error == 33 and count == 3
        assert b"SCRAM-SHA-512" in body and b"PLAIN" in body
        assert _closed(s)
    # SaslAuthenticate without a handshake: ILLEGAL_SASL_STATE (34), then closed.
    with socket.create_connection(("127.0.0.1", gateway.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        token = b"\0alice\0alice-secret"
        s.sendall(_frame(36, 1, struct.pack(">i", len(token)) + token))
        (size,) = struct.unpack(">i", s.recv(4))
        assert struct.unpack_from(">h", s.recv(size), 4)[0] == 34
        assert _closed(s)


def test_inter_broker_mechanism_is_accepted_with_a_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="logway.server.config")
    config = BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:9095", "log.dirs": str(tmp_path),
                           "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                           "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                           "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                           "listener.name.sasl_plaintext.bogus.key": "x"})
    messages = [r.getMessage() for r in caplog.records]
    assert any("sasl.mechanism.inter.broker.protocol" in m and "ignored" in m for m in messages)
    assert config.security["SASL_PLAINTEXT"].mechanisms == ("SCRAM-SHA-512",)  # the listener prefix wins
    assert config.warnings == ["unknown config listener.name.sasl_plaintext.bogus.key; ignored"]
