"""The broker's metrics at scrape time: a snapshot of the live state on the event loop, rendered off it.

`take_snapshot` copies the numbers (offsets, sizes, counters, groups) into plain tuples on the event-loop thread,
the only thread that changes them, in a single pass with no formatting; `BrokerCollector` turns a snapshot into
prometheus_client metric families, which `render` formats in a worker thread. Nothing is updated per request
but plain ints (gateway.metrics.stats, storage's PartitionCounters).

Names are Kafka's JMX names as the Prometheus JMX exporter's example Kafka config (kafka-2_0_0.yml,
lowercaseOutputName) maps them: ``kafka.server<type=BrokerTopicMetrics, name=BytesInPerSec, topic=t><>Count``
becomes ``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}`` (and without the topic label, the broker's
total), ``kafka.log<type=Log, name=LogEndOffset, topic=t, partition=0><>Value`` becomes
``kafka_log_log_logendoffset{topic="t",partition="0"}``, and the request-time histograms become a summary with
Kafka's percentiles as ``quantile`` labels. Consumer lag uses kafka_exporter's names (``kafka_consumergroup_lag``);
client quotas the exporter's quota rules (``kafka_server_quota_byte_rate{resource="Produce",clientId="c"}``).
What Kafka has no metric for is named ``logway_*``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio
from prometheus_client import Metric
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.utils import floatToGoString

from logway.gateway.throttling import monotonic_ms
from logway.server.audit_writer import AuditLog, audit_families
from logway.server.metrics_http import serve_scrapes
from logway.server.quota_metrics import QuotaRow, quota_families, quota_rows
from logway.server.stats import LATENCY_BOUNDS_MS, request_label

if TYPE_CHECKING:
    from logway.gateway.broker import Broker

# The percentiles Kafka's Yammer histograms report (50thPercentile ... 999thPercentile), as the JMX exporter
# labels them.
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))
GROUP_STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead")

# One partition: topic, partition, log end offset, log start offset, bytes on disk, segments, then its
# PartitionCounters: bytes in, messages in, bytes out, produce requests, fetch requests, segments deleted,
# bytes deleted.
PartitionRow = tuple[str, int, int, int, int, int, int, int, int, int, int, int, int]


@dataclass
class GroupRow:
    group_id: str
    state: str
    members: int
    offsets: list[tuple[str, int, int]]  # committed (topic, partition, offset)


@dataclass
class Snapshot:
    """The numbers one scrape reports, copied on the event loop."""

    partitions: list[PartitionRow]
    offline_partitions: int
    log_dirs: list[str]
    offline_dirs: set[str]
    uncleanable: dict[str, int]  # log dir -> partitions whose last compaction failed
    deleted: tuple[int, ...]  # PartitionCounters summed over deleted topics' partitions
    requests: list[tuple[str, list[int], list[int], list[int], int, float]]
    connections: dict[str, int]
    connections_created: dict[str, int]
    memory_used: int
    memory_available: int
    fetches_waiting: int
    failed_produce: int
    failed_fetch: int
    storage_errors: dict[str, int]
    recovery: tuple[int, int, int, int]  # truncations, bytes dropped, segments deleted, bytes scanned
    cleaner: tuple[int, int, int, int]  # runs, failures, segments cleaned, bytes removed
    retention_runs: int
    groups: list[GroupRow] = field(default_factory=list)
    audit: list[Metric] = field(default_factory=list)  # the audit log's counters (audit.log.file)
    quotas: list[QuotaRow] = field(default_factory=list)  # client quota budgets (server/quota_metrics.py)


@dataclass
class Table:
    """A family with one sample per row (per partition, per committed offset): the part of a scrape that grows
    with the broker. ``family()`` is it for prometheus_client; ``text()`` writes the same bytes generate_latest
    would, about ten times faster (measured in bench/metrics_scrape.py; proved equal in tests)."""

    name: str
    doc: str
    kind: str  # "gauge" or "counter"
    labels: tuple[str, ...]
    rows: list[tuple[tuple[str, ...], float]]

    def family(self) -> Metric:
        family_type = GaugeMetricFamily if self.kind == "gauge" else CounterMetricFamily
        family = family_type(self.name, self.doc, labels=list(self.labels))
        for values, number in self.rows:
            family.add_metric(list(values), number)
        return family

    def text(self, cache: dict[tuple[str, ...], dict[tuple[str, ...], str]] | None = None) -> str:
        """The text exposition; ``cache`` keeps the label part of each row across tables with the same labels."""
        sample = self.name + "_total" if self.kind == "counter" else self.name
        doc = self.doc.replace("\\", r"\\").replace("\n", r"\n")
        out = [f"# HELP {sample} {doc}\n# TYPE {sample} {self.kind}\n"]
        order = sorted(range(len(self.labels)), key=self.labels.__getitem__)  # the format sorts label names
        known = {} if cache is None else cache.setdefault(self.labels, {})
        for values, number in self.rows:
            labels = known.get(values)
            if labels is None:
                labels = known[values] = ",".join(f'{self.labels[i]}="{_escape(values[i])}"' for i in order)
            out.append(f"{sample}{{{labels}}} {floatToGoString(number)}\n")
        return "".join(out)


def _escape(value: str) -> str:
    """A label value as the text format quotes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def take_snapshot(broker: Broker) -> Snapshot:
    """Copy what the metrics report (event-loop thread; no formatting, one pass over the partitions)."""
    logs = broker.logs
    stats = broker.stats
    partitions: list[PartitionRow] = []
    offline_dirs: set[str] = set()
    uncleanable: dict[str, int] = defaultdict(int)
    offline_partitions = 0
    for topic in logs.topics.values():
        # Fetch's fast path counts per topic (Topic.fetch_requests): it goes with the first partition's row, as
        # fetch requests are only reported per topic.
        per_topic = topic.fetch_requests
        for plog in topic.partitions:
            c = plog.counters
            partitions.append((
                plog.topic, plog.partition, plog.log_end_offset, plog.log_start_offset, plog.size_bytes,
                len(plog.segment_base_offsets), c.bytes_in, c.messages_in, c.bytes_out, c.produce_requests,
                c.fetch_requests + per_topic, c.segments_deleted, c.bytes_deleted,
            ))
            per_topic = 0
            if plog.offline:
                offline_partitions += 1
                offline_dirs.add(str(plog.dir.parent))
            if plog.compaction_failed:
                uncleanable[str(plog.dir.parent)] += 1
    now = time.monotonic()
    requests = [
        (request_label(api.api_key), list(api.versions), list(api.buckets), api.recent_buckets(now), api.count,
         api.total_ms)
        for api in stats.requests.apis.values()
    ]
    memory = stats.memory
    gone = logs.deleted_counters
    loss = logs.recovery_loss
    groups = [
        GroupRow(g.group_id, g.state.value, len(g.members), [(t, p, v.offset) for (t, p), v in g.offsets.items()])
        for g in broker.groups.coordinator.groups()
    ]
    return Snapshot(
        partitions=partitions,
        offline_partitions=offline_partitions,
        log_dirs=[str(log_dir) for log_dir in logs.log_dirs],
        offline_dirs=offline_dirs,
        uncleanable=dict(uncleanable),
        deleted=(gone.bytes_in, gone.messages_in, gone.bytes_out, gone.produce_requests, gone.fetch_requests,
                 gone.segments_deleted, gone.bytes_deleted),
        requests=requests,
        connections=dict(stats.connections),
        connections_created=dict(stats.connections_created),
        memory_used=memory.used if memory else 0,
        memory_available=max(0, memory.limit - memory.used) if memory else 0,
        fetches_waiting=stats.fetches_waiting,
        failed_produce=stats.failed_produce_requests,
        failed_fetch=stats.failed_fetch_requests,
        storage_errors=dict(stats.storage_errors),
        recovery=(loss.truncations, loss.bytes_dropped, loss.segments_deleted, logs.recovered_bytes),
        cleaner=(stats.compactions, stats.compactions_failed, stats.compaction_segments_cleaned,
                 stats.compaction_bytes_removed),
        retention_runs=stats.retention_runs,
        groups=groups,
        audit=audit_families([({}, broker.audit)]) if isinstance(broker.audit, AuditLog) else [],
        quotas=quota_rows(broker.quotas, monotonic_ms()),
    )


