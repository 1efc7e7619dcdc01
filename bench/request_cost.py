"""`python -m bench.request_cost`: what a request and a partition cost the broker, Logway beside Tansu 0.6.

Five figures (issue 15, "Per-request cost" and "Cost in log size and partitions"):
- broker CPU-seconds per GB produced from 100 librdkafka producer connections (2 processes, 1 KiB, acks=1);
- broker CPU per Produce request of a fixed size (about 16 KiB, 1 or 8 partitions) from 100 raw connections,
  which the librdkafka case cannot give: its clients' request size follows how fast the broker answers;
- broker CPU per Fetch request for 1,000 partitions with no new data (a raw Fetch v11 client, max_wait 0,
  every partition at its log end offset), over a few hundred requests on one connection; the same as a long
  poll (max_wait 100 ms) and as incremental requests of a fetch session (KIP-227) over those partitions;
- RSS and open file descriptors with 10,000 partitions (CreateTopics, one record in each);
- RSS with 1 GiB and with 4 GiB of log on disk (Logway only: Tansu's memory engine keeps the log in RAM).

CPU is the broker process's utime+stime from /proc (not wall time: the machine is shared), in runs that
alternate which broker goes first; the markdown shows median (min–max) and the Logway/Tansu ratio.
With ``--profile DIR`` each Logway run is recorded with py-spy (raw collapsed stacks) and summarised.
"""

from __future__ import annotations

import argparse
import logging
import os
import selectors
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from bench.admin import create_topic
from bench.cases import KIB, Bench
from bench.driver import run_load
from bench.latest import write_section
from bench.peer import tansu_binary
from bench.procs import CLK_TCK, Broker, Logway, free_port, recv_exact, scratch_dir
from bench.report import fmt, git_revision, machine
from bench.settings import MB, Settings

HERE = Path(__file__).resolve().parent
log = logging.getLogger("bench")
SECTION = "## Per-request cost"

_FETCH_HEAD = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_FETCH_BODY = struct.Struct(">iiiibii")  # replica, max_wait, min_bytes, max_bytes, isolation, session id, epoch
_FETCH_PARTITION = struct.Struct(">iiqqi")  # partition, current_leader_epoch, fetch_offset, log_start, max_bytes


def fetch_request(correlation_id: int, topic: str, offsets: list[int], max_wait_ms: int = 0, session_id: int = 0,
                  epoch: int = -1) -> bytes:
    """A size-prefixed Fetch v11 request for partitions 0..n-1 of ``topic`` at ``offsets``, min_bytes 1; sessionless
    unless ``epoch`` says otherwise (no offsets: an incremental request with no topic)."""
    client = b"request-cost"
    name = topic.encode()
    parts = [_FETCH_HEAD.pack(1, 11, correlation_id, len(client)), client,
             _FETCH_BODY.pack(-1, max_wait_ms, 1, 50 * MB, 0, session_id, epoch)]
    if offsets:
        parts += [struct.pack(">ih", 1, len(name)), name, struct.pack(">i", len(offsets))]
        parts += [_FETCH_PARTITION.pack(p, -1, offset, -1, MB) for p, offset in enumerate(offsets)]
    else:
        parts += [struct.pack(">i", 0)]
    parts += [struct.pack(">ih", 0, 0)]  # forgotten_topics_data, rack_id
    body = b"".join(parts)
    return struct.pack(">i", len(body)) + body


