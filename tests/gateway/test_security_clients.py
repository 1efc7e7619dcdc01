"""The client families on every secured listener of one `logway serve` process started from a Kafka-style
server.properties: kcat (Debian's, librdkafka), the Java client 3.9.1, confluent-kafka and kafka-python over
SSL, SASL_SSL and SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256/512 and mTLS; certificate and protocol errors
as the clients see them; ssl.principal.mapping.rules as the ACLs see it; KIP-368 re-authentication; PKCS12
stores, an encrypted PEM key, ssl.enabled.protocols and ssl.cipher.suites."""

from __future__ import annotations

import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from logway.server.security.credentials import CredentialStore

sys.path.insert(0, str(Path(__file__).parent))
from tls_certs import make_certs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
JAVA_LIB = ROOT / "compat_tests" / "matrix" / "java" / "lib"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" '
              'user_alice="alice-secret";')
SECRETS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("scram-user", "scram-secret"),
           "SCRAM-SHA-512": ("scram-user", "scram-secret")}
# (listener, mechanism) pairs every client family runs: each listener type with each mechanism.
COMBOS = [("SSL", None), ("MTLS", None), ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"),
          ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
          ("SASL_PLAINTEXT", "SCRAM-SHA-512")]
PROTOCOL = {"SSL": "SSL", "MTLS": "SSL", "TLS12": "SSL", "EXPIRED": "SSL", "SASL_SSL": "SASL_SSL",
            "SASL_PLAINTEXT": "SASL_PLAINTEXT", "REAUTH": "SASL_PLAINTEXT", "PLAINTEXT": "PLAINTEXT"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """A `logway serve --config server.properties` process with every listener kind."""

    def __init__(self, base: Path, certs: dict[str, str]) -> None:
        self.data = base / "data"
        self.log = base / "gateway.log"
        self.ports = {name: _free_port() for name in PROTOCOL}
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        props = {
            "listeners": listeners, "advertised.listeners": listeners, "log.dirs": str(self.data),
            "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in PROTOCOL.items()),
            "ssl.keystore.type": "PEM", "ssl.keystore.location": certs["server"],
            "ssl.truststore.type": "PEM", "ssl.truststore.location": certs["ca"],
            # SASL_SSL: the key encrypted, its password in ssl.key.password.
            "listener.name.sasl_ssl.ssl.keystore.location": certs["server_encrypted"],
            "listener.name.sasl_ssl.ssl.key.password": "key-secret",
            # mTLS, the principal mapped from the subject DN.
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=Eng,.*$/$1/L,DEFAULT",
            # PKCS12 stores, TLS 1.2 only, one cipher suite (Kafka's Java name).
            "listener.name.tls12.ssl.keystore.type": "PKCS12",
            "listener.name.tls12.ssl.keystore.location": certs["server_p12"],
            "listener.name.tls12.ssl.keystore.password": "store-secret",
            "listener.name.tls12.ssl.truststore.type": "PKCS12",
            "listener.name.tls12.ssl.truststore.location": certs["ca_p12"],
            "listener.name.tls12.ssl.truststore.password": "store-secret",
            "listener.name.tls12.ssl.client.auth": "requested",
            "listener.name.tls12.ssl.enabled.protocols": "TLSv1.2",
            "listener.name.tls12.ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "listener.name.expired.ssl.keystore.location": certs["server_expired"],
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.jaas.config": PLAIN_JAAS,
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.reauth.connections.max.reauth.ms": "2000",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true", "super.users": "User:admin",
            "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0",
        }
        self.config = base / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        store = CredentialStore(self.data)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            store.set("scram-user", mechanism, "scram-secret")
            store.set("reauth-user", mechanism, "reauth-secret")
        self.proc: subprocess.Popen | None = None

    def start(self) -> Gateway:
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "logway.cli", "serve", "--config",
                                          str(self.config)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        for port in self.ports.values():
            while True:
                assert self.proc.poll() is None, self.log.read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "gateway did not listen:\n" + self.log.read_text()
                    time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> dict[str, str]:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, certs):
    gw = Gateway(tmp_path_factory.mktemp("gw"), certs).start()
    yield gw
    gw.stop()


