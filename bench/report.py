"""The benchmark report: machine facts, per-section tables, targets met or missed; markdown and JSON."""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import asdict

from bench.outcome import CPU, CaseOutcome
from bench.settings import Settings

SECTION_TITLES = {
    "produce": "Produce throughput (librdkafka producer, linger.ms=5, batch.size=1 MiB)",
    "consume": "Consume throughput (librdkafka and Java consumers from earliest)",
    "e2e": "End-to-end latency (tailing librdkafka consumer)",
    "scaling": "Scaling: partitions and producer connections",
    "idle": "Idle partitions: a consumer tailing 1,000 partitions with a 100 ms long poll",
    "fetch": "Fetch latency from an old offset vs log size (warm page cache)",
    "restart": "Restart time (Logway only)",
    "kafka-python": "kafka-python as the client",
    "transactions": "Transactions: idempotent vs transactional produce, read_uncommitted vs read_committed consume",
}


def machine() -> dict:
    """Facts a reader needs to weigh the numbers: CPU, cores, memory, kernel, load, client versions."""
    import confluent_kafka
    import kafka

    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    return {"cpu": model, "cores": os.cpu_count(), "memory_gb": round(mem_kb / 1024 / 1024, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0],
            "kafka_python": kafka.__version__, "load_avg": os.getloadavg()}


def git_revision() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except OSError:
        return ""


def fmt(x: float | None) -> str:
    if x is None:
        return "–"
    if abs(x) >= 10000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def cell(outcome: CaseOutcome, broker: str, key: str) -> str:
    s = outcome.summary(broker, key)
    if s is None:
        return "n/a" if broker not in outcome.runs else "–"
    return f"{fmt(s['median'])} ({fmt(s['min'])}–{fmt(s['max'])})"


def ratio_cell(outcome: CaseOutcome, key: str, peer: str = "tansu") -> str:
    r = outcome.ratio(key, peer)
    return "–" if r is None else f"{r:.2f}x"


def section_table(outcomes: list[CaseOutcome]) -> list[str]:
    """One row per metric; Logway and Tansu always, Apache Kafka's column and ratio when it ran in the section."""
    brokers = ["logway", "tansu"] + (["kafka"] if any("kafka" in o.runs for o in outcomes) else [])
    label = {"logway": "Logway", "tansu": "Tansu", "kafka": "Kafka"}
    names = " / ".join(label[b] for b in brokers)
    head = (["case", "metric"] + [f"{label[b]} median (min–max)" for b in brokers]
            + [f"Logway/{label[b]}" for b in brokers[1:]]
            + [f"broker CPU s/GB {names}", f"peak RSS MB {names}", "others' load, cores"])
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]

    def medians(o: CaseOutcome, key: str) -> str:
        return " / ".join(fmt(o.summary(b, key)["median"]) if o.summary(b, key) else "–" for b in brokers)

    for o in outcomes:
        first_cells = [medians(o, CPU.key), " / ".join(fmt(o.peak_rss_mb.get(b)) for b in brokers),
                       medians(o, "other_cores")]
        for i, m in enumerate(o.metrics):
            row = [o.name if i == 0 else "", m.label] + [cell(o, b, m.key) for b in brokers]
            row += [ratio_cell(o, m.key, b) for b in brokers[1:]]
            row += first_cells if i == 0 else ["", "", ""]
            lines.append("| " + " | ".join(row) + " |")
    notes = [f"- {o.name}: {o.note.lstrip('; ')}" for o in outcomes if o.note]
    errors = [f"- {o.name} on {b}: {sum(r.get('errors') or 0 for r in runs)} failed or missing messages"
              for o in outcomes for b, runs in o.runs.items() if any(r.get("errors") for r in runs)]
    return lines + ([""] + notes if notes else []) + ([""] + errors if errors else [])


def find(outcomes: list[CaseOutcome], section: str, needle: str = "") -> CaseOutcome | None:
    return next((o for o in outcomes if o.section == section and needle in o.name), None)


