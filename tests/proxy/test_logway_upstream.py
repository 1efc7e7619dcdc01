"""`logway proxy` in front of a Logway broker process, with real clients: everything a client does works
through the proxy's ports, and no client ever sees the upstream's port."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic as KpNewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.procs import recv_exact  # noqa: E402
from compat_tests.kafka.wire_client import request_frame  # noqa: E402
from logway.proxy.frames import decode_response  # noqa: E402
from logway.wire.protocol import build, encode_body, request_type  # noqa: E402


def _confluent_roundtrip(bootstrap: str, topic: str, upstream_port: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 3, 1)]).values():
        future.result(15)
    metadata = admin.list_topics(timeout=10)
    assert {(b.host, b.port) for b in metadata.brokers.values()} == {("127.0.0.1", int(bootstrap.split(":")[1]) + 2)}
    assert all(b.port != upstream_port for b in metadata.brokers.values())
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(300):
        producer.produce(topic, key=str(i % 7).encode(), value=f"v{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-g", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 300 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.commit(asynchronous=False)
    committed = consumer.committed(consumer.assignment(), timeout=10)
    consumer.close()
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(300))
    assert sum(max(tp.offset, 0) for tp in committed) == 300  # a partition no key went to has none
    for future in admin.delete_topics([topic]).values():
        future.result(15)
    assert topic not in admin.list_topics(timeout=10).topics


def test_confluent_kafka_through_proxy(proxy, logway_upstream, topic_name):
    _confluent_roundtrip(proxy.bootstrap, topic_name, logway_upstream.port)


def test_kafka_python_through_proxy(proxy, logway_upstream, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=proxy.bootstrap)
    admin.create_topics([KpNewTopic(topic_name, 2, 1)])
    brokers = admin.describe_cluster()["brokers"]
    assert [(b["broker_id"], b["host"], b["port"]) for b in brokers] == [(1, "127.0.0.1", proxy.node_port(1))]
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, enable_idempotence=True, acks="all")
    for i in range(200):
        producer.send(topic_name, f"m{i}".encode())
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(topic_name, bootstrap_servers=proxy.bootstrap, group_id=f"{topic_name}-g",
                             auto_offset_reset="earliest", consumer_timeout_ms=15000, enable_auto_commit=False)
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 200:
            break
    consumer.commit()
    consumer.close()
    assert sorted(values) == sorted(f"m{i}".encode() for i in range(200))
    admin.delete_topics([topic_name])
    admin.close()


def _frame(api_key: int, version: int, fields: dict, correlation_id: int) -> bytes:
    return request_frame(api_key, version, encode_body(build(request_type(api_key, version), fields)), correlation_id)


def _read(sock: socket.socket) -> bytes:
    """One whole frame's bytes after its size prefix."""
    return recv_exact(sock, struct.unpack(">i", recv_exact(sock, 4))[0])


def test_pipelined_requests_with_repeated_correlation_ids_are_answered_in_order(proxy, logway_upstream):
    """Clients pipeline, and nothing makes their correlation ids unique: the proxy renumbers upstream and
    answers in request order with the client's own ids; Metadata names the proxy's port, not the upstream's."""
    metadata = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
                "include_cluster_authorized_operations": False}
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(_frame(18, 3, {"client_software_name": "t", "client_software_version": "1"}, 7)
                     + _frame(3, 12, metadata, 7) + _frame(3, 9, metadata, 7) + _frame(3, 12, metadata, 42))
        answers = [_read(sock) for _ in range(4)]
    assert [struct.unpack_from(">i", a)[0] for a in answers] == [7, 7, 7, 42]
    versions = decode_response(18, 3, answers[0])
    assert {k.api_key for k in versions.api_keys} >= {0, 1, 3, 18}
    assert not {17, 36} & {k.api_key for k in versions.api_keys}  # no SASL on a PLAINTEXT listener
    for answer, version in zip(answers[1:], (12, 9, 12), strict=True):
        brokers = decode_response(3, version, answer).brokers
        assert [(b.node_id, b.port) for b in brokers] == [(1, proxy.node_port(1))]


