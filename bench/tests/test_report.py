"""Targets from the issue judged from case outcomes, and the markdown a reader sees."""

from bench.outcome import CPU, CaseOutcome, Metric
from bench.report import markdown, targets
from bench.settings import Settings

THROUGHPUT = [Metric("mb_s", "MB/s")]
REF = "produce 1024 B, 8 partitions, none, acks=all"


def case(section: str, name: str, logway: dict, tansu: dict | None, metrics=THROUGHPUT, params=None) -> CaseOutcome:
    runs = {"logway": [logway] * 3}
    if tansu is not None:
        runs["tansu"] = [tansu] * 3
    return CaseOutcome(section, name, params or {}, metrics, runs)


def verdicts(outcomes) -> dict[str, str]:
    return {t["target"]: t["verdict"] for t in targets(outcomes)}


def test_produce_target_met_at_1_2x_and_missed_below():
    met = verdicts([case("produce", REF, {"mb_s": 120, CPU.key: 2.0}, {"mb_s": 100, CPU.key: 4.0})])
    missed = verdicts([case("produce", REF, {"mb_s": 110, CPU.key: 5.0}, {"mb_s": 100, CPU.key: 4.0})])
    key = next(k for k in met if k.startswith("produce throughput"))
    cpu = next(k for k in met if k.endswith("(produce)"))
    assert (met[key], missed[key]) == ("met", "missed")
    assert (met[cpu], missed[cpu]) == ("met", "missed")


def test_latency_target_needs_half_of_tansu():
    metrics = [Metric("p99_ms", "p99 ms", False)]
    half = verdicts([case("e2e", "e2e", {"p99_ms": 50}, {"p99_ms": 100}, metrics)])
    more = verdicts([case("e2e", "e2e", {"p99_ms": 60}, {"p99_ms": 100}, metrics)])
    key = next(k for k in half if k.startswith("e2e"))
    assert (half[key], more[key]) == ("met", "missed")


def test_targets_without_cases_are_not_measured():
    assert set(verdicts([]).values()) == {"not measured"}


def test_memory_growth_with_log_size_is_judged_from_the_fetch_cases():
    metrics = [Metric("p50_ms", "p50"), Metric("rss_mb", "rss")]
    flat = [case("fetch", "small", {"p50_ms": 1.0, "rss_mb": 50}, None, metrics, {"log_mb": 128}),
            case("fetch", "big", {"p50_ms": 1.1, "rss_mb": 52}, None, metrics, {"log_mb": 1024})]
    growing = [flat[0], case("fetch", "big", {"p50_ms": 1.1, "rss_mb": 500}, None, metrics, {"log_mb": 1024})]
    key = "Logway memory flat in log size"
    assert (verdicts(flat)[key], verdicts(growing)[key]) == ("met", "missed")


def test_markdown_shows_ratio_and_na_for_a_broker_without_runs():
    outcomes = [case("produce", REF, {"mb_s": 150.0, CPU.key: 2.0}, {"mb_s": 100.0, CPU.key: 4.0}),
                case("restart", "restart", {"kill_s": 1.5}, None, [Metric("kill_s", "after SIGKILL, s", False)])]
    info = {"cpu": "cpu", "cores": 2, "memory_gb": 1, "kernel": "k", "python": "3", "confluent_kafka": "x",
            "librdkafka": "y", "kafka_python": "z", "load_start": "1", "load_end": "2"}
    md = markdown(outcomes, Settings(), info, "python -m bench", "now", 60.0, [], ["fetch: boom"])
    assert f"| {REF} | MB/s | 150 (150–150) | 100 (100–100) | 1.50x | 2.00 / 4.00 | – / – | – / – |" in md
    assert "| after SIGKILL, s | 1.50 (1.50–1.50) | n/a | – |" in md
    assert "- fetch: boom" in md


def test_kafka_column_and_logway_kafka_ratio_appear_when_kafka_ran():
    o = case("produce", REF, {"mb_s": 150.0, CPU.key: 2.0}, {"mb_s": 100.0, CPU.key: 4.0})
    o.runs["kafka"] = [{"mb_s": 300.0, CPU.key: 8.0}] * 3
    o.peak_rss_mb = {"logway": 50.0, "tansu": 200.0, "kafka": 600.0}
    info = {"cpu": "cpu", "cores": 2, "memory_gb": 1, "kernel": "k", "python": "3", "confluent_kafka": "x",
            "librdkafka": "y", "kafka_python": "z", "load_start": "1", "load_end": "2"}
    md = markdown([o], Settings(), info, "python -m bench", "now", 60.0, [], [])
    assert ("| Logway median (min–max) | Tansu median (min–max) | Kafka median (min–max) | Logway/Tansu "
            "| Logway/Kafka | broker CPU s/GB Logway / Tansu / Kafka |") in md
    assert (f"| {REF} | MB/s | 150 (150–150) | 100 (100–100) | 300 (300–300) | 1.50x | 0.50x "
            "| 2.00 / 4.00 / 8.00 | 50.0 / 200 / 600 |") in md
    assert o.to_json()["ratios_by_peer"]["kafka"]["mb_s"] == 0.5
