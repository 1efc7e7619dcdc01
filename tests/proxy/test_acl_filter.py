"""The proxy's ACL filter on kio requests and responses (sans-IO): per-topic denial in Produce and Fetch,
Metadata naming or listing topics, pipelined requests keeping their own denials; every checked API at every
version; groups, transactional ids, admin and cluster APIs with Kafka's error codes."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import typing
import uuid
from pathlib import Path

import pytest

from logway.proxy.api_versions import kio_range
from logway.proxy.filters.acl import AclFilter
from logway.proxy.filters.base import Answer, ClientInfo
from logway.server.security.authorizer import (
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from logway.server.security.request_acls import RULES, VERSION_CAPS, Acl, authorize_request
from logway.wire.protocol import build, encode_body, field_entity_of, request_type, response_type

ALICE = ClientInfo(principal="User:alice", host="127.0.0.1")
DENIED = 29  # TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = 30


@pytest.fixture
def acl() -> AclFilter:
    authorizer = Authorizer()
    for operation in (Operation.WRITE, Operation.READ):
        authorizer.add(AclBinding(2, "ok", PatternType.LITERAL, "User:alice", "*", operation, Permission.ALLOW))
    return AclFilter(authorizer, ALICE)


def _produce(topics):
    return build(request_type(0, 9), {"transactional_id": None, "acks": -1, "timeout": 1000, "topic_data": [
        {"name": t, "partition_data": [{"index": 0, "records": b""}, {"index": 1, "records": b""}]} for t in topics]})


def _produce_response(topics):
    return build(response_type(0, 9), {"throttle_time": 0, "responses": [
        {"name": t, "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 5, "log_append_time": -1,
                                              "log_start_offset": 0, "error_message": None}]} for t in topics]})


def test_produce_mixed_topics_forwards_the_allowed_and_answers_the_denied(acl):
    first = acl.on_request(ALICE, 0, 9, _produce(["ok", "secret"]))
    second = acl.on_request(ALICE, 0, 9, _produce(["ok", "other"]))  # pipelined before the first's answer
    assert [t.name for t in first.topic_data] == ["ok"] and [t.name for t in second.topic_data] == ["ok"]
    answered = acl.on_response(ALICE, 0, 9, first, _produce_response(["ok"]))
    errors = {(t.name, p.index): p.error_code for t in answered.responses for p in t.partition_responses}
    assert errors == {("ok", 0): 0, ("secret", 0): DENIED, ("secret", 1): DENIED}
    assert {t.name for t in acl.on_response(ALICE, 0, 9, second, _produce_response(["ok"])).responses} == {"ok", "other"}


def test_produce_all_denied_is_answered_by_the_proxy(acl):
    with pytest.raises(Answer) as answer:
        acl.on_request(ALICE, 0, 9, _produce(["secret"]))
    assert [(t.name, [p.error_code for p in t.partition_responses]) for t in answer.value.response.responses] == [
        ("secret", [DENIED, DENIED])]


def test_fetch_denied_topic_gets_its_partitions_refused(acl):
    request = build(request_type(1, 12), {"replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 1 << 20,
                                           "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                           "forgotten_topics_data": [], "rack_id": "", "topics": [
        {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                     "last_fetched_epoch": -1, "log_start_offset": -1,
                                     "partition_max_bytes": 1 << 20}]} for t in ("ok", "secret")]})
    forwarded = acl.on_request(ALICE, 1, 12, request)
    assert [t.topic for t in forwarded.topics] == ["ok"]
    upstream = build(response_type(1, 12), {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "ok", "partitions": [{"partition_index": 0, "error_code": 0, "high_watermark": 3,
                                        "last_stable_offset": 3, "log_start_offset": 0, "aborted_transactions": None,
                                        "preferred_read_replica": -1, "records": b""}]}]})
    answered = acl.on_response(ALICE, 1, 12, forwarded, upstream)
    assert [(t.topic, t.partitions[0].error_code) for t in answered.responses] == [("ok", 0), ("secret", DENIED)]


def _metadata(topics):
    return build(request_type(3, 12), {"topics": None if topics is None else [{"name": t, "topic_id": None}
                                                                              for t in topics],
                                       "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})


def _metadata_response(topics):
    return build(response_type(3, 12), {"throttle_time": 0, "brokers": [], "cluster_id": "c", "controller_id": 1,
                                         "topics": [{"error_code": 0, "name": t, "topic_id": None, "partitions": []}
                                                    for t in topics]})


def test_metadata_named_topic_is_refused_and_never_reaches_the_upstream(acl):
    forwarded = acl.on_request(ALICE, 3, 12, _metadata(["ok", "secret"]))
    assert [t.name for t in forwarded.topics] == ["ok"]  # not auto-created upstream
    answered = acl.on_response(ALICE, 3, 12, forwarded, _metadata_response(["ok"]))
    assert [(t.name, t.error_code) for t in answered.topics] == [("ok", 0), ("secret", DENIED)]


def test_metadata_for_all_topics_lists_only_describable_ones(acl):
    request = _metadata(None)
    assert acl.on_request(ALICE, 3, 12, request) is request
    answered = acl.on_response(ALICE, 3, 12, request, _metadata_response(["ok", "secret", "other"]))
    assert [t.name for t in answered.topics] == ["ok"]


# --- every API the proxy checks (server/security/request_acls.py) ------------------------------------------

def _sample_value(hint, kind):
    args = typing.get_args(hint)
    if type(None) in args:
        hint = next(a for a in args if a is not type(None))
    if typing.get_origin(hint) is tuple:
        entity = field_entity_of(hint)
        return (_sample(entity),) if entity is not None else (_sample_value(typing.get_args(hint)[0], kind),)
    entity = field_entity_of(hint)
    if entity is not None:
        return _sample(entity)
    samples = {"string": "x", "bool": False, "bytes": b"", "records": b"", "uuid": uuid.UUID(int=1)}
    return samples.get(kind, 1)  # 1: a valid enum value (ANY) where the field is an ACL element


def _sample(cls):
    """A message of ``cls`` with one entry in every array and name "x" everywhere (a topic, group, id...)."""
    hints = typing.get_type_hints(cls)
    return build(cls, {f.name: _sample_value(hints[f.name], f.metadata.get("kafka_type", ""))
                      for f in dataclasses.fields(cls)})


def _versions(api_key):
    low, high = kio_range(api_key)
    return range(low, min(high, VERSION_CAPS.get(api_key, high)) + 1)


@pytest.mark.parametrize("api_key", sorted(RULES))
def test_every_checked_api_answers_a_denial_and_passes_an_allowed_request_at_every_version(api_key):
    """With no ACL for "x", a request naming it is refused by the proxy with a response that encodes (or, for
    listings, forwarded and its answer filtered); a super user's request is forwarded as it came."""
    nobody = Acl(Authorizer(), "User:alice", "127.0.0.1")
    superuser = Acl(Authorizer(frozenset({"User:alice"})), "User:alice", "127.0.0.1")
    for version in _versions(api_key):
        request = _sample(request_type(api_key, version))
        denied = authorize_request(api_key, version, request, nobody)
        if denied.request is None:
            encode_body(denied.response)
            if (api_key, version) not in ((35, 1), (35, 2)):  # DescribeLogDirs v1-2: empty, Kafka's only answer
                assert _errors(denied.response) - {0}, (api_key, version, denied.response)
        else:
            encode_body(denied.request)
            encode_body(denied.finish(_sample(response_type(api_key, version))))
        allowed = authorize_request(api_key, version, request, superuser)
        assert allowed.request is request


def _errors(message) -> set[int]:
    """Every error code in a message, nested entries included."""
    out = set()
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        if f.metadata.get("kafka_type") == "error_code" or f.name == "partition_error_code":
            out.add(int(value))
        for item in value if isinstance(value, tuple) else (value,):
            if dataclasses.is_dataclass(item):
                out |= _errors(item)
    return out


def _acl(*bindings) -> Acl:
    authorizer = Authorizer()
    for resource_type, name, operation in bindings:
        authorizer.add(AclBinding(resource_type, name, PatternType.LITERAL, "User:alice", "*", operation,
                                  Permission.ALLOW))
    return Acl(authorizer, "User:alice", "127.0.0.1")


def test_group_membership_needs_group_read_and_answers_group_authorization_failed():
    acl = _acl((ResourceType.GROUP, "g", Operation.DESCRIBE))
    join = build(request_type(11, 9), {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000,
                                       "member_id": "", "protocol_type": "consumer", "protocols": []})
    decision = authorize_request(11, 9, join, acl)
    assert decision.request is None and decision.response.error_code == GROUP_DENIED
    assert decision.response.member_id == "" and decision.response.generation_id == -1
    find = build(request_type(10, 4), {"key_type": 0, "coordinator_keys": ["g", "other"]})
    decision = authorize_request(10, 4, find, acl)
    assert decision.request.coordinator_keys == ("g",)  # DESCRIBE is enough to find it
    answered = decision.finish(build(response_type(10, 4), {"coordinators": [
        {"key": "g", "node_id": 1, "host": "h", "port": 1, "error_code": 0, "error_message": None}]}))
    assert [(c.key, c.error_code, c.node_id) for c in answered.coordinators] == [("g", 0, 1), ("other", GROUP_DENIED, -1)]


def test_transactional_ids_need_write_and_idempotence_needs_some_topic_write():
    init = build(request_type(22, 4), {"transactional_id": "tx", "transaction_timeout": 60000, "producer_id": -1,
                                       "producer_epoch": -1})
    decision = authorize_request(22, 4, init, _acl((ResourceType.TRANSACTIONAL_ID, "tx", Operation.DESCRIBE)))
    assert decision.response.error_code == 53 and decision.response.producer_id == -1
    assert authorize_request(22, 4, init, _acl((ResourceType.TRANSACTIONAL_ID, "tx", Operation.WRITE))).request is init
    idempotent = dataclasses.replace(init, transactional_id=None)
    assert authorize_request(22, 4, idempotent, _acl()).response.error_code == 31  # CLUSTER_AUTHORIZATION_FAILED
    assert authorize_request(22, 4, idempotent, _acl((ResourceType.TOPIC, "t", Operation.WRITE))).request is idempotent


def test_add_partitions_to_txn_one_denied_topic_refuses_the_request():
    request = build(request_type(24, 3), {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1,
                                          "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [
                                              {"name": "ok", "partitions": [0]}, {"name": "no", "partitions": [0, 1]}]})
    acl = _acl((ResourceType.TRANSACTIONAL_ID, "tx", Operation.WRITE), (ResourceType.TOPIC, "ok", Operation.WRITE))
    response = authorize_request(24, 3, request, acl).response
    assert {(t.name, p.partition_index, p.partition_error_code) for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {("ok", 0, 55), ("no", 0, DENIED), ("no", 1, DENIED)}


def test_create_topics_needs_create_on_the_cluster_or_the_topic():
    request = build(request_type(19, 7), {"topics": [{"name": n, "num_partitions": 1, "replication_factor": 1,
                                                      "assignments": [], "configs": []} for n in ("ok", "no")],
                                          "timeout": 1000, "validate_only": False})
    decision = authorize_request(19, 7, request, _acl((ResourceType.TOPIC, "ok", Operation.CREATE)))
    assert [t.name for t in decision.request.topics] == ["ok"]
    upstream = build(response_type(19, 7), {"topics": [{"name": "ok", "topic_id": uuid.uuid4(), "error_code": 0,
                                                        "num_partitions": 1, "replication_factor": 1, "configs": []}]})
    answered = decision.finish(upstream)
    assert [(t.name, t.error_code, t.topic_config_error_code) for t in answered.topics] == [
        ("ok", 0, DENIED), ("no", DENIED, DENIED)]  # no DESCRIBE_CONFIGS: configs withheld
    everything = authorize_request(19, 7, request, _acl((ResourceType.CLUSTER, "kafka-cluster", Operation.CREATE)))
    assert everything.request is request


def test_listings_show_only_what_the_principal_may_describe():
    acl = _acl((ResourceType.GROUP, "mine", Operation.DESCRIBE), (ResourceType.TOPIC, "t", Operation.DESCRIBE))
    request = build(request_type(16, 4), {"states_filter": []})
    upstream = build(response_type(16, 4), {"error_code": 0, "groups": [
        {"group_id": g, "protocol_type": "consumer", "group_state": "Stable"} for g in ("mine", "theirs")]})
    decision = authorize_request(16, 4, request, acl)
    assert [g.group_id for g in decision.finish(upstream).groups] == ["mine"]
    fetch_all = build(request_type(9, 7), {"group_id": "mine", "topics": None, "require_stable": False})
    offsets = build(response_type(9, 7), {"error_code": 0, "topics": [
        {"name": n, "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                                    "metadata": "", "error_code": 0}]} for n in ("t", "secret")]})
    decision = authorize_request(9, 7, fetch_all, acl)
    assert [t.name for t in decision.finish(offsets).topics] == ["t"]


def test_config_resources_are_checked_on_their_own_resource_type():
    request = build(request_type(32, 4), {"resources": [
        {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
        {"resource_type": 32, "resource_name": "g", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    decision = authorize_request(32, 4, request, _acl((ResourceType.TOPIC, "t", Operation.ALTER_CONFIGS)))
    assert [r.resource_name for r in decision.request.resources] == ["t"]  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    answered = decision.finish(build(response_type(32, 4), {"results": []}))
    assert [(r.resource_name, r.error_code) for r in answered.results] == [("1", 31), ("g", GROUP_DENIED)]


def _broker_cases():
    """The broker's own authorization cases (tests/gateway/test_acl_requests.py): the proxy must answer alike."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
    spec = importlib.util.spec_from_file_location("broker_acl_requests",
                                                  Path(__file__).resolve().parents[1] / "gateway" / "test_acl_requests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


@pytest.mark.parametrize(("name", "api_key", "version", "data", "field", "expected"), _broker_cases(),
                         ids=[c[0] for c in _broker_cases()])
def test_the_proxy_denies_as_the_broker_does(name, api_key, version, data, field, expected):
    """With ACLs on and none granted, the proxy answers each request of the broker's authorization tests with
    the error the broker answers (DescribeCluster is forwarded, its authorized operations made the principal's)."""
    nobody = Acl(Authorizer(), "User:ANONYMOUS", "127.0.0.1")
    decision = authorize_request(api_key, version, build(request_type(api_key, version), data), nobody)
    response = decision.response
    if response is None:  # forwarded: the upstream's answer, finished for the principal
        response = decision.finish(build(response_type(api_key, version), {}))
    assert field(response) == expected