def test_many_pipelined_small_requests_are_answered_in_order_with_their_offsets(proxy, logway_upstream, topic_name):
    """A client that pipelines hundreds of small requests: the proxy sends the responses already received
    together, and each still arrives once, in request order, with the client's correlation id; the proxy's own
    ApiVersions answers keep their place between upstream answers, and the Produce offsets are consecutive."""
    from logway.wire.records import build_batch

    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    for future in admin.create_topics([NewTopic(topic_name, 1, 1)]).values():
        future.result(15)
    software = {"client_software_name": "t", "client_software_version": "1"}
    frames, expected = [], []
    for n in range(300):
        if n % 50 == 25:
            frames.append(_frame(18, 3, software, 10_000 + n))
            expected.append((10_000 + n, None))
        frames.append(_frame(0, 9, {"transactional_id": None, "acks": 1, "timeout": 10_000, "topic_data": [
            {"name": topic_name, "partition_data": [{"index": 0, "records": build_batch([(None, b"v%d" % n, ())])}]}]},
            n))
        expected.append((n, "produce"))
    with socket.create_connection(("127.0.0.1", proxy.node_port(1)), timeout=20) as sock:
        sock.sendall(b"".join(frames))
        answers = [_read(sock) for _ in expected]
    assert [struct.unpack_from(">i", a)[0] for a in answers] == [cid for cid, _ in expected]
    offsets = []
    for answer, (_, kind) in zip(answers, expected, strict=True):
        if kind == "produce":
            partition = decode_response(0, 9, answer).responses[0].partition_responses[0]
            assert partition.error_code == 0
            offsets.append(partition.base_offset)
        else:
            assert decode_response(18, 3, answer).error_code == 0
    assert offsets == list(range(300))


def test_unknown_api_key_closes_the_connection_with_a_log_line(proxy):
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 999, 0, 5, -1))
        assert sock.recv(100) == b""
    deadline = time.monotonic() + 5
    while "is not served by the proxy" not in proxy.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "unknown api key (999) is not served by the proxy" in proxy.log()


