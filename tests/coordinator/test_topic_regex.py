"""RE2J regex subscriptions checked and matched with Python's re: what both read alike is matched in full;
what they read differently (or what RE2J refuses) is INVALID_REGULAR_EXPRESSION."""

from __future__ import annotations

import pytest

from logway.coordinator.topic_regex import InvalidRegex, compile_topic_regex, matching_topics

TOPICS = ["orders", "orders-eu", "orders-us", "payments", "__consumer_offsets", "a.b", "aXb"]


@pytest.mark.parametrize(("pattern", "matched"), [
    ("orders.*", {"orders", "orders-eu", "orders-us"}),
    ("orders-(eu|us)", {"orders-eu", "orders-us"}),
    ("order", set()),  # a full match, as RE2J's matches()
    (r"a\.b", {"a.b"}),
    ("a.b", {"a.b", "aXb"}),
    ("(?i)PAYMENTS", {"payments"}),
    ("[^_o].*", {"payments", "a.b", "aXb"}),
    (r"[\]a]\.b", {"a.b"}),
    (r"\w+", {"orders", "payments", "__consumer_offsets", "aXb"}),
    ("orders-[a-z]{2}", {"orders-eu", "orders-us"}),
    ("(?P<name>pay)ments", {"payments"}),
    (".*", set(TOPICS)),  # internal topics too, as Kafka's metadata image lists them
])
def test_matches_as_re2j(pattern: str, matched: set[str]) -> None:
    assert matching_topics(pattern, TOPICS) == matched


@pytest.mark.parametrize("pattern", [
    r"(\w)\1", "(?P=x)", "(?=a)a", "(?!a)b", "(?<=a)b", "(?<!a)b", "(?>a)", "a*+", "a++", "a?+", "a{2}+",
    "(?(1)a|b)", "(?#note)a", "(?x)a b", "(?a)a", "(?U)a*", "[[:alpha:]]", r"\pL", r"\p{Greek}", r"\Qa.b\E",
    r"a\z", r"a\Z", r"\C", r"\x{41}", r"\101", "(?<name>a)", "a{1001}", "a{1,2000}", "[a", "(a", "*a",
])
def test_refused(pattern: str) -> None:
    with pytest.raises(InvalidRegex):
        compile_topic_regex(pattern)


def test_classes_may_hold_what_is_refused_outside_them() -> None:
    assert matching_topics(r"[(?=]+", ["(?=", "="]) == {"(?=", "="}
