"""bench.tls's report (no broker): per-round Logway/Kafka ratios, issue 26's verdicts, the table's cells, and the
librdkafka settings each listener gets."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from bench.tls import Endpoint, goals, markdown, per_round_ratios, table


def run(mb_s: float, cpu: float) -> dict[str, float]:
    return {"mb_s": mb_s, "cpu_s_per_gb": cpu, "other_cores": 0.5, "errors": 0}


def results() -> dict:
    """Two rounds per case: Logway faster and cheaper over SSL, slower over SASL_SSL's consume."""
    by_case = {}
    for case in ("produce", "consume", "connections"):
        by_case[case] = {
            "SSL": {"logway": [run(200, 2.0), run(150, 3.0)], "kafka": [run(100, 6.0), run(100, 6.0)]},
            "SASL_SSL": {"logway": [run(200, 2.0), run(90, 2.0)], "kafka": [run(100, 6.0), run(100, 6.0)]},
        }
    by_case["consume"]["SASL_SSL"]["logway"] = [run(90, 2.0), run(80, 2.0)]
    return by_case


def test_ratios_are_per_round_and_verdicts_follow_the_medians():
    r = results()
    assert per_round_ratios(r, "produce", "SSL", "mb_s") == [2.0, 1.5]
    assert per_round_ratios(r, "produce", "SSL", "cpu_s_per_gb") == [2.0 / 6.0, 0.5]
    verdicts = {line.split(" | ")[0].removeprefix("| "): line.split(" | ")[1] for line in goals(r)[2:]}
    assert verdicts == {
        "produce over SSL: >= 1.0x Kafka's MB/s, <= Kafka's CPU-s/GB": "met",
        "produce over SASL_SSL: >= 1.0x Kafka's MB/s, <= Kafka's CPU-s/GB": "met",  # median of 2.0x and 0.9x
        "consume over SSL: >= 1.0x Kafka's MB/s, <= Kafka's CPU-s/GB": "met",
        "consume over SASL_SSL: >= 1.0x Kafka's MB/s, <= Kafka's CPU-s/GB": "missed",  # 0.85x
    }


def test_the_table_has_a_row_per_case_and_listener(monkeypatch):
    monkeypatch.setattr("bench.tls.machine", lambda: {"cpu": "cpu", "cores": 2, "kernel": "k", "python": "3.11",
                                                       "librdkafka": "2.16"})
    args = Namespace(argv=["--rounds", "2"], rounds=2, warmup_records=10, records=100, conn_records=100,
                     connections=5, baseline=None)
    md = markdown(results(), {"logway": {"PLAIN": 100.0}}, "why not", args, ("1", "2"), 1.0)
    rows = [line for line in md.splitlines() if line.startswith("| produce 1 KiB, 8 partitions, acks=all")]
    assert len(rows) == 2
    cells = rows[0].split(" | ")
    assert cells[1] == "SSL" and cells[2] == "175.0 (150.0–200.0)" and cells[4] == "1.75 (1.50–2.00)x"
    assert "Tansu 0.6 over TLS: not measured: why not." in md and "Logway PLAIN 100/s" in md


def test_each_listener_gets_its_client_settings():
    class Broker:
        ports = {"PLAINTEXT": 1, "SSL": 2, "SASL_SSL": 3}

    assert Endpoint(Broker(), "PLAINTEXT", "ca.pem").client == {"security.protocol": "PLAINTEXT"}
    assert Endpoint(Broker(), "SSL", "ca.pem").bootstrap == "127.0.0.1:2"
    sasl = Endpoint(Broker(), "SASL_SSL", str(Path("ca.pem"))).client
    assert sasl["sasl.mechanism"] == "SCRAM-SHA-256" and sasl["ssl.ca.location"] == "ca.pem"


def test_a_baseline_tree_gets_its_columns_and_ratios():
    r = results()
    for case in r.values():
        for runs in case.values():
            runs["baseline"] = [run(50, 8.0), run(50, 6.0)]
    lines = table(r, ["logway", "baseline", "kafka"])
    assert "| Logway/Logway before MB/s |" in lines[0] and "| Logway/Kafka 4.3.1 CPU-s/GB |" in lines[0]
    produce_ssl = lines[2].split(" | ")
    assert produce_ssl[1] == "SSL" and produce_ssl[6] == "3.50 (3.00–4.00)x"  # Logway/before MB/s, per round