def targets(outcomes: list[CaseOutcome]) -> list[dict]:
    """The issue's targets, each met or missed with the figure that decides it."""
    out = []

    def add(target: str, value: float | None, ok: bool | None, detail: str) -> None:
        verdict = "not measured" if value is None else ("met" if ok else "missed")
        out.append({"target": target, "value": value, "verdict": verdict, "detail": detail})

    ref = find(outcomes, "produce", "produce 1024 B, 8 partitions, none, acks=all")
    r = ref.ratio("mb_s") if ref else None
    add("produce throughput >= 1.2x Tansu (1 KiB, 8 partitions, none, acks=all)", r,
        r is not None and r >= 1.2, f"Logway/Tansu MB/s = {fmt(r)}")
    con = find(outcomes, "consume")
    r = con.ratio("mb_s") if con else None
    add("consume throughput >= 1.2x Tansu", r, r is not None and r >= 1.2, f"Logway/Tansu MB/s = {fmt(r)}")
    e2e = find(outcomes, "e2e")
    r = e2e.ratio("p99_ms") if e2e else None
    add("e2e p99 latency <= 0.5x Tansu", r, r is not None and r <= 0.5, f"Logway/Tansu p99 = {fmt(r)}")
    lz4 = find(outcomes, "produce", "produce 1024 B, 8 partitions, lz4, acks=all")
    r = lz4.ratio(CPU.key) if lz4 else None
    add("produce lz4, records validated: broker CPU per GB <= Tansu (1 KiB, 8 partitions, acks=all)", r,
        r is not None and r <= 1.0, f"Logway/Tansu CPU s/GB = {fmt(r)}")
    r = lz4.ratio("mb_s", "kafka") if lz4 else None
    add("produce lz4, records validated: throughput >= 1.5x Kafka (1 KiB, 8 partitions, acks=all)", r,
        r is not None and r >= 1.5, f"Logway/Kafka MB/s = {fmt(r)}")
    idle = find(outcomes, "idle")
    if idle:
        per = {b: idle.summary(b, "cpu_ms_per_fetch") for b in ("logway", "tansu", "kafka")}
        ms = per["logway"]["median"] if per["logway"] else None
        peers = ", ".join(f"{label} {fmt(per[b]['median'])}" for b, label in (("tansu", "Tansu"), ("kafka", "Kafka"))
                          if per[b])
        add("one consumer tailing 1,000 idle partitions, long poll 100 ms: <= 2 ms broker CPU per Fetch", ms,
            ms is not None and ms <= 2.0, f"Logway {fmt(ms)} ms per Fetch" + (f" ({peers})" if peers else ""))
    for label, case in (("produce", ref), ("consume", con)):
        r = case.ratio(CPU.key) if case else None
        add(f"broker CPU per GB <= Tansu ({label})", r, r is not None and r <= 1.0,
            f"Logway/Tansu CPU s/GB = {fmt(r)}")
    fetch = [o for o in outcomes if o.section == "fetch" and o.summary("logway", "rss_mb")]
    if len(fetch) >= 2:
        small, big = fetch[0].summary("logway", "rss_mb")["median"], fetch[-1].summary("logway", "rss_mb")["median"]
        growth = big / small
        add("Logway memory flat in log size", growth, growth <= 1.25,
            f"RSS {fmt(small)} MB at {fetch[0].params['log_mb']} MiB -> {fmt(big)} MB at "
            f"{fetch[-1].params['log_mb']} MiB ({growth:.2f}x)")
        a, b = fetch[0].summary("logway", "p50_ms")["median"], fetch[-1].summary("logway", "p50_ms")["median"]
        add("Logway fetch latency from an old offset flat in log size", b / a, b / a <= 1.5,
            f"p50 {fmt(a)} ms -> {fmt(b)} ms ({b / a:.2f}x)")
    restarts = [o for o in outcomes if o.section == "restart" and o.summary("logway", "kill_s")]
    if len(restarts) >= 2:
        a, b = restarts[0].summary("logway", "kill_s")["median"], restarts[-1].summary("logway", "kill_s")["median"]
        add("Logway restart after SIGKILL independent of log size", b / a, b / a <= 2.0,
            f"{fmt(a)} s at {restarts[0].params['log_mb']} MiB -> {fmt(b)} s at "
            f"{restarts[-1].params['log_mb']} MiB ({b / a:.2f}x)")
    return out


