"""KIP-219 muting: a handler that throttles its client (Connection.throttle) has its answer sent at once, and the
connection reads no further request of that client until the throttle time is over; other connections go on."""

from __future__ import annotations

import socket
import struct

import trio
import trio.testing

from logway.server.config import Listener
from logway.server.connection import Connection, ListenerContext, RequestHandler
from logway.server.request_memory import RequestMemory
from logway.server.security.realm import Realm
from logway.server.security.settings import ListenerSecurity
from logway.server.stats import ServerStats


def frame(tag: bytes) -> bytes:
    return struct.pack(">i", len(tag)) + tag


async def read_exactly(sock: trio.socket.SocketType, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = await sock.recv(n - len(data))
        assert chunk
        data += chunk
    return data


async def test_a_throttled_client_is_answered_then_not_read_until_its_throttle_time_is_over(tmp_path, autojump_clock):
    context = ListenerContext(Listener("PLAINTEXT", "127.0.0.1", 0), ListenerSecurity(), Realm(tmp_path), 100 << 20)
    memory = RequestMemory(64 << 20)
    handled: list[tuple[bytes, float]] = []
    answered: list[tuple[bytes, float]] = []
    slow_client, slow_server = socket.socketpair()
    other_client, other_server = socket.socketpair()

    class Throttling(RequestHandler):
        async def handle(self, conn: Connection, request: memoryview) -> list[bytes]:
            handled.append((bytes(request), trio.current_time()))
            if bytes(request) == b"slow-1":
                conn.throttle(1500)
            return [frame(b"answer " + bytes(request))]

    async def client(sock: socket.socket, count: int) -> None:
        tsock = trio.socket.from_stdlib_socket(sock)
        for _ in range(count):
            size = struct.unpack(">i", await read_exactly(tsock, 4))[0]
            answered.append((await read_exactly(tsock, size), trio.current_time()))

    # Both requests of the throttled client are in its socket before its connection starts (pipelined).
    slow_client.sendall(frame(b"slow-1") + frame(b"slow-2"))
    slow_client.setblocking(False)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for server, peer in ((slow_server, "slow"), (other_server, "other")):
                server.setblocking(False)
                conn = Connection(server, peer, context, memory, ServerStats(), lambda conn: Throttling())
                nursery.start_soon(conn.run)
            nursery.start_soon(client, slow_client, 2)
            await trio.sleep(0.5)
            other_client.sendall(frame(b"other"))  # while the slow client is muted
            await trio.sleep(2)
            nursery.cancel_scope.cancel()
    when = {tag: t for tag, t in handled}
    assert when[b"slow-2"] - when[b"slow-1"] >= 1.5  # not read before the throttle time was over
    assert when[b"other"] < when[b"slow-2"]  # another connection is served meanwhile
    sent = {tag: t for tag, t in answered}
    assert sent[b"answer slow-1"] < when[b"slow-1"] + 1.5  # the throttled request's own answer went out at once
    for sock in (slow_client, other_client, slow_server, other_server):
        sock.close()