class BrokerCollector:
    """A prometheus_client collector over one snapshot (make one per scrape; `render` does)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        """Every family, the large ones (`tables`) included."""
        yield from (table.family() for table in self.tables())
        yield from self.collect_small()

    def collect_small(self) -> Iterator[Metric]:
        """The families whose size does not grow with partitions or committed offsets."""
        yield from self._topic_metrics()
        yield from self._log_metrics()
        yield from self._request_metrics()
        yield from self._socket_metrics()
        yield from self._group_metrics()
        yield from self._storage_metrics()
        yield from self.snapshot.audit
        yield from quota_families(self.snapshot.quotas)

    def tables(self) -> list[Table]:
        """The per-partition families (kafka.log Log) and the per committed offset ones (kafka_exporter's)."""
        rows = self.snapshot.partitions
        keys = [(row[0], str(row[1])) for row in rows]
        labels = ("topic", "partition")
        tables = [
            Table(name, doc, kind, labels, [(key, row[column]) for key, row in zip(keys, rows, strict=True)])
            for column, name, kind, doc in (
                (2, "kafka_log_log_logendoffset", "gauge", "The offset the next record appended to the partition gets"),
                (3, "kafka_log_log_logstartoffset", "gauge", "The first offset a consumer can read"),
                (4, "kafka_log_log_size", "gauge", "Bytes of the partition's segments on disk"),
                (5, "kafka_log_log_numlogsegments", "gauge", "Segments of the partition"),
                (6, "logway_partition_bytes_in", "counter", "Bytes appended to the partition by Produce requests"),
                (7, "logway_partition_messages_in", "counter", "Records appended to the partition by Produce requests"),
                (8, "logway_partition_bytes_out", "counter", "Record bytes of the partition sent in Fetch responses"),
            )
        ]
        # kafka_exporter's names, which Kafka dashboards use for consumer lag.
        end_offsets = {(row[0], row[1]): row[2] for row in rows}
        group_labels = ("consumergroup", "topic", "partition")
        current = Table("kafka_consumergroup_current_offset", "Committed offset", "gauge", group_labels, [])
        lag = Table("kafka_consumergroup_lag", "Log end offset minus the committed offset", "gauge", group_labels, [])
        for g in sorted(self.snapshot.groups, key=lambda g: g.group_id):
            for topic, partition, offset in sorted(g.offsets):
                key = (g.group_id, topic, str(partition))
                current.rows.append((key, offset))
                end = end_offsets.get((topic, partition))
                if end is not None:  # a deleted topic has no lag to report
                    lag.rows.append((key, end - offset))
        return [*tables, current, lag]

    # --- kafka.server BrokerTopicMetrics (per topic, and the broker's total) ---------------------------------

    def _topic_metrics(self) -> Iterator[Metric]:
        snap = self.snapshot
        per_topic: dict[str, list[int]] = {}
        for row in snap.partitions:
            sums = per_topic.get(row[0])
            if sums is None:
                sums = per_topic[row[0]] = [0, 0, 0, 0, 0]
            sums[0] += row[6]
            sums[1] += row[7]
            sums[2] += row[8]
            sums[3] += row[9]
            sums[4] += row[10]
        totals = [sum(s[i] for s in per_topic.values()) + snap.deleted[i] for i in range(5)]
        for i, (name, doc) in enumerate((
            ("bytesin", "Bytes appended by Produce requests (Kafka's BytesInPerSec)"),
            ("messagesin", "Records appended by Produce requests (Kafka's MessagesInPerSec)"),
            ("bytesout", "Record bytes sent in Fetch responses (Kafka's BytesOutPerSec)"),
            ("totalproducerequests", "Partitions of Produce requests (Kafka's TotalProduceRequestsPerSec)"),
            ("totalfetchrequests", "Partitions of Fetch responses (Kafka's TotalFetchRequestsPerSec)"),
        )):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"])
            for topic, sums in per_topic.items():
                family.add_metric([topic], sums[i])
            family.add_sample(family.name + "_total", {}, totals[i])  # all topics: no topic label, as in Kafka
            yield family
        for name, value, doc in (
            ("failedproducerequests", snap.failed_produce, "Partitions whose append failed (FailedProduceRequestsPerSec)"),
            ("failedfetchrequests", snap.failed_fetch, "Partitions whose read failed (FailedFetchRequestsPerSec)"),
        ):
            yield CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, value=value)

    # --- kafka.log Log (per partition) ----------------------------------------------------------------------

    def _log_metrics(self) -> Iterator[Metric]:
        """Broker-wide partition counts (the per-partition kafka.log families are `tables`)."""
        rows = self.snapshot.partitions
        topics = {row[0] for row in rows}
        count = len(rows)
        offline = self.snapshot.offline_partitions
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions on this broker", value=count)
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions this broker leads", value=count)
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Always 0: one replica per partition", value=0)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount_value",
                                "Always 1: a single broker is its own controller", value=1)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_globaltopiccount_value", "Topics", value=len(topics))
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_globalpartitioncount_value", "Partitions", value=count)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount_value",
                                "Partitions whose log dir is offline", value=offline)

    # --- kafka.network RequestMetrics -----------------------------------------------------------------------

    def _request_metrics(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests received (Kafka's RequestsPerSec)", labels=["request", "version"])
        total_time = Metric("kafka_network_requestmetrics_totaltimems",
                            "Request total time in ms, received to response sent (Kafka's TotalTimeMs; "
                            "percentiles over the last one to two minutes)", "summary")
        histogram = HistogramMetricFamily("logway_request_duration_seconds",
                                          "Request total time, received to response sent", labels=["request"])
        bounds = [str(b / 1000) for b in LATENCY_BOUNDS_MS] + ["+Inf"]
        for name, versions, buckets, recent, count, total_ms in sorted(self.snapshot.requests):
            for version, n in enumerate(versions):
                if n:
                    requests.add_metric([name, str(version)], n)
            for label, q in QUANTILES:
                total_time.add_sample("kafka_network_requestmetrics_totaltimems", {"request": name, "quantile": label},
                                      _quantile(recent, q))
            total_time.add_sample("kafka_network_requestmetrics_totaltimems_count", {"request": name}, count)
            total_time.add_sample("kafka_network_requestmetrics_totaltimems_sum", {"request": name}, total_ms)
            cumulative = 0
            le = []
            for bound, n in zip(bounds, buckets, strict=True):
                cumulative += n
                le.append((bound, cumulative))
            histogram.add_metric([name], le, total_ms / 1000)
        yield requests
        yield total_time
        yield histogram

    # --- connections and request memory ---------------------------------------------------------------------

    def _socket_metrics(self) -> Iterator[Metric]:
        snap = self.snapshot
        # kafka.server<type=socket-server-metrics, listener=L, networkProcessor=N><>connection-count
        labels = ["listener", "networkProcessor"]
        count = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count", "Open connections",
                                  labels=labels)
        created = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_creation_total",
                                    "Connections accepted since start", labels=labels)
        for listener in sorted(set(snap.connections) | set(snap.connections_created)):
            count.add_metric([listener, "0"], snap.connections.get(listener, 0))
            created.add_metric([listener, "0"], snap.connections_created.get(listener, 0))
        yield count
        yield created
        yield GaugeMetricFamily("kafka_network_socketserver_memorypoolused",
                                "Bytes of received requests held in connection buffers (queued.max.request.bytes)",
                                value=snap.memory_used)
        yield GaugeMetricFamily("kafka_network_socketserver_memorypoolavailable",
                                "Bytes of queued.max.request.bytes not in use", value=snap.memory_available)
        purgatory = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                      "Requests waiting (long-polling Fetch requests)", labels=["delayedOperation"])
        purgatory.add_metric(["Fetch"], snap.fetches_waiting)
        yield purgatory

    # --- consumer groups ------------------------------------------------------------------------------------

    def _group_metrics(self) -> Iterator[Metric]:
        groups = self.snapshot.groups
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        states: dict[str, int] = dict.fromkeys(GROUP_STATES, 0)
        for g in groups:
            states[g.state] = states.get(g.state, 0) + 1
        yield GaugeMetricFamily(prefix + "numgroups", "Consumer groups", value=len(groups))
        for state in GROUP_STATES:
            yield GaugeMetricFamily(prefix + "numgroups" + state.lower(), f"Consumer groups in state {state}",
                                    value=states[state])
        yield GaugeMetricFamily(prefix + "numoffsets", "Committed offsets",
                                value=sum(len(g.offsets) for g in groups))
        end_offsets = {(row[0], row[1]): row[2] for row in self.snapshot.partitions}
        # kafka_exporter's names (the per-partition lag is in `tables`).
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group", labels=["consumergroup"])
        state = GaugeMetricFamily("logway_consumergroup_state", "1 for the group's state", labels=["consumergroup", "state"])
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "Lag summed over the topic's partitions",
                                    labels=["consumergroup", "topic"])
        for g in sorted(groups, key=lambda g: g.group_id):
            members.add_metric([g.group_id], g.members)
            state.add_metric([g.group_id, g.state], 1)
            sums: dict[str, int] = defaultdict(int)
            for topic, partition, offset in g.offsets:
                end = end_offsets.get((topic, partition))
                if end is not None:
                    sums[topic] += end - offset
            for topic, total in sorted(sums.items()):
                lag_sum.add_metric([g.group_id, topic], total)
        yield from (members, state, lag_sum)

    # --- storage: offline dirs, recovery, retention, cleaning, errors ---------------------------------------

    def _storage_metrics(self) -> Iterator[Metric]:
        snap = self.snapshot
        yield GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount", "Log dirs taken offline by an I/O error",
                                value=len(snap.offline_dirs))
        offline = GaugeMetricFamily("kafka_log_logmanager_logdirectoryoffline", "1 if the log dir is offline",
                                    labels=["logDirectory"])
        uncleanable = GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_partitions_count",
                                        "Partitions whose last compaction failed", labels=["logDirectory"])
        for d in snap.log_dirs:
            offline.add_metric([d], int(d in snap.offline_dirs))
            uncleanable.add_metric([d], snap.uncleanable.get(d, 0))
        yield offline
        yield uncleanable
        truncations, dropped, segments, scanned = snap.recovery
        yield CounterMetricFamily("logway_log_recovery_truncations", "Segments recovery cut at an invalid batch",
                                  value=truncations)
        yield CounterMetricFamily("logway_log_recovery_dropped_bytes", "Bytes recovery removed", value=dropped)
        yield CounterMetricFamily("logway_log_recovery_deleted_segments", "Segments recovery deleted", value=segments)
        yield CounterMetricFamily("logway_log_recovery_scanned_bytes",
                                  "Bytes start-up recovery read whole and checked by CRC (not fsynced before a crash)",
                                  value=scanned)
        deleted_segments = sum(row[11] for row in snap.partitions) + snap.deleted[5]
        deleted_bytes = sum(row[12] for row in snap.partitions) + snap.deleted[6]
        yield CounterMetricFamily("logway_log_retention_runs", "Retention passes over every log",
                                  value=snap.retention_runs)
        yield CounterMetricFamily("logway_log_retention_deleted_segments",
                                  "Segments deleted by retention or a moved log start offset", value=deleted_segments)
        yield CounterMetricFamily("logway_log_retention_deleted_bytes",
                                  "Bytes deleted by retention or a moved log start offset", value=deleted_bytes)
        runs, failures, cleaned, removed = snap.cleaner
        yield CounterMetricFamily("logway_log_cleaner_runs", "Compactions finished", value=runs)
        yield CounterMetricFamily("logway_log_cleaner_failures", "Compactions that failed", value=failures)
        yield CounterMetricFamily("logway_log_cleaner_cleaned_segments", "Segments compaction rewrote", value=cleaned)
        yield CounterMetricFamily("logway_log_cleaner_removed_bytes", "Bytes compaction removed", value=removed)
        errors = CounterMetricFamily("logway_storage_errors", "Appends and reads that failed on a storage error "
                                     "(KAFKA_STORAGE_ERROR, or CORRUPT_MESSAGE for stored data)", labels=["operation"])
        for operation in ("append", "read"):
            errors.add_metric([operation], snap.storage_errors.get(operation, 0))
        yield errors


