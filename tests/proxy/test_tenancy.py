"""Virtual clusters end to end: one Logway upstream, one `logway proxy` with two tenant listeners (a and b,
prefixes tenant-a. and tenant-b.). Both tenants use the same topic and group names with real clients; each
sees, reads, commits and administers only its own, and the upstream holds both under their prefixes."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import TopicAlreadyExistsError, TopicAuthorizationFailedError, UnknownTopicOrPartitionError

from tests.proxy.prometheus_text import sample, scrape

NODE = 1  # the upstream's node.id (tests/proxy/conftest.py)
SPAN = 12  # ports per listener: the bootstrap port, then node N on + 1 + N (node ids 0-9)


@pytest.fixture(scope="module")
def tenant_proxy(tmp_path_factory, logway_upstream) -> Iterator[tuple[dict[str, str], int]]:
    """The proxy's two tenant bootstraps, {"a": host:port, "b": host:port}, and its metrics port."""
    from compat_tests.gateway_process import free_port  # noqa: PLC0415
    from tests.proxy.conftest import free_port_block, proxy_from_properties  # noqa: PLC0415

    base = free_port_block(2 * SPAN)
    metrics_port = free_port()
    workdir = tmp_path_factory.mktemp("tenant-proxy")
    ports = {"a": base, "b": base + SPAN}
    properties = (
        f"listeners=TENANT_A://127.0.0.1:{ports['a']},TENANT_B://127.0.0.1:{ports['b']}\n"
        "listener.security.protocol.map=TENANT_A:PLAINTEXT,TENANT_B:PLAINTEXT\n"
        f"log.dirs={workdir / 'state'}\n"
        f"proxy.upstream.bootstrap.servers={logway_upstream.bootstrap}\n"
        "proxy.node.id.range=0-9\nproxy.metadata.refresh.interval.ms=1000\n"
        f"metrics.port={metrics_port}\n"
        "proxy.virtual.clusters=a,b\n"
        "proxy.virtual.cluster.a.listener=TENANT_A\nproxy.virtual.cluster.a.topic.prefix=tenant-a.\n"
        "proxy.virtual.cluster.b.listener=TENANT_B\nproxy.virtual.cluster.b.topic.prefix=tenant-b.\n")
    with proxy_from_properties(workdir, properties, [p + skip for p in ports.values() for skip in (0, 1 + NODE)]):
        yield {name: f"127.0.0.1:{port}" for name, port in ports.items()}, metrics_port


