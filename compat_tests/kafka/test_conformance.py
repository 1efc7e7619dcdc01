"""Differential conformance: identical request sequences to Apache Kafka and to Logway, responses compared.

One test per (API, version, case) — every version Logway advertises. Broker-specific values (cluster
id, ports, throttle times, error messages, member and topic ids, timestamps) are masked (normalise.py).
Every known difference is in compat_tests/KAFKA_DIFFERENCES.md and marked xfail(strict=True) below, so
a fix turns its test into an unexpected pass that must be acknowledged by removing the mark.
"""

from __future__ import annotations

import re
import secrets
from typing import NamedTuple

import pytest

from compat_tests.kafka import (
    cases_groups,  # noqa: F401  (registers the KIP-848 cases)
    cases_shares,  # noqa: F401  (registers the KIP-932 cases)
    cases_txn_v2,  # noqa: F401  (registers the KIP-890 part 2 cases)
)
from compat_tests.kafka.cases import API_NAMES, CASES, CLIENT_SOFTWARE, LOGWAY_VERSIONS, Case
from compat_tests.kafka.normalise import differences, normalise
from compat_tests.kafka.sides import Side


class FromVersion(NamedTuple):
    """A difference that exists from ``version`` on (the field appeared then)."""

    version: int
    reason: str


# (API name, case name) or (API name, case name, version) -> reason; see KAFKA_DIFFERENCES.md.
OPEN: dict[tuple, str | FromVersion] = {
    ("ListOffsets", "unsupported special timestamp (-6)"):
        "open: an unknown negative timestamp gets INVALID_REQUEST; Kafka answers UNSUPPORTED_VERSION",
    ("Produce", "idempotent: in order, duplicate, gap, old epoch", 3):
        "accepted: Kafka 4.3.1 on Produce v3 appends the repeated batch again and accepts a sequence gap "
        "(observed, not explained); Logway deduplicates at every version, as Kafka does from v4",
    ("Produce", "idempotent: a newer epoch, then the old one"): FromVersion(
        5, "open: OUT_OF_ORDER_SEQUENCE_NUMBER and INVALID_PRODUCER_EPOCH answers have log_start_offset -1; Kafka "
        "sends the partition's (the error comes from the log append, which knows it)"),
    ("Produce", "idempotent: in order, duplicate, gap, old epoch"):
        "open: a duplicate batch's answer lacks the batch timestamp as log_append_time, and an "
        "OUT_OF_ORDER_SEQUENCE answer has log_start_offset -1 (Kafka: the partition's)",
    ("CreateTopics", "segment.bytes below 1 MiB"):
        "open: Logway accepts segment.bytes down to 14 (its own tests roll tiny segments through it); Kafka 4 "
        "answers INVALID_CONFIG below 1048576",
    ("ShareFetch", "invalid requests"):
        "accepted: a ShareFetch naming an unknown topic id gets UNKNOWN_TOPIC_ID for that partition; Kafka 4.3.1 "
        "fails the whole request with UNKNOWN_SERVER_ERROR (a share partition with a null topic name)",
    ("Metadata", "malformed: unknown API key, unsupported version, truncated body, trailing bytes"):
        "open: an array length below -1 closes the connection; Kafka reads any negative length of a "
        "nullable array as null",
}


def _topic(c: Case, version: int) -> str:
    """The case's topic (and group, transactional id, ... named after it) on both sides: named for the case, with
    a suffix of its own so that a second attempt (`make test` retries a failure once) starts from nothing."""
    name = re.sub(r"[^a-zA-Z0-9]+", "-", f"cf-{API_NAMES[c.api_key]}-{c.name}-v{version}").strip("-")[:200]
    return f"{name}-{secrets.token_hex(3)}"


def _params() -> list:
    out = []
    for c in CASES:
        api = API_NAMES[c.api_key]
        for v in c.versions():
            reason = OPEN.get((api, c.name, v)) or OPEN.get((api, c.name))
            if isinstance(reason, FromVersion):
                reason = reason.reason if v >= reason.version else None
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(c, v, id=f"{api}-v{v}-{c.name}", marks=marks))
    return out


@pytest.fixture(scope="module")
def sides(kafka, logway_ref) -> tuple[Side, Side]:
    return Side("kafka", kafka.port), Side("logway", logway_ref.port)


@pytest.mark.parametrize(("case", "version"), _params())
def test_same_answers(sides: tuple[Side, Side], case: Case, version: int) -> None:
    kafka, logway = sides
    topic = _topic(case, version)
    expected = normalise(case.fn(kafka, version, topic))
    got = normalise(case.fn(logway, version, topic))
    diffs = differences(expected, got)
    assert not diffs, f"{len(diffs)} difference(s) from Apache Kafka:\n" + "\n".join(diffs[:40])


def test_api_versions_are_a_subset_of_kafkas(sides: tuple[Side, Side]) -> None:
    """Every (API, version) Logway advertises is one Kafka 4 serves, and the table in cases.py is Logway's."""
    kafka, logway = sides
    ranges = {}
    for side in sides:
        resp = side.call(18, 3, CLIENT_SOFTWARE)
        ranges[side.name] = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges["logway"] == LOGWAY_VERSIONS
    outside = {API_NAMES.get(key, key): (lo, hi, ranges["kafka"].get(key))
               for key, (lo, hi) in ranges["logway"].items()
               if key not in ranges["kafka"] or lo < ranges["kafka"][key][0] or hi > ranges["kafka"][key][1]}
    assert not outside, f"advertised beyond Kafka 4: {outside}"
