"""Each API's authorization answer, request by request: with ACLs on and none granting anything
(allow.everyone.if.no.acl.found=false, Kafka's default), every API answers the error Kafka's KafkaApis answers."""

from __future__ import annotations

import datetime
import socket

import pytest
from raw_requests import exchange

from logway.gateway.in_process import InProcessGateway
from logway.wire.errors import ErrorCode

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
S = datetime.timedelta(seconds=10)
E = ErrorCode





@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = InProcessGateway(tmp_path_factory.mktemp("acl-requests"), AUTHORIZER).start()
    yield gw
    gw.stop()


TOPIC_PARTS = [{"name": "t", "partitions": [{"partition_index": 0}]}]

CASES = [
    # SCRAM credentials: DESCRIBE / ALTER on the cluster (KafkaApis.handleDescribe/AlterUserScramCredentialsRequest).
    ("DescribeUserScramCredentials", 50, 0, {"users": None}, lambda r: r.error_code, E.cluster_authorization_failed),
    ("AlterUserScramCredentials", 51, 0, {"deletions": [{"name": "u", "mechanism": 1}], "upsertions": []},
     lambda r: [x.error_code for x in r.results], [E.cluster_authorization_failed]),
    # Anyone may describe the cluster (AuthHelper.computeDescribeClusterResponse); its operations need DESCRIBE.
    ("DescribeCluster", 60, 0, {"include_cluster_authorized_operations": True},
     lambda r: (r.error_code, r.cluster_authorized_operations), (E.none, 0)),
    ("FindCoordinator v3", 10, 3, {"key": "g", "key_type": 0}, lambda r: r.error_code, E.group_authorization_failed),
    ("FindCoordinator v4", 10, 4, {"key_type": 0, "coordinator_keys": ["g"]},
     lambda r: r.coordinators[0].error_code, E.group_authorization_failed),
    ("FindCoordinator txn", 10, 4, {"key_type": 1, "coordinator_keys": ["tx"]},
     lambda r: r.coordinators[0].error_code, E.transactional_id_authorization_failed),
    ("JoinGroup", 11, 7, {"group_id": "g", "session_timeout": S, "rebalance_timeout": S, "member_id": "",
                          "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]},
     lambda r: r.error_code, E.group_authorization_failed),
    ("SyncGroup", 14, 5, {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []},
     lambda r: r.error_code, E.group_authorization_failed),
    ("Heartbeat", 12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"},
     lambda r: r.error_code, E.group_authorization_failed),
    ("LeaveGroup", 13, 4, {"group_id": "g", "members": [{"member_id": "m"}]},
     lambda r: r.error_code, E.group_authorization_failed),
    ("OffsetCommit", 8, 8, {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                             "committed_metadata": ""}]}]},
     lambda r: r.topics[0].partitions[0].error_code, E.group_authorization_failed),
    ("OffsetFetch v7", 9, 7, {"group_id": "g", "topics": None}, lambda r: r.error_code, E.group_authorization_failed),
    ("OffsetFetch v8", 9, 8, {"groups": [{"group_id": "g", "topics": None}]},
     lambda r: r.groups[0].error_code, E.group_authorization_failed),
    ("DescribeGroups", 15, 5, {"groups": ["g"], "include_authorized_operations": False},
     lambda r: r.groups[0].error_code, E.group_authorization_failed),
    ("DeleteGroups", 42, 2, {"groups_names": ["g"]}, lambda r: r.results[0].error_code, E.group_authorization_failed),
    ("OffsetDelete", 47, 0, {"group_id": "g", "topics": TOPIC_PARTS}, lambda r: r.error_code,
     E.group_authorization_failed),
    ("InitProducerId", 22, 4, {"transactional_id": None, "transaction_timeout": S},
     lambda r: r.error_code, E.cluster_authorization_failed),
    ("InitProducerId txn", 22, 4, {"transactional_id": "tx", "transaction_timeout": S},
     lambda r: (r.error_code, r.producer_id), (E.transactional_id_authorization_failed, -1)),
    ("AddOffsetsToTxn", 25, 3, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "group_id": "g"},
     lambda r: r.error_code, E.transactional_id_authorization_failed),
    ("EndTxn", 26, 3, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "committed": True},
     lambda r: r.error_code, E.transactional_id_authorization_failed),
    ("TxnOffsetCommit", 28, 3, {"transactional_id": "tx", "group_id": "g", "producer_id": 1, "producer_epoch": 0,
                                "generation_id": -1, "member_id": "", "topics": [
                                    {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                  "committed_metadata": ""}]}]},
     lambda r: r.topics[0].partitions[0].error_code, E.transactional_id_authorization_failed),
    ("DescribeLogDirs", 35, 4, {"topics": None}, lambda r: r.error_code, E.cluster_authorization_failed),
    ("AlterPartitionReassignments", 45, 0, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [1]}]}]},
     lambda r: (r.error_code, r.responses[0].partitions[0].error_code), (E.cluster_authorization_failed,) * 2),
    ("DeleteRecords", 21, 2, {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 1}]}],
                              "timeout": S},
     lambda r: r.topics[0].partitions[0].error_code, E.topic_authorization_failed),
    ("DescribeProducers", 61, 0, {"topics": [{"name": "t", "partition_indexes": [0]}]},
     lambda r: r.topics[0].partitions[0].error_code, E.topic_authorization_failed),
    ("ElectLeaders", 43, 2, {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}],
                             "timeout": S},
     lambda r: (r.error_code, r.replica_election_results[0].partition_result[0].error_code),
     (E.cluster_authorization_failed,) * 2),
    ("DescribeTransactions", 65, 0, {"transactional_ids": ["tx"]},
     lambda r: r.transaction_states[0].error_code, E.transactional_id_authorization_failed),
    ("ListPartitionReassignments", 46, 0, {"topics": None}, lambda r: r.error_code, E.cluster_authorization_failed),
    ("ListOffsets", 2, 7, {"replica_id": -1, "isolation_level": 0,
                           "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
     lambda r: r.topics[0].partitions[0].error_code, E.topic_authorization_failed),
    ("Fetch", 1, 12, {"replica_id": -1, "max_wait": datetime.timedelta(0), "min_bytes": 1, "max_bytes": 1 << 20,
                      "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                 "partition_max_bytes": 1 << 20}]}],
                      "forgotten_topics_data": []},
     lambda r: r.responses[0].partitions[0].error_code, E.topic_authorization_failed),
    ("OffsetForLeaderEpoch", 23, 4, {"replica_id": -1, "topics": [{"topic": "t", "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
     lambda r: r.topics[0].partitions[0].error_code, E.topic_authorization_failed),
    ("Metadata named", 3, 12, {"topics": [{"name": "t", "topic_id": None}], "allow_auto_topic_creation": True,
                                "include_topic_authorized_operations": False},
     lambda r: r.topics[0].error_code, E.topic_authorization_failed),
    ("CreateTopics", 19, 7, {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}],
                             "timeout": S, "validate_only": False},
     lambda r: r.topics[0].error_code, E.topic_authorization_failed),
    ("DeleteTopics", 20, 5, {"topic_names": ["t"], "timeout": S},
     lambda r: r.responses[0].error_code, E.topic_authorization_failed),
    ("CreatePartitions", 37, 3, {"topics": [{"name": "t", "count": 2, "assignments": None}], "timeout": S, "validate_only": False},
     lambda r: r.results[0].error_code, E.topic_authorization_failed),
    ("DescribeConfigs broker", 32, 4, {"resources": [{"resource_type": 4, "resource_name": "1",
                                                      "configuration_keys": None}]},
     lambda r: r.results[0].error_code, E.cluster_authorization_failed),
    ("DescribeAcls", 29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
     lambda r: r.error_code, E.cluster_authorization_failed),
    ("CreateAcls", 30, 3, {"creations": [{"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
                                          "principal": "User:x", "host": "*", "operation": 3, "permission_type": 3}]},
     lambda r: r.results[0].error_code, E.cluster_authorization_failed),
    ("DeleteAcls", 31, 3, {"filters": [{"resource_type_filter": 1, "resource_name_filter": None,
                                        "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                                        "operation": 1, "permission_type": 1}]},
     lambda r: r.filter_results[0].error_code, E.cluster_authorization_failed),
]


@pytest.mark.parametrize(("name", "api_key", "version", "data", "field", "expected"), CASES, ids=[c[0] for c in CASES])
def test_unauthorized_request_gets_kafkas_error(gateway, name, api_key, version, data, field, expected):
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        assert field(exchange(s, api_key, version, data)) == expected


def test_metadata_for_all_topics_lists_none_the_principal_may_not_describe(gateway):
    gateway.broker.logs.create_topic("hidden", 1)
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        response = exchange(s, 3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
    assert response.topics == ()


def test_delete_topics_by_id_does_not_reveal_the_name_without_describe(gateway):
    topic = gateway.broker.logs.create_topic("secret-by-id", 1)
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        response = exchange(s, 20, 6, {"topics": [{"name": None, "topic_id": topic.topic_id}], "timeout": S})
    assert (response.responses[0].name, response.responses[0].error_code) == (None, E.topic_authorization_failed)
    assert "secret-by-id" in gateway.broker.logs.topics


def test_an_acl_filter_with_unknown_elements_closes_the_connection(gateway):
    """Kafka's DescribeAclsRequest refuses UNKNOWN (0) elements while parsing: the connection is closed."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        with pytest.raises(ConnectionError):
            exchange(s, 29, 3, {"resource_type_filter": 0, "resource_name_filter": None, "pattern_type_filter": 1,
                                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})


def test_authorized_operations_are_kafkas_bitfields(tmp_path):
    """AuthHelper.authorizedOperations: without an authorizer every supported operation; with ACLs the allowed
    ones (READ on a topic implies DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS)."""
    topic_ops = {3, 4, 5, 6, 7, 8, 10, 11}  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
    cluster_ops = {5, 7, 8, 9, 10, 11, 12}
    metadata = {"topics": [{"name": "ops", "topic_id": None}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": True, "include_topic_authorized_operations": True}

    def bits(value: int) -> set[int]:
        return {i for i in range(32) if value >> i & 1}

    plain = InProcessGateway(tmp_path / "plain").start()
    try:
        plain.broker.logs.create_topic("ops", 1)
        with socket.create_connection(("127.0.0.1", plain.port), timeout=10) as s:
            response = exchange(s, 3, 10, metadata)
            assert bits(response.topics[0].topic_authorized_operations) == topic_ops
            assert bits(response.cluster_authorized_operations) == cluster_ops
    finally:
        plain.stop()
    creations = [{"resource_type": rt, "resource_name": name, "resource_pattern_type": 3,
                  "principal": "User:ANONYMOUS", "host": "*", "operation": op, "permission_type": 3}
                 for rt, name, op in ((2, "ops", 3), (2, "ops", 11), (4, "kafka-cluster", 8))]
    admin = InProcessGateway(tmp_path / "secured", {**AUTHORIZER, "super.users": "User:ANONYMOUS"}).start()
    try:
        admin.broker.logs.create_topic("ops", 1)
        with socket.create_connection(("127.0.0.1", admin.port), timeout=10) as s:
            assert [r.error_code for r in exchange(s, 30, 3, {"creations": creations}).results] == [E.none] * 3
    finally:
        admin.stop()
    secured = InProcessGateway(tmp_path / "secured", AUTHORIZER).start()
    try:
        with socket.create_connection(("127.0.0.1", secured.port), timeout=10) as s:
            response = exchange(s, 3, 10, metadata)
            assert bits(response.topics[0].topic_authorized_operations) == {3, 8, 10, 11}
            assert bits(response.cluster_authorized_operations) == {8}
    finally:
        secured.stop()
