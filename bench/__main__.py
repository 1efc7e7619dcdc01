"""`python -m bench` (`make bench`): Logway beside Tansu and Apache Kafka; writes bench/results/<timestamp>.md/.json."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.cases import Bench
from bench.latest import write_run
from bench.peer import tansu_binary
from bench.report import as_json, git_revision, machine, markdown
from bench.settings import SECTIONS, Settings

HERE = Path(__file__).resolve().parent
log = logging.getLogger("bench")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes: a few minutes instead of ~20")
    p.add_argument("--runs", type=int, help="runs per case per broker (default 3)")
    p.add_argument("--full-grid", action="store_true",
                   help="all 24 produce cases: 1 KiB/100 B x 1/8/64 partitions x none/lz4 x acks=1/all")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    p.add_argument("--peers", default="tansu,kafka",
                   help="comma-separated brokers measured beside Logway: tansu, kafka (Apache Kafka 4)")
    p.add_argument("--produce-case", action="append", default=[], metavar="TEXT",
                   help="run only the produce cases whose name holds TEXT (repeatable), e.g. lz4 or 'none, acks=all'")
    p.add_argument("--produce-mb", type=int, help="payload MiB per produce run")
    p.add_argument("--consume-mb", type=int, help="backlog MiB read from earliest")
    p.add_argument("--log-gb", type=float,
                   help="log size for restart and the largest fetch-latency log, e.g. 10 for the issue's 10 GB case")
    p.add_argument("--profile", action="store_true", help="also py-spy Logway under produce and consume load")
    p.add_argument("--out", type=Path, default=HERE / "results", help="where <timestamp>.md/.json go")
    return p.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    sections = tuple(s.strip() for s in args.sections.split(",") if s.strip())
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise SystemExit(f"unknown sections: {', '.join(sorted(unknown))}")
    s = Settings.for_run(args.quick, runs=args.runs, produce_mb=args.produce_mb, consume_mb=args.consume_mb)
    s.full_grid, s.sections, s.profile = args.full_grid, sections, args.profile
    s.produce_cases = tuple(args.produce_case)
    s.peers = tuple(p.strip() for p in args.peers.split(",") if p.strip())
    if set(s.peers) - {"tansu", "kafka"}:
        raise SystemExit(f"unknown peers: {args.peers}")
    if args.log_gb is not None:
        mb = int(args.log_gb * 1024)
        s.restart_log_mb = mb
        s.fetch_log_mb = tuple(sorted({*s.fetch_log_mb[:1], mb}))
    if s.runs < 1:
        raise SystemExit("--runs must be at least 1")
    return s


def kafka_or_not(peers: tuple[str, ...]) -> tuple[str, ...]:
    """Resolve Apache Kafka's jars (Maven, first use only); without Java or Maven, leave Kafka out with a warning."""
    from compat_tests.kafka.cluster import KafkaUnavailable, ensure_jars

    try:
        ensure_jars()
    except KafkaUnavailable as exc:
        log.warning("Apache Kafka left out of this run: %s", exc)
        return tuple(p for p in peers if p != "kafka")
    return peers


def stop_on_sigterm(_signum: int, _frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C, so every case stops its brokers and deletes its data on the way out."""
    raise SystemExit(143)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args(argv)
    settings = settings_from(args)
    command = "python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    info = {**machine(), "git": git_revision()}
    info["load_start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if "kafka" in settings.peers:
        settings.peers = kafka_or_not(settings.peers)
    bench = Bench(settings, tansu_binary())
    t0 = time.monotonic()
    outcomes = []
    steps = {"produce": bench.produce, "consume": lambda: [bench.consume(), bench.consume(procs=2), *bench.consume_more()],
             "e2e": lambda: [bench.e2e()],
             "scaling": bench.scaling, "idle": bench.idle, "fetch": bench.fetch, "restart": bench.restart,
             "kafka-python": bench.kafka_python, "transactions": bench.transactions}
    failures = []
    for section in SECTIONS:
        if section in settings.sections:
            try:
                outcomes += steps[section]()
            except Exception as exc:  # one broken section must not lose the others' numbers
                log.exception("section %s failed", section)
                failures.append(f"{section}: {type(exc).__name__}: {exc}")
    args.out.mkdir(parents=True, exist_ok=True)
    profiles = []
    if settings.profile:
        from bench.profile import record

        profiles = record(bench, args.out / started)
    info["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    elapsed = time.monotonic() - t0
    md = markdown(outcomes, settings, info, command, started, elapsed, profiles, failures)
    (args.out / f"{started}.md").write_text(md)
    (args.out / f"{started}.json").write_text(json.dumps(as_json(outcomes, settings, info, command, started,
                                                                  elapsed, profiles, failures), indent=1))
    if not settings.quick and set(settings.sections) == set(SECTIONS) and not failures:
        # The run's sections replace their namesakes; the other benchmarks' sections stay.
        write_run(md)
    print(md)
    log.info("wrote %s", args.out / f"{started}.md")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