def _consume(bootstrap: str, topic: str, group: str, want: int) -> tuple[list[bytes], list[TopicPartition]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(values) < want and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.poll(0.5)  # anything beyond what was wanted would show here
    values += [m.value() for m in [consumer.poll(0.2)] if m is not None and m.error() is None]
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    consumer.close()
    return values, committed


def test_confluent_tenants_share_names_but_nothing_else(tenant_proxy, logway_upstream):
    tenants, metrics_port = tenant_proxy
    admins = {t: AdminClient({"bootstrap.servers": b}) for t, b in tenants.items()}
    for admin in admins.values():
        for future in admin.create_topics([NewTopic("x", 1, 1)]).values():
            future.result(15)
    upstream = AdminClient({"bootstrap.servers": logway_upstream.bootstrap})
    assert {"tenant-a.x", "tenant-b.x"} <= set(upstream.list_topics(timeout=10).topics)
    for tenant, admin in admins.items():  # metadata: each lists only its own x, never a prefixed name
        listed = set(admin.list_topics(timeout=10).topics)
        assert "x" in listed and not any(n.startswith("tenant-") for n in listed), (tenant, listed)

    for tenant, bootstrap in tenants.items():
        producer = Producer({"bootstrap.servers": bootstrap, "client.id": f"producer-{tenant}"})
        for i in range(3):
            producer.produce("x", f"{tenant}-{i}".encode())
        assert producer.flush(15) == 0
    # The metrics name the upstream's topics (the tenant filter runs first).
    text = scrape(metrics_port)
    for tenant in tenants:
        assert sample(text, "kafka_server_brokertopicmetrics_messagesin_total", topic=f"tenant-{tenant}.x",
                      client_id=f"producer-{tenant}") == 3

    for tenant, bootstrap in tenants.items():  # the same group name in both tenants
        values, committed = _consume(bootstrap, "x", "g", 3)
        assert values == [f"{tenant}-{i}".encode() for i in range(3)]
        assert committed[0].offset == 3
    groups = {g.group_id for g in upstream.list_consumer_groups().result(10).valid}
    assert {"tenant-a.g", "tenant-b.g"} <= groups
    for tenant, admin in admins.items():
        seen = {g.group_id for g in admin.list_consumer_groups().result(10).valid}
        assert "g" in seen and not any(g.startswith("tenant-") for g in seen), (tenant, seen)
        described = admin.describe_consumer_groups(["g"])["g"].result(10)
        assert described.group_id == "g"

    # Tenant a cannot name b's topic: "tenant-b.x" from a is a's own "tenant-a.tenant-b.x", which is not there.
    described = admins["a"].describe_configs([ConfigResource(ResourceType.TOPIC, "tenant-b.x")])
    with pytest.raises(KafkaException):
        next(iter(described.values())).result(10)
    with pytest.raises(KafkaException):  # nor delete it
        admins["a"].delete_topics(["tenant-b.x"])["tenant-b.x"].result(10)
    # Cluster-wide things are not a tenant's: broker configs carry the upstream's addresses.
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        next(iter(admins["a"].describe_configs([ConfigResource(ResourceType.BROKER, str(NODE))]).values())).result(10)

    # Deleting b's x leaves a's x and its records.
    admins["b"].delete_topics(["x"])["x"].result(15)
    deadline = time.monotonic() + 10
    while "x" in admins["b"].list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "x" not in admins["b"].list_topics(timeout=10).topics
    assert "x" in admins["a"].list_topics(timeout=10).topics
    remaining = set(upstream.list_topics(timeout=10).topics)
    assert "tenant-a.x" in remaining and "tenant-b.x" not in remaining
    values, _ = _consume(tenants["a"], "x", "g2", 3)
    assert values == [f"a-{i}".encode() for i in range(3)]


def _group_id(group) -> str:
    return group["group_id"] if isinstance(group, dict) else group[0]


def test_kafka_python_tenants(tenant_proxy, logway_upstream):
    tenants, _ = tenant_proxy
    admins = {t: KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=10000) for t, b in tenants.items()}
    try:
        admins["a"].create_topics([KpNewTopic("y", 2, 1)])
        [b_view] = admins["b"].describe_topics(["y"])  # b has no y
        assert b_view["error_code"] == UnknownTopicOrPartitionError.errno
        with pytest.raises(UnknownTopicOrPartitionError):
            admins["b"].delete_topics(["y"])
        admins["b"].create_topics([KpNewTopic("y", 1, 1)])  # b's y is its own, even with a's y there
        with pytest.raises(TopicAlreadyExistsError):
            admins["b"].create_topics([KpNewTopic("y", 1, 1)])
        described = {t["topic"] if "topic" in t else t["name"]: len(t["partitions"]) for t in admins["a"].describe_topics(["y"])}
        assert described == {"y": 2}
        described = {t["topic"] if "topic" in t else t["name"]: len(t["partitions"]) for t in admins["b"].describe_topics(["y"])}
        assert described == {"y": 1}
        for tenant, admin in admins.items():
            assert not any(n.startswith("tenant-") for n in admin.list_topics()), tenant

        for tenant, bootstrap in tenants.items():
            producer = KafkaProducer(bootstrap_servers=bootstrap)
            for i in range(2):
                producer.send("y", f"{tenant}{i}".encode(), partition=0)
            producer.flush(15)
            producer.close()
        for tenant, bootstrap in tenants.items():
            consumer = KafkaConsumer("y", bootstrap_servers=bootstrap, group_id="kg", auto_offset_reset="earliest",
                                     enable_auto_commit=False, consumer_timeout_ms=3000)
            values = [m.value for m in consumer]
            consumer.commit()
            consumer.close()
            assert sorted(values) == [f"{tenant}0".encode(), f"{tenant}1".encode()]
            offsets = admins[tenant].list_group_offsets("kg")["kg"]
            assert {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()}[("y", 0)] == 2
            groups = [_group_id(g) for g in admins[tenant].list_groups()]
            assert "kg" in groups and not any(g.startswith("tenant-") for g in groups), groups
        upstream = KafkaAdminClient(bootstrap_servers=logway_upstream.bootstrap)
        try:
            assert {"tenant-a.y", "tenant-b.y"} <= set(upstream.list_topics())
            a_offsets = upstream.list_group_offsets("tenant-a.kg")["tenant-a.kg"]
            assert {tp.topic for tp in a_offsets} == {"tenant-a.y"}
        finally:
            upstream.close()
        admins["a"].delete_topics(["y"])
        assert "y" in admins["b"].list_topics()
    finally:
        for admin in admins.values():
            admin.close()


PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def test_acls_on_a_virtual_cluster_name_upstream_topics_and_answer_in_tenant_names(processes, logway_upstream):
    """The tenant filter runs before the ACLs: an ACL names the upstream's topic (tenant-t.ok), and a denial
    the ACL filter answers itself goes back through the tenant filter, so the client reads its own names."""
    from logway.server.security.authorizer import AclBinding, Authorizer, Operation, PatternType, Permission

    upstream = AdminClient({"bootstrap.servers": logway_upstream.bootstrap})
    for future in upstream.create_topics([NewTopic("tenant-t.ok", 1, 1), NewTopic("tenant-t.no", 1, 1),
                                          NewTopic("tenant-t.half", 1, 1)]).values():
        future.result(15)
    proxy = processes["proxy"](
        logway_upstream.bootstrap, "--override", "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f'listener.name.plaintext.plain.sasl.jaas.config={PLAIN} user_alice="a-pw";',
        "--override", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--override", "proxy.virtual.clusters=t", "--override", "proxy.virtual.cluster.t.listener=PLAINTEXT",
        "--override", "proxy.virtual.cluster.t.topic.prefix=tenant-t.")
    state = proxy.workdir / "state" / "virtual-clusters" / "t"  # the virtual cluster's own ACLs
    state.mkdir(parents=True)
    acls = Authorizer()
    for operation in (Operation.WRITE, Operation.READ):
        acls.add(AclBinding(2, "tenant-t.ok", PatternType.LITERAL, "User:alice", "*", operation, Permission.ALLOW))
    # "half" may be described, not written: its Produce reaches the ACL filter, which answers it itself.
    acls.add(AclBinding(2, "tenant-t.half", PatternType.LITERAL, "User:alice", "*", Operation.DESCRIBE,
                        Permission.ALLOW))
    acls.save(state / "logway-acls.json")
    proxy.start()
    proxy.wait_node_port(NODE)
    alice = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "alice", "sasl.password": "a-pw"}
    admin = AdminClient(alice)
    assert set(admin.list_topics(timeout=10).topics) == {"ok", "half"}
    assert admin.list_topics("no", timeout=10).topics["no"].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    outcomes: dict[str, list] = {"ok": [], "no": [], "half": []}
    for topic in ("no", "half", "ok"):
        producer = Producer({**alice, "message.timeout.ms": 5000})
        for i in range(3):
            producer.produce(topic, f"{i}".encode(), on_delivery=lambda err, msg: outcomes[msg.topic()].append(err))
        producer.flush(15)
    assert outcomes["ok"] == [None] * 3
    assert [e and e.code() for e in outcomes["no"]] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    assert [e and e.code() for e in outcomes["half"]] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    # kafka-python matches a Produce response's partitions to its batches by topic name (the answer must
    # be in the tenant's names).
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="a-pw",
                             retries=0, request_timeout_ms=5000, max_block_ms=5000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("half", b"x", partition=0).get(10)
    finally:
        producer.close(5)


def _api_keys(address: str) -> set[int]:
    """The API keys an ApiVersions v3 request to ``address`` lists."""
    from logway.proxy.frames import decode_response  # noqa: PLC0415
    from logway.wire.protocol import build, encode_body, request_type  # noqa: PLC0415

    body = encode_body(build(request_type(18, 3), {"client_software_name": "t", "client_software_version": "1"}))
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        header = struct.pack(">hhih", 18, 3, 1, 1) + b"t" + b"\x00"  # request header v2, client id "t"
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            assert chunk, "closed"
            data += chunk
    return {int(k.api_key) for k in decode_response(18, 3, data[4:]).api_keys}


def test_a_virtual_cluster_does_not_advertise_cluster_wide_apis(tenant_proxy, logway_upstream):
    from logway.proxy.filters.tenant import DENIED_API_KEYS  # noqa: PLC0415

    tenants, _ = tenant_proxy
    assert _api_keys(logway_upstream.bootstrap) & DENIED_API_KEYS  # e.g. DescribeLogDirs, SCRAM credentials
    advertised = _api_keys(tenants["a"])
    assert not advertised & DENIED_API_KEYS
    assert {0, 1, 3, 19, 20, 32} <= advertised  # produce, fetch, metadata, create/delete topics, configs


def test_share_groups_are_per_tenant(tenant_proxy, logway_upstream, tmp_path):
    """KIP-932 through the virtual clusters: Kafka 4.3.1's KafkaShareConsumer in tenant a and in tenant b, the
    same topic and share group names in both; each reads and acknowledges only its own records, its group's
    share.auto.offset.reset is its own, and the upstream holds tenant-a.workers and tenant-b.workers."""
    import shutil

    if shutil.which("java") is None:
        pytest.skip("the share consumer is Kafka's Java client")
    from compat_tests.kafka.kafka4_client import Kafka4Client  # noqa: PLC0415
    from compat_tests.kafka.sides import Side  # noqa: PLC0415

    tenants, _ = tenant_proxy
    consumers = []
    try:
        for tenant, bootstrap in tenants.items():
            port = int(bootstrap.rsplit(":", 1)[1])
            side = Side(tenant, port)
            side.create_topic("jobs", 1)
            resp = side.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": "workers", "configs": [
                {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
                "validate_only": False})
            assert [(r.error_code.name, r.resource_name) for r in resp.responses] == [("none", "workers")]
            producer = Producer({"bootstrap.servers": bootstrap})
            for i in range(5):
                producer.produce("jobs", f"{tenant}-{i}".encode())
            assert producer.flush(15) == 0
            consumers.append((tenant, Kafka4Client.start("share", bootstrap, "workers", "jobs", log_dir=tmp_path)))
        for tenant, consumer in consumers:
            consumer.wait_for(lambda c=consumer: len(c.committed()) >= 5, f"tenant {tenant}'s five records")
            assert sorted(consumer.committed()) == [f"{tenant}-{i}" for i in range(5)]
        upstream = Side("upstream", logway_upstream.port)
        listed = upstream.call(16, 5, {"states_filter": [], "types_filter": ["share"]}).groups
        assert {"tenant-a.workers", "tenant-b.workers"} <= {g.group_id for g in listed}
        described = Side("a", int(tenants["a"].rsplit(":", 1)[1])).call(
            77, 1, {"group_ids": ["workers"], "include_authorized_operations": False}).groups[0]
        assert (described.group_id, [m.subscribed_topic_names for m in described.members]) == ("workers", [("jobs",)])
        assert [t.topic_name for m in described.members for t in m.assignment.topic_partitions] == ["jobs"]
    finally:
        for _, consumer in consumers:
            consumer.stop()