def _quantile(buckets: list[int], q: float) -> float:
    """The q-quantile (ms) of bucketed request times, interpolated inside its bucket (0 with no requests)."""
    total = sum(buckets)
    if not total:
        return 0.0
    rank = q * total
    seen = 0
    lower = 0.0
    for i, n in enumerate(buckets):
        upper = LATENCY_BOUNDS_MS[i] if i < len(LATENCY_BOUNDS_MS) else LATENCY_BOUNDS_MS[-1]
        if n and seen + n >= rank:
            return lower + (upper - lower) * (rank - seen) / n
        seen += n
        lower = upper
    return LATENCY_BOUNDS_MS[-1]


_PROCESS = ProcessCollector(registry=None)


class _Collectors:
    """What generate_latest needs of a registry: collect() over several collectors."""

    def __init__(self, collectors: Iterable) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self.collectors:
            yield from collector.collect()


class _Small:
    def __init__(self, collector: BrokerCollector) -> None:
        self.collector = collector

    def collect(self) -> Iterator[Metric]:
        return self.collector.collect_small()


def render(snapshot: Snapshot) -> bytes:
    """The Prometheus text exposition of a snapshot plus the process metrics (CPU, memory, open files): the
    large families written directly (`Table.text`), the others by prometheus_client's generate_latest."""
    collector = BrokerCollector(snapshot)
    cache: dict[tuple[str, ...], dict[tuple[str, ...], str]] = {}
    tables = "".join(table.text(cache) for table in collector.tables()).encode()
    return tables + generate_latest(_Collectors((_Small(collector), _PROCESS)))  # type: ignore[arg-type]


async def serve_metrics(broker: Broker, listeners: list[trio.SocketListener],
                        task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Answer scrapes of the broker until cancelled: the live state is copied on the event loop, the text is
    formatted in a worker thread."""

    async def body(limiter: trio.CapacityLimiter) -> bytes:
        snapshot = take_snapshot(broker)
        return await trio.to_thread.run_sync(render, snapshot, limiter=limiter)

    await serve_scrapes(body, listeners, task_status=task_status)
