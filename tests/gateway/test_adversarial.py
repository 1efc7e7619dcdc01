"""Issue 24's standing adversarial test on the broker itself: two SCRAM principals of one `logway serve` under
ACLs, mallory (the attacker) and bob (the victim), each allowed everything on its own prefix (topics, groups,
transactional ids) and idempotent writes, nothing on the other's; a super user watches.

The same sweep as through the proxy (tests/gateway/sweep.py; tests/proxy/test_adversarial.py says what each API's
requests name): bob plants state worth stealing through his own connection (tests/gateway/victim.py: records, one in
a transaction left open, an idempotent producer, a classic group member and a committed offset, KIP-848 and share
group members (the latter with a share session), a fetch session; an ACL of his other principal), then every API key
and version the broker advertises to mallory (asked by ApiVersions, so an API added later is swept without a change
here), and every other key kio knows, is sent in each way mallory can name bob's things (``_ways``), then malformed
frames; then mallory's own KIP-848 and share groups subscribe to bob's topics by name and by pattern, and she
re-authenticates as bob on her connection. After each API: nothing of bob's in any answer to mallory that her
request did not hold, nothing of bob's changed (as the super user sees it, and the broker's ACL and SCRAM files),
bob notices nothing (his fetch and share sessions, producer sequence and group members go on), and no traceback or
internal error in the broker's log.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from logway.server.security.authorizer import (
    ACL_FILE,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from logway.server.security.credentials import FILE_NAME as SCRAM_FILE
from logway.wire.errors import ErrorCode
from tests.gateway.adversary import ATTACKER_SESSION_MS, REGEXES, Target, tricks
from tests.gateway.sweep import Arena, malformed, subscriptions, sweep
from tests.gateway.victim import Closed, Conn, Holdings, Planted, Secrets, Spelling, plant, secrets_of

MECHANISM = "SCRAM-SHA-256"
TAG = "q7"
USERS = {"mallory": ("mal-z3", "mal-pw"), "bob": (f"bob-{TAG}", "bob-pw"), "root": ("root-z9", "root-pw")}
OTHER_OF_BOB = f"carol-{TAG}"  # bob's other principal: an ACL of hers on bob's topic is watched
PREFIXES = {"mallory": "mal-z3.", "bob": f"bob-{TAG}."}
OWN_TOPIC = PREFIXES["mallory"] + "mine"
FIRST_PRODUCER_ID = 0x0123_4567_89AB_CDEF  # the broker's producer ids start here: their bytes are searchable


@dataclass
class Broker(Arena):
    """One broker's two principals (the watcher: the super user, who sees bob's things by their names)."""

    data: Path = Path()

    def attackers_own(self) -> set[str]:
        """Mallory's own names (her prefix's topics, groups and transactional ids), some made to look like bob's,
        and her principal."""
        watch = self.watch()
        names = [t.name for t in watch.ask(3, 12, {"topics": None, "allow_auto_topic_creation": False}).topics]
        names += [g.group_id for g in watch.ask(16, 4, {"states_filter": []}).groups]
        names += [t.transactional_id for t in watch.ask(66, 1, {"state_filters": [], "producer_id_filters": [],
                                                                "duration_filter": -1}).transaction_states]
        watch.close()
        return {n for n in names if n.startswith(PREFIXES["mallory"])} | {USERS["mallory"][0]}


def _acls() -> Authorizer:
    acls = Authorizer()
    for who in ("mallory", "bob"):
        principal = f"User:{USERS[who][0]}"
        for kind in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID):
            acls.add(AclBinding(kind, PREFIXES[who], PatternType.PREFIXED, principal, "*", Operation.ALL,
                                Permission.ALLOW))
        acls.add(AclBinding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, principal, "*",
                            Operation.IDEMPOTENT_WRITE, Permission.ALLOW))
    acls.add(AclBinding(ResourceType.TOPIC, f"{PREFIXES['bob']}vault-{TAG}", PatternType.LITERAL,
                        f"User:{OTHER_OF_BOB}", "*", Operation.READ, Permission.ALLOW))
    return acls


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[Broker]:
    """`logway serve` on a SASL_PLAINTEXT listener (SCRAM-SHA-256) with the StandardAuthorizer; bob's state."""
    from tests.proxy.conftest import free_port_block, wait_for_port  # noqa: PLC0415

    workdir = tmp_path_factory.mktemp("adversarial-broker")
    data = workdir / "data"
    data.mkdir()
    (data / "producer-id-block").write_text(f"{FIRST_PRODUCER_ID}\n")
    _acls().save(data / ACL_FILE)
    port = free_port_block(1)
    props = workdir / "server.properties"
    props.write_text(
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}\nadvertised.listeners=SASL_PLAINTEXT://127.0.0.1:{port}\n"
        f"sasl.enabled.mechanisms={MECHANISM}\nconnections.max.reauth.ms=600000\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        f"super.users=User:{USERS['root'][0]}\nlog.dirs={data}\nnode.id=1\n"
        f"group.initial.rebalance.delay.ms=0\ngroup.min.session.timeout.ms={ATTACKER_SESSION_MS}\n")
    for user, password in USERS.values():
        subprocess.run([sys.executable, "-m", "logway.cli", "users", "add", "--config", str(props), "--user", user,
                        "--password", password, "--mechanism", MECHANISM], check=True, timeout=60)
    log_path = workdir / "broker.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "logway.cli", "serve", "--config", str(props)],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc)
        yield _plant(port, data, log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _plant(port: int, data: Path, log_path: Path) -> Broker:
    """Bob's state, what mallory must not learn of it, and the ways she names it."""
    prefix = PREFIXES["bob"]
    spelling = Spelling(topic=f"{prefix}vault-{TAG}", probe=f"{prefix}probe-{TAG}", group=f"{prefix}grp-{TAG}",
                        txn=f"{prefix}txn-{TAG}", tag=TAG)
    b = Conn(port, USERS["bob"], client_id=f"client-{TAG}", mechanism=MECHANISM)
    planted = plant(b, spelling)
    held = Holdings(topics=(spelling.topic,), config_topics=(spelling.topic, spelling.probe),
                    groups=(spelling.group,), txns=(spelling.txn,), partitions=3,
                    consumer_groups=(spelling.consumer_group,), share_groups=(spelling.share_group,),
                    files=(data / ACL_FILE, data / SCRAM_FILE), acl_principals=(f"User:{OTHER_OF_BOB}",))
    m = Conn(port, USERS["mallory"], mechanism=MECHANISM)
    created = m.ask(19, 5, {"topics": [{"name": OWN_TOPIC, "num_partitions": 3, "replication_factor": 1}],
                            "timeout": 15000})
    assert created.topics[0].error_code == ErrorCode.none, created
    own_id = m.ask(3, 12, {"topics": [{"name": OWN_TOPIC}], "allow_auto_topic_creation": False}).topics[0].topic_id
    m.close()
    world = Broker(b, spelling, planted, _secrets(spelling, planted), held, _ways(spelling, planted, own_id),
                   (log_path,), port, USERS["mallory"], port, USERS["root"], own_group=PREFIXES["mallory"] + "sub",
                   mechanism=MECHANISM, data=data)
    world.new_log_lines()
    return world


def _secrets(n: Spelling, planted: Planted) -> Secrets:
    return secrets_of(n, planted, {"prefix": PREFIXES["bob"], "other principal": OTHER_OF_BOB,
                                   "super user": USERS["root"][0]})


def _ways(n: Spelling, planted: Planted, own_topic_id) -> dict[str, Target]:
    """Each way mallory names bob's things (the Target generated requests take their values from)."""
    session_id, epoch = planted.session
    sessions = tuple((session_id, e) for e in (-1, 0, 1, epoch, epoch + 1, 2**31 - 1))
    victim = Target(
        topics=(n.topic, n.probe), groups=(n.group, n.consumer_group, n.share_group), txns=(n.txn,),
        regexes=(re.escape(PREFIXES["bob"]) + ".*", n.topic, f"{re.escape(n.topic)}|.*", f"(?i){n.topic.upper()}"),
        topic_ids=tuple(planted.topic_ids.values()), sessions=sessions,
        producers=(planted.idempotent, planted.transactional), members=planted.member_ids(), instances=(None,),
        users=(USERS["bob"][0], OTHER_OF_BOB), principals=(f"User:{USERS['bob'][0]}", f"User:{OTHER_OF_BOB}"),
        auth=(b"\0" + USERS["bob"][0].encode() + b"\0" + USERS["bob"][1].encode(),))
    own = Target(topics=(OWN_TOPIC,), groups=(PREFIXES["mallory"] + "grp",), txns=(PREFIXES["mallory"] + "txn",),
                 regexes=(re.escape(PREFIXES["mallory"]) + ".*",), topic_ids=(own_topic_id,),
                 sessions=((0, 0), (0, -1)), producers=((-1, -1),), members=("", "mal-z3-member"),
                 instances=(None, PREFIXES["mallory"] + "inst"), users=(USERS["mallory"][0],),
                 principals=(f"User:{USERS['mallory'][0]}",), auth=victim.auth)
    bare = tuple(name.removeprefix(PREFIXES["bob"]) for name in (n.topic, n.group, n.txn))
    tricked = tricks(PREFIXES["bob"], PREFIXES["mallory"], bare)
    return {
        "names": victim,
        "prefix tricks": dataclasses.replace(victim, topics=tricked, groups=tricked, txns=tricked),
        "regexes": dataclasses.replace(victim, regexes=REGEXES + victim.regexes, topics=REGEXES[:4] + victim.topics,
                                       groups=own.groups + REGEXES[:1], txns=REGEXES[:4]),  # own: regexes resolved
        "topic ids": dataclasses.replace(own, topic_ids=victim.topic_ids, by_id=True),
        "handed ids": dataclasses.replace(own, sessions=sessions, producers=victim.producers, members=victim.members),
        # the victim's share member in the attacker's group, its share session opened anew (0) or closed (-1)
        "share member": dataclasses.replace(own, members=(planted.share[0],), sessions=((0, 0), (0, -1))),
        "null lists": dataclasses.replace(victim, nulls=True),
        "mixed": own.mix(victim),
    }


def test_nothing_of_bob_reaches_mallory_by_any_request(broker):
    findings, summary = sweep(broker)
    print(summary)
    assert not findings, "\n".join(findings)


def test_nothing_of_bob_reaches_mallory_by_malformed_frames(broker):
    findings = malformed(broker)
    assert not findings, "\n".join(findings)


def test_mallorys_groups_subscribing_to_bobs_topics_get_none(broker):
    findings = subscriptions(broker)
    assert not findings, "\n".join(findings)


def test_mallory_cannot_reauthenticate_as_bob(broker):
    """Re-authentication (KIP-368) on mallory's connection with bob's user and password: refused (Kafka's
    "Cannot change principals during re-authentication"), and the connection, if still open, is mallory's."""
    m = broker.attacker()
    m.connect()
    assert m.authenticate(*USERS["bob"]) in (ErrorCode.sasl_authentication_failed, -1)
    try:
        answer = m.ask(3, 12, {"topics": [{"name": broker.spelling.topic}], "allow_auto_topic_creation": False})
    except Closed:
        pass
    else:
        assert [t.error_code for t in answer.topics] == [ErrorCode.topic_authorization_failed], answer
    assert not broker.new_log_lines()
