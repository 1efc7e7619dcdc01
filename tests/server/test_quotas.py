"""Kafka's client quota model (server/quotas.py), driven with a clock passed in: which quota holds a client (the
eight levels), which clients share a budget, how much a fresh client may take at once, the throttle times, the
Request, controller-mutation and IP connection-rate quotas, what AlterClientQuotas accepts and what a
DescribeClientQuotas filter matches."""

from __future__ import annotations

import math

import pytest

from logway.server.quota_entities import CLIENT_ID, IP, USER, QuotaFilter, check_entity, check_value, make_entity
from logway.server.quota_sensors import Windows
from logway.server.quotas import MAX_SENSORS, ClientQuotas
from logway.wire.errors import ErrorCode, KafkaError

MiB = 1024 * 1024


def entity(user: str | None | bool = False, client: str | None | bool = False) -> tuple:
    """An entity: user and/or client id (None: <default>; False: not part of it)."""
    pairs = []
    if user is not False:
        pairs.append((USER, user))
    if client is not False:
        pairs.append((CLIENT_ID, client))
    return make_entity(pairs)


# The eight levels of Kafka's ClientQuotaManager, most specific first, each with a distinct producer_byte_rate.
LEVELS = [
    (entity("alice", "app"), 1),
    (entity("alice", None), 2),
    (entity("alice"), 3),
    (entity(None, "app"), 4),
    (entity(None, None), 5),
    (entity(None), 6),
    (entity(client="app"), 7),
    (entity(client=None), 8),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_of_the_eight_levels_holds_a_client(level: int):
    quotas = ClientQuotas()
    for e, value in LEVELS[level:]:
        quotas.set(e, "producer_byte_rate", value * 1000)
    manager = quotas.produce
    assert manager.limit(manager.tags("alice", "app")) == (level + 1) * 1000


def test_clients_share_the_budget_of_the_entity_that_holds_them():
    quotas = ClientQuotas()
    quotas.set(entity("alice"), "producer_byte_rate", 1000)
    quotas.set(entity(client=None), "producer_byte_rate", 1000)
    tags = quotas.produce.tags
    assert tags("alice", "a") == tags("alice", "b") == ("alice", "")  # one user quota for all its client ids
    assert tags("bob", "a") != tags("bob", "b")  # a <default> client-id quota: each client id its own
    assert tags("bob", "a") == tags("carol", "a") == ("", "a")  # the same client id shares it across users


def test_a_fresh_client_takes_its_burst_then_is_held_to_its_rate():
    quotas = ClientQuotas(Windows(11, 1000))
    quotas.set(entity(client="slow"), "producer_byte_rate", MiB)
    record = quotas.produce.record
    # Ten windows' worth at once is within the quota: Kafka measures a young sensor over num - 1 windows.
    assert all(record("u", "slow", MiB, 0) == 0 for _ in range(10))
    delay = record("u", "slow", MiB, 0)
    # 11 MiB over 10 s is 1.1 MiB/s: (1.1 - 1) / 1 x 10 s = 1 s to fall back to 1 MiB/s (QuotaUtils.throttleTime).
    assert delay == 1000
    assert record("u", "other", 100 * MiB, 0) == 0  # another client id has no quota
    # A client sending as fast as its throttle times let it is held near its quota once the burst has passed.
    now, sent = 1000, 0
    while now < 60_000:
        if now >= 20_000:
            sent += MiB // 4
        now += 20 + record("u", "slow", MiB // 4, now)
    assert 0.9 * MiB < sent / ((now - 20_000) / 1000) < 1.2 * MiB


def test_a_removed_quota_no_longer_throttles_and_a_changed_one_applies_at_once():
    quotas = ClientQuotas()
    e = entity(client="c")
    quotas.set(e, "producer_byte_rate", 1000)
    assert quotas.produce.record("u", "c", 20_000, 0) > 0
    quotas.set(e, "producer_byte_rate", 10_000_000)
    assert quotas.produce.record("u", "c", 20_000, 0) == 0
    quotas.set(e, "producer_byte_rate", None)
    assert quotas.produce.record("u", "c", 10**9, 0) == 0
    assert quotas.configs == {}


def test_nothing_is_measured_until_a_quota_of_the_kind_exists():
    quotas = ClientQuotas()
    assert not quotas.produce.enabled
    assert quotas.produce.record("u", "c", 10**12, 0) == 0
    assert quotas.produce.sensors == {}
    quotas.set(entity(client="c"), "consumer_byte_rate", 1000)
    assert quotas.fetch.enabled and not quotas.produce.enabled


def test_a_fetch_is_capped_at_what_its_quota_allows_over_the_windows_and_can_be_taken_back():
    quotas = ClientQuotas(Windows(11, 1000))
    quotas.set(entity(client="c"), "consumer_byte_rate", 1000)
    assert quotas.fetch.max_in_window("u", "c", 0) == 10_000
    assert quotas.fetch.max_in_window("u", "other", 0) == math.inf
    assert quotas.fetch.record("u", "c", 20_000, 0) > 0
    quotas.fetch.unrecord("u", "c", 20_000, 0)
    assert quotas.fetch.record("u", "c", 5_000, 0) == 0


def test_the_request_quota_throttles_for_at_most_one_window():
    quotas = ClientQuotas(Windows(11, 1000))
    quotas.set(entity(user=None), "request_percentage", 1)
    assert quotas.request.record("u", "c", 10_000, 0) == 1000


def test_a_strict_mutation_quota_refuses_once_the_bucket_is_empty_and_a_permissive_one_throttles():
    quotas = ClientQuotas(controller_windows=Windows(11, 1000))
    quotas.set(entity(client="admin"), "controller_mutation_rate", 2)  # a burst of 22 partitions
    mutate = quotas.controller_mutation.mutate
    now = 10_000_000
    assert mutate("u", "admin", 30, now, strict=True) == 0  # accepted: the bucket was not empty
    assert mutate("u", "admin", 1, now, strict=True) == 4000  # 8 tokens short at 2 a second: refused
    assert mutate("u", "admin", 1, now + 4000, strict=True) == 0
    assert mutate("u", "admin", 1, now + 4000, strict=False) == 1000  # permissive: taken, and throttled


def test_connections_over_an_ips_rate_are_held_for_at_most_one_window():
    quotas = ClientQuotas(Windows(11, 1000))
    quotas.set(make_entity([(IP, None)]), "connection_creation_rate", 1)
    quotas.set(make_entity([(IP, "::ffff:10.0.0.9")]), "connection_creation_rate", 1000)
    record = quotas.connections.record
    assert all(record("10.0.0.1", 0) == 0 for _ in range(10))
    assert 0 < record("10.0.0.1", 0) <= 1000
    assert all(record("10.0.0.9", 0) == 0 for _ in range(100))  # its own rate (written IPv4-mapped)


def test_clients_choosing_ever_new_client_ids_cannot_grow_the_sensors_without_bound():
    quotas = ClientQuotas()
    quotas.set(entity(client=None), "producer_byte_rate", 1000)
    for i in range(MAX_SENSORS + 500):
        quotas.produce.record("u", f"c{i}", 1, i)
    assert len(quotas.produce.sensors) <= MAX_SENSORS


@pytest.mark.parametrize(("pairs", "message"), [
    ([], "Invalid empty client quota entity"),
    ([("group", "g")], "Unhandled client quota entity type: group"),
    ([(USER, "")], "Empty user not supported"),
    ([(IP, "1.2.3.4"), (USER, "u")], "Invalid quota entity combination, IP entity shouldnot be combined with User "
                                     "or ClientId"),
    ([(IP, "not-an-ip.invalid")], "not-an-ip.invalid is not a valid IP or resolvable host."),
])
def test_entities_kafka_refuses(pairs, message):
    with pytest.raises(KafkaError, match=message) as info:
        check_entity(make_entity(pairs))
    assert info.value.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize(("key", "value", "message"), [
    ("connection_creation_rate", 5.0, "Invalid configuration key connection_creation_rate"),
    ("producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
    ("producer_byte_rate", 1.5, "producer_byte_rate cannot be a fractional value."),
    ("producer_byte_rate", 2.0**64, "Proposed value for producer_byte_rate is too large for a LONG."),
])
def test_values_kafka_refuses(key, value, message):
    with pytest.raises(KafkaError, match=message):
        check_value(check_entity(entity("u")), key, value)
    check_value(check_entity(entity("u")), "request_percentage", 0.5)  # a DOUBLE may be fractional


def test_describe_filters_match_as_kafkas():
    quotas = ClientQuotas()
    for e in (entity("alice"), entity("alice", "app"), entity(None), entity(client="app")):
        quotas.set(e, "producer_byte_rate", 1000)

    def matched(components, strict=False):
        return sorted(e for e, _ in quotas.describe(QuotaFilter.of(components, strict)))

    assert matched([(USER, 0, "alice")]) == sorted([entity("alice"), entity("alice", "app")])
    assert matched([(USER, 0, "alice")], strict=True) == [entity("alice")]
    assert matched([(USER, 1, None)]) == [entity(None)]
    assert matched([(CLIENT_ID, 2, None)]) == sorted([entity("alice", "app"), entity(client="app")])
    with pytest.raises(KafkaError, match="cannot appear more than once") as info:
        QuotaFilter.of([(USER, 2, None), (USER, 1, None)], False)
    assert info.value.error_code == ErrorCode.invalid_request
    with pytest.raises(KafkaError) as info:
        QuotaFilter.of([("group", 2, None)], False)
    assert info.value.error_code == ErrorCode.unsupported_version
