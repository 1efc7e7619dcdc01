"""The authorizer alone: a table of (principal, host, operation, resource) -> decision cases from Kafka's
documented StandardAuthorizer behaviour (docs "Authorization and ACLs", StandardAuthorizerTest)."""

from __future__ import annotations

import pytest

from logway.server.security.authorizer import (
    AclBinding,
    AclError,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    client_host,
    parse_super_users,
)

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
OP = Operation
ALICE, BOB, ADMIN = "User:alice", "User:bob", "User:admin"
H1, H2 = "10.0.0.1", "10.0.0.2"


def acl(rt, name, pt, principal, host, op, perm) -> AclBinding:
    return AclBinding(int(rt), name, int(pt), principal, host, int(op), int(perm))


# The ACLs every case below is decided against.
ACLS = [
    acl(T, "orders", LIT, ALICE, "*", OP.READ, ALLOW),
    acl(T, "orders", LIT, ALICE, "*", OP.WRITE, DENY),
    acl(T, "pay-", PRE, ALICE, "*", OP.WRITE, ALLOW),
    acl(T, "pay-secret", LIT, ALICE, "*", OP.WRITE, DENY),
    acl(T, "pay-", PRE, BOB, H1, OP.READ, ALLOW),
    acl(T, "logs", LIT, "User:*", "*", OP.DESCRIBE, ALLOW),
    acl(T, "metrics", PRE, "User:*", "*", OP.ALL, ALLOW),
    acl(T, "metrics-private", LIT, BOB, "*", OP.ALL, DENY),
    acl(T, "cfg", LIT, ALICE, "*", OP.ALTER_CONFIGS, ALLOW),
    acl(T, "cfg", LIT, BOB, "*", OP.DESCRIBE_CONFIGS, ALLOW),
    acl(T, "ro", LIT, ALICE, "*", OP.DELETE, ALLOW),
    acl(T, "ro", LIT, ALICE, "*", OP.ALTER, ALLOW),
    acl(T, "nodesc", LIT, BOB, "*", OP.READ, ALLOW),
    acl(T, "nodesc", LIT, BOB, "*", OP.READ, DENY),
    acl(T, "denyread", LIT, ALICE, "*", OP.READ, DENY),
    acl(T, "denyread", LIT, ALICE, "*", OP.DESCRIBE, ALLOW),
    acl(T, "a", PRE, ALICE, "*", OP.CREATE, ALLOW),
    acl(T, "ab", PRE, ALICE, "*", OP.CREATE, DENY),
    acl(T, "abc", LIT, ALICE, "*", OP.CREATE, ALLOW),
    acl(G, "app-", PRE, ALICE, "*", OP.READ, ALLOW),
    acl(G, "*", LIT, BOB, "*", OP.READ, ALLOW),
    acl(G, "app-banned", LIT, BOB, "*", OP.READ, DENY),
    acl(C, "kafka-cluster", LIT, ALICE, "*", OP.IDEMPOTENT_WRITE, ALLOW),
    acl(C, "kafka-cluster", LIT, BOB, H2, OP.ALTER, ALLOW),
    acl(X, "tx-", PRE, ALICE, "*", OP.WRITE, ALLOW),
    acl(T, "*", LIT, "User:carol", "*", OP.READ, ALLOW),
    acl(T, "wild-deny", LIT, "User:*", H2, OP.ALL, DENY),
]

