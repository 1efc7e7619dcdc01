"""Two tenants behind one proxy, tried as an attacker would (issue 24): tenant A (listener TENANT_A, user alice)
against tenant B (listener TENANT_B, user bob), each a virtual cluster with its own SCRAM users. Every attempt is
checked from the victim's side (nothing read, nothing changed) and in the proxy's log (no traceback).

Raw requests where a client library would never send them: another tenant's fetch session id, another's producer
id in a batch, a topic id with a null name."""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logway.proxy.frames import NO_START_TIME, decode_response
from logway.server.security.scram import ScramClient
from logway.wire.errors import ErrorCode
from logway.wire.records import build_batch
from tests.gateway.raw_requests import exchange, read_frame, request_frame

NODE = 1  # the upstream's node.id (tests/proxy/conftest.py)
SPAN = 12  # ports per listener: the bootstrap port, then node N on + 1 + N (node ids 0-9)
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"
USERS = {"a": ("alice", "alice-pw"), "b": ("bob", "bob-pw")}


class Tenants:
    def __init__(self, ports: dict[str, int], log_path, props) -> None:
        self.ports = ports
        self.log_path = log_path
        self.props = props

    def bootstrap(self, tenant: str) -> str:
        return f"127.0.0.1:{self.ports[tenant]}"

    def node_port(self, tenant: str) -> int:
        return self.ports[tenant] + 1 + NODE

    def scram(self, tenant: str, user: str | None = None) -> dict:
        name, password = USERS[tenant] if user is None else (user, USERS[user][1])
        return {"bootstrap.servers": self.bootstrap(tenant), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": name, "sasl.password": password}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def tenants(tmp_path_factory, logway_upstream) -> Iterator[Tenants]:
    """A proxy with virtual clusters a and b on SASL_PLAINTEXT listeners: PLAIN users per listener, SCRAM users
    per virtual cluster (made with `logway users --virtual-cluster`)."""
    from tests.proxy.conftest import add_scram_users, free_port_block, proxy_from_properties  # noqa: PLC0415

    base = free_port_block(2 * SPAN)
    ports = {"a": base, "b": base + SPAN}
    workdir = tmp_path_factory.mktemp("confinement")
    props = workdir / "proxy.properties"
    props.write_text(
        f"listeners=TENANT_A://127.0.0.1:{ports['a']},TENANT_B://127.0.0.1:{ports['b']}\n"
        "listener.security.protocol.map=TENANT_A:SASL_PLAINTEXT,TENANT_B:SASL_PLAINTEXT\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n"
        f'listener.name.tenant_a.plain.sasl.jaas.config={PLAIN} user_alice="alice-pw";\n'
        f'listener.name.tenant_b.plain.sasl.jaas.config={PLAIN} user_bob="bob-pw";\n'
        f"log.dirs={workdir / 'state'}\n"
        f"proxy.upstream.bootstrap.servers={logway_upstream.bootstrap}\n"
        "proxy.node.id.range=0-9\nproxy.metadata.refresh.interval.ms=1000\n"
        "proxy.virtual.clusters=a,b\n"
        "proxy.virtual.cluster.a.listener=TENANT_A\nproxy.virtual.cluster.a.topic.prefix=tenant-a.\n"
        "proxy.virtual.cluster.b.listener=TENANT_B\nproxy.virtual.cluster.b.topic.prefix=tenant-b.\n")
    add_scram_users(props, USERS)
    log_path = workdir / "proxy.log"
    with proxy_from_properties(workdir, props.read_text(), [p + skip for p in ports.values() for skip in (0, 1 + NODE)]):
        yield Tenants(ports, log_path, props)
    assert "Traceback" not in log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def secret(tenants) -> dict:
    """Tenant B's topic `secret` holding one record, with its upstream topic id."""
    admin = AdminClient(tenants.scram("b"))
    admin.create_topics([NewTopic("secret", 1, 1)])["secret"].result(15)
    producer = Producer({**tenants.scram("b"), "acks": "all"})
    producer.produce("secret", b"b's record")
    assert producer.flush(15) == 0
    with _client(tenants, "b") as s:
        metadata = exchange(s, 3, 12, {"topics": [{"name": "secret"}], "allow_auto_topic_creation": False})
    return {"topic_id": metadata.topics[0].topic_id}


def _client(tenants: Tenants, tenant: str, user: str | None = None, port: int | None = None) -> socket.socket:
    """A raw connection to ``tenant``'s bootstrap (or ``port``), logged in with PLAIN as its user (or ``user``)."""
    s = socket.create_connection(("127.0.0.1", port or tenants.ports[tenant]), timeout=15)
    name, password = USERS[user or tenant]
    assert exchange(s, 17, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
    answer = exchange(s, 36, 2, {"auth_bytes": b"\0" + name.encode() + b"\0" + password.encode()})
    assert answer.error_code == ErrorCode.none, answer
    return s


def _fetch(s: socket.socket, session_id: int, epoch: int, topic_id: uuid.UUID | None = None):
    topics = [] if topic_id is None else [{"topic_id": topic_id, "partitions": [
        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "log_start_offset": -1}]}]
    return exchange(s, 1, 16, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                               "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
                               "topics": topics, "forgotten_topics_data": [], "rack_id": ""})


