"""Which server.properties keys Logway reads, which Kafka keys it knowingly ignores, and the warnings for the rest.

A stock Kafka `server.properties` names many settings that mean nothing to a single-process broker
(KRaft quorum, replication, threads, socket buffers): those are warned about once as "not applicable",
so a Kafka user's file starts unchanged. A key that is neither read nor a Kafka setting is most likely a
typo (`num.partition`): it is warned about as unknown, with the nearest known key as a suggestion.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping

log = logging.getLogger("logway.server.config")

# Kafka broker settings (KafkaConfig / KRaftConfigs / ServerConfigs names) that Logway accepts and ignores.
NOT_APPLICABLE: frozenset[str] = frozenset({
    # KRaft and the controller quorum: Logway is one process with no metadata quorum.
    "process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "controller.listener.names", "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.backoff.max.ms", "controller.quorum.append.linger.ms",
    "controller.quorum.request.timeout.ms", "controller.quorum.retry.backoff.ms",
    "metadata.log.dir", "metadata.log.segment.bytes", "metadata.log.segment.ms", "metadata.max.retention.bytes",
    "metadata.max.retention.ms", "metadata.log.max.record.bytes.between.snapshots",
    "initial.broker.registration.timeout.ms", "broker.heartbeat.interval.ms", "broker.session.timeout.ms",
    "broker.rack", "reserved.broker.max.id",
    # ZooKeeper-era settings (Kafka 4 removed them; old files still carry them).
    "zookeeper.connect", "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms",
    # Listeners and security beyond one PLAINTEXT listener.
    "inter.broker.listener.name", "security.inter.broker.protocol", "sasl.mechanism.controller.protocol",
    # Threads and socket tuning of Kafka's network and request layers.
    "num.network.threads", "num.io.threads", "background.threads", "num.replica.fetchers",
    "num.recovery.threads.per.data.dir", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "socket.listen.backlog.size", "queued.max.requests",
    # Replication and internal-topic replication: one broker, one replica.
    "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
    "replica.lag.time.max.ms", "replica.fetch.max.bytes", "replica.fetch.wait.max.ms",
    "replica.socket.timeout.ms", "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
    "controlled.shutdown.enable", "create.topic.policy.class.name", "alter.config.policy.class.name",
    # Metrics reporters, quotas and other features Logway does not implement.
    "metric.reporters", "metrics.num.samples", "metrics.sample.window.ms", "group.coordinator.rebalance.protocols",
    "share.coordinator.enable",
    "producer.id.expiration.ms", "log.message.format.version",
    "inter.broker.protocol.version", "unstable.api.versions.enable", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.io.buffer.size", "log.cleaner.backoff.ms.max",
})


def check_keys(given: Iterable[str], known: Iterable[str]) -> list[str]:
    """Log one warning per given key that Logway does not read; returns the warnings (for tests)."""
    known = frozenset(known)
    warnings = []
    for key in sorted(set(given) - known):
        if key in NOT_APPLICABLE:
            message = f"config {key} is a Kafka setting that does not apply to Logway; ignored"
        else:
            near = difflib.get_close_matches(key, sorted(known | NOT_APPLICABLE), n=1, cutoff=0.8)
            hint = f" (did you mean {near[0]}?)" if near else ""
            message = f"unknown config {key}{hint}; ignored"
        log.warning("%s", message)
        warnings.append(message)
    return warnings


def known_keys(*tables: Mapping[str, object] | Iterable[str]) -> frozenset[str]:
    """The union of the key tables the broker reads."""
    out: set[str] = set()
    for table in tables:
        out.update(table)
    return frozenset(out)