# (principal, host, operation, resource type, name, allowed with allow.everyone.if.no.acl.found=false, =true)
CASES = [
    # literal ALLOW, and DENY beats ALLOW
    (ALICE, H1, OP.READ, T, "orders", True, True),
    (ALICE, H1, OP.WRITE, T, "orders", False, False),
    (BOB, H1, OP.READ, T, "orders", False, False),  # ACLs exist on the resource: no default allow
    (ALICE, H1, OP.DESCRIBE, T, "orders", True, True),  # READ implies DESCRIBE
    (ALICE, H1, OP.CREATE, T, "orders", False, False),
    # prefixed
    (ALICE, H1, OP.WRITE, T, "pay-in", True, True),
    (ALICE, H1, OP.WRITE, T, "pay-", True, True),  # the prefix itself
    (ALICE, H1, OP.WRITE, T, "pay", False, False),  # shorter than the prefix; the '*' topic ACL applies
    (ALICE, H1, OP.WRITE, T, "pay-secret", False, False),  # literal DENY within an allowed prefix
    (ALICE, H1, OP.WRITE, T, "pay-secrets", True, True),  # the literal DENY is not a prefix
    (ALICE, H1, OP.READ, T, "pay-in", False, False),
    (ALICE, H1, OP.DESCRIBE, T, "pay-in", True, True),  # WRITE implies DESCRIBE
    # hosts
    (BOB, H1, OP.READ, T, "pay-in", True, True),
    (BOB, H2, OP.READ, T, "pay-in", False, False),
    (BOB, H2, OP.DESCRIBE, T, "pay-in", False, False),
    # wildcard principal User:*
    (ALICE, H1, OP.DESCRIBE, T, "logs", True, True),
    ("User:zed", H2, OP.DESCRIBE, T, "logs", True, True),
    ("User:zed", H2, OP.READ, T, "logs", False, False),  # DESCRIBE implies nothing
    # ALL
    (ALICE, H1, OP.WRITE, T, "metrics-cpu", True, True),
    (ALICE, H1, OP.DELETE, T, "metrics-cpu", True, True),
    (ALICE, H1, OP.ALTER_CONFIGS, T, "metrics-cpu", True, True),
    (BOB, H1, OP.READ, T, "metrics-private", False, False),  # DENY ALL
    (BOB, H1, OP.DESCRIBE, T, "metrics-private", False, False),
    (ALICE, H1, OP.READ, T, "metrics-private", True, True),
    # DESCRIBE_CONFIGS implied by ALTER_CONFIGS only
    (ALICE, H1, OP.DESCRIBE_CONFIGS, T, "cfg", True, True),
    (ALICE, H1, OP.DESCRIBE, T, "cfg", False, False),  # ALTER_CONFIGS does not imply DESCRIBE
    (BOB, H1, OP.DESCRIBE_CONFIGS, T, "cfg", True, True),
    (BOB, H1, OP.ALTER_CONFIGS, T, "cfg", False, False),
    (ALICE, H1, OP.DESCRIBE_CONFIGS, T, "orders", False, False),  # READ does not imply DESCRIBE_CONFIGS
    # DELETE and ALTER imply DESCRIBE, nothing else
    (ALICE, H1, OP.DESCRIBE, T, "ro", True, True),
    (ALICE, H1, OP.READ, T, "ro", False, False),
    # both ALLOW and DENY of one operation: DENY
    (BOB, H1, OP.READ, T, "nodesc", False, False),
    # a DENY READ does not deny DESCRIBE (implication is for ALLOW only)
    (ALICE, H1, OP.DESCRIBE, T, "denyread", True, True),
    (ALICE, H1, OP.READ, T, "denyread", False, False),
    # nested prefixes and a literal inside them
    (ALICE, H1, OP.CREATE, T, "a1", True, True),
    (ALICE, H1, OP.CREATE, T, "abx", False, False),
    (ALICE, H1, OP.CREATE, T, "abc", False, False),  # the DENY prefix 'ab' covers 'abc'
    (ALICE, H1, OP.CREATE, T, "b", False, False),  # only the '*' ACL (for carol) applies
    # groups, the '*' resource, DENY beats a '*' ALLOW
    (ALICE, H1, OP.READ, G, "app-1", True, True),
    (ALICE, H1, OP.DESCRIBE, G, "app-1", True, True),
    (ALICE, H1, OP.READ, G, "other", False, False),  # the '*' ACL applies (for bob): no default allow
    (BOB, H1, OP.READ, G, "anything", True, True),
    (BOB, H1, OP.READ, G, "app-banned", False, False),
    (BOB, H1, OP.DELETE, G, "anything", False, False),
    # cluster
    (ALICE, H1, OP.IDEMPOTENT_WRITE, C, "kafka-cluster", True, True),
    (ALICE, H1, OP.ALTER, C, "kafka-cluster", False, False),
    (BOB, H2, OP.ALTER, C, "kafka-cluster", True, True),
    (BOB, H1, OP.ALTER, C, "kafka-cluster", False, False),
    (BOB, H2, OP.DESCRIBE, C, "kafka-cluster", True, True),
    # transactional ids
    (ALICE, H1, OP.WRITE, X, "tx-1", True, True),
    (ALICE, H1, OP.DESCRIBE, X, "tx-1", True, True),
    (BOB, H1, OP.WRITE, X, "tx-1", False, False),
    (BOB, H1, OP.WRITE, X, "other", False, True),
    # '*' topic ACL applies to every topic (so no default allow anywhere for topics)
    ("User:carol", H1, OP.READ, T, "anything", True, True),
    ("User:carol", H1, OP.WRITE, T, "anything", False, False),
    ("User:carol", H2, OP.READ, T, "wild-deny", False, False),  # DENY for User:* from H2
    ("User:carol", H1, OP.READ, T, "wild-deny", True, True),
    # resource types are separate
    (ALICE, H1, OP.READ, G, "orders", False, False),
    (ALICE, H1, OP.READ, X, "orders", False, True),
    # principals compare exactly (type and case)
    ("User:Alice", H1, OP.READ, T, "orders", False, False),
    ("Group:alice", H1, OP.READ, T, "orders", False, False),
]


@pytest.mark.parametrize("allow_if_none", [False, True])
@pytest.mark.parametrize(("principal", "host", "op", "rt", "name", "no_default", "with_default"), CASES)
def test_decision_table(principal, host, op, rt, name, no_default, with_default, allow_if_none):
    authorizer = Authorizer(allow_if_no_acl=allow_if_none)
    for a in ACLS:
        authorizer.add(a)
    expected = with_default if allow_if_none else no_default
    assert authorizer.authorize(principal, host, op, rt, name) is expected


def test_no_acls_at_all_follows_allow_everyone_if_no_acl_found():
    assert Authorizer(allow_if_no_acl=False).authorize(ALICE, H1, OP.READ, T, "t") is False
    assert Authorizer(allow_if_no_acl=True).authorize(ALICE, H1, OP.READ, T, "t") is True


def test_super_users_are_allowed_everything_even_when_denied():
    authorizer = Authorizer(parse_super_users(" User:admin ; User:bob"))
    authorizer.add(acl(T, "*", LIT, "User:*", "*", OP.ALL, DENY))
    assert authorizer.authorize(ADMIN, H1, OP.DELETE, T, "x") is True
    assert authorizer.authorize(BOB, H1, OP.ALTER, C, "kafka-cluster") is True
    assert authorizer.authorize(ALICE, H1, OP.READ, T, "x") is False


def test_removing_acls_updates_the_index():
    authorizer = Authorizer()
    prefixed = acl(T, "p", PRE, ALICE, "*", OP.READ, ALLOW)
    authorizer.add(prefixed)
    authorizer.add(prefixed)  # a duplicate is one ACL, as in Kafka
    assert len(authorizer.acls) == 1
    assert authorizer.authorize(ALICE, H1, OP.READ, T, "pq")
    authorizer.remove(prefixed)
    assert not authorizer.authorize(ALICE, H1, OP.READ, T, "pq")
    assert not authorizer._prefix_lengths[int(T)]


def test_any_allowed_by_resource_type():
    authorizer = Authorizer()
    authorizer.add(acl(T, "w-", PRE, ALICE, "*", OP.WRITE, ALLOW))
    assert authorizer.any_allowed(ALICE, H1, OP.WRITE, T)
    assert not authorizer.any_allowed(BOB, H1, OP.WRITE, T)
    authorizer.add(acl(T, "w", PRE, ALICE, "*", OP.WRITE, DENY))
    assert not authorizer.any_allowed(ALICE, H1, OP.WRITE, T)


