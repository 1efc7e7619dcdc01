"""Two principals on one broker under ACLs, tried as an attacker would (issue 24): alice and mallory may both
read and write topic `shared`, yet what alice was handed (her fetch session, her producer id) is hers. Raw
requests, where a client library would never send another's ids."""

from __future__ import annotations

import socket

import pytest

from logway.gateway.in_process import InProcessGateway
from logway.server.security.authorizer import AclBinding, Authorizer, Operation, PatternType, Permission
from logway.wire.errors import ErrorCode
from logway.wire.records import build_batch
from tests.gateway.raw_requests import exchange

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"
USERS = {"alice": "alice-pw", "mallory": "mallory-pw"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("confinement")
    acls = Authorizer()
    for user in USERS:
        acls.add(AclBinding(2, "shared", PatternType.LITERAL, f"User:{user}", "*", Operation.ALL, Permission.ALLOW))
        acls.add(AclBinding(4, "kafka-cluster", PatternType.LITERAL, f"User:{user}", "*", Operation.IDEMPOTENT_WRITE,
                            Permission.ALLOW))
        acls.add(AclBinding(4, "kafka-cluster", PatternType.LITERAL, f"User:{user}", "*", Operation.CREATE,
                            Permission.ALLOW))
    acls.save(data / "logway-acls.json")
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    gw = InProcessGateway(data, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f"{PLAIN} {users};",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}).start()
    try:
        with _client(gw, "alice") as s:
            created = exchange(s, 19, 5, {"topics": [{"name": "shared", "num_partitions": 1, "replication_factor": 1,
                                                      "assignments": [], "configs": []}], "timeout": 15000})
            assert created.topics[0].error_code == ErrorCode.none
        yield gw
    finally:
        gw.stop()


def _client(gw: InProcessGateway, user: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=15)
    assert exchange(s, 17, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
    token = b"\0" + user.encode() + b"\0" + USERS[user].encode()
    assert exchange(s, 36, 2, {"auth_bytes": token}).error_code == ErrorCode.none
    return s


def _produce(s: socket.socket, producer_id: int, epoch: int, sequence: int):
    batch = build_batch([(None, b"v", ())], base_timestamp=0, producer_id=producer_id, producer_epoch=epoch,
                        base_sequence=sequence)
    answer = exchange(s, 0, 9, {"transactional_id": None, "acks": -1, "timeout": 15000, "topic_data": [
        {"name": "shared", "partition_data": [{"index": 0, "records": bytes(batch)}]}]})
    return answer.responses[0].partition_responses[0]


def test_another_principals_producer_id_cannot_be_written_with(broker):
    """Mallory may write the topic, but not in alice's producer sequence (a batch she sent there would make
    alice's next one a "duplicate" the broker drops)."""
    with _client(broker, "alice") as alice, _client(broker, "mallory") as mallory:
        issued = exchange(alice, 22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                         "producer_id": -1, "producer_epoch": -1})
        assert issued.error_code == ErrorCode.none
        forged = _produce(mallory, issued.producer_id, issued.producer_epoch, 0)
        assert forged.error_code == ErrorCode.invalid_producer_id_mapping
        mine = _produce(alice, issued.producer_id, issued.producer_epoch, 0)
        assert (mine.error_code, mine.base_offset) == (ErrorCode.none, 0)  # her first batch: nothing came before


def test_another_principals_fetch_session_is_not_there(broker):
    with _client(broker, "alice") as alice, _client(broker, "mallory") as mallory:
        topic_id = exchange(alice, 3, 12, {"topics": [{"name": "shared"}],
                                           "allow_auto_topic_creation": False}).topics[0].topic_id
        fetch = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                 "forgotten_topics_data": [], "rack_id": ""}
        created = exchange(alice, 1, 16, {**fetch, "session_id": 0, "session_epoch": 0, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                                   "log_start_offset": -1}]}]})
        session = created.session_id
        assert created.error_code == ErrorCode.none and session
        for epoch in (1, 7):
            stolen = exchange(mallory, 1, 16, {**fetch, "session_id": session, "session_epoch": epoch, "topics": []})
            assert (stolen.error_code, stolen.responses) == (ErrorCode.fetch_session_id_not_found, ())
        exchange(mallory, 1, 16, {**fetch, "session_id": session, "session_epoch": -1, "topics": []})  # "close" it
        going_on = exchange(alice, 1, 16, {**fetch, "session_id": session, "session_epoch": 1, "topics": []})
        assert (going_on.error_code, going_on.session_id) == (ErrorCode.none, session)