def markdown(outcomes: list[CaseOutcome], settings: Settings, info: dict, command: str, started: str,
             elapsed_s: float, profiles: list[dict], failures: list[str]) -> str:
    peers = " and Apache Kafka 4.3.1 (one KRaft node, default settings, kafka-server-start's 1 GiB heap)" \
        if "kafka" in settings.peers else ""
    lines = [f"# Logway vs Tansu 0.6.0 (memory engine){peers} — {started}", "",
             f"Command: `{command}` · git {info.get('git', '')} · {elapsed_s / 60:.1f} min · "
             f"{settings.runs} runs per case, alternating which broker goes first", "",
             f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB RAM, Linux {info['kernel']}, "
             f"Python {info['python']}; load average at start {info['load_start']}, at end {info['load_end']} "
             f"(the machine is shared). Clients: confluent-kafka {info['confluent_kafka']} "
             f"(librdkafka {info['librdkafka']}), kafka-python {info['kafka_python']}, each in its own process.",
             "", "Logway and Kafka keep their data on disk (temp dir, no fsync per write); Tansu keeps it in RAM. "
             "MB/s is 10^6 bytes of message value per second; CPU s/GB is the broker's utime+stime during the "
             "load window per 10^9 bytes moved; peak RSS is VmHWM of the broker process over the case; others' load "
             "is the median number of cores other processes on the machine kept busy during the runs "
             "(/proc/stat minus the broker and the load generators), in the broker order of the column. Ratios are "
             "of medians from the same alternated runs.", ""]
    if failures:
        lines += ["## Failed sections", ""] + [f"- {f}" for f in failures] + [""]
    lines += ["## Targets", "", "| target | verdict | figure |", "| --- | --- | --- |"]
    lines += [f"| {t['target']} | {t['verdict']} | {t['detail']} |" for t in targets(outcomes)]
    for section, title in SECTION_TITLES.items():
        chosen = [o for o in outcomes if o.section == section]
        if chosen:
            lines += ["", f"## {title}", ""] + section_table(chosen)
    for p in profiles:
        lines += ["", f"## py-spy profile of Logway: {p['load']}", "",
                  f"{p['samples']} busy samples ({p['idle_samples']} idle ones left out: epoll wait, idle worker "
                  f"threads) over {p['seconds']:.0f} s; percentages of busy samples. "
                  f"Raw collapsed stacks: `{p['raw']}`.", "", "| self % | total % | function |",
                  "| --- | --- | --- |"]
        lines += [f"| {row['self_pct']:.1f} | {row['total_pct']:.1f} | `{row['function']}` |" for row in p["top"]]
        lines += ["", "Highest inclusive (total) share:", "", "| total % | self % | function |", "| --- | --- | --- |"]
        lines += [f"| {row['total_pct']:.1f} | {row['self_pct']:.1f} | `{row['function']}` |"
                  for row in p["top_total"]]
    return "\n".join(lines) + "\n"


def as_json(outcomes: list[CaseOutcome], settings: Settings, info: dict, command: str, started: str,
            elapsed_s: float, profiles: list[dict], failures: list[str]) -> dict:
    return {"started": started, "command": command, "elapsed_s": elapsed_s, "machine": info,
            "settings": asdict(settings), "targets": targets(outcomes), "cases": [o.to_json() for o in outcomes],
            "profiles": profiles, "failures": failures}