def _rdkafka_conf(gw: Gateway, certs: dict, listener: str, mechanism: str | None = None,
                  password: str | None = None, user: str | None = None) -> dict[str, str]:
    """librdkafka properties (confluent-kafka and kcat -X)."""
    conf = {"bootstrap.servers": gw.bootstrap(listener), "security.protocol": PROTOCOL[listener]}
    if "SSL" in conf["security.protocol"]:
        conf["ssl.ca.location"] = certs["ca"]
    if listener == "MTLS":
        conf["ssl.certificate.location"], conf["ssl.key.location"] = certs["client"], certs["client_key"]
    if mechanism:
        name, secret = SECRETS[mechanism]
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user or name, "sasl.password": password or secret})
    return conf


def _kcat(conf: dict[str, str], *args: str, stdin: str | None = None, timeout: float = 30):
    x = [a for k, v in conf.items() if k != "bootstrap.servers" for a in ("-X", f"{k}={v}")]
    return subprocess.run(["kcat", "-b", conf["bootstrap.servers"], *x, *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)


needs_kcat = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (compat_tests/setup.sh)")


@needs_kcat
@pytest.mark.parametrize(("listener", "mechanism"), COMBOS)
def test_kcat_produce_and_consume_in_a_group(gateway, certs, listener, mechanism):
    conf = _rdkafka_conf(gateway, certs, listener, mechanism)
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    lines = [f"line-{i}" for i in range(10)]
    produced = _kcat(conf, "-P", "-t", topic, stdin="".join(f"{line}\n" for line in lines))
    assert produced.returncode == 0, produced.stderr
    # A balanced consumer (-G: JoinGroup, SyncGroup, OffsetCommit) reading to the end of the partition.
    consumed = _kcat({**conf, "auto.offset.reset": "earliest"}, "-G", f"g-{topic}", "-e", "-f", "%s\n", topic)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines


@needs_kcat
@pytest.mark.parametrize(("listener", "mechanism", "message"), [
    ("SASL_SSL", "PLAIN", "Authentication failed: Invalid username or password"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "invalid credentials with SASL mechanism SCRAM-SHA-256"),
    ("SASL_SSL", "SCRAM-SHA-512", "invalid credentials with SASL mechanism SCRAM-SHA-512"),
])
def test_kcat_wrong_password_is_a_clear_failure(gateway, certs, listener, mechanism, message):
    out = _kcat(_rdkafka_conf(gateway, certs, listener, mechanism, password="wrong"), "-L", "-m", "5")
    assert out.returncode != 0
    assert message in out.stderr, out.stderr
    assert gateway.alive()
    good = _kcat(_rdkafka_conf(gateway, certs, listener, mechanism), "-L", "-m", "10")
    assert good.returncode == 0, good.stderr


@needs_kcat
@pytest.mark.parametrize(("listener", "ca", "message"), [
    ("SSL", "other_ca", "self-signed certificate in certificate chain"),  # its CA is not the one trusted
    ("EXPIRED", "ca", "certificate has expired"),
])
def test_clients_refuse_an_untrusted_or_expired_server_certificate(gateway, certs, listener, ca, message):
    conf = {**_rdkafka_conf(gateway, certs, listener), "ssl.ca.location": certs[ca]}
    # -m 5, not 1: the handshake error must surface before kcat gives up waiting (a loaded machine missed 1 s).
    out = _kcat(conf, "-L", "-m", "5")
    assert out.returncode != 0 and "certificate verify failed: broker certificate could not be verified" in out.stderr
    context = ssl.create_default_context(cafile=certs[ca])
    with socket.create_connection(("127.0.0.1", gateway.ports[listener]), timeout=5) as raw:
        with pytest.raises(ssl.SSLCertVerificationError, match=message):
            context.wrap_socket(raw, server_hostname="127.0.0.1")
    assert gateway.alive()


@needs_kcat
def test_kcat_mtls_refused_without_a_trusted_certificate(gateway, certs):
    for cert in ("untrusted", "expired", None):
        conf = _rdkafka_conf(gateway, certs, "MTLS")
        if cert:
            conf["ssl.certificate.location"], conf["ssl.key.location"] = certs[cert], certs[cert + "_key"]
        else:
            del conf["ssl.certificate.location"], conf["ssl.key.location"]
        out = _kcat(conf, "-L", "-m", "5")
        assert out.returncode != 0, out.stdout
        assert "SSL" in out.stderr or "ssl" in out.stderr, out.stderr
    log = gateway.log.read_text()
    assert "SSL handshake failed" in log
    assert _kcat(_rdkafka_conf(gateway, certs, "MTLS"), "-L", "-m", "10").returncode == 0


@needs_kcat
def test_kcat_plaintext_on_tls_port_and_tls_on_plaintext_port(gateway, certs):
    plain_on_tls = _kcat({"bootstrap.servers": gateway.bootstrap("SSL")}, "-L", "-m", "1")
    assert plain_on_tls.returncode != 0 and "Failed to acquire metadata" in plain_on_tls.stderr
    tls_on_plain = _kcat({"bootstrap.servers": gateway.bootstrap("PLAINTEXT"), "security.protocol": "SSL",
                          "ssl.ca.location": certs["ca"]}, "-L", "-m", "5")
    assert tls_on_plain.returncode != 0 and "SSL" in tls_on_plain.stderr, tls_on_plain.stderr
    assert _kcat({"bootstrap.servers": gateway.bootstrap("PLAINTEXT")}, "-L", "-m", "10").returncode == 0


@pytest.mark.parametrize(("listener", "mechanism"), COMBOS)
def test_kafka_python_admin_produce_and_group(gateway, certs, listener, mechanism):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    kp: dict = {"bootstrap_servers": gateway.bootstrap(listener), "security_protocol": PROTOCOL[listener]}
    if "SSL" in kp["security_protocol"]:
        kp["ssl_cafile"] = certs["ca"]
    if listener == "MTLS":
        kp.update(ssl_certfile=certs["client"], ssl_keyfile=certs["client_key"])
    if mechanism:
        kp.update(sasl_mechanism=mechanism, sasl_plain_username=SECRETS[mechanism][0],
                  sasl_plain_password=SECRETS[mechanism][1])
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(**kp)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
        assert topic in admin.list_topics()
    finally:
        admin.close()
    producer = KafkaProducer(**kp)
    for i in range(6):
        producer.send(topic, f"m{i}".encode(), partition=i % 2)
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=10000, **kp)
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 6:
                break
        consumer.commit()
        assert sum(consumer.committed(TopicPartition(topic, p)) for p in (0, 1)) == 6
    finally:
        consumer.close()
    assert sorted(got) == [f"m{i}".encode() for i in range(6)]


