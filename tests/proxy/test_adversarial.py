"""Issue 24's standing adversarial test through the proxy: tenant A (attacker) and tenant B (victim), two virtual
clusters of one `logway proxy` in front of a Logway upstream, without an authorizer ("open") and with one ("acl":
each virtual cluster's own ACLs, A an admin of its own cluster).

B holds state worth stealing, planted through its own connection (tests/gateway/victim.py): a topic with records,
one of them in a transaction left open; an idempotent producer; a consumer group member that never heartbeats and a
committed offset; a KIP-848 consumer group member and a share group member (with a share session, where ShareFetch
is offered); a fetch session; a SCRAM user (and, under ACLs, an ACL) of its virtual cluster.

For every API key and version the proxy advertises on A's listener (asked by ApiVersions), a request is built from
kio's schema (tests/gateway/adversary.py: every field filled by what it names) in each way A can name B's things
(``WAYS``): B's names as B writes them, B's names with B's prefix (as the upstream knows them), prefix tricks,
regexes, B's ids (topic ids, its fetch session at several epochs, its producer ids in batches and transactions, its
member ids; its share member id in A's own group), null lists ("all topics", "all groups"), and a mix with A's own
things. Every API key kio knows that the proxy does not advertise is sent too (its lowest and highest versions).
Then A's connection gets malformed frames (cut, lengths lying, junk), and A's credentials are tried on B's ports.

After each API's requests: nothing leaked (no answer to A holds B's names, prefix, topic ids, record or group bytes,
committed offset, producer or session ids, users, ACL principals, unless A's request held it: checked in the
answer's bytes and its decoded fields, tests/gateway/victim.py ``leaks``), nothing changed (B's topics, configs,
records, producers, group and offsets, transactions, users and ACLs, as the upstream and the proxy's files hold
them, are as before), B notices nothing (its fetch session goes on, its producer's next batch lands where it
expects, its members are still in their generations and epochs, its share session goes on), and neither process
logged a traceback or an internal error. The run is seeded (LOGWAY_ADVERSARY_SEED, 0 by default) and bounded (every
wait a request asks is short).

What a generated request names, per API advertised on A's listener; the APIs with nothing of B to name are sent
all the same (and checked for leaks), as listed:

=================================  ==========================================================================
API                                what the attacker's requests name
=================================  ==========================================================================
Produce (0)                        topics (names, v13 ids), batches with B's producer ids, transactional ids
Fetch (1)                          topics (names, v13+ ids), B's fetch session at epochs -1, 0, next, far
ListOffsets, OffsetForLeaderEpoch  topics
Metadata (3)                       topics (names, v10+ ids with null names), null list (all topics)
OffsetCommit/Fetch/Delete, TxnOC   groups, topics, B's member id and generation, producer ids
FindCoordinator (10)               groups and transactional ids (by key type), v4+ lists of them
JoinGroup .. LeaveGroup (11-14)    groups, B's member id, B's instance id
DescribeGroups, DeleteGroups       groups; ListGroups (16): nothing but state/type filters (a listing)
CreateTopics .. CreatePartitions   topics (DeleteTopics v6 ids), configs
InitProducerId .. EndTxn (22-26)   transactional ids with B's producer ids and epochs
ACLs (29-31)                       every resource type with B's names and patterns, B's principals
Configs (32, 33, 44)               topic and group resources by B's names, broker resources
SCRAM users (50, 51)               B's users (answered by the proxy from A's own realm)
DescribeProducers, DescribeTxns    topics; transactional ids; ListTransactions (66): regexes, B's producer ids
DescribeTopicPartitions (75)       topics, cursors naming B's topics
ConsumerGroupHeartbeat/Describe    groups (B's KIP-848 group), B's member ids, subscribed names and regexes
ShareGroupHeartbeat/Describe       groups (B's share group), B's member ids, subscribed names
ShareFetch, ShareAcknowledge       groups, B's share member id (also in A's group, at session epochs 0, -1),
                                   topic ids (offered without ACLs only: the proxy cannot check them)
Share group offsets (90-92)        groups, topics
ApiVersions (18), SaslHandshake    nothing (the proxy's own answer; a mechanism): leak-checked only
SaslAuthenticate (36)              B's credentials on A's listener (re-authentication as B's user)
DescribeCluster (60)               nothing (the upstream's brokers, rewritten): leak-checked only
=================================  ==========================================================================
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from logway.server.security.authorizer import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType
from logway.wire.errors import ErrorCode
from tests.gateway.adversary import ATTACKER_SESSION_MS, REGEXES, Target, tricks
from tests.gateway.sweep import Arena, malformed, subscriptions, sweep
from tests.gateway.victim import (
    Closed,
    Conn,
    Holdings,
    Planted,
    Secrets,
    Spelling,
    errors_of,
    plant,
    secrets_of,
)

NODE = 1  # the upstream's node.id
SPAN = 12  # ports per listener: the bootstrap port, then node N on + 1 + N (node ids 0-9)
FIRST_PRODUCER_ID = 0x0123_4567_89AB_CDEF  # the upstream's producer ids start here: their bytes are searchable
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"
USERS = {"a": ("alice-z3", "alice-pw"), "b": ("bob-q7", "bob-pw")}
VICTIM_ONLY_USER = ("carol-q7", b"carol-salt-q7", b"carol-salted-password-q7")
TAG = "q7"
OWN_TOPIC = "mine-z3"  # A's own topic (three partitions), named beside B's


@dataclass
class World(Arena):
    """One proxy's two tenants and the upstream behind it (the watcher's view: B's things by their full names)."""

    mode: str = ""
    ports: dict[str, int] = dataclasses.field(default_factory=dict)
    prefixes: dict[str, str] = dataclasses.field(default_factory=dict)
    realm_dirs: dict[str, Path] = dataclasses.field(default_factory=dict)

    def node_port(self, tenant: str) -> int:
        return self.ports[tenant] + 1 + NODE

    def attackers_own(self) -> set[str]:
        """A's own names as A sees them (its topics, groups and transactional ids upstream, its realm's users and
        ACLs), some of which A made to look like B's."""
        prefix, watch = self.prefixes["a"], self.watch()
        names = [t.name for t in watch.ask(3, 12, {"topics": None, "allow_auto_topic_creation": False}).topics]
        names += [g.group_id for g in watch.ask(16, 4, {"states_filter": []}).groups]
        names += [t.transactional_id for t in watch.ask(66, 1, {"state_filters": [], "producer_id_filters": [],
                                                                "duration_filter": -1}).transaction_states]
        watch.close()
        own = {name[len(prefix):] for name in names if name.startswith(prefix)}
        users = self.realm_dirs["a"] / "scram-credentials.json"
        if users.exists():
            own |= set(json.loads(users.read_text())["users"])
        acls = self.realm_dirs["a"] / "logway-acls.json"
        if acls.exists():
            for acl in json.loads(acls.read_text())["acls"]:
                own |= {acl["principal"], acl["name"].removeprefix(prefix)}
        return own


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Iterator:
    """A Logway broker (node.id 1) whose producer ids start at FIRST_PRODUCER_ID."""
    from tests.proxy.conftest import GatewayProcess  # noqa: PLC0415

    data = tmp_path_factory.mktemp("adversarial-upstream") / "data"
    data.mkdir()
    (data / "producer-id-block").write_text(f"{FIRST_PRODUCER_ID}\n")
    gw = GatewayProcess(data, extra_args=("--override", "node.id=1", "--override", "group.initial.rebalance.delay.ms=0",
                                          "--override", f"group.min.session.timeout.ms={ATTACKER_SESSION_MS}"))
    gw.start()
    try:
        yield gw
    finally:
        gw.stop("KILL")


