"""The benchmark cases: each starts its own Logway and Tansu, alternates runs between them, and measures."""

from __future__ import annotations

import itertools
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.admin import create_topic, high_watermarks, wait_high_watermark
from bench.driver import LoadRun, run_load
from bench.outcome import CaseOutcome, Metric
from bench.procs import Broker, Kafka, Logway, Tansu, scratch_dir
from bench.settings import MB, Settings

log = logging.getLogger("bench")
KIB = 1024
THROUGHPUT = [Metric("mb_s", "MB/s"), Metric("msgs_s", "msgs/s")]
_topic_ids = itertools.count()


def new_topic(broker: Broker, partitions: int, prefix: str = "bench") -> str:
    name = f"{prefix}-{next(_topic_ids)}"
    create_topic(broker.bootstrap, name, partitions)
    return name


def throughput(run: LoadRun) -> dict[str, float]:
    """MB/s (10^6 bytes of payload), msgs/s and broker CPU-seconds per GB (10^9 bytes) for one load run."""
    nbytes, span = run.total("bytes"), run.span_s
    return {"mb_s": nbytes / span / 1e6, "msgs_s": run.total("messages") / span,
            "cpu_s_per_gb": run.broker_cpu_s / (nbytes / 1e9) if nbytes else None, "errors": run.total("errors"),
            "other_cores": run.other_cores}


def check_errors(case: str, broker: Broker, result: dict) -> None:
    if result.get("errors"):
        log.warning("%s on %s: %d messages failed", case, broker.name, result["errors"])


