"""A connection with many pipelined requests already in its buffer lets the other connections in every few
requests (server.connection's _take_turn), so one client that pipelines cannot hold up another's requests
for the time its whole backlog takes."""

from __future__ import annotations

import socket
import struct

import trio

from logway.server.config import Listener
from logway.server.connection import Connection, ListenerContext, RequestHandler
from logway.server.request_memory import RequestMemory
from logway.server.security.realm import Realm
from logway.server.security.settings import ListenerSecurity
from logway.server.stats import ServerStats

PIPELINED = 100


def frame(tag: bytes) -> bytes:
    return struct.pack(">i", len(tag)) + tag


async def test_a_pipelining_connection_lets_another_in_every_few_requests(tmp_path):
    context = ListenerContext(Listener("PLAINTEXT", "127.0.0.1", 0), ListenerSecurity(), Realm(tmp_path), 100 << 20)
    memory = RequestMemory(64 * 1024 * 1024)
    order: list[bytes] = []
    a_client, a_server = socket.socketpair()
    b_client, b_server = socket.socketpair()

    class Recording(RequestHandler):
        async def handle(self, conn: Connection, request: memoryview) -> None:
            """Record the order; when the pipelining connection's second request is handled, the other sends."""
            order.append(bytes(request))
            if bytes(request) == b"a001":
                b_client.sendall(frame(b"b"))
            if len(order) == PIPELINED + 1:
                for client in (a_client, b_client):
                    client.shutdown(socket.SHUT_WR)

    # Every request of the pipelining client is in its socket (one receive) before either connection starts.
    a_client.sendall(b"".join(frame(b"a%03d" % i) for i in range(PIPELINED)))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for server, peer in ((a_server, "a"), (b_server, "b")):
                server.setblocking(False)
                conn = Connection(server, peer, context, memory, ServerStats(), lambda conn: Recording())
                nursery.start_soon(conn.run)
    a_client.close()
    b_client.close()
    assert sorted(order) == sorted([b"a%03d" % i for i in range(PIPELINED)] + [b"b"])
    # b's request arrived while a had 98 requests to go: it is handled within a few of a's requests (a turn is 4
    # requests), not after all of them.
    assert order.index(b"b") <= 12, order