def test_oversized_frame_is_refused_before_any_read(proxy):
    with socket.create_connection(("127.0.0.1", proxy.node_port(1)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", 2**31 - 1) + b"\0" * 16)
        assert sock.recv(100) == b""


def test_upstream_sigkill_under_load_gives_retriable_errors_then_recovery(processes, topic_name):
    """A producer through the proxy keeps going while the upstream is killed and restarted on the same
    port and data: sends fail with retriable errors (never a hang), then succeed again; every acknowledged
    message is there afterwards."""
    upstream = processes["gateway"]("data", "--override", "node.id=1",
                                    "--override", "group.initial.rebalance.delay.ms=0").start()
    proxy = processes["proxy"](upstream.bootstrap).start()
    if True:
        proxy.wait_node_port(1)
        admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
        for future in admin.create_topics([NewTopic(topic_name, 1, 1)]).values():
            future.result(15)
        acked, failed = [], []

        def on_delivery(err, msg):
            (failed if err else acked).append(msg.value())

        producer = Producer({"bootstrap.servers": proxy.bootstrap, "acks": "all", "message.timeout.ms": 3000,
                             "retry.backoff.ms": 100, "socket.timeout.ms": 2000})
        killed_at = restarted_at = None
        started = time.monotonic()
        i = 0
        while time.monotonic() - started < 25 and i < 100_000:
            producer.produce(topic_name, f"{i}".encode(), on_delivery=on_delivery)
            i += 1
            producer.poll(0.002)
            now = time.monotonic()
            if killed_at is None and now - started > 1:
                upstream.stop("KILL")
                killed_at = now
            if killed_at is not None and restarted_at is None and now - killed_at > 3:
                upstream.start()
                restarted_at = now
                acked_before = len(acked)
            if restarted_at is not None and len(acked) > acked_before + 100:
                break
        print(f"killed at {killed_at - started:.1f}s, restarted at {restarted_at - started:.1f}s, "
              f"recovered at {time.monotonic() - started:.1f}s; {len(failed)} failed, {len(acked)} acked")
        producer.flush(15)
        assert failed, "no send failed while the upstream was down"
        assert restarted_at is not None and len(acked) > acked_before + 100, "no recovery after the restart"
        consumer = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": f"{topic_name}-check",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic_name])
        seen = set()
        deadline = time.monotonic() + 30
        while not set(acked) <= seen and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
        consumer.close()
        assert set(acked) <= seen, f"{len(set(acked) - seen)} acknowledged messages missing"


PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def test_sasl_plain_ends_at_the_proxy_which_authenticates_upstream_with_its_own_credentials(processes, topic_name):
    """Clients authenticate to the proxy (its listener's users); the proxy authenticates to a SASL upstream as
    itself. A wrong client password is refused by the proxy with Kafka's error."""
    sasl = ("--override", "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT",
            "--override", "sasl.enabled.mechanisms=PLAIN")
    upstream = processes["gateway"]("data", *sasl, "--override",
                                    f'listener.name.plaintext.plain.sasl.jaas.config={PLAIN} user_proxy="up-secret";',
                                    "--override", "group.initial.rebalance.delay.ms=0").start()
    proxy = processes["proxy"](
        upstream.bootstrap, *sasl,
        "--override", f'listener.name.plaintext.plain.sasl.jaas.config={PLAIN} user_alice="alice-secret";',
        "--override", "proxy.upstream.security.protocol=SASL_PLAINTEXT",
        "--override", f'proxy.upstream.sasl.jaas.config={PLAIN} username="proxy" password="up-secret";').start()
    proxy.wait_node_port(1)
    client = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    errors = _sasl_roundtrip_then_wrong_password(client, topic_name, 50)
    assert any("Authentication failed: Invalid username or password" in e.str() for e in errors), errors


def test_acls_at_the_proxy_apply_to_the_client_principal(processes, tmp_path, topic_name):
    """The proxy's authorizer (the gateway's, Kafka's StandardAuthorizer semantics) decides on the principal
    the client authenticated as at the proxy: alice may write and read one topic, not another; Metadata for
    all topics lists only what she may describe; a denied topic gets TOPIC_AUTHORIZATION_FAILED."""
    from logway.server.security.authorizer import AclBinding, Authorizer, Operation, PatternType, Permission

    upstream = processes["gateway"]("data", "--override", "node.id=1").start()
    allowed, denied = f"{topic_name}-ok", f"{topic_name}-no"
    admin = AdminClient({"bootstrap.servers": upstream.bootstrap})
    for future in admin.create_topics([NewTopic(allowed, 1, 1), NewTopic(denied, 1, 1)]).values():
        future.result(15)
    proxy = processes["proxy"](
        upstream.bootstrap, "--override", "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f'listener.name.plaintext.plain.sasl.jaas.config={PLAIN} user_alice="a-pw";',
        "--override", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    state = proxy.workdir / "state"
    state.mkdir(parents=True)
    acls = Authorizer()
    for operation in (Operation.WRITE, Operation.READ):
        acls.add(AclBinding(2, allowed, PatternType.LITERAL, "User:alice", "*", operation, Permission.ALLOW))
    acls.add(AclBinding(3, "*", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW))
    acls.save(state / "logway-acls.json")
    proxy.start()
    proxy.wait_node_port(1)
    alice = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "alice", "sasl.password": "a-pw"}
    listed = AdminClient(alice).list_topics(timeout=10).topics
    assert allowed in listed and denied not in listed
    outcomes: dict[str, list] = {allowed: [], denied: []}
    producer = Producer({**alice, "message.timeout.ms": 5000})
    for topic in (allowed, denied):
        for i in range(5):
            producer.produce(topic, f"{i}".encode(), on_delivery=lambda err, msg: outcomes[msg.topic()].append(err))
    producer.flush(15)
    assert outcomes[allowed] == [None] * 5
    assert outcomes[denied] and all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                                    for e in outcomes[denied])
    consumer = Consumer({**alice, "group.id": f"{topic_name}-g", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(allowed, 0, 0)])
    values = []
    deadline = time.monotonic() + 15
    while len(values) < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert sorted(values) == [f"{i}".encode() for i in range(5)]


def test_large_produce_and_fetch_frames_pass_through_intact(proxy, topic_name):
    """Frames beyond the proxy's small-frame path (64 KiB): Produce batches and Fetch responses of MBs."""
    import hashlib

    values = [hashlib.sha256(str(i).encode()).digest() * 2000 for i in range(120)]  # 64,000 B each
    failed = []
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 50})  # batches up to 1 MB
    for value in values:
        producer.produce(topic_name, value, on_delivery=lambda err, _: err and failed.append(err))
    assert producer.flush(30) == 0 and not failed
    consumer = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": f"{topic_name}-g",
                         "auto.offset.reset": "earliest", "fetch.max.bytes": 8 << 20})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == values


def test_version_beyond_the_advertised_range_closes_the_connection_with_a_log_line(proxy):
    with socket.create_connection(("127.0.0.1", proxy.node_port(1)), timeout=10) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 0, 99, 6, -1))  # Produce v99
        assert sock.recv(100) == b""
    deadline = time.monotonic() + 5
    while "produce v99 is not supported by the proxy" not in proxy.log().lower() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "produce v99 is not supported by the proxy" in proxy.log().lower()
    assert "internal error" not in proxy.log()


def test_tls_to_the_proxy_and_tls_to_the_upstream(processes, tmp_path, topic_name):
    """Client TLS ends at the proxy (the gateway's TLS listener code); the proxy opens its own TLS connections
    to an SSL upstream, trusting the upstream's CA from proxy.upstream.ssl.truststore.location."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
    from tls_certs import make_certs

    certs = make_certs(tmp_path)
    tls = ("--override", "listener.security.protocol.map=PLAINTEXT:SSL", "--override", "ssl.keystore.type=PEM",
           "--override", f"ssl.keystore.location={certs['server']}")
    upstream = processes["gateway"]("data", *tls, "--override", "node.id=1").start()
    proxy = processes["proxy"](upstream.bootstrap, *tls, "--override", "proxy.upstream.security.protocol=SSL",
                               "--override", f"proxy.upstream.ssl.truststore.location={certs['ca']}",
                               # the test certificate names localhost; the brokers are addressed by IP
                               "--override", "proxy.upstream.ssl.endpoint.identification.algorithm=").start()
    proxy.wait_node_port(1)
    client = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SSL", "ssl.ca.location": certs["ca"],
              "ssl.endpoint.identification.algorithm": "none"}
    producer = Producer(client)
    for i in range(20):
        producer.produce(topic_name, f"t{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**client, "group.id": f"{topic_name}-g", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    values = []
    deadline = time.monotonic() + 15
    while len(values) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert values == [f"t{i}".encode() for i in range(20)]


def test_sasl_scram_sha_256_ends_at_the_proxy(processes, topic_name):
    """Clients authenticate to the proxy with SCRAM-SHA-256 against the proxy's own SCRAM users (the
    gateway's credential store in the proxy's log.dirs, `logway users add`); the upstream is PLAINTEXT."""
    upstream = processes["gateway"]("data", "--override", "group.initial.rebalance.delay.ms=0").start()
    proxy = processes["proxy"](upstream.bootstrap,
                               "--override", "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT",
                               "--override", "sasl.enabled.mechanisms=SCRAM-SHA-256")
    subprocess.run([sys.executable, "-m", "logway.cli", "users", "add", "--log-dirs",
                    str(proxy.workdir / "state"), "--user", "alice", "--password", "alice-secret",
                    "--mechanism", "SCRAM-SHA-256"], check=True, timeout=60)
    proxy.start().wait_node_port(1)
    client = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "alice-secret"}
    errors = _sasl_roundtrip_then_wrong_password(client, topic_name, 10)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def _sasl_roundtrip_then_wrong_password(client: dict, topic: str, count: int) -> list[KafkaError]:
    """Create ``topic``, produce ``count`` records and read them back in a group as the SASL client ``client``;
    then the errors a producer with a wrong password gets (until an authentication error, at most 10 s)."""
    admin = AdminClient(client)  # held: a dropped AdminClient fails its futures with _DESTROY
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer(client)
    for i in range(count):
        producer.produce(topic, f"s{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**client, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + 20
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert sorted(values) == sorted(f"s{i}".encode() for i in range(count))
    errors: list[KafkaError] = []
    wrong = Producer({**client, "sasl.password": "nope", "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        wrong.poll(0.25)
    return errors


def _fetch_request(version: int, topic_id, max_bytes: int = 8 << 20) -> dict:
    return {"replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "topic": None, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 4 << 20} for p in range(2)]}]}


def test_large_fetch_responses_streamed_by_the_proxy_are_the_bytes_the_broker_sent(proxy, logway_upstream,
                                                                                  topic_name):
    """Fetch responses beyond 64 KiB are streamed (record data spliced socket to socket): at the version
    librdkafka uses (v16, walked to its tagged fields) and an older one (v11, forwarded unwalked), the client
    gets byte for byte what the broker sends a direct client."""
    import hashlib

    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    for future in admin.create_topics([NewTopic(topic_name, 2, 1)]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 20})
    for i in range(400):
        producer.produce(topic_name, hashlib.sha256(str(i).encode()).digest() * 100, partition=i % 2)
    assert producer.flush(30) == 0
    metadata = {"topics": [{"name": topic_name, "topic_id": None}], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False}
    with socket.create_connection(("127.0.0.1", logway_upstream.port), timeout=10) as sock:
        sock.sendall(_frame(3, 12, metadata, 1))
        topic_id = decode_response(3, 12, _read(sock)).topics[0].topic_id
    for version in (16, 11):
        fields = _fetch_request(version, topic_id if version >= 13 else None)
        if version < 13:
            fields["topics"][0]["topic"] = topic_name
        answers = []
        for port in (logway_upstream.port, proxy.node_port(1)):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(_frame(1, version, fields, 5) + _frame(1, version, fields, 6))  # pipelined
                answers.append([_read(sock), _read(sock)])
        direct, proxied = answers
        assert len(direct[0]) > 200_000
        assert proxied == direct
        assert [struct.unpack_from(">i", a)[0] for a in proxied] == [5, 6]


def test_tls_client_gets_large_fetch_responses_through_the_buffered_path(processes, tmp_path, topic_name):
    """A TLS client socket cannot be spliced: large responses are read whole and encrypted as before."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
    from tls_certs import make_certs

    certs = make_certs(tmp_path)
    upstream = processes["gateway"]("data", "--override", "node.id=1").start()
    proxy = processes["proxy"](upstream.bootstrap, "--override", "listener.security.protocol.map=PLAINTEXT:SSL",
                               "--override", "ssl.keystore.type=PEM",
                               "--override", f"ssl.keystore.location={certs['server']}").start()
    proxy.wait_node_port(1)
    client = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SSL", "ssl.ca.location": certs["ca"],
              "ssl.endpoint.identification.algorithm": "none"}
    values = [bytes([i]) * 30_000 for i in range(40)]
    producer = Producer({**client, "linger.ms": 20})
    for value in values:
        producer.produce(topic_name, value)
    assert producer.flush(15) == 0
    consumer = Consumer({**client, "group.id": f"{topic_name}-g", "fetch.max.bytes": 4 << 20})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < len(values) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == values


def test_large_produce_requests_streamed_upstream_in_pieces_keep_their_order(proxy, logway_upstream, topic_name):
    """Produce requests beyond 64 KiB are streamed upstream as they arrive (the rest of the frame spliced
    socket to socket): one trickling in over several sends, an acks=0 one (never answered) and a Metadata
    request pipelined behind them are answered in order, and every record reaches the broker."""
    from logway.wire.records import build_batch, decode_batches

    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    for future in admin.create_topics([NewTopic(topic_name, 1, 1)]).values():
        future.result(15)
    values = [[bytes([n, i % 256]) * 1000 for i in range(150)] for n in range(2)]  # ~300 KB per request

    def produce(acks: int, batch: bytes, correlation_id: int) -> bytes:
        return _frame(0, 9, {"transactional_id": None, "acks": acks, "timeout": 10_000, "topic_data": [
            {"name": topic_name, "partition_data": [{"index": 0, "records": batch}]}]}, correlation_id)

    first = produce(1, build_batch([(None, v, ()) for v in values[0]]), 1)
    second = produce(0, build_batch([(None, v, ()) for v in values[1]]), 2)
    metadata = _frame(3, 12, {"topics": [{"name": topic_name, "topic_id": None}], "allow_auto_topic_creation": False,
                              "include_topic_authorized_operations": False,
                              "include_cluster_authorized_operations": False}, 3)
    with socket.create_connection(("127.0.0.1", proxy.node_port(1)), timeout=10) as sock:
        for piece in range(0, len(first), 100_000):  # the proxy streams a frame it has only the head of
            sock.sendall(first[piece:piece + 100_000])
            time.sleep(0.05)
        sock.sendall(second + metadata)
        answers = [_read(sock), _read(sock)]
    assert [struct.unpack_from(">i", a)[0] for a in answers] == [1, 3]
    produced = decode_response(0, 9, answers[0]).responses[0].partition_responses[0]
    assert (produced.error_code, produced.base_offset) == (0, 0)
    topic_id = decode_response(3, 12, answers[1]).topics[0].topic_id
    fetch = _fetch_request(16, topic_id)
    fetch["topics"][0]["partitions"] = fetch["topics"][0]["partitions"][:1]
    deadline, got = time.monotonic() + 10, []
    while len(got) < 300 and time.monotonic() < deadline:  # the acks=0 batch is appended a little later
        with socket.create_connection(("127.0.0.1", logway_upstream.port), timeout=10) as sock:
            sock.sendall(_frame(1, 16, fetch, 9))
            records = decode_response(1, 16, _read(sock)).responses[0].partitions[0].records
        got = [r.value for b in decode_batches(records) for r in b.records]
    assert got == values[0] + values[1]