FILTER_ACLS = [
    acl(T, "foo", LIT, ALICE, "*", OP.READ, ALLOW),
    acl(T, "fo", PRE, ALICE, "*", OP.READ, ALLOW),
    acl(T, "*", LIT, BOB, H1, OP.WRITE, DENY),
    acl(T, "bar", PRE, BOB, "*", OP.READ, ALLOW),
    acl(G, "foo", LIT, ALICE, "*", OP.READ, ALLOW),
]


@pytest.mark.parametrize(("flt", "expected"), [
    (AclFilter(1, None, 1, None, None, 1, 1), {0, 1, 2, 3, 4}),
    (AclFilter(2, None, 1, None, None, 1, 1), {0, 1, 2, 3}),
    (AclFilter(2, "foo", 3, None, None, 1, 1), {0}),
    (AclFilter(2, "foo", 1, None, None, 1, 1), {0}),
    (AclFilter(2, "foo", 2, None, None, 1, 1), {0, 1, 2}),  # MATCH: literal, '*' and prefixes
    (AclFilter(2, "fo", 4, None, None, 1, 1), {1}),
    (AclFilter(1, None, 1, "User:bob", None, 1, 1), {2, 3}),
    (AclFilter(1, None, 1, None, H1, 1, 1), {2}),
    (AclFilter(1, None, 1, None, None, 4, 1), {2}),
    (AclFilter(1, None, 1, None, None, 1, 3), {0, 1, 3, 4}),
    (AclFilter(1, "foo", 2, "User:alice", None, 3, 3), {0, 1, 4}),
])
def test_filters(flt, expected):
    authorizer = Authorizer()
    for a in FILTER_ACLS:
        authorizer.add(a)
    assert set(authorizer.matching(flt)) == {FILTER_ACLS[i] for i in expected}


@pytest.mark.parametrize("bad", [
    acl(ResourceType.ANY, "t", LIT, ALICE, "*", OP.READ, ALLOW),
    acl(T, "t", PatternType.MATCH, ALICE, "*", OP.READ, ALLOW),
    acl(T, "t", LIT, ALICE, "*", OP.ANY, ALLOW),
    acl(T, "t", LIT, ALICE, "*", OP.READ, Permission.ANY),
    acl(T, "", LIT, ALICE, "*", OP.READ, ALLOW),
    acl(C, "my-cluster", LIT, ALICE, "*", OP.ALTER, ALLOW),
    acl(T, "t", LIT, "alice", "*", OP.READ, ALLOW),
    acl(99, "t", LIT, ALICE, "*", OP.READ, ALLOW),
])
def test_invalid_bindings_are_refused(bad):
    with pytest.raises(AclError):
        bad.validate()


def test_acls_persist_through_a_file(tmp_path):
    authorizer = Authorizer()
    for a in ACLS:
        authorizer.add(a)
    authorizer.save(tmp_path / "acls.json")
    again = Authorizer()
    again.load(tmp_path / "acls.json")
    assert again.acls == authorizer.acls
    assert again.authorize(ALICE, H1, OP.WRITE, T, "pay-in")
    (tmp_path / "acls.json").write_text("{not json")
    with pytest.raises(ValueError, match="cannot read the ACLs"):
        Authorizer().load(tmp_path / "acls.json")


@pytest.mark.parametrize(("peer", "host"), [
    ("10.0.0.1:5555", "10.0.0.1"),
    ("::1:5555", "::1"),
    ("::ffff:10.0.0.1:5555", "10.0.0.1"),  # an IPv4 client of a dual-stack listener, as Java sees it
    ("?", "?"),
])
def test_client_host_is_the_address_kafka_matches_acl_hosts_against(peer, host):
    assert client_host(peer) == host
