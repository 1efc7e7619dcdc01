"""Does a huge CreateTopics freeze other clients? `python -m bench.create_topics_freeze --partitions 10000`.

Starts a gateway process, keeps a second client doing a Metadata round trip every 10 ms on its own
connection, sends one CreateTopics of N partitions (and one over max.partitions.per.request), and reports the
probe's latency p50/p99/max, its longest gap without an answer, and the gateway's open file descriptors.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from bench.procs import free_port, recv_exact


def metadata_request(correlation: int) -> bytes:
    """Metadata v1 for no topics (an empty array): the cheapest round trip that goes through dispatch."""
    client = b"probe"
    body = struct.pack(">hhih", 3, 1, correlation, len(client)) + client + struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


class Probe(threading.Thread):
    """Round trips every 10 ms; records each latency and the longest time between two answers."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.latencies: list[float] = []
        self.max_gap = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        last_answer = time.monotonic()
        n = 0
        while not self.stop.is_set():
            n += 1
            start = time.monotonic()
            self.sock.sendall(metadata_request(n))
            (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
            recv_exact(self.sock, size)
            now = time.monotonic()
            self.latencies.append(now - start)
            self.max_gap = max(self.max_gap, now - last_answer)
            last_answer = now
            time.sleep(max(0.0, 0.01 - (time.monotonic() - start)))

    def summary(self) -> str:
        lat = sorted(self.latencies)
        if not lat:
            return "no answers"

        def pct(p: float) -> float:
            return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000

        return (f"{len(lat)} round trips: p50 {pct(0.5):.2f} ms, p99 {pct(0.99):.2f} ms, max {lat[-1] * 1000:.1f} ms, "
                f"longest gap without an answer {self.max_gap * 1000:.0f} ms")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=10000)
    parser.add_argument("--over", type=int, default=20000, help="a request over the limit (0 to skip)")
    parser.add_argument("--override", action="append", default=[])
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        listener = f"PLAINTEXT://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "logway.cli", "serve", "--listeners", listener, "--log-dirs",
               str(Path(tmp) / "data"), "--log-level", "WARNING"]
        for o in args.override:
            cmd += ["--override", o]
        proc = subprocess.Popen(cmd)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=600_000)
            print(f"gateway fds before: {open_fds(proc.pid)}")
            for name, count in (("over", args.over), ("big", args.partitions)):
                if not count:
                    continue
                probe = Probe(port)
                probe.start()
                time.sleep(0.5)
                start = time.monotonic()
                try:
                    admin.create_topics([NewTopic(name, count, 1)], timeout_ms=600_000)
                    outcome = "created"
                except KafkaError as exc:
                    outcome = f"refused: {exc}"
                took = time.monotonic() - start
                time.sleep(0.5)
                probe.stop.set()
                probe.join()
                print(f"CreateTopics {count} partitions: {outcome} in {took:.1f} s")
                print(f"  other client: {probe.summary()}")
                print(f"  gateway open fds: {open_fds(proc.pid)}")
            admin.close()
        finally:
            proc.terminate()
            proc.wait(120)


if __name__ == "__main__":
    main()
