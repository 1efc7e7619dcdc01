"""Bounded memory and connection limits, against a gateway process over real sockets.

Memory follows received bytes (not declared frame sizes) within queued.max.request.bytes; idle connections
cost little; connections.max.idle.ms, max.connections and max.connections.per.ip(.overrides) behave as
Kafka's SocketServer.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from raw_requests import read_frame

from logway.gateway.config import BrokerConfig
from logway.server.config import ConfigError, parse_connection_overrides

MiB = 1024 * 1024


def start(gateway_process, **overrides: str):
    gateway_process.extra_args = tuple(a for k, v in overrides.items() for a in ("--override", f"{k}={v}"))
    return gateway_process.start()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class PeakRss:
    """Samples a process's RSS every 20 ms in a thread; ``peak`` is the largest seen."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, rss_mb(pid), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_mb(self.pid))

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def api_versions_frame(correlation_id: int = 1) -> bytes:
    payload = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    return struct.pack(">i", len(payload)) + payload


def connect(port: int, source: str | None = None, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                    source_address=(source, 0) if source else None)


def ask_api_versions(s: socket.socket, correlation_id: int = 1) -> int:
    """Send ApiVersions v0 and return the response's correlation id (raises if the server closed or is silent)."""
    s.sendall(api_versions_frame(correlation_id))
    return struct.unpack_from(">i", read_frame(s))[0]


def closed_by_server(s: socket.socket, timeout: float) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def produce_and_consume(bootstrap: str, values: list[bytes], **producer_config) -> None:
    """A normal client: produce ``values`` (all acknowledged), then read them back."""
    topic = f"normal-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, **producer_config)
    try:
        for future in [producer.send(topic, v) for v in values]:
            future.get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=15000, fetch_max_bytes=64 * MiB,
                             max_partition_fetch_bytes=64 * MiB)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == len(values):
                break
    finally:
        consumer.close()
    assert got == values


def declared_frame_attack(port: int, connections: int, declared: int, send: int, seconds: float) -> list[socket.socket]:
    """``connections`` clients each declare a ``declared``-byte request and send ``send`` bytes of it, as far
    as the server reads them within ``seconds``; the sockets stay open (the caller closes them)."""
    header = struct.pack(">i", declared) + struct.pack(">hhih", 0, 9, 1, -1)
    pending = []
    for _ in range(connections):
        s = connect(port)
        s.setblocking(False)
        pending.append([s, memoryview(header + bytes(send - len(header)))])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(len(data) for _, data in pending):
        for item in pending:
            try:
                item[1] = item[1][item[0].send(item[1][:MiB]):]
            except BlockingIOError:
                pass
        time.sleep(0.005)
    return [s for s, _ in pending]


@pytest.mark.parametrize(("send", "overrides", "max_growth_mb"), [
    # 20 x 1 KiB sent: the old receive path allocated the declared 100 MB each (RSS 52 -> 2,057 MB).
    pytest.param(1024, {}, 20, id="1KiB-of-100MB-each"),
    # 20 x 4 MiB sent (80 MiB): memory follows the bytes received (old: 2,057 MB).
    pytest.param(4 * MiB, {}, 80 * 1.25 + 20, id="4MiB-of-100MB-each"),
    # The same with a 32 MiB budget: the broker stops reading once it is spent (+ one overdrawn request).
    pytest.param(4 * MiB, {"queued.max.request.bytes": str(32 * MiB), "socket.request.max.bytes": str(32 * MiB)},
                 32 + 8 + 20, id="4MiB-each-budget-32MiB"),
])
def test_declared_frame_attack_keeps_memory_bounded(gateway_process, send, overrides, max_growth_mb):
    gw = start(gateway_process, **overrides)
    declared = min(100 * MiB, int(overrides.get("socket.request.max.bytes", 100 * MiB)) - 1024)
    with connect(gw.port) as s:
        ask_api_versions(s)
    base = rss_mb(gw.proc.pid)
    with PeakRss(gw.proc.pid) as rss:
        attackers = declared_frame_attack(gw.port, 20, declared, send, seconds=2.0)
        try:
            with connect(gw.port) as s:
                assert ask_api_versions(s, 7) == 7
            produce_and_consume(gw.bootstrap, [b"v%d" % i for i in range(20)])
            time.sleep(0.3)
        finally:
            for a in attackers:
                a.close()
    assert rss.peak - base < max_growth_mb, f"RSS grew from {base:.0f} to {rss.peak:.0f} MB"


def test_idle_connections_cost_little(gateway_process):
    gw = start(gateway_process)
    with connect(gw.port) as s:
        ask_api_versions(s)
    base = rss_mb(gw.proc.pid)
    idle = []
    try:
        for i in range(1000):
            s = connect(gw.port)
            idle.append(s)
            assert ask_api_versions(s, i) == i
        time.sleep(0.2)
        per_connection_kb = (rss_mb(gw.proc.pid) - base) * 1024 / len(idle)
    finally:
        for s in idle:
            s.close()
    # The old fixed 256 KiB receive buffer cost 262 KB per idle connection.
    assert per_connection_kb < 32, f"{per_connection_kb:.1f} KB per idle connection"


def test_connections_max_idle_ms_closes_idle_connections_only(gateway_process):
    gw = start(gateway_process, **{"connections.max.idle.ms": "400"})
    with connect(gw.port) as idle, connect(gw.port) as half_frame, connect(gw.port) as active:
        assert ask_api_versions(idle, 1) == 1
        half_frame.sendall(api_versions_frame()[:6])  # a request started and never finished
        deadline = time.monotonic() + 1.5
        n = 0
        while time.monotonic() < deadline:
            n += 1
            assert ask_api_versions(active, n) == n
            time.sleep(0.1)
        assert closed_by_server(idle, timeout=1.0)
        assert closed_by_server(half_frame, timeout=1.0)
        assert ask_api_versions(active, 999) == 999


def test_max_connections_makes_new_connections_wait_for_a_free_slot(gateway_process):
    gw = start(gateway_process, **{"max.connections": "3"})
    first = [connect(gw.port) for _ in range(3)]
    try:
        for i, s in enumerate(first):
            assert ask_api_versions(s, i) == i
        # Kafka's acceptor blocks until a connection closes: the 4th client waits, it is not refused.
        waiting = connect(gw.port, timeout=0.5)
        with pytest.raises(TimeoutError):
            ask_api_versions(waiting, 42)
        first.pop().close()
        waiting.settimeout(5)
        assert struct.unpack(">ii", waiting.recv(8))[1] == 42
        waiting.close()
    finally:
        for s in first:
            s.close()
    # Within the limit, a normal client (producer then consumer, up to 2 connections each) is served.
    produce_and_consume(gw.bootstrap, [b"a", b"b", b"c"])


def open_served(port: int, source: str, count: int) -> list[socket.socket]:
    """``count`` connections from ``source``, each answered; retried while the server still counts an
    earlier connection of ours (the start-up probe) that it has not seen close yet."""
    deadline = time.monotonic() + 5
    while True:
        conns = [connect(port, source) for _ in range(count)]
        try:
            for i, s in enumerate(conns):
                assert ask_api_versions(s, i) == i
            return conns
        except ConnectionError:
            for s in conns:
                s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_max_connections_per_ip_and_overrides(gateway_process):
    gw = start(gateway_process, **{"max.connections.per.ip": "2",
                                   "max.connections.per.ip.overrides": "127.0.0.2:3"})
    for source, allowed in (("127.0.0.1", 2), ("127.0.0.2", 3)):
        conns = open_served(gw.port, source, allowed)
        try:
            extra = connect(gw.port, source)
            assert closed_by_server(extra, timeout=5)
            extra.close()
            assert ask_api_versions(conns[0], 9) == 9
        finally:
            for s in conns:
                s.close()
    assert "Rejected connection from 127.0.0.1, address already has the configured maximum of 2 connections" in \
        gw.log_path.read_text()
    produce_and_consume(gw.bootstrap, [b"x"])


def test_small_request_budget_still_serves_every_producer(gateway_process):
    """Backpressure without deadlock: 4 producers of ~300 KB requests share a 512 KiB budget, so they wait for
    memory and one at a time overdraws it (a request larger than what is left is still read, as in Kafka)."""
    gw = start(gateway_process, **{"queued.max.request.bytes": str(512 * 1024),
                                   "socket.request.max.bytes": str(512 * 1024)})
    errors: list[BaseException] = []

    def producer(n: int) -> None:
        try:
            values = [bytes([n]) * 300_000 + b"%d" % i for i in range(12)]
            produce_and_consume(gw.bootstrap, values, max_request_size=400_000, linger_ms=5)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a producer hung"
    assert not errors, errors


def test_connection_limit_config_is_validated_as_kafka_does():
    assert parse_connection_overrides("127.0.0.2:3, ::1:4") == {"127.0.0.2": 3, "::1": 4}
    config = BrokerConfig.load(None, {})
    assert (config.max_connections, config.max_connections_per_ip, config.connections_max_idle_ms,
            config.queued_max_request_bytes) == (2147483647, 2147483647, 600000, -1)
    for bad, message in [
        ({"max.connections.per.ip": "0"}, "can be set to zero only if max.connections.per.ip.overrides"),
        ({"max.connections": "-1"}, "Value must be at least 0"),
        ({"queued.max.request.bytes": "1000"}, "must be larger or equal to socket.request.max.bytes"),
        ({"max.connections.per.ip.overrides": "127.0.0.1"}, "is not host:count"),
    ]:
        with pytest.raises(ConfigError, match=message):
            BrokerConfig.load(None, bad)


def test_idle_connection_gives_its_grown_buffer_back(gateway_process):
    """Producers that sent 2 MB requests and then idle go back to a small buffer within a few seconds."""
    gw = start(gateway_process, **{"message.max.bytes": str(3 * MiB)})
    base = rss_mb(gw.proc.pid)
    producers = [KafkaProducer(bootstrap_servers=gw.bootstrap, max_request_size=3 * MiB) for _ in range(10)]
    try:
        for n, producer in enumerate(producers):
            producer.send("big-then-idle", bytes([n]) * (2 * MiB)).get(timeout=30)
        busy = rss_mb(gw.proc.pid)
        deadline = time.monotonic() + 6
        while rss_mb(gw.proc.pid) - base > 10 and time.monotonic() < deadline:
            time.sleep(0.2)
        idle = rss_mb(gw.proc.pid)
    finally:
        for producer in producers:
            producer.close()
    assert busy - base > 12, "the producers' requests never held memory: the test measures nothing"
    assert idle - base <= 10, f"RSS {base:.0f} MB before, {busy:.0f} MB busy, still {idle:.0f} MB after idling"
