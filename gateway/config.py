"""The broker's configuration: the server's keys (server/config.py) and the broker's own, with Kafka's property
names and defaults, from a server.properties file, the environment and CLI flags."""

from __future__ import annotations

from collections.abc import Mapping

from logway.server.audit_writer import KEYS as AUDIT_KEYS
from logway.server.audit_writer import AuditSettings
from logway.server.config import READ_ELSEWHERE, SERVER_DEFAULTS, ConfigError, ServerConfig, bool_setting, int_setting
from logway.server.config_keys import NOT_APPLICABLE, known_keys
from logway.server.env_config import env_settings
from logway.server.security.settings import SECURITY_DEFAULTS, SUPPORTED_MECHANISMS
from logway.storage.cleaner import CLEANER_KEYS, CleanerConfig
from logway.storage.config import BROKER_TO_TOPIC, LogConfig
from logway.storage.errors import InvalidConfig

AUDIT_PREFIX = "audit.log."

# Broker-level properties this gateway reads (Kafka's names and defaults), the server's among them. Log
# properties (log.*) are handled by storage.config.LogConfig.from_broker_properties.
BROKER_DEFAULTS: dict[str, str] = {
    **SERVER_DEFAULTS,
    "node.id": "1",
    "broker.id": "-1",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "offsets.topic.num.partitions": "50",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    # KIP-848 consumer groups (coordinator/consumer_membership.py), Kafka 4.3's names and defaults.
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
    "group.consumer.max.size": "2147483647",
    "group.consumer.assignors": "uniform,range",
    "group.consumer.assignment.interval.ms": "1000",
    "group.consumer.regex.refresh.interval.ms": "600000",
    "group.consumer.migration.policy": "bidirectional",
    "group.consumer.min.assignment.interval.ms": "0",
    "group.consumer.max.assignment.interval.ms": "15000",
    # KIP-932 share groups (coordinator/share_membership.py, gateway/shares.py), Kafka 4.3's names and defaults.
    "group.share.session.timeout.ms": "45000",
    "group.share.min.session.timeout.ms": "45000",
    "group.share.max.session.timeout.ms": "60000",
    "group.share.heartbeat.interval.ms": "5000",
    "group.share.min.heartbeat.interval.ms": "5000",
    "group.share.max.heartbeat.interval.ms": "15000",
    "group.share.max.size": "200",
    "group.share.assignment.interval.ms": "1000",
    "group.share.min.assignment.interval.ms": "0",
    "group.share.max.assignment.interval.ms": "15000",
    "group.share.record.lock.duration.ms": "30000",
    "group.share.min.record.lock.duration.ms": "15000",
    "group.share.max.record.lock.duration.ms": "60000",
    "group.share.delivery.count.limit": "5",
    "group.share.min.delivery.count.limit": "2",
    "group.share.max.delivery.count.limit": "10",
    "group.share.partition.max.record.locks": "2000",
    "group.share.min.partition.max.record.locks": "100",
    "group.share.max.partition.max.record.locks": "4000",
    "group.share.max.share.sessions": "2000",
    "share.coordinator.state.topic.num.partitions": "50",
    "share.coordinator.snapshot.update.records.per.snapshot": "500",
    # Transactions (gateway/transactions.py), Kafka's names and defaults.
    "transaction.state.log.num.partitions": "50",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    # The transaction.version feature the broker finalizes (Kafka sets it with `kafka-storage format --feature`
    # or `kafka-features upgrade`): 2 (Kafka 4's default, KIP-890 part 2) lets clients bump the epoch at every
    # transaction end; 0 or 1 keeps them on transaction version 1.
    "transaction.version": "2",
    "log.retention.check.interval.ms": "300000",
    "log.flush.scheduler.interval.ms": "9223372036854775807",
    "cluster.id": "",
    "max.incremental.fetch.session.cache.slots": "1000",  # KIP-227 fetch sessions (gateway/fetch_sessions.py)
    # Logway's bound on one CreateTopics/CreatePartitions request (see gateway/apis/create_topics.py): Kafka's
    # controller refuses a user operation of more than 10000 metadata records (QuorumController
    # MAX_RECORDS_PER_USER_OP) with POLICY_VIOLATION; here the partitions of one request count.
    "max.partitions.per.request": "10000",
    # Logway's bound on segments holding open files (storage/open_files.py); Kafka leaves it to the OS limit.
    "log.max.open.segments": "2048",
    # The audit log (server/audit.py; Kafka has none): off unless audit.log.file names a file, or "-" (stderr).
    **{AUDIT_PREFIX + key: default for key, default in AUDIT_KEYS.items()},
}


