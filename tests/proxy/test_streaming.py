"""A frame streamed between real sockets (proxy/streaming.py): a Produce request from a client socket to an
upstream socket, walked for its record sets while its record data is spliced, arrives byte for byte; so does
one whose bytes do not walk (its counts are lost, not the frame), and the next request behind it in the
client's socket is left there."""

from __future__ import annotations

import datetime
import os
import socket
import struct

import pytest
import trio

from logway.proxy.produce_walk import ProduceWalk
from logway.proxy.splice import Pipe
from logway.proxy.streaming import ClientSource, FrameDoesNotWalk, FrameRelay
from logway.proxy.upstream import send_parts
from logway.wire.errors import MalformedRequest
from logway.wire.protocol import build, encode_body, request_type
from logway.wire.records import build_batch

HEADER = 11  # the test's request header: api key, version, correlation id, a null client id, no tags
VERSION = 9


class FakeConnection:
    """What the relay uses of a server Connection: its socket, its buffered head and its sign of life."""

    def __init__(self, sock: socket.socket, head: bytes) -> None:
        self.sock = sock
        self._head = head
        self.io_bytes = 0

    def buffered(self) -> memoryview:
        return memoryview(self._head)

    def drop_buffered(self) -> None:
        self._head = b""


def produce_frame(sizes: list[int], parts_per_batch: int = 1) -> tuple[bytes, dict]:
    """A Produce v9 frame (size prefix included) with one record set per entry of ``sizes`` (records of about
    that many KB each, in ``parts_per_batch`` batches), and the record sets the walk must find."""
    partitions, expected = [], [0, 0]
    for index, kb in enumerate(sizes):
        records = b"".join(build_batch([(None, os.urandom(1000), ())] * kb) for _ in range(parts_per_batch))
        partitions.append({"index": index, "records": records})
        expected[0] += len(records)
        expected[1] += kb * parts_per_batch
    body = encode_body(build(request_type(0, VERSION), {
        "transactional_id": None, "acks": 1, "timeout": datetime.timedelta(seconds=5),
        "topic_data": [{"name": "t", "partition_data": partitions}]}))
    header = struct.pack(">hhih", 0, VERSION, 7, -1) + b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload, {"t": tuple(expected)}


async def relay_through(frame: bytes, head: int, walk: ProduceWalk | None, tail: bool = False,
                        after: bytes = b"") -> tuple[bytes, bytes]:
    """Stream ``frame`` as the proxy does, its first ``head`` bytes already buffered, the rest (and ``after``)
    sent into the client's socket by a peer: what the upstream socket receives, and what is left in the
    client's socket."""
    client_peer, client = socket.socketpair()
    upstream, upstream_peer = socket.socketpair()
    for sock in (client, upstream, upstream_peer, client_peer):
        sock.setblocking(False)
    pipe = Pipe()
    received = bytearray()
    try:
        async def feed() -> None:
            rest = memoryview(frame[head:] + after)
            while rest:
                await trio.lowlevel.wait_writable(client_peer)
                try:
                    rest = rest[client_peer.send(rest[:70_001]):]  # pieces that cut fields apart
                except BlockingIOError:
                    pass

        async def drain() -> None:
            while len(received) < len(frame):
                await trio.lowlevel.wait_readable(upstream_peer)
                try:
                    received.extend(upstream_peer.recv(1 << 20))
                except BlockingIOError:
                    pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(feed)
            nursery.start_soon(drain)
            conn = FakeConnection(client, frame[:head])
            relay = FrameRelay(ClientSource(conn, 5.0), len(frame), pipe, upstream,
                               lambda parts: send_parts(upstream, parts), conn, MalformedRequest)
            if walk is not None:
                await relay.fields(4 + HEADER)
                try:
                    await relay.walk(walk, tail=tail)
                except FrameDoesNotWalk:
                    pass
            await relay.rest()
            await relay.flush()
        await trio.sleep(0.05)
        try:
            left = client.recv(1 << 20)
        except BlockingIOError:
            left = b""
        return bytes(received), left
    finally:
        pipe.close()
        for sock in (client_peer, client, upstream, upstream_peer):
            sock.close()


@pytest.mark.parametrize("sizes", [[250, 250, 250, 250], [300, 1, 2, 300], [1, 1, 1, 500]])
@pytest.mark.parametrize("tail", [False, True])
async def test_a_walked_produce_arrives_byte_for_byte_with_its_record_sets(sizes, tail) -> None:
    frame, expected = produce_frame(sizes)
    walk = ProduceWalk(VERSION)
    received, left = await relay_through(frame, 1024, walk, tail=tail, after=b"next request")
    assert received == frame
    assert left == b"next request"
    assert walk.record_sets == expected


async def test_batches_of_one_record_set_are_each_counted() -> None:
    frame, expected = produce_frame([100, 100], parts_per_batch=3)
    walk = ProduceWalk(VERSION)
    received, _ = await relay_through(frame, 2000, walk)
    assert received == frame and walk.record_sets == expected


async def test_a_produce_whose_records_run_past_its_end_is_forwarded_unwalked() -> None:
    frame, _ = produce_frame([200])
    at = frame.index(b"\x00\x00\x00\x00\x00\x00\x00\x00", 4 + HEADER + 9) - 3  # the record set's 3-byte length
    lying = bytearray(frame)
    lying[at:at + 3] = b"\xff\xff\x7f"  # about 2 MB: past the frame's end
    walk = ProduceWalk(VERSION)
    received, left = await relay_through(bytes(lying), 1024, walk, after=b"next")
    assert received == bytes(lying) and left == b"next"
    assert not walk.at_tail
