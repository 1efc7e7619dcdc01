"""A TLS connection (server/tls_connection.py) against a real TLS client over a socket pair: frames arrive whole
whatever the TLS records they were cut into (librdkafka writes one record per buffer segment: 10 bytes, then
1 KiB), answers of every size go out whole while the client is slow to read, and bad input (a truncated or
corrupted record, plaintext, a client that stops reading) closes that connection with one log line while
another connection goes on."""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import sys
import threading
from functools import partial
from pathlib import Path

import pytest
import trio

from logway.server.config import Listener
from logway.server.connection import Connection, ListenerContext, RequestHandler
from logway.server.connection_limits import expire_idle_connections
from logway.server.request_memory import RequestMemory
from logway.server.security.realm import Realm
from logway.server.security.settings import ListenerSecurity
from logway.server.stats import ServerStats
from logway.server.tls_connection import TlsConnection, wrap_server_socket

sys.path.insert(0, str(Path(__file__).parent.parent / "gateway"))
from tls_certs import make_certs  # noqa: E402

_SIZE = struct.Struct(">i")
BIG_ANSWER = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> dict[str, str]:
    return make_certs(tmp_path_factory.mktemp("certs"))


def frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


class Echo(RequestHandler):
    """Answers each frame with itself; a frame b"big" with BIG_ANSWER bytes."""

    async def handle(self, conn: Connection, request: memoryview) -> list[bytes]:
        body = bytes(request)
        return [frame(bytes(range(256)) * (BIG_ANSWER // 256) if body == b"big" else body)]


class Client:
    """A TLS client over a blocking socket that decides how its bytes are cut into TLS records."""

    def __init__(self, sock: socket.socket, ca: str) -> None:
        self.sock = sock
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        context = ssl.create_default_context(cafile=ca)
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname="127.0.0.1")

    def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                self._receive()
        self.sock.sendall(self.outgoing.read())

    def records(self, *pieces: bytes) -> bytes:
        """The ciphertext of ``pieces``, one TLS record per piece (up to 16 KiB each)."""
        for piece in pieces:
            self.tls.write(piece)
        return self.outgoing.read()

    def send(self, *pieces: bytes) -> None:
        self.sock.sendall(self.records(*pieces))

    def read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            try:
                out += self.tls.read(n - len(out))
            except ssl.SSLWantReadError:
                self._receive()
        return bytes(out)

    def answer(self) -> bytes:
        (size,) = _SIZE.unpack(self.read(4))
        return self.read(size)

    def closed(self) -> bool:
        """True once the server has closed the connection (with or without an alert or close_notify)."""
        try:
            while True:
                try:
                    if not self.tls.read(1):
                        return True
                    return False
                except ssl.SSLWantReadError:
                    self._receive()
        except (ssl.SSLError, ConnectionError):
            return True

    def _receive(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        self.incoming.write(data)


def librdkafka_cut(data: bytes) -> list[bytes]:
    """``data`` cut as librdkafka cuts a Produce request into TLS records: 10 bytes, 1 KiB, 10 bytes, ..."""
    pieces, pos, sizes = [], 0, (10, 1024)
    while pos < len(data):
        size = sizes[len(pieces) % 2]
        pieces.append(data[pos:pos + size])
        pos += size
    return pieces


async def serve(certs: dict[str, str], clients, max_idle_ms: int = -1) -> list[Exception | None]:
    """Serve one TLS connection per client function, each run in a thread with its end of a socket pair and an
    event set once the server has closed its connection; returns what each client function raised (None: it
    passed)."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(certs["server"])
    context = ListenerContext(Listener("SSL", "127.0.0.1", 0), ListenerSecurity(), Realm(Path(certs["ca"]).parent),
                              100 << 20)
    memory = RequestMemory(64 << 20)
    outcomes: list[Exception | None] = [None] * len(clients)
    connections: set[Connection] = set()

    def run_client(i: int, client_sock: socket.socket, closed: threading.Event) -> None:
        try:
            with client_sock:
                clients[i](client_sock, closed)
        except Exception as exc:  # reported by the test
            outcomes[i] = exc

    async def run_server(conn: Connection, closed: threading.Event) -> None:
        try:
            await conn.run()
        finally:
            closed.set()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(expire_idle_connections, connections, max_idle_ms)
            async with trio.open_nursery() as served:
                for i in range(len(clients)):
                    client_sock, server_sock = socket.socketpair()
                    server_sock.setblocking(False)
                    conn = TlsConnection(wrap_server_socket(server_context, server_sock), f"client-{i}", context,
                                         memory, ServerStats(), lambda conn: Echo())
                    connections.add(conn)
                    closed = threading.Event()
                    served.start_soon(run_server, conn, closed)
                    served.start_soon(partial(trio.to_thread.run_sync, abandon_on_cancel=True), run_client, i,
                                      client_sock, closed)
            nursery.cancel_scope.cancel()
    return outcomes


def good_client(ca: str):
    def run(sock: socket.socket, _closed: threading.Event) -> None:
        client = Client(sock, ca)
        client.handshake()
        for size in (0, 1, 10, 1024, 16_379, 16_380, 100_000, 3_000_000):
            body = (bytes(range(251)) * (size // 251 + 1))[:size]
            client.send(*librdkafka_cut(frame(body)))
            assert client.answer() == body, size
            client.send(frame(body))  # as few records as TLS allows (16 KiB each)
            assert client.answer() == body, size
        # Pipelined: 50 requests in one send, before any answer is read.
        bodies = [b"%04d" % i * 256 for i in range(50)]
        client.send(*(frame(b) for b in bodies))
        assert [client.answer() for _ in bodies] == bodies
        # An answer larger than the socket buffers: the server waits for the client to read.
        client.send(frame(b"big"))
        assert client.answer() == bytes(range(256)) * (BIG_ANSWER // 256)
    return run


async def test_frames_cut_into_any_records_arrive_whole_and_answers_go_out_whole(certs):
    assert await serve(certs, [good_client(certs["ca"])]) == [None]


def truncated_record(ca: str):
    """Half a Kafka frame in whole records, then half a record, then the TCP stream ends."""
    def run(sock: socket.socket, _closed: threading.Event) -> None:
        client = Client(sock, ca)
        client.handshake()
        data = client.records(frame(b"x" * 1000)[:600], b"y" * 200)
        sock.sendall(data[:-50])
        sock.shutdown(socket.SHUT_WR)
        assert client.closed()
    return run


def corrupted_record(ca: str):
    def run(sock: socket.socket, _closed: threading.Event) -> None:
        client = Client(sock, ca)
        client.handshake()
        data = bytearray(client.records(frame(b"x" * 1000)))
        data[40] ^= 0xFF
        sock.sendall(data)
        assert client.closed()
    return run


def plaintext_client(_ca: str):
    def run(sock: socket.socket, _closed: threading.Event) -> None:
        sock.sendall(frame(struct.pack(">hhih", 18, 0, 1, -1)))  # ApiVersions v0
        try:
            assert sock.recv(1024)[:1] in (b"", b"\x15")  # nothing served: closed, or a TLS alert
        except ConnectionResetError:
            pass
    return run


@pytest.mark.parametrize(("bad", "logged"), [
    (truncated_record, "closing connection from client-0: truncated frame: connection closed after 596 of 1000 bytes"),
    (corrupted_record, "closing connection from client-0: [SSL: DECRYPTION_FAILED_OR_BAD_RECORD_MAC]"),
    (plaintext_client, "failed authentication with client-0 (SSL handshake failed: "),
])
async def test_bad_input_closes_that_connection_with_one_log_line(certs, caplog, bad, logged):
    caplog.set_level(logging.DEBUG, logger="logway")
    assert await serve(certs, [bad(certs["ca"]), good_client(certs["ca"])]) == [None, None]
    lines = [r.getMessage() for r in caplog.records if "client-0" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(logged), lines
    assert not [r for r in caplog.records if "client-1" in r.getMessage()]


async def test_a_client_that_stops_reading_is_closed_when_idle(certs, caplog):
    caplog.set_level(logging.DEBUG, logger="logway")

    def stops_reading(sock: socket.socket, closed: threading.Event) -> None:
        client = Client(sock, certs["ca"])
        client.handshake()
        client.send(frame(b"big"))  # and never reads the answer
        assert closed.wait(20)

    def quick(sock: socket.socket, _closed: threading.Event) -> None:
        client = Client(sock, certs["ca"])
        client.handshake()
        for i in range(10):
            client.send(frame(b"%d" % i))
            assert client.answer() == b"%d" % i

    # (idle for a second: the other client's exchange takes milliseconds, on a loaded machine too)
    outcomes = await serve(certs, [stops_reading, quick], max_idle_ms=1000)
    assert outcomes == [None, None]
    lines = [r.getMessage() for r in caplog.records if "client-0" in r.getMessage()]
    assert lines == ["closing idle connection from client-0 (connections.max.idle.ms)"], lines