@pytest.mark.parametrize(("listener", "mechanism"), COMBOS)
def test_confluent_kafka_admin_calls(gateway, certs, listener, mechanism):
    from confluent_kafka.admin import NewTopic

    admin = AdminClient(_rdkafka_conf(gateway, certs, listener, mechanism))
    topic = f"ck-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3
    assert admin.describe_cluster().result(10).nodes
    admin.delete_topics([topic])[topic].result(15)


def _java_client(tmp: Path, *args: str, timeout: float = 120) -> str:
    if shutil.which("javac") is None or not (JAVA_LIB / "kafka-clients.jar").exists():
        pytest.skip("needs javac and compat_tests/matrix/java/lib (compat_tests/setup.sh)")
    classes = tmp / "classes"
    if not (classes / "SecureClient.class").exists():
        subprocess.run(["javac", "-d", str(classes), "-cp", f"{JAVA_LIB}/*",
                        str(Path(__file__).parent / "java" / "SecureClient.java")], check=True, timeout=120)
    out = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-cp", f"{classes}:{JAVA_LIB}/*", "SecureClient", *args],
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _java_conf(path: Path, gw: Gateway, certs: dict, listener: str, mechanism: str | None,
               user: str | None = None, password: str | None = None) -> str:
    lines = [f"bootstrap.servers={gw.bootstrap(listener)}", f"security.protocol={PROTOCOL[listener]}",
             "ssl.truststore.type=PEM", f"ssl.truststore.location={certs['ca']}"]
    if listener == "MTLS":
        lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={certs['client_keystore']}",
                  "ssl.key.password=key-secret"]
    if mechanism:
        name, secret = SECRETS[mechanism]
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        lines += [f"sasl.mechanism={mechanism}",
                  f'sasl.jaas.config={module} required username="{user or name}" password="{password or secret}";']
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_java_client_on_every_listener_and_mechanism(gateway, certs, tmp_path_factory):
    tmp = tmp_path_factory.getbasetemp()
    confs = [_java_conf(tmp / f"java-{i}.properties", gateway, certs, listener, mechanism)
             for i, (listener, mechanism) in enumerate(COMBOS)]
    out = _java_client(tmp, "roundtrip", f"java-{uuid.uuid4().hex[:6]}", *confs).splitlines()
    assert out == [f"OK {c} produced=20 consumed=20 committed=20" for c in confs]


def test_java_client_errors(gateway, certs, tmp_path_factory):
    # A wrong password, TLS to the plaintext port, an expired server certificate: Kafka's exceptions, nothing served.
    # The wrong password and the expired certificate fail as soon as the handshake is done, within the client's
    # default timeouts (60 s, for a handshake that takes about 1 s: a loaded machine delays it, it does not change
    # the answer); TLS to the plaintext port can only end by a timeout, so that client gets short ones.
    tmp = tmp_path_factory.getbasetemp()
    short = "request.timeout.ms=3000\ndefault.api.timeout.ms=5000\nreconnect.backoff.max.ms=200\n"
    wrong = Path(_java_conf(tmp / "wrong.properties", gateway, certs, "SASL_SSL", "SCRAM-SHA-512",
                            password="wrong"))
    tls_on_plain = Path(_java_conf(tmp / "tls-on-plain.properties", gateway, certs, "SSL", None))
    expired = Path(_java_conf(tmp / "expired.properties", gateway, certs, "EXPIRED", None))
    tls_on_plain.write_text(tls_on_plain.read_text().replace(gateway.bootstrap("SSL"), gateway.bootstrap("PLAINTEXT"))
                            + short)
    out = _java_client(tmp, "roundtrip", f"java-err-{uuid.uuid4().hex[:6]}", str(wrong), str(tls_on_plain),
                       str(expired), timeout=300).splitlines()
    assert out[0].startswith(f"FAIL {wrong}") and ("SaslAuthenticationException: Authentication failed during "
                                                   "authentication due to invalid credentials with SASL mechanism "
                                                   "SCRAM-SHA-512") in out[0], out[0]
    # The gateway closes the connection on the ClientHello (a frame size past socket.request.max.bytes), as
    # Kafka does; the Java client takes that as a lost connection and retries until its timeout, as with Kafka.
    assert out[1].startswith(f"FAIL {tls_on_plain}") and "TimeoutException" in out[1], out[1]
    assert out[2].startswith(f"FAIL {expired}") and "SslAuthenticationException" in out[2], out[2]
    assert gateway.alive()


def test_java_client_reauthenticates_transparently(gateway, certs, tmp_path_factory):
    # connections.max.reauth.ms=2000 on REAUTH: the client re-authenticates at 85-95% of each session and keeps
    # producing and consuming; the broker would close a connection that let its session lapse. The client runs
    # until its producer and its consumer have each re-authenticated twice (about 4 s on a quiet machine) or 120 s
    # pass: a loaded machine makes it slower, not fewer.
    tmp = tmp_path_factory.getbasetemp()
    conf = _java_conf(tmp / "reauth.properties", gateway, certs, "REAUTH", "SCRAM-SHA-512", "reauth-user",
                      "reauth-secret")
    out = _java_client(tmp, "reauth", f"reauth-{uuid.uuid4().hex[:6]}", conf, "2", "120", timeout=180).strip()
    assert out.startswith("OK "), out
    facts = dict(item.split("=") for item in out.split()[1:])
    assert int(facts["produced"]) >= 20 and facts["consumed"] == facts["produced"], out
    assert int(facts["producer_reauth"]) >= 2 and int(facts["consumer_reauth"]) >= 2, out
    assert int(facts["reauth"]) >= 4, out  # producer and consumer connections, twice or more each


def _sasl_plain(s: socket.socket, user: bytes, password: bytes) -> bytes:
    """SaslHandshake v1 + SaslAuthenticate v1 with PLAIN; the SaslAuthenticate response body."""
    s.sendall(_frame(17, 1, struct.pack(">h", 5) + b"PLAIN"))
    _response(s)
    token = b"\0" + user + b"\0" + password
    s.sendall(_frame(36, 1, struct.pack(">i", len(token)) + token))
    return _response(s)


def _frame(api_key: int, version: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, 4) + b"test"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _response(s: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
    return s.recv(size, socket.MSG_WAITALL)[4:]


def _closed(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_session_lifetime_and_expired_session_is_closed(gateway):
    with socket.create_connection(("127.0.0.1", gateway.ports["REAUTH"]), timeout=5) as s:
        body = _sasl_plain(s, b"alice", b"alice-secret")
        error, = struct.unpack_from(">h", body)
        (msg_len,) = struct.unpack_from(">h", body, 2)  # error_message (null: -1)
        pos = 4 + max(msg_len, 0)
        (auth_len,) = struct.unpack_from(">i", body, pos)
        (lifetime,) = struct.unpack_from(">q", body, pos + 4 + auth_len)
        assert (error, lifetime) == (0, 2000)
        s.sendall(_frame(3, 1, struct.pack(">i", -1)))  # Metadata within the session: served
        assert _response(s)
        time.sleep(2.2)
        s.sendall(_frame(3, 1, struct.pack(">i", -1)))  # after it: the connection is closed
        assert _closed(s)
    assert "its SASL session expired (connections.max.reauth.ms=2000)" in gateway.log.read_text()
    # Without connections.max.reauth.ms (Kafka's default 0) the lifetime is 0 and the session never expires.
    with socket.create_connection(("127.0.0.1", gateway.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        assert _sasl_plain(s, b"alice", b"alice-secret")[-8:] == struct.pack(">q", 0)


def test_reauthentication_must_keep_the_mechanism_and_principal(gateway):
    with socket.create_connection(("127.0.0.1", gateway.ports["REAUTH"]), timeout=5) as s:
        assert _sasl_plain(s, b"alice", b"alice-secret")[:2] == b"\0\0"
        assert _sasl_plain(s, b"alice", b"alice-secret")[:2] == b"\0\0"  # a re-authentication
        s.sendall(_frame(3, 1, struct.pack(">i", -1)))
        assert _response(s)
        # Kafka allows one re-authentication a second; a SaslHandshake sooner is refused, the connection stays.
        s.sendall(_frame(17, 1, struct.pack(">h", 5) + b"PLAIN"))
        assert struct.unpack_from(">h", _response(s))[0] == 34  # ILLEGAL_SASL_STATE
        time.sleep(1.0)
        body = _sasl_plain(s, b"admin", b"admin-secret")
        assert struct.unpack_from(">h", body)[0] == 58  # SASL_AUTHENTICATION_FAILED
        assert b"Cannot change principals during re-authentication from User.alice: User.admin" in body
        assert _closed(s)


def _authenticate(s: socket.socket, token: bytes) -> tuple[int, bytes, bytes]:
    """One SaslAuthenticate v1: (error code, the whole response body, auth bytes)."""
    s.sendall(_frame(36, 1, struct.pack(">i", len(token)) + token))
    body = _response(s)
    error, msg_len = struct.unpack_from(">hh", body)
    pos = 4 + max(msg_len, 0)
    (n,) = struct.unpack_from(">i", body, pos)
    return error, body, body[pos + 4:pos + 4 + n]


def _sasl_scram256(s: socket.socket, user: str, password: str) -> tuple[int, bytes]:
    """SaslHandshake + a SCRAM-SHA-256 exchange as a client does it (RFC 5802); (error code, last response)."""
    import base64
    import hashlib
    import hmac
    import secrets

    s.sendall(_frame(17, 1, struct.pack(">h", 13) + b"SCRAM-SHA-256"))
    _response(s)
    first = f"n={user},r={secrets.token_urlsafe(18)}"
    error, body, server_first = _authenticate(s, b"n,," + first.encode())
    if error:
        return error, body
    attrs = dict(part.split("=", 1) for part in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{first},{server_first.decode()},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth, "sha256")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    error, body, _ = _authenticate(s, f"{without_proof},p={proof}".encode())
    return error, body


def test_reauthentication_of_a_deleted_user_fails(gateway):
    store = CredentialStore(gateway.data)
    store.set("to-delete", "SCRAM-SHA-256", "pw-secret")
    with socket.create_connection(("127.0.0.1", gateway.ports["REAUTH"]), timeout=5) as s:
        assert _sasl_scram256(s, "to-delete", "pw-secret")[0] == 0
        assert _sasl_scram256(s, "to-delete", "pw-secret")[0] == 0  # re-authenticated while the user exists
        store.delete("to-delete")
        time.sleep(1.0)  # one re-authentication a second
        error, body = _sasl_scram256(s, "to-delete", "pw-secret")
        assert error == 58 and b"invalid credentials with SASL mechanism SCRAM-SHA-256" in body
        assert _closed(s)


def test_reauthentication_checks_the_credentials_again(gateway, certs):
    # A SCRAM user deleted while connected: the next re-authentication fails and the connection is closed.
    # (librdkafka re-authenticates too, KIP-368 since 2.2.)
    store = CredentialStore(gateway.data)
    store.set("short-lived", "SCRAM-SHA-256", "pw-secret")
    errors: list[KafkaError] = []
    conf = {**_rdkafka_conf(gateway, certs, "REAUTH", "SCRAM-SHA-256", user="short-lived", password="pw-secret"),
            "error_cb": errors.append}
    producer = Producer(conf)
    topic = f"reauth-del-{uuid.uuid4().hex[:6]}"
    producer.produce(topic, b"before")
    assert producer.flush(10) == 0
    store.delete("short-lived")
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        producer.poll(0.2)
    assert any("invalid credentials with SASL mechanism SCRAM-SHA-256" in e.str() for e in errors), errors


def test_mapped_principal_is_what_acls_see(gateway, certs):
    # ssl.principal.mapping.rules on MTLS turns CN=alice,OU=Eng,O=Acme,C=US into "alice"; a topic whose only
    # ACL allows User:alice is writable over mTLS and refused to everyone else.
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap("PLAINTEXT")})
    topic = f"mapped-{uuid.uuid4().hex[:6]}"
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.ALL,
                     AclPermissionType.ALLOW)
    for future in admin.create_acls([acl]).values():
        future.result(10)
    mtls = Producer(_rdkafka_conf(gateway, certs, "MTLS"))
    mtls.produce(topic, b"from alice")
    assert mtls.flush(10) == 0
    failures: list = []
    anonymous = Producer({"bootstrap.servers": gateway.bootstrap("PLAINTEXT"), "message.timeout.ms": 5000})
    anonymous.produce(topic, b"from anyone", on_delivery=lambda err, msg: failures.append(err))
    anonymous.flush(10)
    assert failures and failures[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, failures


def test_pkcs12_stores_tls12_only_and_cipher_suite(gateway, certs, tmp_path_factory):
    # TLS12: PKCS12 keystore and truststore, ssl.enabled.protocols=TLSv1.2, one cipher suite.
    conf = _rdkafka_conf(gateway, certs, "TLS12")
    AdminClient(conf).list_topics(timeout=10)
    context = ssl.create_default_context(cafile=certs["ca"])
    with socket.create_connection(("127.0.0.1", gateway.ports["TLS12"]), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            assert s.version() == "TLSv1.2" and s.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    # A client that offers only TLS 1.3, or only another TLS 1.2 suite, cannot connect.
    context = ssl.create_default_context(cafile=certs["ca"])
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    with socket.create_connection(("127.0.0.1", gateway.ports["TLS12"]), timeout=5) as raw:
        with pytest.raises(ssl.SSLError):
            context.wrap_socket(raw, server_hostname="127.0.0.1")
    errors: list[KafkaError] = []
    producer = Producer({**conf, "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256", "error_cb": errors.append})
    for _ in range(20):
        producer.poll(0.25)
        if errors:
            break
    assert errors and errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
    # The Java client: served; configured for TLSv1.3 only, refused with Kafka's SslAuthenticationException.
    tmp = tmp_path_factory.getbasetemp()
    ok = _java_conf(tmp / "tls12.properties", gateway, certs, "TLS12", None)
    bad = tmp / "tls13.properties"
    bad.write_text(Path(ok).read_text() + "ssl.enabled.protocols=TLSv1.3\nrequest.timeout.ms=5000\n"
                   "default.api.timeout.ms=8000\n")
    out = _java_client(tmp, "roundtrip", f"tls12-{uuid.uuid4().hex[:6]}", ok, str(bad)).splitlines()
    assert out[0] == f"OK {ok} produced=20 consumed=20 committed=20"
    assert out[1].startswith(f"FAIL {bad}") and "SslAuthenticationException" in out[1], out[1]


def test_startup_warned_about_the_inter_broker_mechanism(gateway):
    assert "sasl.mechanism.inter.broker.protocol: Logway has no inter-broker traffic; ignored" in gateway.log.read_text()


@pytest.mark.parametrize(("props", "message"), [
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/etc/kafka/server.jks"},
     "ssl.keystore.type=JKS: Logway reads PEM and PKCS12 stores, not JKS"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "P12", "ssl.keystore.password": "wrong"},
     "cannot read the PKCS12 store (wrong ssl.keystore.password?)"),
    ({"ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/X"}, "ssl.principal.mapping.rules="),
])
def test_store_and_rule_errors_are_one_start_up_line(certs, tmp_path, props, message):
    props = {"ssl.keystore.type": "PEM", "ssl.keystore.location": certs["server"], **props}
    props = {k: certs["server_p12"] if v == "P12" else v for k, v in props.items()}
    args = [a for k, v in props.items() for a in ("--override", f"{k}={v}")]
    proc = subprocess.run([sys.executable, "-m", "logway.cli", "serve", "--listeners", "SSL://127.0.0.1:0",
                           "--log-dirs", str(tmp_path), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_gateway_still_serves_after_everything(gateway, certs):
    # After the refused handshakes, wrong passwords and expired sessions above: no crash, no internal error.
    assert gateway.alive()
    AdminClient(_rdkafka_conf(gateway, certs, "SASL_SSL", "SCRAM-SHA-512")).list_topics(timeout=10)
    assert "internal error" not in gateway.log.read_text() and "Traceback" not in gateway.log.read_text()


@needs_kcat
def test_readme_security_example_starts_and_serves(certs, tmp_path):
    # The README's server.properties, with this test's files and free ports, serves SCRAM over SASL_SSL and
    # mTLS (the mapped principal, alice) to kcat.
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Security: TLS and SASL"):]
    start = section.index("```\n") + 4
    example = section[start:section.index("\n```", start)]
    assert "listeners=SASL_SSL://" in example
    ports = {port: str(_free_port()) for port in ("9092", "9093", "9094", "9095")}
    files = {"/etc/logway/server.pem": certs["server_encrypted"], "/etc/logway/ca.pem": certs["ca"],
             "/var/lib/logway": str(tmp_path / "data")}
    for old, new in [*files.items(), *((f"127.0.0.1:{p}", f"127.0.0.1:{n}") for p, n in ports.items())]:
        example = example.replace(old, new)
    config = tmp_path / "server.properties"
    config.write_text(example + "\n")
    subprocess.run([sys.executable, "-m", "logway.cli", "users", "add", "--config", str(config), "--user", "alice",
                    "--password", "alice-secret"], check=True, timeout=60)
    proc = subprocess.Popen([sys.executable, "-m", "logway.cli", "serve", "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        scram = {"bootstrap.servers": f"127.0.0.1:{ports['9094']}", "security.protocol": "SASL_SSL",
                 "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "alice-secret",
                 "ssl.ca.location": certs["ca"]}
        for _ in range(20):
            out = _kcat(scram, "-L", "-m", "1")
            if out.returncode == 0 or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert out.returncode == 0, out.stderr
        mtls = {"bootstrap.servers": f"127.0.0.1:{ports['9093']}", "security.protocol": "SSL",
                "ssl.ca.location": certs["ca"], "ssl.certificate.location": certs["client"],
                "ssl.key.location": certs["client_key"]}
        assert _kcat(mtls, "-L", "-m", "5").returncode == 0
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr
