"""Virtual clusters (proxy/filters/tenant.py): two tenants on one upstream cannot see or touch each other.

The table tests take every API and version kio knows: a request naming one topic, group and transactional
id goes through tenant A's filter and must reach the upstream prefixed and as valid wire bytes; the
upstream's answer, with tenant B's entries mixed in, must come back to A stripped and without B's. The
scenario tests run two tenants' requests through their filters against one in-memory upstream (a small
fake Kafka defined here, answering decoded requests) and assert what each tenant's client would notice.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections import defaultdict

import pytest
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader

from logway.proxy.filters.base import Answer, ClientInfo
from logway.proxy.filters.tenant import (
    CONFINED_API_KEYS,
    DENIED_API_KEYS,
    PASS_THROUGH_API_KEYS,
    TenantFilter,
    TopicIdDirectory,
    check_prefixes,
    error_response,
)
from logway.wire.errors import ErrorCode
from logway.wire.protocol import decode_body, encode_body, request_type, response_type

CLIENT = ClientInfo(principal="User:alice", client_id="app")
A, B = "tenant-a.", "tenant-b."


def versions(api_key: int) -> list[int]:
    return sorted(schema_name_map[api_key_map[api_key]])


def cases(keys) -> list[tuple[int, int]]:
    return [(k, v) for k in sorted(keys) for v in versions(k)]


# --- kio helpers: wire round trips, a sample request, the names in a message ---------------------------


def wire_request(api_key: int, version: int, request):
    body = encode_body(request)
    return decode_body(api_key, version, body, 0)


def wire_response(api_key: int, version: int, response):
    cls = response_type(api_key, version)
    decoded, _ = entity_reader(cls)(encode_body(response), 0)
    return decoded


def _leaves(hint) -> set:
    args = typing.get_args(hint)
    return {hint} if not args else set().union(*(_leaves(a) for a in args if a is not Ellipsis))


def _kind(hint) -> str | None:
    text = str(hint)
    for kind in ("TopicName", "GroupId", "TransactionalId"):
        if kind in text:
            return kind
    return None


SAMPLE = {"TopicName": "orders", "GroupId": "g1", "TransactionalId": "tx1"}


def sample(cls: type, topic_id: uuid.UUID):
    """``cls`` with one entry per array, every name set to the tenant's sample names."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        hint, kafka_type = hints[f.name], f.metadata.get("kafka_type", "")
        leaves = _leaves(hint)
        entity = next((x for x in leaves if dataclasses.is_dataclass(x)), None)
        many = "tuple" in str(hint)
        kind = _kind(hint)
        if entity is not None:
            value = sample(entity, topic_id)
            kwargs[f.name] = (value,) if many else value
        elif kind is not None:
            kwargs[f.name] = (SAMPLE[kind],) if many else SAMPLE[kind]
        elif f.name == "topic_id":
            kwargs[f.name] = topic_id
        elif f.name in ("key", "resource_name", "resource_name_filter"):
            kwargs[f.name] = "g1" if f.name == "key" else "orders"
        elif f.name == "coordinator_keys":
            kwargs[f.name] = ("g1",)
        elif f.name in ("resource_type", "resource_type_filter"):
            kwargs[f.name] = 2  # TOPIC, for configs and ACLs
        elif many:
            kwargs[f.name] = ()
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        elif type(None) in leaves:
            kwargs[f.name] = None
        else:
            kwargs[f.name] = {
                "string": "",
                "bool": False,
                "uuid": uuid.UUID(int=0),
                "bytes": b"",
                "records": b"",
                "float64": 0.0,
                "error_code": ErrorCode.none,
            }.get(kafka_type, datetime.timedelta(0) if kafka_type.startswith("timedelta") else 0)
    return cls(**kwargs)


def _zero(kafka_type: str, leaves: set, many: bool):
    if many:
        return ()
    if type(None) in leaves:
        return None
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    zeros = {"string": "", "bool": False, "uuid": uuid.UUID(int=0), "bytes": b"", "records": b"", "float64": 0.0}
    return zeros.get(kafka_type, ErrorCode.none if kafka_type == "error_code" else -1)


def message(cls: type, data: dict):
    """A kio message from a dict (nested dicts and lists too); what the dict leaves out is zero or empty."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        hint, leaves = hints[f.name], _leaves(hints[f.name])
        entity = next((x for x in leaves if dataclasses.is_dataclass(x)), None)
        if f.name in data:
            value = data[f.name]
            if entity is not None and isinstance(value, dict):
                value = message(entity, value)
            elif entity is not None and isinstance(value, list):
                value = tuple(message(entity, v) for v in value)
            elif isinstance(value, list):
                value = tuple(value)
            elif f.metadata.get("kafka_type", "").startswith("timedelta") and isinstance(value, int):
                value = datetime.timedelta(milliseconds=value)
            kwargs[f.name] = value
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = _zero(f.metadata.get("kafka_type", ""), leaves, "tuple" in str(hint))
    return cls(**kwargs)


def names(obj) -> list[str]:
    """Every topic name, group id, transactional id, coordinator key and config resource name in ``obj``."""
    out: list[str] = []
    if not dataclasses.is_dataclass(obj):
        return out
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        values = value if isinstance(value, tuple) else (value,)
        untyped_name = f.name in ("key", "coordinator_keys", "resource_name", "resource_name_filter")
        for v in values:
            if dataclasses.is_dataclass(v):
                out += names(v)
            elif isinstance(v, str) and v and (_kind(hints[f.name]) or untyped_name):
                out.append(v)
    return out


def error_codes(obj) -> list[int]:
    out: list[int] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            out.append(int(value))
        for v in value if isinstance(value, tuple) else (value,):
            if dataclasses.is_dataclass(v):
                out += error_codes(v)
    return out


def merge_arrays(mine, theirs):
    """``mine`` with every top-level array extended by ``theirs``: an upstream answer listing both tenants."""
    changes = {}
    for f in dataclasses.fields(mine):
        a, b = getattr(mine, f.name), getattr(theirs, f.name)
        if isinstance(a, tuple) and isinstance(b, tuple):
            changes[f.name] = a + b
    return dataclasses.replace(mine, **changes)


# --- the table: every confined API and version ---------------------------------------------------------

GENERIC = [(k, v) for k, v in cases(CONFINED_API_KEYS)]


@pytest.mark.parametrize(("api_key", "version"), GENERIC, ids=[f"{api_key_map[k]}-v{v}" for k, v in GENERIC])
def test_every_confined_api_prefixes_names_and_hides_the_other_tenant(api_key: int, version: int) -> None:
    directory = TopicIdDirectory()
    id_a, id_b = uuid.uuid4(), uuid.uuid4()
    directory.learn(id_a, A + "orders")
    directory.learn(id_b, B + "orders")
    tenant_a, tenant_b = TenantFilter(A, directory), TenantFilter(B, directory)
    request = sample(request_type(api_key, version), id_a)
    expected = names(request)

    sent_a = wire_request(api_key, version, tenant_a.on_request(CLIENT, api_key, version, request))
    assert sorted(names(sent_a)) == sorted(A + n for n in expected)
    sent_b = tenant_b.on_request(CLIENT, api_key, version, sample(request_type(api_key, version), id_b))
    if "topic_id" in repr(request) and api_key != 68:  # ConsumerGroupHeartbeat's owned partitions aside
        with pytest.raises(Answer) as answered:  # B's topic id, sent by A: an id A cannot know
            tenant_a.on_request(CLIENT, api_key, version, sample(request_type(api_key, version), id_b))
        assert ErrorCode.unknown_topic_id in error_codes(wire_response(api_key, version, answered.value.response))

    # The upstream answers naming what was asked, and lists tenant B's things as well (as an all-topics
    # Metadata or a ListGroups would): tenant A sees only its own, in its own names.
    upstream = merge_arrays(
        error_response(api_key, version, sent_a, ErrorCode.none),
        error_response(api_key, version, sent_b, ErrorCode.none),
    )
    seen = tenant_a.on_response(CLIENT, api_key, version, sent_a, wire_response(api_key, version, upstream))
    seen = wire_response(api_key, version, seen)
    assert sorted(names(seen)) == sorted(names(error_response(api_key, version, request, ErrorCode.none)))
    assert not any(n.startswith(("tenant-", B)) for n in names(seen))


DENIED = cases(DENIED_API_KEYS)


@pytest.mark.parametrize(("api_key", "version"), DENIED, ids=[f"{api_key_map[k]}-v{v}" for k, v in DENIED])
def test_every_other_api_is_answered_with_cluster_authorization_failed(api_key: int, version: int) -> None:
    request = sample(request_type(api_key, version), uuid.uuid4())
    with pytest.raises(Answer) as answered:
        TenantFilter(A).on_request(CLIENT, api_key, version, request)
    response = wire_response(api_key, version, answered.value.response)
    codes = error_codes(response)
    if codes:
        assert ErrorCode.cluster_authorization_failed in codes
        assert set(codes) <= {ErrorCode.cluster_authorization_failed, ErrorCode.none}
    assert not any(n.startswith(A) for n in names(response))


def test_the_filter_decodes_every_api_kio_knows_except_the_harmless_ones() -> None:
    assert set(TenantFilter(A).requests) == frozenset(api_key_map) - PASS_THROUGH_API_KEYS
    assert {27, 35, 43, 45, 58} <= DENIED_API_KEYS  # txn markers, log dirs, elections, envelope
    assert not {50, 51} & DENIED_API_KEYS  # a virtual cluster's own SCRAM users: answered by the proxy


# --- a shared upstream: a tiny Kafka that answers decoded requests -------------------------------------


class FakeKafka:
    """The state a real cluster keeps, and answers to the requests these tests send, at any version."""

    def __init__(self) -> None:
        self.topics: dict[str, uuid.UUID] = {"__consumer_offsets": uuid.uuid4()}
        self.logs: dict[tuple[str, int], list[bytes]] = defaultdict(list)
        self.offsets: dict[str, dict[tuple[str, int], int]] = defaultdict(dict)
        self.configs: dict[str, dict[str, str]] = {}
        self.acls: list[tuple[int, str, int, str]] = []  # resource type, name, pattern type, principal
        self.requests = 0

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.topics.items() if i == topic_id), None)

    def handle(self, api_key: int, version: int, request):
        self.requests += 1
        handler = getattr(self, api_key_map[api_key])
        return message(response_type(api_key, version), handler(version, request))

    def metadata(self, version, request):
        wanted = list(self.topics) if not request.topics else [t.name for t in request.topics]
        topics = []
        for name in wanted:
            known = name in self.topics
            topics.append(
                {
                    "name": name,
                    "topic_id": self.topics.get(name, uuid.UUID(int=0)),
                    "error_code": ErrorCode.none if known else ErrorCode.unknown_topic_or_partition,
                    "partitions": [{"partition_index": 0, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]}]
                    if known
                    else [],
                }
            )
        return {
            "brokers": [{"node_id": 1, "host": "kafka1", "port": 9092}],
            "cluster_id": "c",
            "controller_id": 1,
            "topics": topics,
        }

    def create_topics(self, version, request):
        results = []
        for t in request.topics:
            if t.name in self.topics:
                results.append(
                    {
                        "name": t.name,
                        "error_code": ErrorCode.topic_already_exists,
                        "error_message": f"Topic '{t.name}' already exists.",
                    }
                )
                continue
            self.topics[t.name] = uuid.uuid4()
            self.configs[t.name] = {"retention.ms": "604800000"}
            results.append(
                {"name": t.name, "topic_id": self.topics[t.name], "error_code": ErrorCode.none, "num_partitions": 1}
            )
        return {"topics": results}

    def delete_topics(self, version, request):
        wanted = (
            [(n, None) for n in request.topic_names] if version < 6 else [(t.name, t.topic_id) for t in request.topics]
        )
        results = []
        for name, topic_id in wanted:
            name = name or self.name_of(topic_id)
            if name in self.topics:
                results.append({"name": name, "topic_id": self.topics.pop(name), "error_code": ErrorCode.none})
            else:
                results.append({"name": name, "topic_id": topic_id, "error_code": ErrorCode.unknown_topic_or_partition})
        return {"responses": results}

    def produce(self, version, request):
        out = []
        for t in request.topic_data:
            name = t.name if version < 13 else self.name_of(t.topic_id)
            parts = []
            for p in t.partition_data:
                log = self.logs[(name, p.index)]
                log.append(p.records)
                parts.append({"index": p.index, "error_code": ErrorCode.none, "base_offset": len(log) - 1})
            out.append(
                {
                    "name": t.name if version < 13 else "",
                    "topic_id": getattr(t, "topic_id", None),
                    "partition_responses": parts,
                }
            )
        return {"responses": out}

    def fetch(self, version, request):
        out = []
        for t in request.topics:
            name = t.topic if version < 13 else self.name_of(t.topic_id)
            parts = []
            for p in t.partitions:
                log = self.logs[(name, p.partition)]
                parts.append(
                    {
                        "partition_index": p.partition,
                        "error_code": ErrorCode.none,
                        "high_watermark": len(log),
                        "records": b"".join(log[p.fetch_offset :]),
                    }
                )
            out.append(
                {
                    "topic": t.topic if version < 13 else "",
                    "topic_id": getattr(t, "topic_id", None),
                    "partitions": parts,
                }
            )
        return {"responses": out}

    def offset_commit(self, version, request):
        store = self.offsets[request.group_id]
        topics = []
        for t in request.topics:
            for p in t.partitions:
                store[(t.name, p.partition_index)] = p.committed_offset
            topics.append(
                {
                    "name": t.name,
                    "partitions": [
                        {"partition_index": p.partition_index, "error_code": ErrorCode.none} for p in t.partitions
                    ],
                }
            )
        return {"topics": topics}

    def _fetch_group(self, group_id, topics):
        store = self.offsets.get(group_id, {})
        wanted = {} if topics is None else {t.name: t.partition_indexes for t in topics}
        found = defaultdict(list)
        for (topic, partition), offset in store.items():
            if topics is None or partition in wanted.get(topic, ()):
                found[topic].append(
                    {"partition_index": partition, "committed_offset": offset, "error_code": ErrorCode.none}
                )
        return [{"name": n, "partitions": p} for n, p in found.items()]

    def offset_fetch(self, version, request):
        if version < 8:
            return {"topics": self._fetch_group(request.group_id, request.topics)}
        groups = [{"group_id": g.group_id, "topics": self._fetch_group(g.group_id, g.topics)} for g in request.groups]
        return {"groups": groups}

    def list_groups(self, version, request):
        return {"groups": [{"group_id": g, "protocol_type": "consumer"} for g in self.offsets]}

    def delete_groups(self, version, request):
        results = []
        for g in request.groups_names:
            found = self.offsets.pop(g, None) is not None
            results.append({"group_id": g, "error_code": ErrorCode.none if found else ErrorCode.group_id_not_found})
        return {"results": results}

    def describe_configs(self, version, request):
        results = []
        for r in request.resources:
            configs = self.configs.get(r.resource_name)
            results.append(
                {
                    "resource_type": r.resource_type,
                    "resource_name": r.resource_name,
                    "error_code": ErrorCode.none if configs is not None else ErrorCode.unknown_topic_or_partition,
                    "error_message": None if configs is not None else f"Topic {r.resource_name} does not exist",
                    "configs": [{"name": k, "value": v, "read_only": False} for k, v in (configs or {}).items()],
                }
            )
        return {"results": results}

    @staticmethod
    def _acl_matches(acl, kind: int, name: str | None, pattern: int) -> bool:
        """Kafka's ResourcePatternFilter.matches: ANY type/pattern, MATCH (literal, "*", covering prefixes)."""
        acl_kind, acl_name, acl_pattern, _ = acl
        if kind != 1 and kind != acl_kind:
            return False
        if name is None:
            return pattern in (1, 2) or pattern == acl_pattern
        if pattern == 2:
            return (acl_pattern == 3 and acl_name in (name, "*")) or (acl_pattern == 4 and name.startswith(acl_name))
        return acl_name == name and pattern in (1, acl_pattern)

    def _acl_out(self, acl) -> dict:
        kind, name, pattern, principal = acl
        return {
            "resource_type": kind,
            "resource_name": name,
            "pattern_type": pattern,
            "principal": principal,
            "host": "*",
            "operation": 2,
            "permission_type": 3,
        }

    def create_acls(self, version, request):
        for c in request.creations:
            self.acls.append((c.resource_type, c.resource_name, c.resource_pattern_type, c.principal))
        return {"results": [{"error_code": ErrorCode.none} for _ in request.creations]}

    def describe_acls(self, version, request):
        found = [
            a
            for a in self.acls
            if self._acl_matches(
                a, request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter
            )
        ]
        resources = [{**self._acl_out(a), "acls": [self._acl_out(a)]} for a in found]
        return {"resources": resources}

    def delete_acls(self, version, request):
        results = []
        for f in request.filters:
            gone = [
                a
                for a in self.acls
                if self._acl_matches(a, f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter)
            ]
            self.acls = [a for a in self.acls if a not in gone]
            results.append({"matching_acls": [self._acl_out(a) for a in gone]})
        return {"filter_results": results}

    def find_coordinator(self, version, request):
        if version < 4:
            return {"node_id": 1, "host": "kafka1", "port": 9092, "error_code": ErrorCode.none}
        return {
            "coordinators": [
                {"key": k, "node_id": 1, "host": "kafka1", "port": 9092, "error_code": ErrorCode.none}
                for k in request.coordinator_keys
            ]
        }


class Tenant:
    """One tenant's client: requests go through its filter to the shared upstream, as bytes both ways."""

    def __init__(self, upstream: FakeKafka, prefix: str, directory: TopicIdDirectory) -> None:
        self.upstream = upstream
        self.filter = TenantFilter(prefix, directory)

    def send(self, api_key: int, version: int, data: dict):
        request = message(request_type(api_key, version), data)
        try:
            forwarded = self.filter.on_request(CLIENT, api_key, version, request)
        except Answer as answer:
            return wire_response(api_key, version, answer.response)
        forwarded = wire_request(api_key, version, forwarded)
        response = wire_response(api_key, version, self.upstream.handle(api_key, version, forwarded))
        return wire_response(api_key, version, self.filter.on_response(CLIENT, api_key, version, forwarded, response))

    def create(self, *topics: str, version: int = 7):
        return self.send(
            19,
            version,
            {"topics": [{"name": t, "num_partitions": 1, "replication_factor": 1} for t in topics], "timeout": 1000},
        )

    def metadata(self, topics: list[str] | None, version: int = 12):
        data = {"topics": None if topics is None else [{"name": t} for t in topics], "allow_auto_topic_creation": False}
        return self.send(3, version, data)

    def topic_id(self, topic: str):
        return next(t.topic_id for t in self.metadata([topic]).topics)


@pytest.fixture
def cluster():
    upstream, directory = FakeKafka(), TopicIdDirectory()
    return upstream, Tenant(upstream, A, directory), Tenant(upstream, B, directory)


METADATA = versions(3)


@pytest.mark.parametrize("version", METADATA)
def test_metadata_shows_a_tenant_only_its_own_topics(cluster, version: int) -> None:
    upstream, a, b = cluster
    a.create("orders")
    b.create("orders", "payments")

    everything_a = a.metadata(None if version else [], version)
    everything_b = b.metadata(None if version else [], version)
    assert [t.name for t in everything_a.topics] == ["orders"]
    assert sorted(t.name for t in everything_b.topics) == ["orders", "payments"]
    if version >= 10:  # topic ids: each tenant learns only the id of its own "orders"
        assert everything_a.topics[0].topic_id == upstream.topics[A + "orders"] != upstream.topics[B + "orders"]

    asked = a.metadata(["payments"], version) if version else a.metadata(["payments"], version)
    assert [(t.name, t.error_code) for t in asked.topics] == [("payments", ErrorCode.unknown_topic_or_partition)]


PRODUCE_FETCH = [(p, f) for p in versions(0) for f in versions(1) if (p >= 13) == (f >= 13)][::7] + [
    (13, 18),
    (12, 12),
    (3, 4),
]


@pytest.mark.parametrize(("produce_v", "fetch_v"), PRODUCE_FETCH)
def test_produce_and_fetch_reach_only_the_tenants_own_topic(cluster, produce_v: int, fetch_v: int) -> None:
    upstream, a, b = cluster
    a.create("orders")
    b.create("orders")
    for tenant, payload in ((a, b"from-a"), (b, b"from-b")):
        topic = {"topic_id": tenant.topic_id("orders")} if produce_v >= 13 else {"name": "orders"}
        tenant.send(
            0,
            produce_v,
            {
                "acks": -1,
                "timeout": 1000,
                "topic_data": [{**topic, "partition_data": [{"index": 0, "records": payload}]}],
            },
        )

    for tenant, payload in ((a, b"from-a"), (b, b"from-b")):
        topic = {"topic_id": tenant.topic_id("orders")} if fetch_v >= 13 else {"topic": "orders"}
        part = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
        fetched = tenant.send(
            1, fetch_v, {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "topics": [{**topic, "partitions": [part]}]}
        )
        assert [p.records for t in fetched.responses for p in t.partitions] == [payload]
        if fetch_v < 13:
            assert [t.topic for t in fetched.responses] == ["orders"]


@pytest.mark.parametrize("version", [v for v in versions(1) if v >= 13])
def test_fetch_by_another_tenants_topic_id_is_unknown_and_never_reaches_the_upstream(cluster, version: int) -> None:
    upstream, a, b = cluster
    b.create("secret")
    secret_id = b.topic_id("secret")
    b.send(
        0,
        13,
        {
            "acks": -1,
            "timeout": 1000,
            "topic_data": [{"topic_id": secret_id, "partition_data": [{"index": 0, "records": b"b-only"}]}],
        },
    )
    before = upstream.requests

    part = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
    fetched = a.send(
        1, version, {"replica_id": -1, "max_wait": 0, "topics": [{"topic_id": secret_id, "partitions": [part]}]}
    )
    assert upstream.requests == before
    assert [(t.topic_id, p.error_code, p.records) for t in fetched.responses for p in t.partitions] == [
        (secret_id, ErrorCode.unknown_topic_id, None)
    ]
    random_id = a.send(1, version, {"replica_id": -1, "topics": [{"topic_id": uuid.uuid4(), "partitions": [part]}]})
    assert random_id.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_id


def test_a_topic_id_is_known_to_every_connection_of_its_tenant(cluster) -> None:
    """Clients fetch on the leader's connection, not the one that fetched metadata: the id set is shared."""
    upstream, a, _ = cluster
    a.create("orders")
    a.topic_id("orders")
    fetch_connection = Tenant(upstream, A, a.filter.topic_ids)
    part = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
    fetched = fetch_connection.send(
        1, 13, {"replica_id": -1, "topics": [{"topic_id": upstream.topics[A + "orders"], "partitions": [part]}]}
    )
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.none


@pytest.mark.parametrize("commit_v", versions(8)[:-1])
def test_the_same_group_name_commits_separately_per_tenant(cluster, commit_v: int) -> None:
    upstream, a, b = cluster
    for tenant, offset in ((a, 5), (b, 9)):
        tenant.create("orders")
        commit = {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": offset}]}],
        }
        committed = tenant.send(8, commit_v, commit)
        assert [t.name for t in committed.topics] == ["orders"]

    for fetch_v in versions(9)[:-1]:
        for tenant, offset in ((a, 5), (b, 9)):
            every_topic = [None] if fetch_v >= 2 else []  # null = all topics, from v2
            for topics in [*every_topic, [{"name": "orders", "partition_indexes": [0]}]]:
                if fetch_v < 8:
                    got = tenant.send(9, fetch_v, {"group_id": "g", "topics": topics}).topics
                else:
                    group = tenant.send(9, fetch_v, {"groups": [{"group_id": "g", "topics": topics}]}).groups
                    assert [g.group_id for g in group] == ["g"]
                    got = group[0].topics
                assert [(t.name, p.committed_offset) for t in got for p in t.partitions] == [("orders", offset)]
    assert set(upstream.offsets) == {A + "g", B + "g"}


@pytest.mark.parametrize("version", versions(16))
def test_list_groups_shows_only_the_tenants_groups(cluster, version: int) -> None:
    upstream, a, b = cluster
    upstream.offsets["tenant-a.g1"] = {}
    upstream.offsets["tenant-b.g1"] = {}
    upstream.offsets["tenant-b.g2"] = {}
    upstream.offsets["admin-group"] = {}
    assert [g.group_id for g in a.send(16, version, {}).groups] == ["g1"]
    assert sorted(g.group_id for g in b.send(16, version, {}).groups) == ["g1", "g2"]


@pytest.mark.parametrize("version", versions(42))
def test_delete_groups_deletes_only_inside_the_tenant(cluster, version: int) -> None:
    upstream, a, _ = cluster
    upstream.offsets["tenant-b.g1"] = {}
    result = a.send(42, version, {"groups_names": ["g1"]})
    assert [(r.group_id, r.error_code) for r in result.results] == [("g1", ErrorCode.group_id_not_found)]
    assert "tenant-b.g1" in upstream.offsets


@pytest.mark.parametrize("version", versions(19))
def test_create_topics_is_per_tenant_and_errors_name_the_tenants_topic(cluster, version: int) -> None:
    upstream, a, b = cluster
    assert a.create("orders", version=version).topics[0].error_code == ErrorCode.none
    assert b.create("orders", version=version).topics[0].error_code == ErrorCode.none
    again = a.create("orders", version=version).topics[0]
    assert (again.name, again.error_code, again.error_message) == (
        "orders",
        ErrorCode.topic_already_exists,
        "Topic 'orders' already exists.",
    )
    assert {A + "orders", B + "orders"} <= set(upstream.topics)


@pytest.mark.parametrize("version", versions(20))
def test_delete_topics_deletes_only_inside_the_tenant(cluster, version: int) -> None:
    upstream, a, b = cluster
    a.create("orders")
    b.create("orders")
    b_id = b.topic_id("orders")
    if version >= 6:
        stolen = a.send(20, version, {"topics": [{"name": None, "topic_id": b_id}], "timeout": 1000})
        assert [(r.topic_id, r.error_code) for r in stolen.responses] == [(b_id, ErrorCode.unknown_topic_id)]
        deleted = a.send(20, version, {"topics": [{"name": "orders", "topic_id": uuid.UUID(int=0)}], "timeout": 1000})
    else:
        deleted = a.send(20, version, {"topic_names": ["orders"], "timeout": 1000})
    assert [(r.name, r.error_code) for r in deleted.responses] == [("orders", ErrorCode.none)]
    assert [t.name for t in b.metadata(["orders"]).topics if t.error_code == ErrorCode.none] == ["orders"]
    assert A + "orders" not in upstream.topics