def fetch_response_summary(frame: bytes) -> tuple[int, int, int]:
    """(correlation id, partitions answered, record bytes) of a Fetch v11 response (topic names, no flexible)."""
    correlation_id, _throttle, _error, _session, ntopics = struct.unpack_from(">iihii", frame, 0)
    pos = 18
    partitions = record_bytes = 0
    for _ in range(ntopics):
        (name_len,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + name_len
        (nparts,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        for _ in range(nparts):
            pos += 4 + 2 + 8 + 8 + 8
            (naborted,) = struct.unpack_from(">i", frame, pos)
            pos += 4 + 16 * max(0, naborted) + 4  # aborted transactions, preferred_read_replica
            (size,) = struct.unpack_from(">i", frame, pos)
            pos += 4 + max(0, size)
            record_bytes += max(0, size)
            partitions += 1
    return correlation_id, partitions, record_bytes


def fill_partitions(broker: Broker, topic: str, partitions: int, per_partition: int = 1) -> list[int]:
    """``per_partition`` 100-byte records in every partition (librdkafka, round robin); the log end offsets."""
    run = run_load(broker, [{"mode": "rdkafka.produce", "topic": topic, "count": partitions * per_partition,
                             "size": 100, "acks": "1", "round_robin": partitions}], timeout=600)
    if run.total("errors"):
        raise RuntimeError(f"filling {topic} on {broker.name}: {run.total('errors')} records failed")
    return [per_partition] * partitions


def empty_fetches(broker: Broker, topic: str, ends: list[int], requests: int, max_wait_ms: int = 0) -> dict[str, float]:
    """Send ``requests`` Fetch requests one after another on one connection, every partition at its end."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
        def once(cid: int) -> tuple[int, int, int]:
            sock.sendall(fetch_request(cid, topic, ends, max_wait_ms))
            (size,) = struct.unpack(">i", recv_exact(sock, 4))
            return fetch_response_summary(recv_exact(sock, size))

        for cid in range(5):  # warm up (the first requests load code paths and caches)
            once(cid)
        cpu0, sys0, t0 = broker.cpu_seconds(), system_seconds(broker.pid), time.monotonic()
        answered = data = 0
        for cid in range(5, 5 + requests):
            got_cid, partitions, record_bytes = once(cid)
            if got_cid != cid:
                raise RuntimeError(f"{broker.name} answered correlation {got_cid} to {cid}")
            answered += partitions
            data += record_bytes
        cpu, wall = broker.cpu_seconds() - cpu0, time.monotonic() - t0
        kernel = system_seconds(broker.pid) - sys0
    if data:
        raise RuntimeError(f"{broker.name}: {data} record bytes answered (expected none)")
    # Kafka answers every partition asked for; a broker may leave out partitions without data (Tansu 0.6 does).
    return {"cpu_ms_per_request": 1000 * cpu / requests, "kernel_ms_per_request": 1000 * kernel / requests,
            "wall_ms_per_request": 1000 * wall / requests,
            "partitions_answered": answered / requests}


def session_fetches(broker: Broker, topic: str, ends: list[int], requests: int, max_wait_ms: int = 0) -> dict[str, float]:
    """A fetch session over every partition (KIP-227, as the Java consumer keeps one), then ``requests`` incremental
    fetches with nothing new, each waiting up to ``max_wait_ms``: broker CPU per incremental request. Empty if the
    broker keeps no sessions."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
        def once(cid: int, offsets: list[int], session_id: int, epoch: int, wait_ms: int = max_wait_ms) -> bytes:
            sock.sendall(fetch_request(cid, topic, offsets, wait_ms, session_id, epoch))
            (size,) = struct.unpack(">i", recv_exact(sock, 4))
            return recv_exact(sock, size)

        (session_id,) = struct.unpack_from(">i", once(0, ends, 0, 0, 0), 10)  # correlation, throttle, error, session
        if not session_id:
            return {}
        for epoch in range(1, 6):  # warm up
            (error,) = struct.unpack_from(">h", once(epoch, [], session_id, epoch), 8)
            if error:
                log.info("%s: incremental fetch answered error %d; no session figure", broker.name, error)
                return {}
        cpu0 = broker.cpu_seconds()
        for epoch in range(6, 6 + requests):
            frame = once(epoch, [], session_id, epoch)
            if fetch_response_summary(frame)[1:] != (0, 0):
                raise RuntimeError(f"{broker.name} answered an incremental fetch with partitions (expected none)")
        return {"cpu_ms_per_request": 1000 * (broker.cpu_seconds() - cpu0) / requests}


def system_seconds(pid: int) -> float:
    """stime of a process (kernel time: syscalls such as send and recv), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[12]) / CLK_TCK


def produce_requests(broker: Broker) -> int | None:
    """Produce requests the broker has answered so far, from its Prometheus endpoint (Logway only)."""
    port = getattr(broker, "overrides", {}).get("metrics.port")
    if port is None:
        return None
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if line.startswith('kafka_network_requestmetrics_requests_total{request="Produce"'))


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Profiler:
    """py-spy attached to the Logway process for one run (raw collapsed stacks), or nothing."""

    def __init__(self, out_dir: Path | None, broker: Broker, label: str) -> None:
        self.spy = None
        self.path = out_dir / f"pyspy-{label}.txt" if out_dir else None
        if self.path is not None and broker.name == "logway":
            from bench.profile import py_spy

            self.spy = subprocess.Popen([py_spy(), "record", "--pid", str(broker.pid), "--format", "raw",
                                         "--rate", "250", "--native", "-o", str(self.path)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # py-spy attaches before the load starts

    def __enter__(self) -> Profiler:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.spy is None:
            return
        self.spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            self.spy.wait(60)
        except subprocess.TimeoutExpired:
            self.spy.kill()
            self.spy.wait(10)


def alternate(brokers: list[Broker], runs: int, run_once) -> dict[str, list[dict]]:
    """run_once(broker, i) ``runs`` times per broker, rotating which broker goes first."""
    out: dict[str, list[dict]] = {b.name: [] for b in brokers}
    for i in range(runs):
        for broker in brokers[i % len(brokers):] + brokers[:i % len(brokers)]:
            result = run_once(broker, i)
            log.info("%s run %d: %s", broker.name, i, {k: round(v, 3) for k, v in result.items()})
            out[broker.name].append(result)
    return out


class BaselineLogway(Logway):
    """Logway from another source tree (``--baseline DIR``, e.g. `git archive` of an older commit), run beside
    the working tree's in the same alternated runs: before/after figures from one loaded machine."""

    name = "baseline"

    def __init__(self, workdir: Path, tree: Path, overrides: dict[str, str] | None = None) -> None:
        super().__init__(workdir, overrides)
        # PYTHONPATH holds a directory with `logway` -> the tree, found before the editable install.
        self.pkg = workdir / "pkg"
        self.pkg.mkdir(parents=True, exist_ok=True)
        (self.pkg / "logway").symlink_to(tree.resolve())

    def command(self) -> list[str]:
        return ["env", f"PYTHONPATH={self.pkg}", *super().command()]


@contextmanager
def brokers(bench: Bench, args: argparse.Namespace, peers: bool = True) -> Iterator[list[Broker]]:
    """Logway, the baseline tree if given, and (with ``peers``) Tansu, started; cleaned up afterwards."""
    started: list[Broker] = []
    try:
        # The metrics endpoint counts Produce requests, for the CPU per request.
        candidates: list[Broker] = [Logway(scratch_dir("logway"), {"metrics.port": str(free_port())})]
        if args.baseline:
            candidates.append(BaselineLogway(scratch_dir("baseline"), args.baseline,
                                             {"metrics.port": str(free_port())}))
        if peers and bench.s.peers:
            candidates.append(bench.broker("tansu"))
        for broker in candidates:
            started.append(broker)
            broker.start()
        yield started
    finally:
        for broker in started:
            broker.cleanup()


def connections_case(bench: Bench, args: argparse.Namespace) -> dict[str, list[dict]]:
    """100 producer connections (50 per process), 1 KiB, acks=1, 8 partitions, as bench's scaling case."""
    count = args.conn_mb * MB // KIB

    def run_once(broker: Broker, i: int) -> dict[str, float]:
        topic = f"conns-{i + 1}"
        create_topic(broker.bootstrap, topic, 8)
        specs = [{"mode": "rdkafka.produce", "topic": topic, "count": count // 2, "size": KIB, "acks": "1",
                  "producers": 50} for _ in range(2)]
        with Profiler(args.profile if i >= 0 else None, broker, f"conns-{i}"):
            requests0 = produce_requests(broker)
            run = run_load(broker, specs, timeout=600)
            requests1 = produce_requests(broker)
        # The kernel share of the same window as the CPU figure (from the release of the loaded clients to their
        # results): the connection set-up before it is in neither (it once was in this one only).
        kernel = run.broker_kernel_s
        nbytes = run.total("bytes")
        per_request = {}
        if requests0 is not None and requests1 is not None and requests1 > requests0:
            n = requests1 - requests0
            per_request = {"cpu_us_per_request": 1e6 * run.broker_cpu_s / n, "kib_per_request": nbytes / n / KIB}
        return {"cpu_s_per_gb": run.broker_cpu_s / (nbytes / 1e9), "kernel_s_per_gb": kernel / (nbytes / 1e9),
                **per_request, "mb_s": nbytes / run.span_s / 1e6,
                "errors": run.total("errors"), "other_cores": run.other_cores}

    with brokers(bench, args) as started:
        for broker in started:  # warm-up, not counted: first connections, code paths loaded on first use
            run_once(broker, -1)
        return alternate(started, args.runs, run_once)


def empty_fetch_case(bench: Bench, args: argparse.Namespace) -> dict[str, list[dict]]:
    """Fetch of 1,000 partitions, all at their end: broker CPU per request."""
    ends: dict[str, list[int]] = {}

    with brokers(bench, args) as started:
        for broker in started:
            create_topic(broker.bootstrap, "wide", args.fetch_partitions)
            ends[broker.name] = fill_partitions(broker, "wide", args.fetch_partitions)

        def run_once(broker: Broker, i: int) -> dict[str, float]:
            with Profiler(args.profile, broker, f"fetch-{i}"):
                result = empty_fetches(broker, "wide", ends[broker.name], args.fetch_requests)
            # The long poll a consumer sends (librdkafka's fetch.wait.max.ms is 500, the bench's 100): each request
            # waits max_wait for an append, so it also pays for registering its 1,000 partitions' wake-ups.
            poll = empty_fetches(broker, "wide", ends[broker.name], args.poll_requests, max_wait_ms=100)
            session = session_fetches(broker, "wide", ends[broker.name], args.fetch_requests)
            session_poll = session_fetches(broker, "wide", ends[broker.name], args.poll_requests, max_wait_ms=100)
            # What the broker spends with no request at all (timers, retention and flush loops), which the
            # 100 ms of each long poll include.
            cpu0 = broker.cpu_seconds()
            time.sleep(2.0)
            idle = (broker.cpu_seconds() - cpu0) / 2.0
            return {**result, "poll_cpu_ms_per_request": poll["cpu_ms_per_request"],
                    **{f"session_{k}": v for k, v in session.items()},
                    **{f"session_poll_{k}": v for k, v in session_poll.items()}, "idle_cpu_ms_per_100ms": 100 * idle}

        return alternate(started, args.runs, run_once)


# The fixed-size Produce case: (partitions per request, 1 KiB records per partition), about 16 KiB of records each.
FIXED_SHAPES = ((1, 16), (8, 2))
FIXED_CONNECTIONS = 100
FIXED_IN_FLIGHT = 2


def produce_v9_frame(topic: str, partitions: int, records: int) -> bytes:
    """A size-prefixed Produce v9 request (acks=1) with one batch of ``records`` 1 KiB records per partition."""
    from logway.wire.protocol import build, encode_body, request_type
    from logway.wire.records import build_batch

    body = build(request_type(0, 9), {"transactional_id": None, "acks": 1, "timeout": 30000, "topic_data": [
        {"name": topic, "partition_data": [
            {"index": p, "records": build_batch([(None, bytes(KIB), ())] * records)} for p in range(partitions)]}]})
    client = b"request-cost"
    payload = struct.pack(">hhih", 0, 9, 7, len(client)) + client + b"\x00" + encode_body(body)
    return struct.pack(">i", len(payload)) + payload


def pipelined_produce(broker: Broker, frame: bytes, requests: int) -> int:
    """``requests`` copies of ``frame`` over FIXED_CONNECTIONS connections, FIXED_IN_FLIGHT in flight on each
    (the same batches every time: acks=1 without a producer id, so each is appended). Returns the requests
    answered; raises if a connection closes or an answer is not a Produce v9 answer without an error."""
    per = requests // FIXED_CONNECTIONS
    socks = [socket.create_connection(("127.0.0.1", broker.port), timeout=60) for _ in range(FIXED_CONNECTIONS)]
    sel = selectors.DefaultSelector()
    try:
        state = {}
        for sock in socks:
            sock.sendall(frame * FIXED_IN_FLIGHT)
            sock.setblocking(False)
            state[sock] = [FIXED_IN_FLIGHT, 0, bytearray()]  # sent, answered, received bytes not yet read
            sel.register(sock, selectors.EVENT_READ)
        done = 0
        expected = None
        deadline = time.monotonic() + 600
        while done < FIXED_CONNECTIONS:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{broker.name}: fixed-size produce did not finish in 600 s")
            for key, _ in sel.select(5):
                sock = key.fileobj
                st = state[sock]
                data = sock.recv(1 << 20)
                if not data:
                    raise RuntimeError(f"{broker.name} closed a producing connection")
                buf = st[2]
                buf += data
                pos = got = 0
                while len(buf) - pos >= 4:
                    (size,) = struct.unpack_from(">i", buf, pos)
                    if len(buf) - pos - 4 < size:
                        break
                    if expected is None:  # the first answer read whole; the others must be alike (an error
                        check_produce_answer(broker, bytes(buf[pos + 4 : pos + 4 + size]))  # carries a message)
                        expected = size
                    elif size != expected:
                        check_produce_answer(broker, bytes(buf[pos + 4 : pos + 4 + size]))
                        raise RuntimeError(f"{broker.name} answered a Produce in {size} bytes, not {expected}")
                    pos += 4 + size
                    got += 1
                del buf[:pos]
                st[1] += got
                more = min(got, per - st[0])
                if more > 0:
                    sock.setblocking(True)
                    sock.sendall(frame * more)
                    sock.setblocking(False)
                    st[0] += more
                if st[1] >= per:
                    done += 1
                    sel.unregister(sock)
        return per * FIXED_CONNECTIONS
    finally:
        sel.close()
        for sock in socks:
            sock.close()


def check_produce_answer(broker: Broker, frame: bytes) -> None:
    """Every partition of a Produce v9 answer (correlation id, tagged fields, topics...) has error code 0."""
    from kio.serial import entity_reader

    from logway.wire.protocol import response_type

    response, _ = entity_reader(response_type(0, 9))(frame, 5)  # correlation id and the header's tagged fields
    errors = {p.error_code for t in response.responses for p in t.partition_responses}
    if errors != {0}:
        raise RuntimeError(f"{broker.name} answered a Produce with error codes {sorted(errors)}")


def fixed_case(bench: Bench, args: argparse.Namespace) -> dict[str, list[dict]]:
    """Produce requests of a fixed size from 100 raw connections: broker CPU per request and per GB without the
    swings of the librdkafka case, whose request size follows how fast the broker answers."""
    frames: dict[str, bytes] = {}

    with brokers(bench, args) as started:
        for broker in started:
            for partitions, records in FIXED_SHAPES:
                topic = f"fixed-{partitions}"
                create_topic(broker.bootstrap, topic, partitions)
                frames[topic] = produce_v9_frame(topic, partitions, records)
                pipelined_produce(broker, frames[topic], 2 * FIXED_CONNECTIONS)  # warm-up: connections, code paths

        def run_once(broker: Broker, i: int) -> dict[str, float]:
            result: dict[str, float] = {}
            for partitions, _ in FIXED_SHAPES:
                frame = frames[f"fixed-{partitions}"]
                cpu0, sys0 = broker.cpu_seconds(), system_seconds(broker.pid)
                n = pipelined_produce(broker, frame, args.fixed_requests)
                cpu, kernel = broker.cpu_seconds() - cpu0, system_seconds(broker.pid) - sys0
                result[f"cpu_us_per_request_{partitions}"] = 1e6 * cpu / n
                result[f"kernel_us_per_request_{partitions}"] = 1e6 * kernel / n
                result[f"cpu_s_per_gb_{partitions}"] = cpu / (n * len(frame) / 1e9)
            return result

        return alternate(started, args.runs, run_once)


def partitions_case(bench: Bench, args: argparse.Namespace) -> dict[str, dict]:
    """RSS and open files at 10,000 partitions (10 topics of 1,000 made with CreateTopics, a record in each)."""
    out = {}
    with brokers(bench, args) as started:
        for broker in started:
            before = {"rss_mb": broker.memory_mb()["VmRSS"], "fds": open_files(broker.pid)}
            per_topic = 1000
            for t in range(args.partitions // per_topic):
                create_topic(broker.bootstrap, f"many-{t}", per_topic)
                fill_partitions(broker, f"many-{t}", per_topic)
            time.sleep(1.0)
            mem = broker.memory_mb()
            fds = open_files(broker.pid)
            out[broker.name] = {"partitions": args.partitions, "rss_mb_empty": before["rss_mb"],
                                "fds_empty": before["fds"], "rss_mb": mem["VmRSS"], "peak_rss_mb": mem["VmHWM"],
                                "fds": fds}
            if broker.name != "tansu":
                # Segments evicted past log.max.open.segments keep their descriptors for a 30 s grace period.
                time.sleep(35.0)
                out[broker.name]["fds_settled"] = open_files(broker.pid)
            log.info("%s: %s", broker.name, out[broker.name])
    return out


def log_size_case(bench: Bench, args: argparse.Namespace) -> dict[str, float]:
    """Logway's RSS with each log size on disk (one topic, 8 partitions, 1 KiB records), after a consumer read it all."""
    out: dict[str, float] = {}
    broker = Logway(scratch_dir("logway"))
    try:
        broker.start()
        create_topic(broker.bootstrap, "big", 8)
        written = 0
        for gb in sorted(args.log_gb):
            count = int(gb * 1024) * MB // KIB - written
            run = run_load(broker, [{"mode": "rdkafka.produce", "topic": "big", "count": count, "size": KIB,
                                     "acks": "1", "round_robin": 8}], timeout=1800)
            if run.total("errors"):
                raise RuntimeError(f"log size case: {run.total('errors')} records failed")
            written += count
            broker.settle()
            ends = [written // 8 + (p < written % 8) for p in range(8)]
            run_load(broker, [{"mode": "rdkafka.consume", "topic": "big", "assign": list(range(8)), "ends": ends,
                               "size": KIB}], timeout=1800)
            mem = broker.memory_mb()
            out[f"rss_mb_{gb:g}gb"] = mem["VmRSS"]
            out[f"fds_{gb:g}gb"] = open_files(broker.pid)
            log.info("log %g GiB: %s", gb, out)
        out["peak_rss_mb"] = broker.memory_mb()["VmHWM"]
    finally:
        broker.cleanup()
    return out


def busy_stacks(raw: Path) -> Path:
    """The raw py-spy stacks without idle threads: with --native, an idle trio worker thread waits in
    PyThread_acquire_lock and the loop in epoll_wait, which bench.profile's idle rule does not catch."""
    busy = raw.with_suffix(".busy.txt")
    lines = [line for line in raw.read_text().splitlines()
             if "PyThread_acquire_lock" not in line and not line.rpartition(" ")[0].endswith(("epoll_wait (libc.so.6)",))]
    busy.write_text("\n".join(lines) + "\n")
    return busy


def profile_tables(out_dir: Path, top: int = 15) -> str:
    """The hottest functions (self share of busy samples) of each profiled Logway run, as markdown."""
    from bench.profile import summarize

    lines = []
    for raw in sorted(out_dir.glob("pyspy-*.txt")):
        if raw.name.endswith(".busy.txt"):
            continue
        summary = summarize(busy_stacks(raw), top=top)
        lines += [f"py-spy `{raw.name}` ({summary['samples']} busy samples at 250 Hz, --native):", "",
                  "| function | self % | | Logway function (inclusive) | total % |", "| --- | --- | --- | --- | --- |"]
        for a, b in zip(summary["top"], summary["top_total"] + [None] * top, strict=False):
            right = f"{b['function']} | {b['total_pct']:.1f}" if b else " | "
            lines.append(f"| {a['function']} | {a['self_pct']:.1f} | | {right} |")
        lines.append("")
    return "\n".join(lines)


def cell(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def ratio(a: list[float], b: list[float]) -> str:
    if not a or not b or statistics.median(b) == 0:
        return "–"
    return f"{statistics.median(a) / statistics.median(b):.2f}x"


def markdown(results: dict, info: dict, command: str) -> str:
    lines = [SECTION, "",
             f"`{command}` · git {info['git']} · {info['when']} · {info['runs']} alternated runs per broker · "
             f"load average at start {info['load_start']}, at end {info['load_end']} (2 cores shared with other "
             "work: CPU is the broker's utime+stime from /proc, not wall time; absolute figures move between runs, "
             "the ratios much less).", ""]
    names = [n for n in ("logway", "baseline", "tansu") if any(n in results.get(k, {}) for k in results)]
    heads = {"logway": "Logway", "baseline": "Logway before (baseline tree)", "tansu": "Tansu 0.6"}
    pairs = [(a, b) for a, b in (("logway", "baseline"), ("logway", "tansu")) if a in names and b in names]
    if "conns" in results or "fetch" in results or "fixed" in results:
        lines += ["| case | metric | " + " | ".join(f"{heads[n]} median (min–max)" for n in names) + " | "
                  + " | ".join(f"{heads[a].split()[0]}/{heads[b]}" for a, b in pairs) + " |",
                  "| --- | --- |" + " --- |" * (len(names) + len(pairs))]
        for key, label, metrics in (
                ("conns", f"produce 1 KiB, 8 partitions, acks=1, from 100 librdkafka connections (2 processes), "
                 f"{info['conn_mb']} MiB per run", (("cpu_s_per_gb", "broker CPU s/GB"), ("kernel_s_per_gb", "of which kernel (stime) s/GB"),
                  ("cpu_us_per_request", "broker CPU µs per Produce request"),
                  ("kib_per_request", "KiB of records per Produce request"), ("mb_s", "MB/s"))),
                ("fixed", f"Produce v9 requests of a fixed size (about 16 KiB of 1 KiB records, acks=1), {FIXED_IN_FLIGHT} "
                 f"in flight on each of {FIXED_CONNECTIONS} raw connections, {info['fixed_requests']:,} per run",
                 (("cpu_us_per_request_1", "1 partition x 16 records: broker CPU µs per request"),
                  ("kernel_us_per_request_1", "of which kernel (stime) µs"),
                  ("cpu_s_per_gb_1", "broker CPU s/GB"),
                  ("cpu_us_per_request_8", "8 partitions x 2 records: broker CPU µs per request"),
                  ("kernel_us_per_request_8", "of which kernel (stime) µs"),
                  ("cpu_s_per_gb_8", "broker CPU s/GB"))),
                ("fetch", "Fetch v11 of 1,000 partitions at their end (no new data), max_wait 0, one connection",
                 (("cpu_ms_per_request", "broker CPU ms/request"),
                  ("kernel_ms_per_request", "of which kernel (stime) ms"), ("wall_ms_per_request", "round trip ms"),
                  ("partitions_answered", "partitions answered"),
                  ("poll_cpu_ms_per_request", "the same with max_wait 100 ms (a long poll): broker CPU ms/request"),
                  ("session_cpu_ms_per_request", "an incremental fetch session over the 1,000 partitions (KIP-227, "
                   "as the Java consumer fetches) with nothing new, max_wait 0: broker CPU ms/request"),
                  ("session_poll_cpu_ms_per_request", "the same session with max_wait 100 ms (a long poll): broker CPU "
                   "ms/request"),
                  ("idle_cpu_ms_per_100ms", "broker CPU ms per 100 ms idle (part of each long poll)")))):
            if key not in results:
                continue
            runs = results[key]
            for n, (metric, mlabel) in enumerate(metrics):
                vals = {b: [r[metric] for r in runs.get(b, []) if metric in r] for b in names}
                lines.append(f"| {label if n == 0 else ''} | {mlabel} | " + " | ".join(cell(vals[b]) for b in names)
                             + " | " + " | ".join(ratio(vals[a], vals[b]) for a, b in pairs) + " |")
        if "fetch" in results:
            lines += ["", "Kafka answers every partition of a sessionless Fetch (about 41 bytes each here, 41 KB per "
                      "response); Tansu 0.6 leaves out the partitions without new data, so its answer is a few bytes "
                      "and its CPU figure is for less work."]
        lines.append("")
    if "partitions" in results:
        p = results["partitions"]
        cols = [n for n in names if n in p]
        lines += [f"| {p[cols[0]]['partitions']:,} partitions (topics of 1,000 made with CreateTopics, one 100 B "
                  "record each) | " + " | ".join(heads[n] for n in cols) + " |", "| --- |" + " --- |" * len(cols)]
        for metric, label in (("rss_mb_empty", "RSS MB before (no topics)"), ("rss_mb", "RSS MB after"),
                              ("peak_rss_mb", "peak RSS MB"), ("fds_empty", "open files before"),
                              ("fds", "open files right after"),
                              ("fds_settled", "open files 35 s later (evicted descriptors' grace period over)")):
            lines.append(f"| {label} | " + " | ".join(f"{p[n][metric]:.0f}" if metric in p[n] else "–"
                                                        for n in cols) + " |")
        lines.append("")
    if "logsize" in results:
        s = results["logsize"]
        sizes = sorted(float(k[len("rss_mb_"):-2]) for k in s if k.startswith("rss_mb_") and k.endswith("gb"))
        lines += ["| Logway, log on disk (8 partitions, 1 KiB records, read back by a consumer) | "
                  + " | ".join(f"{g:g} GiB" for g in sizes) + " |", "| --- |" + " --- |" * len(sizes)]
        lines.append("| RSS MB | " + " | ".join(f"{s[f'rss_mb_{g:g}gb']:.1f}" for g in sizes) + " |")
        lines.append("| open files | " + " | ".join(f"{s[f'fds_{g:g}gb']}" for g in sizes) + " |")
        lines += ["", "Tansu is left out of the log-size case: its memory engine holds the log in RAM.", ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.request_cost", description=__doc__.split("\n")[0])
    p.add_argument("--sections", default="conns,fixed,fetch,partitions,logsize")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--conn-mb", type=int, default=128, help="MiB produced per run from 100 connections")
    p.add_argument("--fixed-requests", type=int, default=5000, help="Produce requests per run of the fixed-size case")
    p.add_argument("--fetch-partitions", type=int, default=1000)
    p.add_argument("--fetch-requests", type=int, default=300)
    p.add_argument("--poll-requests", type=int, default=40, help="long-poll (max_wait 100 ms) fetches per run")
    p.add_argument("--partitions", type=int, default=10000, help="partitions of the memory/open-files case")
    p.add_argument("--log-gb", type=float, nargs="+", default=[1.0, 4.0])
    p.add_argument("--peers", default="tansu", help="tansu, or '' for Logway alone")
    p.add_argument("--baseline", type=Path, help="also run Logway from this source tree (before/after columns)")
    p.add_argument("--profile", type=Path, help="record each Logway run with py-spy into this directory")
    p.add_argument("--write-latest", action="store_true", help="replace the section in bench/LATEST.md")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    settings = Settings(runs=args.runs, peers=tuple(p for p in args.peers.split(",") if p))
    bench = Bench(settings, tansu_binary() if settings.peers else Path("/nonexistent"))
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    info = {"git": git_revision(), "conn_mb": args.conn_mb, "fixed_requests": args.fixed_requests, "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "runs": args.runs,
            "load_start": " ".join(f"{x:.2f}" for x in os.getloadavg()), **machine()}
    results: dict = {}
    steps = {"conns": connections_case, "fixed": fixed_case, "fetch": empty_fetch_case, "partitions": partitions_case,
             "logsize": log_size_case}
    for section in sections:
        log.info("request cost / %s", section)
        results[section] = steps[section](bench, args)
    info["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    md = markdown(results, info, "python -m bench.request_cost " + " ".join(sys.argv[1:] if argv is None else argv))
    if args.profile:
        md += "\n" + profile_tables(args.profile)
    if args.write_latest:
        write_section(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