class Bench:
    """Holds the settings and the Tansu binary; starts brokers per case and cleans them up."""

    def __init__(self, settings: Settings, tansu: Path) -> None:
        self.s = settings
        self.tansu = tansu

    @property
    def kinds(self) -> tuple[str, ...]:
        """Logway and the peers this run measures beside it."""
        return ("logway", *self.s.peers)

    def broker(self, kind: str, overrides: dict[str, str] | None = None) -> Broker:
        if kind == "logway":
            return Logway(scratch_dir("logway"), overrides)
        if kind == "kafka":
            return Kafka(scratch_dir("kafka"), overrides)
        return Tansu(scratch_dir("tansu"), self.tansu)

    @contextmanager
    def brokers(self, kinds: tuple[str, ...] | None = None,
                overrides: dict[str, str] | None = None) -> Iterator[list[Broker]]:
        started: list[Broker] = []
        try:
            for kind in kinds or self.kinds:
                broker = self.broker(kind, overrides)
                started.append(broker)
                broker.start()
            yield started
        finally:
            for broker in started:
                broker.cleanup()

    def paired(self, outcome: CaseOutcome, run_once: Callable[[Broker, int], dict[str, float]],
               setup: Callable[[Broker], None] | None = None,
               kinds: tuple[str, ...] | None = None) -> CaseOutcome:
        """Run `run_once` s.runs times on each broker, alternating which goes first, then read peak RSS."""
        log.info("case %s / %s", outcome.section, outcome.name)
        with self.brokers(kinds) as brokers:
            if setup is not None:
                for broker in brokers:
                    setup(broker)
            outcome.runs = {b.name: [] for b in brokers}
            for i in range(self.s.runs):
                # Alternate the order (rotate it with three brokers) so no broker always goes first.
                for broker in brokers[i % len(brokers):] + brokers[:i % len(brokers)]:
                    result = run_once(broker, i)
                    check_errors(outcome.name, broker, result)
                    outcome.runs[broker.name].append(result)
            outcome.peak_rss_mb = {b.name: b.memory_mb()["VmHWM"] for b in brokers}
        return outcome

    # produce ---------------------------------------------------------------------------------------------

    def produce_grid(self) -> list[dict]:
        if self.s.full_grid:
            return [dict(size=size, partitions=p, compression=c, acks=a) for size in (KIB, 100)
                    for p in (1, 8, 64) for c in ("none", "lz4") for a in ("1", "all")]
        return [dict(size=KIB, partitions=8, compression="none", acks="all"),  # the reference point
                dict(size=KIB, partitions=8, compression="lz4", acks="1"),
                # Issue 26: compressed produce, every record decompressed and checked (Logway and Kafka validate
                # every batch; Tansu 0.6 does not).
                dict(size=KIB, partitions=8, compression="lz4", acks="all"),
                dict(size=KIB, partitions=8, compression="zstd", acks="all"),
                dict(size=100, partitions=8, compression="none", acks="1"),
                dict(size=KIB, partitions=1, compression="none", acks="1"),
                dict(size=KIB, partitions=64, compression="none", acks="all")]

    def produce(self) -> list[CaseOutcome]:
        out = []
        for params in self.produce_grid():
            size = params["size"]
            payload = self.s.produce_mb * MB // (4 if size < KIB else 1)
            count = payload // size
            name = (f"produce {size} B, {params['partitions']} partitions, {params['compression']}, "
                    f"acks={params['acks']}")
            if self.s.produce_cases and not any(text in name for text in self.s.produce_cases):
                continue

            def run_once(broker: Broker, _i: int, params=params, count=count) -> dict[str, float]:
                topic = new_topic(broker, params["partitions"])
                spec = {"mode": "rdkafka.produce", "topic": topic, "count": count, "size": params["size"],
                        "compression": params["compression"], "acks": params["acks"]}
                return throughput(run_load(broker, [spec]))

            outcome = CaseOutcome("produce", name, {**params, "messages": count, "client": "librdkafka"},
                                  THROUGHPUT)
            out.append(self.paired(outcome, run_once))
        return out

    # consume ---------------------------------------------------------------------------------------------

    def backlog(self, broker: Broker, mb: int, partitions: int = 8) -> tuple[str, list[int]]:
        """A topic holding `mb` MiB of 1 KiB messages, written with librdkafka (acks=1); its per-partition ends."""
        topic = new_topic(broker, partitions, "backlog")
        count = mb * MB // KIB
        run = run_load(broker, [{"mode": "rdkafka.produce", "topic": topic, "count": count, "size": KIB,
                                 "acks": "1", "round_robin": partitions}], timeout=900)
        if run.total("errors"):
            raise RuntimeError(f"backlog on {broker.name}: {run.total('errors')} messages failed")
        broker.settle()
        # Counted, not read back with ListOffsets: Tansu 0.6.0's memory engine reported fewer records
        # than were acknowledged (519,910 of 524,288) while a consumer still read them all.
        return topic, [count // partitions + (p < count % partitions) for p in range(partitions)]

    def consume(self, client: str = "rdkafka", mb: int | None = None, section: str = "consume",
                procs: int = 1, config: dict | None = None) -> CaseOutcome:
        """Read a backlog from earliest; with procs > 1 the 8 partitions are split over that many consumers;
        `config` adds client settings (named in the case)."""
        mb = mb or self.s.consume_mb
        backlogs: dict[str, tuple[str, list[int]]] = {}

        def setup(broker: Broker) -> None:
            backlogs[broker.name] = self.backlog(broker, mb)

        def run_once(broker: Broker, _i: int) -> dict[str, float]:
            topic, ends = backlogs[broker.name]
            shares = [list(range(i, len(ends), procs)) for i in range(procs)]
            specs = [{"mode": f"{client}.consume", "topic": topic, "assign": share,
                      "ends": [ends[p] for p in share], "size": KIB, "config": config or {}} for share in shares]
            return throughput(run_load(broker, specs, timeout=900))

        label = {"rdkafka": "librdkafka", "java": "Java kafka-clients"}.get(client, "kafka-python")
        who = "1 consumer" if procs == 1 else f"{procs} consumer processes"
        settings = "".join(f", {k}={v}" for k, v in (config or {}).items())
        name = f"consume from earliest, {mb} MiB backlog of 1 KiB, 8 partitions, {who} ({label}{settings})"
        return self.paired(CaseOutcome(section, name, {"backlog_mb": mb, "client": label, "consumers": procs},
                                       THROUGHPUT), run_once, setup)

    def consume_more(self) -> list[CaseOutcome]:
        """Issue 15's consume cases: librdkafka with fetch.queue.backoff.ms=10 (its default 1000 ms pause after the
        client's 64 MiB prefetch queue fills stalls a consumer fed faster than it drains; see LATEST.md's consume
        investigation), and the Java consumer (fetch sessions), when Java is installed."""
        quick = {"fetch.queue.backoff.ms": 10}
        out = [self.consume(config=quick), self.consume(procs=2, config=quick)]
        if shutil.which("java"):
            out.append(self.consume("java"))
        return out

    # end-to-end latency ------------------------------------------------------------------------------------

    def e2e(self) -> CaseOutcome:
        rate, seconds = self.s.e2e_rate, self.s.e2e_seconds
        count = int(rate * seconds)

        def run_once(broker: Broker, _i: int) -> dict[str, float]:
            topic = new_topic(broker, 1, "e2e")
            consumer = {"mode": "rdkafka.e2e_consume", "topic": topic, "partitions": 1, "count": count,
                        "timeout": seconds + 60}
            producer = {"mode": "rdkafka.e2e_produce", "topic": topic, "rate": rate, "duration": seconds,
                        "size": KIB, "acks": "all"}
            run = run_load(broker, [consumer, producer], timeout=seconds + 60)
            got, sent = run.results
            return {"p50_ms": got.get("p50_ms"), "p99_ms": got.get("p99_ms"), "max_ms": got.get("max_ms"),
                    "received": got["received"], "errors": sent["errors"] + (sent["sent"] - got["received"]),
                    "worst_ms_by_second": got.get("worst_ms_by_second"), "other_cores": run.other_cores}

        name = f"end-to-end latency, {rate} msg/s paced, 1 KiB, acks=all, linger 0, fetch.wait.max.ms 500"
        metrics = [Metric("p50_ms", "p50 ms", False), Metric("p99_ms", "p99 ms", False),
                   Metric("max_ms", "max ms", False)]
        return self.paired(CaseOutcome("e2e", name, {"rate": rate, "seconds": seconds, "partitions": 1},
                                       metrics), run_once)

    # scaling ---------------------------------------------------------------------------------------------

    def scaling(self) -> list[CaseOutcome]:
        out = []
        count = self.s.scaling_mb * MB // KIB
        metrics = THROUGHPUT[:1] + [Metric("rss_mb", "broker RSS MB after", False)]
        for partitions in (1, 100, 1000):
            def run_once(broker: Broker, _i: int, partitions=partitions) -> dict[str, float]:
                topic = new_topic(broker, partitions, "scale")
                spec = {"mode": "rdkafka.produce", "topic": topic, "count": count, "size": KIB, "acks": "1"}
                return {**throughput(run_load(broker, [spec])), "rss_mb": broker.memory_mb()["VmRSS"]}

            outcome = CaseOutcome("scaling", f"produce 1 KiB into {partitions} partitions, 1 producer, acks=1",
                                  {"partitions": partitions, "producers": 1}, metrics)
            out.append(self.paired(outcome, run_once))
        for producers in (1, 10, 100):
            procs = 1 if producers == 1 else 2

            def run_once(broker: Broker, _i: int, producers=producers, procs=procs) -> dict[str, float]:
                topic = new_topic(broker, 8, "conns")
                specs = [{"mode": "rdkafka.produce", "topic": topic, "count": count // procs, "size": KIB,
                          "acks": "1", "producers": producers // procs} for _ in range(procs)]
                return {**throughput(run_load(broker, specs)), "rss_mb": broker.memory_mb()["VmRSS"]}

            outcome = CaseOutcome("scaling", f"produce 1 KiB into 8 partitions from {producers} producer "
                                  f"connections ({procs} processes), acks=1",
                                  {"partitions": 8, "producers": producers, "processes": procs}, metrics)
            out.append(self.paired(outcome, run_once))
        return out

    # fetch latency from an old offset vs log size --------------------------------------------------------

    def fetch(self) -> list[CaseOutcome]:
        sizes = sorted(self.s.fetch_log_mb)
        outcomes = {mb: CaseOutcome("fetch", f"fetch from an old offset, log of {mb} MiB in 1 partition",
                                    {"log_mb": mb, "probes": self.s.fetch_probes, "region": "oldest 10%"},
                                    [Metric("p50_ms", "p50 ms", False), Metric("max_ms", "max ms", False),
                                     Metric("rss_mb", "broker RSS MB", False)]) for mb in sizes}
        overrides = {"log.segment.bytes": str(self.s.segment_mb * MB)}
        for kind in self.kinds:
            log.info("case fetch / %s", kind)
            with self.brokers((kind,), overrides) as (broker,):
                topic, written = new_topic(broker, 1, "fetch"), 0
                for mb in sizes:
                    if kind == "tansu" and mb > self.s.tansu_max_log_mb:
                        outcomes[mb].note = f"Tansu skipped above {self.s.tansu_max_log_mb} MiB (log in RAM)"
                        continue
                    count = mb * MB // KIB - written
                    run_load(broker, [{"mode": "rdkafka.produce", "topic": topic, "count": count, "size": KIB,
                                       "acks": "1"}], timeout=3600)
                    written += count
                    broker.settle()
                    rss = broker.memory_mb()["VmRSS"]
                    runs = outcomes[mb].runs.setdefault(kind, [])
                    for i in range(self.s.runs):
                        probe = run_load(broker, [{"mode": "rdkafka.fetch_probe", "topic": topic, "high": written,
                                                   "probes": self.s.fetch_probes, "seed": i}]).results[0]
                        lat = sorted(probe["latencies_ms"])
                        runs.append({"p50_ms": lat[(len(lat) - 1) // 2], "max_ms": lat[-1], "rss_mb": rss})
                    outcomes[mb].peak_rss_mb[kind] = broker.memory_mb()["VmHWM"]
        return [outcomes[mb] for mb in sizes]

    # a consumer tailing idle partitions ----------------------------------------------------------------------

    def idle(self) -> list[CaseOutcome]:
        """One librdkafka consumer tailing 1,000 partitions that get nothing, fetch.wait.max.ms 100: every Fetch
        is a long poll that times out. Broker CPU per Fetch is the broker's CPU per second over the window
        divided by the Fetch requests per second the client's statistics count (idle timers included)."""
        partitions, seconds = 1000, self.s.idle_seconds
        topics: dict[str, str] = {}

        def setup(broker: Broker) -> None:
            topics[broker.name] = new_topic(broker, partitions, "idle")

        def run_once(broker: Broker, _i: int) -> dict[str, float]:
            spec = {"mode": "rdkafka.tail_idle", "topic": topics[broker.name], "partitions": partitions,
                    "fetch_wait_ms": 100, "duration": seconds}
            run = run_load(broker, [spec], timeout=seconds + 120)
            rate = run.results[0]["fetches_per_s"]
            cpu_ms_per_s = 1000 * run.broker_cpu_s / run.span_s
            return {"cpu_ms_per_fetch": cpu_ms_per_s / rate if rate else None, "fetches_per_s": rate,
                    "cpu_ms_per_s": cpu_ms_per_s, "other_cores": run.other_cores}

        name = f"one consumer tailing {partitions:,} idle partitions, fetch.wait.max.ms 100, {seconds:g} s"
        metrics = [Metric("cpu_ms_per_fetch", "broker CPU ms per Fetch", False),
                   Metric("fetches_per_s", "Fetch requests/s"),
                   Metric("cpu_ms_per_s", "broker CPU ms per s", False)]
        return [self.paired(CaseOutcome("idle", name, {"partitions": partitions, "seconds": seconds}, metrics),
                            run_once, setup)]

    # restart -------------------------------------------------------------------------------------------

    def restart(self) -> list[CaseOutcome]:
        """Logway only: Tansu's memory engine keeps nothing across a restart, so it has no recovery to time."""
        out = []
        overrides = {"log.segment.bytes": str(self.s.segment_mb * MB)}
        metrics = [Metric("clean_s", "after clean shutdown, s", False),
                   Metric("kill_s", "after SIGKILL, s", False)]
        for mb in sorted({1, self.s.restart_log_mb}):
            log.info("case restart / %d MiB", mb)
            outcome = CaseOutcome("restart", f"restart until ListOffsets answers, log of {mb} MiB in 1 partition "
                                  f"({self.s.segment_mb} MiB segments)", {"log_mb": mb}, metrics,
                                  note="Tansu n/a: its memory engine keeps no data across restarts")
            with self.brokers(("logway",), overrides) as (broker,):
                topic = new_topic(broker, 1, "restart")
                count = mb * MB // KIB
                run_load(broker, [{"mode": "rdkafka.produce", "topic": topic, "count": count, "size": KIB,
                                   "acks": "1"}], timeout=3600)
                runs = outcome.runs.setdefault("logway", [])
                for _ in range(self.s.runs):
                    row = {"errors": 0}
                    for how, halt in (("clean", broker.stop), ("kill", broker.kill)):
                        halt()
                        t0 = time.monotonic()
                        broker.start(timeout=3600)
                        high = wait_high_watermark(broker.bootstrap, topic, timeout=3600)
                        row[f"{how}_s"] = time.monotonic() - t0
                        row["errors"] += count - high
                    runs.append(row)
                outcome.peak_rss_mb["logway"] = broker.memory_mb()["VmHWM"]
                lost = sum(r["errors"] for r in runs)
                if lost:
                    outcome.note += f"; {lost} acknowledged records missing after restarts"
            out.append(outcome)
        return out

    # kafka-python --------------------------------------------------------------------------------------

    def kafka_python(self) -> list[CaseOutcome]:
        mb = self.s.kafka_python_mb
        count = mb * MB // KIB

        def run_once(broker: Broker, _i: int) -> dict[str, float]:
            topic = new_topic(broker, 8, "kp")
            spec = {"mode": "kafka_python.produce", "topic": topic, "count": count, "size": KIB, "acks": "1"}
            return throughput(run_load(broker, [spec], timeout=900))

        produce = CaseOutcome("kafka-python", f"produce {mb} MiB of 1 KiB, 8 partitions, acks=1 (kafka-python)",
                              {"client": "kafka-python", "messages": count}, THROUGHPUT)
        return [self.paired(produce, run_once), self.consume("kafka_python", mb, "kafka-python")]

    # transactions --------------------------------------------------------------------------------------------

    def transactions(self) -> list[CaseOutcome]:
        """Idempotent vs transactional produce (1 KiB, 8 partitions, transactions of 1,000 records), then
        read_uncommitted vs read_committed consume of the transactional backlog (Logway and Kafka: Tansu 0.6.0
        serves no transactions)."""
        kinds = tuple(k for k in self.kinds if k != "tansu")
        count = self.s.produce_mb * MB // KIB
        out = []
        for label, mode, config in (("idempotent", "rdkafka.produce", {"enable.idempotence": True}),
                                    ("transactional, 1,000 records per transaction", "rdkafka.txn_produce", {})):
            def run_once(broker: Broker, _i: int, mode=mode, config=config) -> dict[str, float]:
                topic = new_topic(broker, 8)
                spec = {"mode": mode, "topic": topic, "count": count, "size": KIB, "acks": "all", "config": config,
                        "round_robin": 8, "txn_records": 1000}
                return throughput(run_load(broker, [spec], timeout=900))

            name = f"produce 1 KiB, 8 partitions, acks=all, {label}"
            out.append(self.paired(CaseOutcome("transactions", name, {"messages": count, "client": "librdkafka"},
                                               THROUGHPUT), run_once, kinds=kinds))
        backlogs: dict[str, tuple[str, list[int]]] = {}

        def setup(broker: Broker) -> None:
            topic = new_topic(broker, 8, "txn-backlog")
            run = run_load(broker, [{"mode": "rdkafka.txn_produce", "topic": topic, "count": count, "size": KIB,
                                     "acks": "all", "round_robin": 8, "txn_records": 1000}], timeout=900)
            if run.total("errors"):
                raise RuntimeError(f"transactional backlog on {broker.name}: {run.total('errors')} messages failed")
            broker.settle()
            backlogs[broker.name] = (topic, high_watermarks(broker.bootstrap, topic, 8))

        for isolation in ("read_uncommitted", "read_committed"):
            def run_once(broker: Broker, _i: int, isolation=isolation) -> dict[str, float]:
                topic, ends = backlogs[broker.name]
                spec = {"mode": "rdkafka.consume", "topic": topic, "assign": list(range(8)), "ends": ends,
                        "count": count, "size": KIB, "isolation": isolation}
                return throughput(run_load(broker, [spec], timeout=900))

            name = f"consume a transactional backlog of {self.s.produce_mb} MiB, 8 partitions, {isolation}"
            out.append(self.paired(CaseOutcome("transactions", name, {"backlog_mb": self.s.produce_mb,
                                                                      "isolation": isolation}, THROUGHPUT),
                                   run_once, setup, kinds=kinds))
            backlogs.clear()
        return out
