"""The KIP-848 server-side assignors: range exactly as Kafka's, uniform balanced and sticky."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from logway.coordinator.assignors import MemberSpec, RangeAssignor, UniformAssignor

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def spec(*topics: uuid.UUID, current=None, instance: str | None = None) -> MemberSpec:
    return MemberSpec(instance, frozenset(topics), current or {})


def test_range_gives_contiguous_ranges_the_first_members_one_more() -> None:
    out = RangeAssignor().assign({"b": spec(T1), "a": spec(T1)}, {T1: 5})
    assert out == {"a": {T1: frozenset({0, 1, 2})}, "b": {T1: frozenset({3, 4})}}


def test_range_sorts_static_members_first_by_instance_id() -> None:
    out = RangeAssignor().assign({"a": spec(T1), "z": spec(T1, instance="i-1")}, {T1: 2})
    assert out == {"z": {T1: frozenset({0})}, "a": {T1: frozenset({1})}}


def test_range_co_partitions_topics() -> None:
    out = RangeAssignor().assign({"a": spec(T1, T2), "b": spec(T1, T2)}, {T1: 4, T2: 4})
    assert out["a"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}


def test_uniform_homogeneous_is_balanced_and_keeps_what_fits() -> None:
    first = UniformAssignor().assign({"a": spec(T1)}, {T1: 6})
    assert first == {"a": {T1: frozenset(range(6))}}
    second = UniformAssignor().assign({"a": spec(T1, current=first["a"]), "b": spec(T1)}, {T1: 6})
    assert len(second["a"][T1]) == len(second["b"][T1]) == 3
    assert second["a"][T1] <= first["a"][T1]  # a kept three of its own and gave the rest to b


def test_uniform_heterogeneous_gives_each_member_only_its_topics() -> None:
    out = UniformAssignor().assign({"a": spec(T1), "b": spec(T1, T2), "c": spec(T2)}, {T1: 4, T2: 2})
    assert set(out["a"]) <= {T1} and set(out["c"]) <= {T2}
    assert sorted(sum(len(p) for p in a.values()) for a in out.values()) == [2, 2, 2]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdef"), st.frozensets(st.sampled_from([T1, T2, T3]), min_size=1),
                       min_size=1),
       st.fixed_dictionaries({T1: st.integers(1, 9), T2: st.integers(1, 9), T3: st.integers(1, 9)}),
       st.sampled_from([UniformAssignor(), RangeAssignor()]))
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(subscriptions, partitions, assignor) -> None:
    members = {m: spec(*topics) for m, topics in subscriptions.items()}
    out = assignor.assign(members, partitions)
    owners: dict[tuple, str] = {}
    for member, assignment in out.items():
        for topic, parts in assignment.items():
            assert topic in subscriptions[member]
            for p in parts:
                assert (topic, p) not in owners
                owners[(topic, p)] = member
    subscribed = {t for topics in subscriptions.values() for t in topics}
    assert set(owners) == {(t, p) for t in subscribed for p in range(partitions[t])}
    # Stickiness: assigning again from this target changes nothing.
    again = assignor.assign({m: spec(*subscriptions[m], current=out[m]) for m in members}, partitions)
    assert again == out