@pytest.fixture(scope="module", params=["open", "acl"])
def world(request, tmp_path_factory, upstream) -> Iterator[World]:
    from tests.proxy.conftest import add_scram_users, free_port_block, proxy_from_properties  # noqa: PLC0415

    mode = request.param
    base = free_port_block(2 * SPAN)
    ports = {"a": base, "b": base + SPAN}
    prefixes = {"a": f"{mode}-a-z3.", "b": f"{mode}-b-{TAG}."}
    workdir = tmp_path_factory.mktemp(f"adversarial-{mode}")
    props = _configure(workdir, mode, ports, prefixes, upstream.bootstrap)
    realm_dirs = {t: workdir / "state" / "virtual-clusters" / t for t in ports}
    if mode == "acl":
        _grant_admins(realm_dirs, prefixes)
    add_scram_users(props, USERS)
    log_path = workdir / "proxy.log"
    with proxy_from_properties(workdir, props.read_text(), [p + skip for p in ports.values() for skip in (0, 1 + NODE)]):
        yield _plant(mode, ports, prefixes, (log_path, upstream.log_path), realm_dirs, upstream.port)


def _configure(workdir: Path, mode: str, ports: dict[str, int], prefixes: dict[str, str], upstream: str) -> Path:
    props = workdir / "proxy.properties"
    props.write_text(
        f"listeners=TENANT_A://127.0.0.1:{ports['a']},TENANT_B://127.0.0.1:{ports['b']}\n"
        "listener.security.protocol.map=TENANT_A:SASL_PLAINTEXT,TENANT_B:SASL_PLAINTEXT\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\nconnections.max.reauth.ms=600000\n"
        f'listener.name.tenant_a.plain.sasl.jaas.config={PLAIN} user_{USERS["a"][0]}="{USERS["a"][1]}";\n'
        f'listener.name.tenant_b.plain.sasl.jaas.config={PLAIN} user_{USERS["b"][0]}="{USERS["b"][1]}";\n'
        f"log.dirs={workdir / 'state'}\n"
        f"proxy.upstream.bootstrap.servers={upstream}\n"
        "proxy.node.id.range=0-9\nproxy.metadata.refresh.interval.ms=1000\n"
        "proxy.virtual.clusters=a,b\n"
        f"proxy.virtual.cluster.a.listener=TENANT_A\nproxy.virtual.cluster.a.topic.prefix={prefixes['a']}\n"
        f"proxy.virtual.cluster.b.listener=TENANT_B\nproxy.virtual.cluster.b.topic.prefix={prefixes['b']}\n"
        + ("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n" if mode == "acl" else ""))
    return props


def _grant_admins(realm_dirs: dict[str, Path], prefixes: dict[str, str]) -> None:
    """Each tenant's user may do everything in its own virtual cluster: its topics, groups and transactional ids
    (its prefix, as the upstream names them) and the cluster (its users, its ACLs)."""
    for tenant, directory in realm_dirs.items():
        principal = f"User:{USERS[tenant][0]}"
        acls = Authorizer()
        for kind in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID):
            acls.add(AclBinding(kind, prefixes[tenant], PatternType.PREFIXED, principal, "*", Operation.ALL,
                                Permission.ALLOW))
        acls.add(AclBinding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, principal, "*", Operation.ALL,
                            Permission.ALLOW))
        if tenant == "b":  # one more of B's: its topic readable by B's other user
            acls.add(AclBinding(ResourceType.TOPIC, f"{prefixes['b']}vault-{TAG}", PatternType.LITERAL,
                                f"User:{VICTIM_ONLY_USER[0]}", "*", Operation.READ, Permission.ALLOW))
        directory.mkdir(parents=True)
        acls.save(directory / "logway-acls.json")


def _plant(mode: str, ports: dict[str, int], prefixes: dict[str, str], log_paths: tuple[Path, ...],
           realm_dirs: dict[str, Path], upstream_port: int) -> World:
    """B's state, what A must not learn of it, and the ways A names it."""
    spelling = Spelling(topic=f"vault-{TAG}", probe=f"probe-{TAG}", group=f"grp-{TAG}", txn=f"txn-{TAG}", tag=TAG)
    b = Conn(ports["b"] + 1 + NODE, USERS["b"], client_id=f"client-{TAG}")
    planted = plant(b, spelling)
    user, salt, salted = VICTIM_ONLY_USER
    altered = b.ask(51, 0, {"deletions": [], "upsertions": [
        {"name": user, "mechanism": 1, "iterations": 4096, "salt": salt, "salted_password": salted}]})
    assert altered.results[0].error_code == ErrorCode.none, altered
    prefix = prefixes["b"]
    full = Spelling(*(prefix + n for n in (spelling.topic, spelling.probe, spelling.group, spelling.txn)), TAG)
    held = Holdings(topics=(full.topic,), config_topics=(full.topic, full.probe), groups=(full.group,),
                    txns=(full.txn,), partitions=3, files=tuple(sorted((realm_dirs["b"]).glob("*.json"))),
                    consumer_groups=(full.consumer_group,), share_groups=(full.share_group,))
    secrets = _secrets(spelling, planted, prefix)
    a = Conn(ports["a"], USERS["a"])
    created = a.ask(19, 5, {"topics": [{"name": OWN_TOPIC, "num_partitions": 3, "replication_factor": 1}],
                            "timeout": 15000})
    assert created.topics[0].error_code == ErrorCode.none, created
    own_id = a.ask(3, 12, {"topics": [{"name": OWN_TOPIC}], "allow_auto_topic_creation": False}).topics[0].topic_id
    a.close()
    world = World(b, spelling, planted, secrets, held, _ways(spelling, prefix, planted, prefixes["a"], own_id),
                  log_paths, ports["a"], USERS["a"], upstream_port, own_group="sub-z3", mode=mode, ports=ports, prefixes=prefixes,
                  realm_dirs=realm_dirs)
    world.new_log_lines()
    return world