def test_a_tenants_scram_user_cannot_log_in_on_another_tenants_listener(tenants):
    """Each virtual cluster authenticates against its own users: alice is a SCRAM user of a only."""
    assert "secret" not in AdminClient(tenants.scram("a")).list_topics(timeout=15).topics  # she logs in on a
    assert _scram_login(tenants.ports["a"], "alice") == ErrorCode.none
    for port in (tenants.ports["b"], tenants.node_port("b")):  # b's bootstrap and its broker's port
        assert _scram_login(port, "alice") == ErrorCode.sasl_authentication_failed
    assert "failed authentication" in tenants.log().lower()


def _scram_login(port: int, user: str) -> int:
    """A SCRAM-SHA-256 login as ``user`` with its password: the last SaslAuthenticate's error code."""
    client = ScramClient("SCRAM-SHA-256", user, dict(USERS.values())[user])
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        assert exchange(s, 17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == ErrorCode.none
        first = exchange(s, 36, 2, {"auth_bytes": client.first()})
        if first.error_code:
            return first.error_code
        return exchange(s, 36, 2, {"auth_bytes": client.final(bytes(first.auth_bytes))}).error_code


def test_another_tenants_fetch_session_is_not_there(tenants, secret):
    """B's session answers A exactly as a session never issued, whatever the epoch; A cannot close it."""
    with _client(tenants, "b", port=tenants.node_port("b")) as b:
        created = _fetch(b, 0, 0, secret["topic_id"])
        assert created.error_code == ErrorCode.none and created.session_id
        session = created.session_id
        with _client(tenants, "a", port=tenants.node_port("a")) as a:
            for epoch in (1, 2, 1000):
                stolen = _fetch(a, session, epoch)
                assert (stolen.error_code, stolen.responses) == (ErrorCode.fetch_session_id_not_found, ())
            never = _fetch(a, 0x7FFF_FFF0 if session != 0x7FFF_FFF0 else 1, 1)
            assert never.error_code == ErrorCode.fetch_session_id_not_found
            closed = _fetch(a, session, -1)  # "close it": forwarded as a sessionless fetch of nothing
            assert closed.error_code == ErrorCode.none and closed.session_id == 0
        going_on = _fetch(b, session, 1)
        assert (going_on.error_code, going_on.session_id) == (ErrorCode.none, session)


def test_another_tenants_producer_id_cannot_be_written_with(tenants, secret):
    """A producer id handed to B, in a batch A sends, is refused before it reaches the upstream."""
    admin = AdminClient(tenants.scram("a"))
    admin.create_topics([NewTopic("mine", 1, 1)])["mine"].result(15)
    with _client(tenants, "b") as b:
        issued = exchange(b, 22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                     "producer_id": -1, "producer_epoch": -1})
        assert issued.error_code == ErrorCode.none
    batch = build_batch([(None, b"forged", ())], base_timestamp=0, producer_id=issued.producer_id,
                        producer_epoch=issued.producer_epoch, base_sequence=0)
    with _client(tenants, "a", port=tenants.node_port("a")) as a:
        a.sendall(request_frame(0, 9, {"transactional_id": None, "acks": -1, "timeout": 15000, "topic_data": [
            {"name": "mine", "partition_data": [{"index": 0, "records": bytes(batch)}]}]}))
        answer = decode_response(0, 9, read_frame(a))
    (partition,) = answer.responses[0].partition_responses
    assert partition.error_code == ErrorCode.invalid_producer_id_mapping


