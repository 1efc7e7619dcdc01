"""Option parsing and offset-range arithmetic, checked against what Spark's Kafka connector does."""

import pytest

from logway.spark.options import (
    Assign,
    Subscribe,
    SubscribePattern,
    offsets_from_json,
    offsets_to_json,
    parse_sink_options,
    parse_source_options,
)
from logway.spark.ranges import OffsetRange, rate_limit, resolve_ranges, split_ranges

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_match_spark_batch_and_streaming():
    batch = parse_source_options({**BASE, "subscribe": "a, b,"}, streaming=False)
    stream = parse_source_options({**BASE, "subscribe": "a"}, streaming=True)
    assert batch.strategy == Subscribe(("a", "b"))
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert stream.starting.kind == "latest"
    assert batch.fail_on_data_loss and not batch.include_headers
    assert stream.max_offsets_per_trigger is None


def test_option_names_are_case_insensitive_and_parsed():
    opts = parse_source_options({**BASE, "subscribePattern": "ev.*", "maxOffsetsPerTrigger": "100",
                                 "includeHeaders": "TRUE", "failOnDataLoss": "false",
                                 "startingOffsets": '{"t":{"0":5,"1":-2}}'}, streaming=True)
    assert opts.strategy == SubscribePattern("ev.*")
    assert opts.strategy.matches("events") and not opts.strategy.matches("my-events")
    assert opts.max_offsets_per_trigger == 100 and opts.include_headers and not opts.fail_on_data_loss
    assert opts.starting.offsets == {("t", 0): 5, ("t", 1): -2}


def test_assign_and_timestamps():
    opts = parse_source_options({**BASE, "assign": '{"t":[0,2]}', "startingTimestamp": "1700000000000"},
                                streaming=False)
    assert opts.strategy == Assign((("t", 0), ("t", 2)))
    assert opts.starting.kind == "global_timestamp" and opts.starting.global_timestamp == 1700000000000


@pytest.mark.parametrize("extra, message", [
    ({}, "One of the following options must be specified"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of"),
    ({"subscribe": " , "}, "No topics to subscribe"),
    ({"assign": "a"}, "No topicpartitions to assign"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "auto.offset.reset"),
    ({"subscribe": "a", "startingOffsets": "latest"}, "can't be latest for batch"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "can't be earliest for batch"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":9}}', "endingOffsets": '{"a":{"0":3}}'}, "greater than"),
    ({"subscribe": "a", "minPartitions": "0"}, "must be positive"),
])
def test_batch_options_rejected_like_spark(extra, message):
    with pytest.raises(ValueError, match=message):
        parse_source_options({**BASE, **extra}, streaming=False)


def test_streaming_rejects_ending_offsets_and_bootstrap_is_required():
    with pytest.raises(ValueError, match="ending offset not valid in streaming"):
        parse_source_options({**BASE, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(ValueError, match="kafka.bootstrap.servers"):
        parse_source_options({"subscribe": "a"}, streaming=True)


def test_sink_topic_option_and_serializers():
    assert parse_sink_options({**BASE, "topic": " out "}).topic == "out"
    with pytest.raises(ValueError, match="value.serializer"):
        parse_sink_options({**BASE, "kafka.value.serializer": "x"})


def test_offsets_json_round_trip_uses_sparks_checkpoint_layout():
    offsets = {("t", 1): 7, ("t", 0): 3, ("u", 0): 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"t": {"0": 3, "1": 7}, "u": {"0": 0}}
    assert offsets_from_json(as_json) == offsets


def test_one_range_per_partition_unless_split():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 10, 30)]
    assert split_ranges(ranges, None, None) == [ranges[0], ranges[2]]  # empty ranges dropped


def test_min_partitions_splits_the_large_range_in_proportion():
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10)]
    pieces = split_ranges(ranges, 5, None)
    big = [r for r in pieces if r.partition == 0]
    assert len(big) == 4 and [r for r in pieces if r.partition == 1] == [ranges[1]]
    assert big[0].from_offset == 0 and big[-1].until_offset == 1000
    assert all(a.until_offset == b.from_offset for a, b in zip(big, big[1:], strict=False))


def test_max_records_per_partition_caps_every_piece():
    pieces = split_ranges([OffsetRange("t", 0, 0, 1001)], None, 250)
    assert [r.size for r in pieces] == [200, 200, 200, 200, 201]


def test_rate_limit_shares_in_proportion_and_never_starves():
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 1000, ("t", 1): 1}
    assert rate_limit(100, start, latest, {}) == {("t", 0): 99, ("t", 1): 1}
    assert rate_limit(10_000, start, latest, {}) == latest


def test_rate_limit_counts_new_partitions_from_their_start():
    assert rate_limit(10, {("t", 0): 0}, {("t", 0): 10, ("t", 1): 10}, {("t", 1): 0}) == {("t", 0): 5, ("t", 1): 5}


def test_resolve_ranges_reports_data_loss():
    lost = []
    ranges = resolve_ranges({("t", 0): 50, ("t", 9): 1}, {("t", 0): 40, ("t", 1): 5}, {("t", 1): 3}, lost.append)
    assert len(lost) == 3  # new partition not starting at 0, vanished partition, offset moved backwards
    assert ranges == [OffsetRange("t", 0, 50, 40), OffsetRange("t", 1, 3, 5)]


def test_min_offsets_per_trigger_and_max_trigger_delay_parse_like_spark():
    opts = parse_source_options({**BASE, "subscribe": "a", "minOffsetsPerTrigger": "10", "maxTriggerDelay": "2s"},
                                streaming=True)
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (10, 2000)
    assert parse_source_options({**BASE, "subscribe": "a"}, streaming=True).max_trigger_delay_ms == 15 * 60_000
    with pytest.raises(ValueError, match=r"minOffsetPerTrigger\(50\) is higher than the maxOffsetsPerTrigger\(5\)"):
        parse_source_options({**BASE, "subscribe": "a", "minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "5"},
                             streaming=True)
    with pytest.raises(ValueError, match="Invalid time string"):
        parse_source_options({**BASE, "subscribe": "a", "maxTriggerDelay": "soon"}, streaming=True)
