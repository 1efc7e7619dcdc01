"""Source and sink options with the names, defaults and checks of Spark's Kafka connector.

Mirrors org.apache.spark.sql.kafka010.KafkaSourceProvider (validateGeneralOptions, validateBatchOptions,
validateStreamOptions, getKafkaOffsetRangeLimit) so a job written for format "kafka" keeps its options.
Spark hands Python data sources their option keys lower-cased and every value as a string.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

# Kafka's sentinel offsets in Spark's per-partition JSON (KafkaOffsetRangeLimit.EARLIEST / LATEST).
EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]

# librdkafka reads through these for every client; the Java-only names Spark rejects stay rejected.
_REJECTED_KAFKA_PARAMS = {
    "auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported; set the source option "
    "'startingOffsets' to 'earliest' or 'latest' instead (resuming always continues from the checkpoint).",
    "key.deserializer": "Kafka option 'key.deserializer' is not supported: keys are always bytes; "
    "deserialize them with DataFrame operations.",
    "value.deserializer": "Kafka option 'value.deserializer' is not supported: values are always bytes; "
    "deserialize them with DataFrame operations.",
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}


@dataclass(frozen=True)
class Subscribe:
    """`subscribe`: a fixed comma-separated list of topics."""

    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    """`subscribePattern`: every topic whose whole name matches the regular expression."""

    pattern: str

    def matches(self, topic: str) -> bool:
        """Java's Pattern.matcher(topic).matches() semantics: the whole name must match."""
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    """`assign`: explicit topic partitions, JSON like {"topicA":[0,1],"topicB":[2,4]}."""

    partitions: tuple[TopicPartition, ...]


Strategy = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True)
class OffsetLimit:
    """Where a read starts or ends: "earliest", "latest", per-partition offsets or timestamps."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamps" | "global_timestamp"
    offsets: PartitionOffsets = field(default_factory=dict)  # offsets (-2/-1 allowed) or timestamps
    timestamps_by_topic: dict[str, dict[int, int]] = field(default_factory=dict)
    global_timestamp: int | None = None
    no_match: str = "error"  # startingOffsetsByTimestampStrategy: "error" | "latest"


@dataclass(frozen=True)
class SourceOptions:
    """Everything a reader needs, parsed once on the driver and pickled to executors."""

    kafka_params: dict[str, str]
    strategy: Strategy
    starting: OffsetLimit
    ending: OffsetLimit
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    max_records_per_partition: int | None
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    poll_timeout_ms: int
    group_id_prefix: str


def parse_partitions_json(text: str) -> tuple[TopicPartition, ...]:
    """Spark's JsonUtils.partitions: {"topicA":[0,1]} -> (("topicA",0),("topicA",1))."""
    try:
        data = json.loads(text)
        return tuple((str(t), int(p)) for t, parts in data.items() for p in parts)
    except (ValueError, AttributeError, TypeError) as e:
        raise ValueError(f'Expected e.g. {{"topicA":[0,1],"topicB":[0,1]}}, got {text}') from e


def parse_partition_offsets_json(text: str) -> PartitionOffsets:
    """Spark's JsonUtils.partitionOffsets: {"topicA":{"0":23,"1":-1}} -> {("topicA",0): 23, ...}."""
    try:
        data = json.loads(text)
        return {(str(t), int(p)): int(o) for t, po in data.items() for p, o in po.items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise ValueError(f'Expected e.g. {{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {text}') from e


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The nested JSON form Spark checkpoints for KafkaSourceOffset: topic -> "partition" -> offset."""
    out: dict[str, dict[str, int]] = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(off)
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """Inverse of offsets_to_json."""
    return {(t, int(p)): int(o) for t, po in data.items() for p, o in po.items()}


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    value = opts.get(key)
    if value is None:
        return default
    lowered = str(value).strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"option {key} must be true or false, got {value!r}")
    return lowered == "true"


def _positive_int(opts: Mapping[str, str], key: str) -> int | None:
    value = opts.get(key)
    if value is None:
        return None
    n = int(value)
    if n <= 0:
        raise ValueError(f"{key} must be positive")
    return n


_TIME_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def time_string_ms(text: str) -> int:
    """Spark's JavaUtils.timeStringAsMs: "15m", "500ms", "2h"; a bare number is milliseconds."""
    match = re.fullmatch(r"\s*(-?[0-9]+)\s*([a-z]+)?\s*", text.lower())
    if match is None or (match.group(2) or "ms") not in _TIME_UNITS_MS:
        raise ValueError(f"Invalid time string {text!r}: use a number with ms, s, m, min, h or d, e.g. 15m")
    return int(match.group(1)) * _TIME_UNITS_MS[match.group(2) or "ms"]


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Spark passes keys lower-cased already; do it again so direct callers behave the same."""
    return {str(k).lower(): str(v) for k, v in options.items()}


def kafka_params(opts: Mapping[str, str]) -> dict[str, str]:
    """The `kafka.`-prefixed options, prefix stripped, checked like Spark's validateGeneralOptions."""
    params = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    if "bootstrap.servers" not in params:
        raise ValueError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    return params


def parse_strategy(opts: Mapping[str, str]) -> Strategy:
    """Exactly one of subscribe / subscribePattern / assign, as Spark requires."""
    given = [k for k in ("assign", "subscribe", "subscribepattern") if k in opts]
    names = "assign, subscribe, subscribePattern"
    if not given:
        raise ValueError(f"One of the following options must be specified for Kafka source: {names}.")
    if len(given) > 1:
        raise ValueError(f"Only one of the following options can be specified for Kafka source: {names}.")
    key, value = given[0], opts[given[0]]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise ValueError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
        return Assign(parse_partitions_json(value))
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return Subscribe(topics)
    if not value.strip():
        raise ValueError(f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'")
    return SubscribePattern(value.strip())


def parse_offset_limit(opts: Mapping[str, str], prefix: str, default: str) -> OffsetLimit:
    """Spark's getKafkaOffsetRangeLimit: <prefix>Timestamp, then <prefix>OffsetsByTimestamp, then <prefix>Offsets."""
    no_match = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if no_match not in ("error", "latest"):
        raise ValueError(f"startingOffsetsByTimestampStrategy must be error or latest, got {no_match!r}")
    if f"{prefix}timestamp" in opts:
        text = opts[f"{prefix}timestamp"].strip()
        try:
            return OffsetLimit("global_timestamp", global_timestamp=int(text), no_match=no_match)
        except ValueError as e:
            raise ValueError(f"Expected a single long value, got {text}") from e
    if f"{prefix}offsetsbytimestamp" in opts:
        stamps = parse_partition_offsets_json(opts[f"{prefix}offsetsbytimestamp"])
        return OffsetLimit("timestamps", offsets=stamps, no_match=no_match)
    text = opts.get(f"{prefix}offsets", default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetLimit(text.lower())
    return OffsetLimit("offsets", offsets=parse_partition_offsets_json(text))


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """Validate and parse reader options; batch and streaming differ only where Spark's do."""
    opts = lower_keys(options)
    params = kafka_params(opts)
    for name, message in _REJECTED_KAFKA_PARAMS.items():
        if name in params:
            raise ValueError(message)
    strategy = parse_strategy(opts)
    max_per_trigger = _positive_int(opts, "maxoffsetspertrigger") if streaming else None
    min_per_trigger = _positive_int(opts, "minoffsetspertrigger") if streaming else None
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise ValueError(f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
                         f"maxOffsetsPerTrigger({max_per_trigger}).")
    if streaming:
        if "endingoffsets" in opts:
            raise ValueError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts or "endingtimestamp" in opts:
            raise ValueError("ending timestamp not valid in streaming queries")
        starting = parse_offset_limit(opts, "starting", "latest")
        ending = OffsetLimit("latest")
    else:
        starting = parse_offset_limit(opts, "starting", "earliest")
        ending = parse_offset_limit(opts, "ending", "latest")
        _check_batch_limits(starting, ending)
    group_prefix = opts.get("groupidprefix", "spark-kafka-source")
    return SourceOptions(
        kafka_params=params,
        strategy=strategy,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_headers=_bool(opts, "includeheaders", False),
        min_partitions=_positive_int(opts, "minpartitions"),
        max_records_per_partition=_positive_int(opts, "maxrecordsperpartition"),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=time_string_ms(opts.get("maxtriggerdelay", "15m")),
        poll_timeout_ms=int(opts.get("kafkaconsumer.polltimeoutms", "120000")),
        group_id_prefix=f"{group_prefix}-{uuid.uuid4()}",
    )


def _check_batch_limits(starting: OffsetLimit, ending: OffsetLimit) -> None:
    """Spark's validateBatchOptions + checkOffsetLimitValidity."""
    _check_batch_start(starting)
    _check_batch_end(ending)
    if starting.kind == ending.kind and starting.kind in ("offsets", "timestamps"):
        _check_offset_ranges(starting, ending)


def _check_batch_start(starting: OffsetLimit) -> None:
    if starting.kind == "latest":
        raise ValueError("starting offset can't be latest for batch queries on Kafka")
    if starting.kind == "offsets":
        for tp, off in starting.offsets.items():
            if off == LATEST:
                raise ValueError(f"startingOffsets for {tp[0]}-{tp[1]} can't be latest for batch queries on Kafka")


def _check_batch_end(ending: OffsetLimit) -> None:
    if ending.kind == "earliest":
        raise ValueError("ending offset can't be earliest for batch queries on Kafka")
    if ending.kind == "offsets":
        for tp, off in ending.offsets.items():
            if off == EARLIEST:
                raise ValueError(f"ending offset for {tp[0]}-{tp[1]} can't be earliest for batch queries on Kafka")


def _check_offset_ranges(starting: OffsetLimit, ending: OffsetLimit) -> None:
    """The same partitions at both ends, none starting after it ends."""
    if set(starting.offsets) != set(ending.offsets):
        raise ValueError("Kafka data source in batch query requires the same topic partitions in "
                         "starting and ending offsets")
    for tp, start in starting.offsets.items():
        end = ending.offsets[tp]
        if start > end and start >= 0 and end >= 0:
            raise ValueError(f"The start offset {start} for {tp[0]}-{tp[1]} is greater than the end "
                             f"offset {end}")


@dataclass(frozen=True)
class SinkOptions:
    """Writer options: the producer params and the optional `topic` overriding the topic column."""

    kafka_params: dict[str, str]
    topic: str | None


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Like Spark's kafkaParamsForProducer: key/value serializers are fixed to bytes."""
    opts = lower_keys(options)
    params = kafka_params(opts)
    for name in ("key.serializer", "value.serializer"):
        if name in params:
            raise ValueError(f"Kafka option '{name}' is not supported as keys and values are written as bytes; "
                             "use DataFrame operations to serialize them")
    topic = opts.get("topic")
    return SinkOptions(kafka_params=params, topic=topic.strip() if topic is not None else None)
