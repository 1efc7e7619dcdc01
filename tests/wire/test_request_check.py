"""The pre-decode length check, over every API key and version Logway serves.

Well-formed requests (random kio instances, encoded by kio) pass it and kio reads them back; truncated
ones never pass; requests with mutated lengths (huge, negative, past the end) are either refused with
MalformedRequest or are safe for kio's native reader, which never aborts the process on them. The
mutation test runs in a forked child, so an abort fails the test instead of killing pytest.
"""

from __future__ import annotations

import multiprocessing
import random
import signal
import struct

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kio_values import request_body

from logway.gateway.apis.registry import supported_versions
from logway.wire.produce import decode_produce_request
from logway.wire.protocol import MalformedRequest, decode_body, encode_body, request_type
from logway.wire.request_check import check_body

SERVED = [(key, v) for key, lo, hi in supported_versions() for v in range(lo, hi + 1)]
# Values written over a length field: null, negative, huge, and the issue's compact length of ~2^35.
EVIL = [b"\xff\xff\xff\xff", b"\xff\xfe", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x80\x80\x80\x80\x40",
        b"\xff\xff\xff\xff\x0f", b"\x7f\xff", b"\x00\x00\x10\x00", b"\xff", b"\x00", b"\x02", b"\x01"]

served = st.sampled_from(SERVED)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(served, st.randoms(use_true_random=False))
def test_well_formed_requests_pass_and_decode(key_version, rng):
    key, version = key_version
    body = request_body(rng, key, version)
    assert check_body(request_type(key, version), body, 0) == len(body)
    assert encode_body(decode_body(key, version, body, 0)) == body


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(served, st.randoms(use_true_random=False), st.data())
def test_truncated_requests_are_refused(key_version, rng, data):
    key, version = key_version
    body = request_body(rng, key, version)
    assume(body)  # ListGroups v0-v3 have an empty body
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(MalformedRequest):
        decode_body(key, version, body[:cut], 0)


def _mutate(body: bytes, rng: random.Random) -> bytes:
    """Overwrite 1-3 places with an evil length, a random byte, or cut/extend the body."""
    out = bytearray(body)
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(out) + 1)
        action = rng.random()
        if action < 0.6:
            evil = rng.choice(EVIL)
            out[pos : pos + len(evil)] = evil
        elif action < 0.9 and out:
            out[min(pos, len(out) - 1)] = rng.randrange(256)
        else:
            out += rng.randbytes(rng.randint(1, 8))
    return bytes(out)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(served, st.randoms(use_true_random=False))
def _mutated_requests_are_refused_or_safe(key_version, rng):
    key, version = key_version
    body = _mutate(request_body(rng, key, version), rng)
    try:
        decode_body(key, version, body, 0)  # check_body first, then kio's native reader
    except MalformedRequest:
        pass  # every kio error, and every length the check refuses, surfaces as this one exception


def _run_mutations() -> None:
    _mutated_requests_are_refused_or_safe()


def test_mutated_requests_are_refused_or_safe_for_kio():
    child = multiprocessing.get_context("fork").Process(target=_run_mutations)
    child.start()
    child.join(300)
    assert child.exitcode is not None, "mutation run did not finish in 300 s"
    assert child.exitcode != -signal.SIGABRT, "kio's reader aborted the process on a checked request"
    assert child.exitcode == 0, f"mutation run failed (exit {child.exitcode}); its falsifying example is above"


def _compact_huge() -> bytes:
    return b"\x80\x80\x80\x80\x40"  # uvarint 2^34 + 1: a compact array of ~2^34 items


# The issue's reproducers: Metadata v9, Fetch v12 and DeleteGroups v2 bodies declaring ~2^34 items.
REPRODUCERS = {
    "metadata v9": (3, 9, _compact_huge()),
    "fetch v12": (1, 12, struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1) + _compact_huge()),
    "delete_groups v2": (42, 2, _compact_huge()),
}


@pytest.mark.parametrize("name", sorted(REPRODUCERS))
def test_issue_reproducers_are_refused_before_kio(name):
    key, version, body = REPRODUCERS[name]
    with pytest.raises(MalformedRequest, match="cannot fit"):
        check_body(request_type(key, version), body, 0)


@pytest.mark.parametrize(("key", "version", "body", "what"), [
    (8, 2, b"\x00\x01g" + struct.pack(">i", 1) + b"\x00\x01m" + struct.pack(">q", -1) + b"\xff\xff\xff\xff",
     "topics: array length -1"),  # OffsetCommit v2: topics is not nullable
    (3, 1, struct.pack(">i", -2), "array length -2"),  # Metadata v1: null is -1, nothing else is negative
    (18, 3, b"\x00", "length -1"),  # ApiVersions v3: client_software_name is not nullable
    (3, 9, b"\x01\x00\x00\x00\x01\x00\x05\x01", "runs past"),  # tagged field of 5 bytes, 1 present
    (3, 9, b"\x01\x00\x00\x00\xff\xff\xff\xff\xff\x01", "varint longer than 5 bytes"),
])
def test_lengths_kafka_refuses_are_refused(key, version, body, what):
    with pytest.raises(MalformedRequest, match=what):
        check_body(request_type(key, version), body, 0)


PRODUCE_VERSIONS = [v for key, v in SERVED if key == 0]


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PRODUCE_VERSIONS), st.randoms(use_true_random=False), st.booleans())
def test_hand_written_produce_decoder_trusts_no_length(version, rng, mutated):
    """Produce skips kio (wire.produce decodes it by hand, records as views): it refuses exactly the bodies
    whose lengths the schema check refuses, and raises nothing but MalformedRequest."""
    body = request_body(rng, 0, version)
    if mutated:
        body = _mutate(body, rng)
    try:
        check_body(request_type(0, version), body, 0)
        schema_ok = True
    except MalformedRequest:
        schema_ok = False
    try:
        decode_produce_request(bytearray(body), 0, version)
        decoder_ok = True
    except MalformedRequest:
        decoder_ok = False
    assert decoder_ok == schema_ok