def _secrets(n: Spelling, planted: Planted, prefix: str) -> Secrets:
    return secrets_of(n, planted, {"prefix": prefix, "user": USERS["b"][0], "victim-only user": VICTIM_ONLY_USER[0],
                                   "salt": VICTIM_ONLY_USER[1], "salted password": VICTIM_ONLY_USER[2]})


def _ways(n: Spelling, prefix: str, planted: Planted, own_prefix: str, own_topic_id) -> dict[str, Target]:
    """Each way A names B's things (the Target generated requests take their values from)."""
    session_id, epoch = planted.session
    sessions = tuple((session_id, e) for e in (-1, 0, 1, epoch, epoch + 1, 2**31 - 1))
    victim = Target(
        topics=(n.topic, n.probe), groups=(n.group, n.consumer_group, n.share_group), txns=(n.txn,),
        regexes=(n.topic, f"{n.topic}|.*", f"(?i){n.topic.upper()}"), topic_ids=tuple(planted.topic_ids.values()),
        sessions=sessions, producers=(planted.idempotent, planted.transactional),
        members=planted.member_ids(), instances=(None,), users=(USERS["b"][0], VICTIM_ONLY_USER[0]),
        principals=(f"User:{USERS['b'][0]}", f"User:{VICTIM_ONLY_USER[0]}"),
        auth=(b"\0" + USERS["b"][0].encode() + b"\0" + USERS["b"][1].encode(),))
    own = Target(topics=(OWN_TOPIC,), groups=("grp-z3",), txns=("txn-z3",), regexes=("mine-.*",),
                 topic_ids=(own_topic_id,), sessions=((0, 0), (0, -1)), producers=((-1, -1),),
                 members=("", "member-z3"), instances=(None, "inst-z3"), users=(USERS["a"][0],),
                 principals=(f"User:{USERS['a'][0]}",), auth=victim.auth)
    upstream = dataclasses.replace(victim, topics=tuple(prefix + t for t in victim.topics),
                                   groups=tuple(prefix + g for g in victim.groups), txns=(prefix + n.txn,),
                                   regexes=tuple(re.escape(prefix) + r for r in (".*", re.escape(n.topic))))
    tricked = tricks(prefix, own_prefix, (n.topic, n.group, n.txn))
    return {
        "names": victim,
        "upstream names": upstream,
        "prefix tricks": dataclasses.replace(victim, topics=tricked, groups=tricked, txns=tricked),
        "regexes": dataclasses.replace(victim, regexes=REGEXES + upstream.regexes, topics=REGEXES[:4] + victim.topics,
                                       groups=own.groups + REGEXES[:1], txns=REGEXES[:4]),  # own: regexes resolved
        "topic ids": dataclasses.replace(own, topic_ids=victim.topic_ids, by_id=True),
        "handed ids": dataclasses.replace(own, sessions=sessions, producers=victim.producers, members=victim.members),
        # the victim's share member in the attacker's group, its share session opened anew (0) or closed (-1)
        "share member": dataclasses.replace(own, members=(planted.share[0],), sessions=((0, 0), (0, -1))),
        "null lists": dataclasses.replace(victim, nulls=True),
        "mixed": own.mix(victim).mix(upstream),
    }


def test_nothing_of_b_reaches_a_by_any_request(world):
    findings, summary = sweep(world)
    print(f"{world.mode}: {summary}")
    assert not findings, "\n".join(findings)


def test_nothing_of_b_reaches_a_by_malformed_frames(world):
    findings = malformed(world)
    assert not findings, "\n".join(findings)


def test_as_groups_subscribing_to_bs_topics_get_none(world):
    findings = subscriptions(world)
    assert not findings, "\n".join(findings)


def _scram_login(port: int, user: str, password: str) -> int:
    """A SCRAM-SHA-256 login on a new connection: the last SaslAuthenticate's error code (or -1: closed)."""
    return _login(port, user, password, "SCRAM-SHA-256")


def _plain_login(port: int, user: str, password: str) -> int:
    return _login(port, user, password, "PLAIN")


def _login(port: int, user: str, password: str, mechanism: str) -> int:
    conn = Conn(port, mechanism=mechanism)
    try:
        return conn.authenticate(user, password)
    finally:
        conn.close()


def test_a_is_no_one_on_bs_ports(world):
    """A's users, and a user A made in its own realm with B's user's name and a password A knows, log in on A's
    ports only; on B's bootstrap and broker ports nothing A knows logs in, and nothing is answered before a login."""
    a = world.attacker()
    password = "chosen-by-a"
    salt = b"salt-chosen-by-a"
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 4096)
    own_salt = b"salt-of-a"  # A's own user set again: the sweep's AlterUserScramCredentials may have changed it
    own = hashlib.pbkdf2_hmac("sha256", USERS["a"][1].encode(), own_salt, 4096)
    upserted = a.ask(51, 0, {"deletions": [], "upsertions": [
        {"name": USERS["b"][0], "mechanism": 1, "iterations": 4096, "salt": salt, "salted_password": salted},
        {"name": USERS["a"][0], "mechanism": 1, "iterations": 4096, "salt": own_salt, "salted_password": own}]})
    assert not errors_of(upserted), upserted
    assert _scram_login(world.ports["a"], USERS["b"][0], password) == ErrorCode.none  # B's name, A's realm
    assert _scram_login(world.ports["a"], *USERS["a"]) == ErrorCode.none
    for port in (world.ports["b"], world.node_port("b")):
        for login in (_scram_login, _plain_login):
            for user, secret in (USERS["a"], (USERS["b"][0], password)):
                assert login(port, user, secret) in (ErrorCode.sasl_authentication_failed, -1), (port, user)
        with pytest.raises(Closed):  # Kafka closes a connection whose first request is not SASL's (or ApiVersions)
            Conn(port).ask(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    assert not world.new_log_lines()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_cannot_reauthenticate_as_b(world, mechanism):
    """Re-authentication (KIP-368) on A's connection with B's user and password: refused (B's user is not A's
    listener's, and a re-authentication may not change the principal), and the connection acts as A after it."""
    a = world.attacker()
    created = a.ask(19, 5, {"topics": [{"name": OWN_TOPIC, "num_partitions": 3, "replication_factor": 1}],
                            "timeout": 15000})  # again: the sweep's DeleteTopics may have deleted it
    assert created.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists), created
    user, password = USERS["b"]
    assert a.authenticate(user, password, mechanism) in (ErrorCode.sasl_authentication_failed, -1)
    a.close()
    listed = a.ask(3, 12, {"topics": None, "allow_auto_topic_creation": False})  # a new connection: A's still
    assert OWN_TOPIC in {t.name for t in listed.topics}
    assert not {t.topic_id for t in listed.topics} & set(world.planted.topic_ids.values())  # none of B's topics
    assert not world.new_log_lines()
