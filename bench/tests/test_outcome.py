"""Case summaries: medians, ranges and Logway/Tansu ratios as the table shows them."""

from bench.outcome import CaseOutcome, Metric


def outcome(logway: list[float], tansu: list[float] | None) -> CaseOutcome:
    runs = {"logway": [{"mb_s": v} for v in logway]}
    if tansu is not None:
        runs["tansu"] = [{"mb_s": v} for v in tansu]
    return CaseOutcome("produce", "case", {}, [Metric("mb_s", "MB/s")], runs)


def test_summary_is_median_min_max_over_runs():
    s = outcome([120.0, 90.0, 100.0], [50.0]).summary("logway", "mb_s")
    assert s == {"median": 100.0, "min": 90.0, "max": 120.0, "n": 3}


def test_ratio_is_logway_median_over_tansu_median():
    assert outcome([120.0, 90.0, 100.0], [40.0, 50.0, 60.0]).ratio("mb_s") == 2.0


def test_ratio_missing_when_a_broker_has_no_runs():
    assert outcome([100.0], None).ratio("mb_s") is None
    assert outcome([100.0], None).summary("tansu", "mb_s") is None


def test_runs_without_the_metric_are_ignored():
    o = outcome([100.0], [50.0])
    o.runs["logway"].append({"mb_s": None})
    assert o.summary("logway", "mb_s")["n"] == 1