def test_a_topic_id_with_a_null_name_is_answered_not_crashed_on(tenants, secret):
    """Metadata v10 naming B's topic id with a null name: UNKNOWN_TOPIC_ID, a well-formed answer, no traceback."""
    with _client(tenants, "a") as a:
        answer = exchange(a, 3, 10, {"topics": [{"topic_id": secret["topic_id"], "name": None}],
                                     "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert [t.error_code for t in answer.topics] == [ErrorCode.unknown_topic_id]
    assert "internal error" not in tenants.log()


def test_a_transaction_not_ongoing_is_described(tenants):
    """DescribeTransactions of the tenant's own transactional id with no transaction open: its start time is
    Kafka's -1, read and sent back as such (it used to close the connection)."""
    producer = Producer({**tenants.scram("a"), "transactional.id": "txn-idle"})
    producer.init_transactions(15)
    with _client(tenants, "a") as a:
        a.sendall(request_frame(65, 0, {"transactional_ids": ["txn-idle"]}))
        frame = read_frame(a)
    assert struct.pack(">q", -1) in frame  # as the upstream sent it
    (state,) = decode_response(65, 0, frame).transaction_states
    assert (state.error_code, state.transactional_id, state.transaction_state) == (0, "txn-idle", "Empty")
    assert state.transaction_start_time == NO_START_TIME


def test_a_listing_pages_over_the_tenants_own_topics(tenants):
    """DescribeTopicPartitions one partition a page: every page is the tenant's (tenant-a. sorts first: b's
    listing used to start on a's topics, which the proxy dropped with the cursor)."""
    admin = AdminClient(tenants.scram("b"))
    for future in admin.create_topics([NewTopic("p1", 1, 1), NewTopic("p2", 1, 1)]).values():
        future.result(15)
    other = AdminClient(tenants.scram("a"))
    other.create_topics([NewTopic("p0", 1, 1)])["p0"].result(15)
    seen, cursor = [], None
    with _client(tenants, "b") as b:
        for _ in range(10):
            page = exchange(b, 75, 0, {"topics": [], "response_partition_limit": 1, "cursor": cursor})
            seen += [t.name for t in page.topics]
            if page.next_cursor is None:
                break
            cursor = {"topic_name": page.next_cursor.topic_name, "partition_index": page.next_cursor.partition_index}
    assert {"p1", "p2"} <= set(seen) and not any(name.startswith("tenant-") for name in seen)


def test_a_regex_with_inline_flags_is_taken(tenants):
    """ListTransactions v2 with `(?i)` opening its pattern works as it does direct."""
    with _client(tenants, "a") as a:
        answer = exchange(a, 66, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                     "transactional_id_pattern": "(?i)TXN-.*"})
    assert answer.error_code == ErrorCode.none
    assert all(not t.transactional_id.startswith("tenant-") for t in answer.transaction_states)


def test_the_virtual_clusters_users_are_managed_through_its_listener(tenants):
    """DescribeUserScramCredentials through a's listener lists a's users only, answered by the proxy."""
    with _client(tenants, "a") as a:
        answer = exchange(a, 50, 0, {"users": None})
    assert [u.user for u in answer.results] == ["alice"]
