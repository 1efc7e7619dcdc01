"""How Apache Kafka describes the broker configs Logway reads: type, whether it is read-only, its default.

Taken from Kafka 4.3.1's DescribeConfigs answer for a broker (KafkaConfig's ConfigDef): `read_only` is true
for a config that cannot be changed dynamically; the default is None where Kafka has none (the value then
comes from another synonym, e.g. log.retention.hours for log.retention.ms). DescribeConfigs uses it so
kafka-configs shows Logway's broker configs as it shows Kafka's.
"""

from __future__ import annotations

from typing import NamedTuple


class BrokerConfigType(NamedTuple):
    kind: str  # DescribeConfigs ConfigType name: BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST
    read_only: bool
    default: str | None


_T = BrokerConfigType

KAFKA_BROKER_CONFIGS: dict[str, BrokerConfigType] = {
    "listeners": _T("LIST", False, "PLAINTEXT://:9092"),
    "advertised.listeners": _T("LIST", True, None),
    "log.dirs": _T("LIST", True, None),
    "log.dir": _T("LIST", True, "/tmp/kafka-logs"),
    "node.id": _T("INT", True, None),
    "broker.id": _T("INT", True, "-1"),
    "num.partitions": _T("INT", True, "1"),
    "default.replication.factor": _T("INT", True, "1"),
    "auto.create.topics.enable": _T("BOOLEAN", True, "true"),
    "delete.topic.enable": _T("BOOLEAN", True, "true"),
    "socket.request.max.bytes": _T("INT", True, "104857600"),
    "queued.max.request.bytes": _T("LONG", True, "-1"),
    "offsets.topic.num.partitions": _T("INT", True, "50"),
    "offsets.retention.minutes": _T("INT", True, "10080"),
    "offsets.retention.check.interval.ms": _T("LONG", True, "600000"),
    "offset.metadata.max.bytes": _T("INT", True, "4096"),
    "group.initial.rebalance.delay.ms": _T("INT", True, "3000"),
    "group.min.session.timeout.ms": _T("INT", True, "6000"),
    "group.max.session.timeout.ms": _T("INT", True, "1800000"),
    "log.retention.check.interval.ms": _T("LONG", True, "300000"),
    "log.flush.scheduler.interval.ms": _T("LONG", True, "9223372036854775807"),
    "connections.max.idle.ms": _T("LONG", True, "600000"),
    # The broker synonyms of topic configs (storage.config BROKER_TO_TOPIC).
    "log.segment.bytes": _T("INT", False, "1073741824"),
    "log.roll.ms": _T("LONG", False, None),
    "log.roll.hours": _T("INT", True, "168"),
    "log.roll.jitter.ms": _T("LONG", False, None),
    "log.roll.jitter.hours": _T("INT", True, "0"),
    "log.index.size.max.bytes": _T("INT", False, "10485760"),
    "log.index.interval.bytes": _T("INT", False, "4096"),
    "log.flush.interval.messages": _T("LONG", False, "9223372036854775807"),
    "log.flush.interval.ms": _T("LONG", False, None),
    "log.flush.acks.all.enable": _T("BOOLEAN", False, "false"),  # Logway's own (storage.config): dynamic like its peers
    "log.retention.ms": _T("LONG", False, None),
    "log.retention.minutes": _T("INT", True, None),
    "log.retention.hours": _T("INT", True, "168"),
    "log.retention.bytes": _T("LONG", False, "-1"),
    "log.cleanup.policy": _T("LIST", False, "delete"),
    "log.message.timestamp.type": _T("STRING", False, "CreateTime"),
    "log.message.timestamp.before.max.ms": _T("LONG", False, "9223372036854775807"),
    "log.message.timestamp.after.max.ms": _T("LONG", False, "3600000"),
    "message.max.bytes": _T("INT", False, "1048588"),
    "log.segment.delete.delay.ms": _T("LONG", False, "60000"),
    "compression.type": _T("STRING", False, "producer"),
    "compression.gzip.level": _T("INT", False, "-1"),
    "compression.lz4.level": _T("INT", False, "9"),
    "compression.zstd.level": _T("INT", False, "3"),
    "log.cleaner.min.cleanable.ratio": _T("DOUBLE", False, "0.5"),
    "log.cleaner.delete.retention.ms": _T("LONG", False, "86400000"),
    "log.cleaner.min.compaction.lag.ms": _T("LONG", False, "0"),
    "log.cleaner.max.compaction.lag.ms": _T("LONG", False, "9223372036854775807"),
    "log.cleaner.enable": _T("BOOLEAN", True, "true"),
    "log.cleaner.threads": _T("INT", False, "1"),
    "log.cleaner.dedupe.buffer.size": _T("LONG", False, "134217728"),
    "log.cleaner.io.buffer.load.factor": _T("DOUBLE", False, "0.9"),
    "log.cleaner.backoff.ms": _T("LONG", False, "15000"),
    "min.insync.replicas": _T("INT", False, "1"),
    "unclean.leader.election.enable": _T("BOOLEAN", False, "false"),
    "log.preallocate": _T("BOOLEAN", False, "false"),
    "log.local.retention.ms": _T("LONG", False, "-2"),
    "log.local.retention.bytes": _T("LONG", False, "-2"),
}

# Logway-only properties Kafka does not have: not listed as broker configs.
NOT_KAFKA_CONFIGS = frozenset({"cluster.id", "metrics.port", "metrics.host"})
