"""The broker settings the group coordinator follows, under Kafka's names."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_OFFSETS_RETENTION_MS", "GroupConfig"]

# offsets.retention.minutes default (7 days).
DEFAULT_OFFSETS_RETENTION_MS = 10080 * 60 * 1000


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Group coordinator settings; the defaults are Kafka 4.3's."""

    num_partitions: int = 50  # offsets.topic.num.partitions
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    offsets_retention_ms: int = DEFAULT_OFFSETS_RETENTION_MS  # offsets.retention.minutes
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    # KIP-848 consumer groups (group.consumer.*).
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors: the first is the default
    consumer_assignment_interval_ms: int = 1000  # group.consumer.assignment.interval.ms (KIP-1263)
    consumer_regex_refresh_interval_ms: int = 600_000  # group.consumer.regex.refresh.interval.ms
    consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    # KIP-932 share groups (group.share.*).
    share_session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    share_heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    share_max_size: int = 200  # group.share.max.size
    share_assignment_interval_ms: int = 1000  # group.share.assignment.interval.ms
    share_record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    share_delivery_count_limit: int = 5  # group.share.delivery.count.limit
    share_partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks
