"""Issue 15's consume investigation: `python -m bench.consume_investigation [--mb 512] [--runs 2]`.

Starts Logway and Tansu, writes the same backlog to each, then alternates traced librdkafka consumes
(bench.consume_trace) over client-setting variants, printing throughput and the fetch trace of each run as
JSON lines, so the brokers compare in the same run on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os

from bench.cases import Bench
from bench.driver import run_load
from bench.peer import tansu_binary
from bench.procs import Logway, scratch_dir
from bench.replay_server import Replay, ReplayServer
from bench.settings import Settings

VARIANTS = {
    "default": {},
    "no-queue-backoff": {"fetch.queue.backoff.ms": 1},
    "backoff-10ms": {"fetch.queue.backoff.ms": 10},
    "big-queue": {"queued.max.messages.kbytes": 1 << 20, "queued.min.messages": 10_000_000},
}


class Ceiling:
    """The replay server (bench.replay_server) over Logway's backlog, shaped like a Broker for run_load."""

    name = "ceiling"

    def __init__(self, logway, topic: str, ends: list[int]) -> None:
        host, port = logway.bootstrap.split(":")
        self.server = ReplayServer(Replay((host, int(port)), topic, ends))
        self.bootstrap = self.server.bootstrap

    @property
    def pid(self) -> int:
        return os.getpid()  # run_load reads a broker's kernel time; the replay server is a thread of this process

    def cpu_seconds(self) -> float:
        return 0.0  # a thread of this driver process; not a broker's cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=512)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--variants", default="default")
    parser.add_argument("--kinds", default="logway,tansu")
    parser.add_argument("--no-debug", action="store_true")
    parser.add_argument("--client", choices=("rdkafka", "java"), default="rdkafka")
    parser.add_argument("--sessionless", action="store_true", help="also a Logway with fetch sessions off")
    parser.add_argument("--ceiling", action="store_true", help="also read Logway's backlog from the replay server")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    bench = Bench(Settings(peers=("tansu",)), tansu_binary())
    kinds = tuple(args.kinds.split(","))
    with bench.brokers(kinds) as brokers, contextlib.ExitStack() as extra:
        if args.sessionless:
            # The same Logway with fetch sessions off (Kafka's max.incremental.fetch.session.cache.slots=0).
            plain = Logway(scratch_dir("logway"), {"max.incremental.fetch.session.cache.slots": "0"})
            plain.name = "logway-sessionless"
            extra.callback(plain.cleanup)
            plain.start()
            brokers = [*brokers, plain]
        backlogs = {b.name: bench.backlog(b, args.mb) for b in brokers}
        if args.ceiling:
            logway = next(b for b in brokers if b.name == "logway")
            brokers = [*brokers, Ceiling(logway, *backlogs["logway"])]
            backlogs["ceiling"] = backlogs["logway"]
        for i in range(args.runs):
            for variant in args.variants.split(","):
                for broker in brokers[i % len(brokers):] + brokers[:i % len(brokers)]:
                    topic, ends = backlogs[broker.name]
                    shares = [list(range(k, len(ends), args.procs)) for k in range(args.procs)]
                    mode = "rdkafka.consume_trace" if args.client == "rdkafka" else "java.consume"
                    specs = [{"mode": mode, "topic": topic, "assign": share,
                              "ends": [ends[p] for p in share], "size": 1024, "debug": not args.no_debug,
                              "config": VARIANTS[variant]} for share in shares]
                    run = run_load(broker, specs, timeout=600)
                    mb_s = run.total("bytes") / run.span_s / 1e6
                    traces = [r["trace"] for r in run.results]
                    for t in traces:
                        t.pop("samples", None) if i or variant != "default" else None
                    print(json.dumps({"run": i, "variant": variant, "broker": broker.name, "mb_s": round(mb_s, 1),
                                      "broker_cpu_s": round(run.broker_cpu_s, 2), "errors": run.total("errors"),
                                      "traces": traces}), flush=True)


if __name__ == "__main__":
    main()