@pytest.mark.parametrize("version", versions(32))
def test_describe_configs_of_topics_is_confined_and_broker_configs_are_denied(cluster, version: int) -> None:
    upstream, a, b = cluster
    b.create("payments")
    described = a.send(
        32, version, {"resources": [{"resource_type": 2, "resource_name": "payments", "configuration_keys": None}]}
    )
    result = described.results[0]
    assert (result.resource_name, result.error_code, result.configs) == (
        "payments",
        ErrorCode.unknown_topic_or_partition,
        (),
    )
    assert result.error_message == "Topic payments does not exist"
    a.create("orders")
    mine = a.send(
        32, version, {"resources": [{"resource_type": 2, "resource_name": "orders", "configuration_keys": None}]}
    )
    assert [(r.resource_name, [c.name for c in r.configs]) for r in mine.results] == [("orders", ["retention.ms"])]

    before = upstream.requests
    broker = a.send(
        32, version, {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}]}
    )
    assert [(r.resource_name, r.error_code) for r in broker.results] == [("1", ErrorCode.cluster_authorization_failed)]
    assert upstream.requests == before


@pytest.mark.parametrize("version", versions(10))
def test_find_coordinator_keys_live_under_the_prefix(cluster, version: int) -> None:
    upstream, a, _ = cluster
    filter_ = a.filter
    if version < 4:
        request = message(request_type(10, version), {"key": "g1", "key_type": 0})
        assert filter_.on_request(CLIENT, 10, version, request).key == A + "g1"
    else:
        request = message(request_type(10, version), {"coordinator_keys": ["g1", "tx1"], "key_type": 1})
        assert filter_.on_request(CLIENT, 10, version, request).coordinator_keys == (A + "g1", A + "tx1")
        answered = a.send(10, version, {"coordinator_keys": ["g1", "tx1"], "key_type": 1})
        assert [c.key for c in answered.coordinators] == ["g1", "tx1"]


def test_a_name_too_long_once_prefixed_is_an_invalid_topic(cluster) -> None:
    upstream, a, _ = cluster
    longest = "x" * (249 - len(A))
    assert a.create(longest).topics[0].error_code == ErrorCode.none
    before = upstream.requests
    too_long = a.create(longest + "x").topics[0]
    assert (too_long.name, too_long.error_code) == (longest + "x", ErrorCode.invalid_topic_exception)
    produced = a.send(
        0,
        9,
        {
            "acks": -1,
            "timeout": 1000,
            "topic_data": [{"name": longest + "x", "partition_data": [{"index": 0, "records": b"r"}]}],
        },
    )
    assert [p.error_code for t in produced.responses for p in t.partition_responses] == [
        ErrorCode.invalid_topic_exception
    ]
    assert upstream.requests == before


def test_regex_subscriptions_are_anchored_under_the_prefix() -> None:
    tenant = TenantFilter(A)
    base = {"group_id": "g", "member_epoch": 0, "subscribed_topic_names": None, "topic_partitions": None}
    request = message(request_type(68, 1), {**base, "subscribed_topic_regex": "orders-.*"})
    sent = tenant.on_request(CLIENT, 68, 1, request)
    assert sent.subscribed_topic_regex == r"^tenant\-a\.(?:orders-.*)"
    import re

    assert re.fullmatch(sent.subscribed_topic_regex, "tenant-a.orders-1")
    assert not re.fullmatch(sent.subscribed_topic_regex, "tenant-b.orders-1")
    for escape in ("x)|(.*", "[)]|.*", "(?x)#(\n)|(?:.*#)\n"):
        with pytest.raises(Answer) as answered:
            tenant.on_request(CLIENT, 68, 1, message(request_type(68, 1), {**base, "subscribed_topic_regex": escape}))
        assert answered.value.response.error_code == ErrorCode.invalid_regular_expression


TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4


def acl_creation(kind: int, name: str, pattern: int = LITERAL, principal: str = "User:alice") -> dict:
    return {
        "resource_type": kind,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": "*",
        "operation": 2,
        "permission_type": 3,
    }


