"""The streaming latency tool (`python -m logway.spark.latency`) on the shared session: a short, slow run per format.

Keeps the measurement script from rotting: it must see every produced record exactly once and report
figures a reader can trust (no timings are asserted, only that they exist and are consistent).
"""

import math

import pytest

from logway.spark.latency import BatchSeen, exactly_once, measure_latency
from logway.spark.source import FORMAT


@pytest.mark.parametrize("fmt", ["kafka", FORMAT])
def test_latency_run_sees_every_record_once_and_reports_each_batch(spark_session, broker_bootstrap, fmt):
    result = measure_latency(spark_session, broker_bootstrap, fmt, rate=200, seconds=2, trigger_ms=500,
                             value_bytes=100)

    assert result.produced >= 350  # ~400 records in 2 s, acknowledged
    assert result.seen == result.produced
    assert result.exactly_once
    assert result.batches >= 2  # a 500 ms trigger over 2 s of data: several micro-batches
    assert 0 < result.rows_per_batch_p50 <= result.produced
    for value in (result.duration_ms_p50, result.duration_ms_p99, result.latency_ms_p50, result.latency_ms_p99):
        assert not math.isnan(value) and value > 0
    assert result.duration_ms_p50 <= result.duration_ms_p99
    assert result.latency_ms_p50 <= result.latency_ms_p99


def test_exactly_once_check_catches_a_gap_an_overlap_and_a_missing_tail():
    def batch(i: int, ranges: dict) -> BatchSeen:
        return BatchSeen(i, sum(r[2] for r in ranges.values()), ranges, 1.0, 1.0)

    tiled = [batch(0, {0: (0, 9, 10), 1: (0, 4, 5)}), batch(1, {0: (10, 19, 10)})]
    assert exactly_once(tiled, {0: 20, 1: 5})
    assert not exactly_once(tiled, {0: 21, 1: 5})  # an acknowledged record never seen
    assert not exactly_once([tiled[0], batch(1, {0: (9, 19, 11)})], {0: 20, 1: 5})  # offset 9 seen twice
    assert not exactly_once([tiled[0], batch(1, {0: (11, 19, 9)})], {0: 20, 1: 5})  # offset 10 skipped
    assert not exactly_once([batch(0, {0: (0, 19, 15)})], {0: 20})  # rows missing inside one batch