def _topic_defaults(props: dict[str, str]) -> LogConfig:
    """The topic defaults from the broker's log.* keys; a bad value is a ConfigError naming the broker key."""
    for key in BROKER_TO_TOPIC:
        if key in props:
            try:
                LogConfig.from_broker_properties({key: props[key]})
            except InvalidConfig as exc:
                raise ConfigError(f"{key}={props[key]!r}: {exc}") from None
    try:
        return LogConfig.from_broker_properties(props)
    except InvalidConfig as exc:
        raise ConfigError(str(exc)) from None


class BrokerConfig(ServerConfig):
    """The effective broker configuration (file, then CLI flags/overrides, over Kafka's defaults)."""

    DEFAULTS = BROKER_DEFAULTS

    def _read_more(self, p: dict[str, str], given: dict[str, str]) -> None:
        # KRaft's node.id; the ZooKeeper-era broker.id is honoured when only it is given.
        self.node_id = int_setting(p, "node.id")
        if "node.id" not in given and int_setting(p, "broker.id") >= 0:
            self.node_id = int_setting(p, "broker.id")
        self.num_partitions = int_setting(p, "num.partitions")
        self.auto_create_topics = bool_setting(p, "auto.create.topics.enable")
        self.delete_topic_enable = bool_setting(p, "delete.topic.enable")
        self.offsets_topic_num_partitions = int_setting(p, "offsets.topic.num.partitions")
        self.group_initial_rebalance_delay_ms = int_setting(p, "group.initial.rebalance.delay.ms")
        self.retention_check_interval_ms = int_setting(p, "log.retention.check.interval.ms")
        self.max_partitions_per_request = int_setting(p, "max.partitions.per.request")
        self.max_open_segments = int_setting(p, "log.max.open.segments")
        if self.max_open_segments < 1:
            raise ConfigError(f"log.max.open.segments={p['log.max.open.segments']!r}: must be at least 1")
        if self.num_partitions < 1:
            raise ConfigError(f"num.partitions={p['num.partitions']!r}: must be at least 1")
        if self.max_partitions_per_request < 1:
            raise ConfigError(f"max.partitions.per.request={p['max.partitions.per.request']!r}: must be at least 1")
        audit = AuditSettings.read({k: p[AUDIT_PREFIX + k] for k in AUDIT_KEYS}, lambda k: AUDIT_PREFIX + k,
                                   ConfigError)
        self.audit = audit if audit.file else None
        if int_setting(p, "transaction.version") not in (0, 1, 2):
            raise ConfigError(f"transaction.version={p['transaction.version']!r}: must be 0, 1 or 2")
        self.log_config = _topic_defaults(p)
        try:
            self.cleaner_config = CleanerConfig.from_broker_properties(p)
        except InvalidConfig as exc:
            raise ConfigError(str(exc)) from None

    @classmethod
    def known_keys(cls) -> frozenset[str]:
        return known_keys(BROKER_DEFAULTS, BROKER_TO_TOPIC, CLEANER_KEYS, SECURITY_DEFAULTS, READ_ELSEWHERE)


def broker_keys() -> frozenset[str]:
    """Every server.properties key the broker reads (what is not here is warned about as unknown)."""
    return BrokerConfig.known_keys()


def environment_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """Broker properties given as LOGWAY_<KAFKA_NAME> variables (see server/env_config.py)."""
    return env_settings(environ, broker_keys() | NOT_APPLICABLE, SECURITY_DEFAULTS, SUPPORTED_MECHANISMS)