def acl_filter(kind: int, name: str | None, pattern: int) -> dict:
    return {
        "resource_type_filter": kind,
        "resource_name_filter": name,
        "pattern_type_filter": pattern,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }


@pytest.mark.parametrize("version", versions(29))
def test_acls_are_confined_to_the_tenants_resources(cluster, version: int) -> None:
    upstream, a, b = cluster
    upstream.acls += [
        (TOPIC, "*", LITERAL, "User:ops"),
        (TOPIC, "tenant-", PREFIXED, "User:ops"),
        (CLUSTER, "kafka-cluster", LITERAL, "User:ops"),
    ]
    a.send(
        30,
        version,
        {"creations": [acl_creation(TOPIC, "orders"), acl_creation(TOPIC, "*"), acl_creation(GROUP, "app-", PREFIXED)]},
    )
    b.send(30, version, {"creations": [acl_creation(TOPIC, "orders")]})
    assert (TOPIC, A + "orders", LITERAL, "User:alice") in upstream.acls
    assert (TOPIC, A, PREFIXED, "User:alice") in upstream.acls  # A's "*": every topic of A, and no other

    def described(tenant, kind, name, pattern):
        response = tenant.send(29, version, acl_filter(kind, name, pattern))
        assert response.error_code == ErrorCode.none
        return sorted((r.resource_type, r.resource_name, r.pattern_type) for r in response.resources)

    assert described(a, ANY, None, ANY) == [
        (TOPIC, "*", LITERAL),
        (TOPIC, "orders", LITERAL),
        (GROUP, "app-", PREFIXED),
    ]
    assert described(b, ANY, None, ANY) == [(TOPIC, "orders", LITERAL)]
    assert described(a, TOPIC, "orders", MATCH) == [(TOPIC, "*", LITERAL), (TOPIC, "orders", LITERAL)]
    assert described(b, TOPIC, "*", LITERAL) == []

    before = list(upstream.acls)
    for broad in (
        acl_filter(TOPIC, None, ANY),
        acl_filter(ANY, "orders", LITERAL),
        acl_filter(TOPIC, "orders", MATCH),
        acl_filter(CLUSTER, "kafka-cluster", LITERAL),
    ):
        refused = a.send(31, version, {"filters": [broad]})
        assert [r.error_code for r in refused.filter_results] == [ErrorCode.cluster_authorization_failed]
    created = a.send(30, version, {"creations": [acl_creation(CLUSTER, "kafka-cluster")]})
    assert [r.error_code for r in created.results] == [ErrorCode.cluster_authorization_failed]
    assert upstream.acls == before

    deleted = a.send(31, version, {"filters": [acl_filter(TOPIC, "orders", LITERAL), acl_filter(TOPIC, "*", LITERAL)]})
    assert [[(m.resource_name, m.pattern_type) for m in r.matching_acls] for r in deleted.filter_results] == [
        [("orders", LITERAL)],
        [("*", LITERAL)],
    ]
    assert described(b, ANY, None, ANY) == [(TOPIC, "orders", LITERAL)]
    assert (TOPIC, "*", LITERAL, "User:ops") in upstream.acls and (
        TOPIC,
        "tenant-",
        PREFIXED,
        "User:ops",
    ) in upstream.acls


def test_describing_cluster_acls_is_a_cluster_authorization_failure(cluster) -> None:
    upstream, a, _ = cluster
    response = a.send(29, 3, acl_filter(CLUSTER, None, ANY))
    assert (response.error_code, response.resources) == (ErrorCode.cluster_authorization_failed, ())


def test_only_responses_with_names_need_decoding() -> None:
    """Fetch v13+ responses carry topic ids and records only: the proxy may forward them as bytes."""
    tenant = TenantFilter(A)
    assert [v for v in versions(1) if not tenant.handles_response(1, v)] == [v for v in versions(1) if v >= 13]
    assert all(tenant.handles_response(k, v) for k in (0, 3, 10, 15, 16, 19, 32) for v in versions(k))
    assert not tenant.handles_response(12, 4)  # Heartbeat: an error code only


def test_prefixes_must_be_disjoint_and_legal() -> None:
    check_prefixes([A, B, "tenant-ab."])
    with pytest.raises(ValueError, match="overlap"):
        check_prefixes(["team.", "ops.", "team.b."])  # "team." naming "b.x" would be "team.b."'s "x"
    with pytest.raises(ValueError, match="overlap"):
        check_prefixes([A, A])
    for bad in ("", "tenant a.", "x" * 249, "t/"):
        with pytest.raises(ValueError):
            TenantFilter(bad)
