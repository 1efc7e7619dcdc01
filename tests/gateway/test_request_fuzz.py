"""The standing request fuzz test: random and mutated frames for every API key and version Logway serves,
sent through the real connection code to a real gateway process.

Seeds are real client traffic (kafka-python's producer, consumer group and admin client, recorded by a
proxy in front of the gateway) and random well-formed requests built from kio's types for every served
(api_key, version). Each fuzz frame is a seed with its body mutated (evil lengths, random bytes, cuts,
appended junk), a body of another version under this version's header, or random bytes. After the run the
process must be alive and still serving, its log must hold no traceback and no internal error, and its
memory must not have grown without bound.

`make test` sends LOGWAY_FUZZ_FRAMES=3000 frames (default); `make fuzz` sends a million, bounded by
LOGWAY_FUZZ_SECONDS. LOGWAY_FUZZ_SEED picks the random sequence (printed on failure).
"""

from __future__ import annotations

import os
import random
import re
import socket
import struct
import threading
import time
from collections import Counter

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kio.serial import entity_reader
from kio_values import request_body, request_frame

from logway.gateway.apis.registry import supported_versions
from logway.wire.protocol import (
    MalformedRequest,
    api_name,
    build,
    decode_body,
    encode_body,
    is_flexible,
    request_type,
    response_type,
)

FRAMES = int(os.environ.get("LOGWAY_FUZZ_FRAMES", "3000"))
SECONDS = float(os.environ.get("LOGWAY_FUZZ_SECONDS", "50"))
SEED = int(os.environ.get("LOGWAY_FUZZ_SEED", "0"))
SERVED = [(key, v) for key, lo, hi in supported_versions() for v in range(lo, hi + 1)]
EVIL = [b"\xff\xff\xff\xff", b"\xff\xfe", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x80\x80\x80\x80\x40",
        b"\xff\xff\xff\xff\x0f", b"\x7f\xff", b"\x00\x00\x10\x00", b"\xff", b"\x00", b"\x01", b"\x02"]
# Two costs a long run would pile up that are not request handling (reported with the hardening issue):
# creating a partition costs the storage layer ~10 ms on the event loop and 3 open files, and a Fetch
# long poll keeps its connection (socket and 256 KiB receive buffer) until max_wait even after the client
# left. So CreateTopics / CreatePartitions frames asking for more partitions than MAX_FUZZ_PARTITIONS and
# Fetch frames waiting longer than MAX_FUZZ_WAIT_MS are redrawn, and every CLEANUP_EVERY frames the topics
# the fuzz created are deleted.
MAX_FUZZ_PARTITIONS = 8
MAX_FUZZ_WAIT_MS = 2000
CLEANUP_EVERY = 500
# How long one frame may go unanswered (a long-polling Fetch, an acks=0 Produce) before the fuzzer moves on.
ANSWER_WAIT = 0.3
RSS_GROWTH_LIMIT = 64 * 1024 * 1024


class RecordingProxy:
    """A TCP proxy on 127.0.0.1 that forwards to the gateway and records every client->gateway frame."""

    def __init__(self, port: int, target_port: int) -> None:
        self.target_port = target_port
        self.frames: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = port
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        pending = b""
        try:
            while data := src.recv(65536):
                dst.sendall(data)
                if record:
                    pending += data
                    while len(pending) >= 4 and len(pending) >= 4 + struct.unpack_from(">i", pending)[0]:
                        size = 4 + struct.unpack_from(">i", pending)[0]
                        self.frames.append(pending[:size])
                        pending = pending[size:]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop = True
        self.listener.close()


def record_kafka_python(proxy_port: int) -> None:
    """Real client traffic: admin, producer (two codecs), a consumer group that commits."""
    bootstrap = f"127.0.0.1:{proxy_port}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("fuzz", num_partitions=2, replication_factor=1)])
    admin.describe_cluster()
    admin.describe_topics(["fuzz"])
    for codec in (None, "gzip"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec)
        for i in range(5):
            producer.send("fuzz", key=b"k%d" % i, value=b"v" * i, headers=[("h", b"x")])
        producer.close()
    consumer = KafkaConsumer("fuzz", bootstrap_servers=bootstrap, group_id="fuzz", auto_offset_reset="earliest",
                             consumer_timeout_ms=3000, enable_auto_commit=False)
    for _ in consumer:
        pass
    consumer.commit()
    consumer.close()
    admin.list_groups()
    admin.describe_groups(["fuzz"])
    admin.list_group_offsets("fuzz")
    admin.close()


def split_frame(frame: bytes) -> tuple[int, int, bytes, bytes]:
    """(api_key, version, header without the size prefix, body) of a recorded request frame."""
    api_key, version, _cid, client_len = struct.unpack_from(">hhih", frame, 4)
    at = 4 + 10 + max(client_len, 0)
    header_end = at + 1 if is_flexible(api_key, version) else at  # kafka-python sends no header tags
    return api_key, version, frame[4:header_end], frame[header_end:]


def mutate(body: bytes, rng: random.Random) -> bytes:
    out = bytearray(body)
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(out) + 1)
        roll = rng.random()
        if roll < 0.55:
            evil = rng.choice(EVIL)
            out[pos : pos + len(evil)] = evil
        elif roll < 0.8 and out:
            out[min(pos, len(out) - 1)] = rng.randrange(256)
        elif roll < 0.9:
            del out[pos:]
        else:
            out[pos:pos] = rng.randbytes(rng.randint(1, 16))
    return bytes(out)


class Fuzzer:
    """Builds fuzz frames from the seeds and sends them, one at a time, reconnecting when closed."""

    def __init__(self, port: int, seeds: dict[tuple[int, int], list[bytes]], rng: random.Random) -> None:
        self.port = port
        self.seeds = seeds
        self.rng = rng
        self.sock: socket.socket | None = None
        self.outcomes: Counter[str] = Counter()

    def frame(self, key: int, version: int) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.1:
            body = request_body(rng, key, version)
        elif roll < 0.85:
            pool = self.seeds.get((key, version))
            body = mutate(rng.choice(pool) if pool and rng.random() < 0.5 else request_body(rng, key, version), rng)
        elif roll < 0.95:
            other = rng.choice([v for k, v in SERVED if k == key])
            body = request_body(rng, key, other)  # version confusion: another version's body
        else:
            body = rng.randbytes(rng.randint(0, 64))
        return request_frame(key, version, body, correlation_id=rng.randrange(2**31), client_id="fuzz")

    def costly(self, frame: bytes) -> bool:
        """A frame kio can read that creates many partitions or long-polls (see MAX_FUZZ_PARTITIONS)."""
        key, version, _header, body = split_frame(frame)
        if key not in (1, 19, 37):
            return False
        try:
            request = decode_body(key, version, body, 0)
        except MalformedRequest:
            return False
        if key == 1:
            return request.max_wait.total_seconds() * 1000 > MAX_FUZZ_WAIT_MS
        if key == 19:
            return sum(max(t.num_partitions, len(t.assignments)) for t in request.topics) > MAX_FUZZ_PARTITIONS
        return any(t.count > MAX_FUZZ_PARTITIONS for t in request.topics)

    def delete_fuzz_topics(self) -> None:
        """Delete every topic but "fuzz" (those the fuzz frames created), with plain requests."""
        self.close()
        with socket.create_connection(("127.0.0.1", self.port), timeout=60) as s:
            s.sendall(request_frame(3, 1, struct.pack(">i", -1)))  # Metadata v1: all topics
            names = [t.name for t in read_answer(s, 3, 1).topics if t.name != "fuzz"]
            if names:
                body = encode_body(build(request_type(20, 4), {"topic_names": names, "timeout": 30_000}))
                s.sendall(request_frame(20, 4, body))
                read_answer(s, 20, 4)

    def send(self, frame: bytes) -> None:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock = self.sock
        try:
            sock.sendall(frame)
            sock.settimeout(ANSWER_WAIT)
            head = sock.recv(4, socket.MSG_WAITALL)
            if len(head) < 4:
                raise ConnectionResetError
            sock.settimeout(10)
            size = struct.unpack(">i", head)[0]
            while size:
                chunk = sock.recv(min(size, 1 << 20))
                if not chunk:
                    raise ConnectionResetError
                size -= len(chunk)
            self.outcomes["answered"] += 1
        except TimeoutError:
            self.outcomes[f"no answer yet: {api_name(struct.unpack_from('>h', frame, 4)[0])}"] += 1
            self.close()
        except (ConnectionResetError, BrokenPipeError):
            self.outcomes["closed"] += 1
            self.close()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def read_answer(s: socket.socket, api_key: int, version: int):
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    payload = s.recv(size, socket.MSG_WAITALL)
    cls = response_type(api_key, version)
    return entity_reader(cls)(payload, 5 if cls.__flexible__ else 4)[0]  # header v1 has tagged fields


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def test_fuzzed_requests_never_kill_or_break_the_gateway(gateway_process):
    # Clients are told the proxy's address, so all their traffic passes it and is recorded.
    proxy_port = free_port()
    gw = gateway_process
    gw.extra_args = ("--advertised-listeners", f"PLAINTEXT://127.0.0.1:{proxy_port}",
                     "--override", "group.initial.rebalance.delay.ms=0")
    gw.start()
    proxy = RecordingProxy(proxy_port, gw.port)
    try:
        record_kafka_python(proxy.port)
    finally:
        proxy.close()
    seeds: dict[tuple[int, int], list[bytes]] = {}
    for frame in proxy.frames:
        key, version, _header, body = split_frame(frame)
        seeds.setdefault((key, version), []).append(body)
    assert len(seeds) >= 8, f"recorded too few request kinds from kafka-python: {sorted(seeds)}"

    rng = random.Random(SEED)
    fuzzer = Fuzzer(gw.port, seeds, rng)
    rss_before = rss_bytes(gw.proc.pid)
    deadline = time.monotonic() + SECONDS
    sent = 0
    while sent < FRAMES and time.monotonic() < deadline:
        key, version = SERVED[sent % len(SERVED)]
        frame = fuzzer.frame(key, version)
        while fuzzer.costly(frame):
            frame = fuzzer.frame(key, version)
        fuzzer.send(frame)
        sent += 1
        if sent % CLEANUP_EVERY == 0:
            fuzzer.delete_fuzz_topics()
        assert gw.proc.poll() is None, f"gateway died (exit {gw.proc.returncode}) at frame {sent}, seed {SEED}"
    fuzzer.close()
    rss_after = rss_bytes(gw.proc.pid)
    print(f"fuzz: {sent} frames, seed {SEED}, {dict(fuzzer.outcomes)}, RSS {rss_before >> 20} -> {rss_after >> 20} MiB")

    assert sent >= min(FRAMES, 1000), f"only {sent} frames in {SECONDS} s"
    assert rss_after - rss_before < RSS_GROWTH_LIMIT
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:  # still serving
        s.sendall(request_frame(18, 0, b"", correlation_id=99))
        size, correlation_id, error_code = struct.unpack(">iih", s.recv(10, socket.MSG_WAITALL))
        assert (correlation_id, error_code) == (99, 0)
    gw.stop()
    log = gw.log_path.read_text()
    assert "Traceback" not in log and "internal error" not in log, internal_errors(log)


def internal_errors(log: str) -> str:
    """Each distinct traceback in the log, by where it was raised and what: a readable failure message."""
    found: Counter[str] = Counter()
    for block in log.split("Traceback (most recent call last):")[1:]:
        lines = []
        for line in block.splitlines():
            if re.match(r"\d{4}-\d\d-\d\d ", line):
                break  # the next log record
            if line.strip():
                lines.append(line)
        where = [line.strip() for line in lines if line.strip().startswith("File ") and "site-packages" not in line]
        error = " / ".join(line for line in lines if not line.startswith(" "))
        found[f"{error}  at  {' <- '.join(reversed(where[-3:]))}"] += 1
    return "internal errors in the gateway log:\n" + "\n".join(f"{n} x {e}" for e, n in found.most_common())
