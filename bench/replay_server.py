"""The consume ceiling (issue 15): a loopback server that answers Fetch from prebuilt responses in memory.

It stands in front of a real broker: every request but Fetch is relayed to it (Metadata answers are rewritten
to advertise this server, so the client fetches here), and Fetch is answered from each partition's record data,
read once from the broker at start in the chunks that broker returns for max.partition.fetch.bytes (1 MiB).
No storage, no long poll, no Python work per record: what the same librdkafka consumer reaches reading from
it is the most any broker can give that client on this machine.
"""

from __future__ import annotations

import bisect
import dataclasses
import socket
import struct
import threading
from datetime import timedelta

from kio.serial import entity_reader

from logway.wire.fetch import FetchPartitionResult, FetchTopicResult, encode_fetch_response
from logway.wire.protocol import (
    build,
    decode_body,
    decode_request_header,
    encode_body,
    encode_response,
    request_type,
    response_type,
)

_I32 = struct.Struct(">i")
FETCH, METADATA = 1, 3
CHUNK = 1 << 20  # librdkafka's default max.partition.fetch.bytes


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = _I32.unpack(_read_exact(sock, 4))
    return _read_exact(sock, size)


def _next_offset(records: bytes) -> int:
    """The offset after the last whole batch in ``records`` (base offset + last offset delta + 1)."""
    pos, last = 0, -1
    while pos + 12 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > len(records):
            break
        (delta,) = struct.unpack_from(">i", records, pos + 23)
        last = base + delta
        pos += 12 + length
    return last + 1


class Replay:
    """Per-partition record chunks of one topic, keyed by start offset, read from ``upstream``."""

    def __init__(self, upstream: tuple[str, int], topic: str, ends: list[int]) -> None:
        self.upstream = upstream
        self.topic = topic
        self.chunks: list[tuple[list[int], list[bytes]]] = []
        with socket.create_connection(upstream) as sock:
            for partition, end in enumerate(ends):
                offsets, data = [], []
                offset = 0
                while offset < end:
                    records = self._fetch(sock, partition, offset)
                    offsets.append(offset)
                    data.append(records)
                    offset = _next_offset(records)
                self.chunks.append((offsets, data))

    def _fetch(self, sock: socket.socket, partition: int, offset: int) -> bytes:
        body = {"replica_id": -1, "max_wait": timedelta(0), "min_bytes": 1, "max_bytes": CHUNK,
                "isolation_level": 0, "topics": [{"topic": self.topic, "partitions": [
                    {"partition": partition, "fetch_offset": offset, "partition_max_bytes": CHUNK}]}]}
        payload = encode_body(build(request_type(FETCH, 4), body))
        header = struct.pack(">hhih", FETCH, 4, 1, 0)
        sock.sendall(_I32.pack(len(header) + len(payload)) + header + payload)
        answer = entity_reader(response_type(FETCH, 4))(_read_frame(sock), 4)[0]
        records = answer.responses[0].partitions[0].records
        if not records:
            raise RuntimeError(f"no records at {self.topic}-{partition} offset {offset}")
        return records

    def records(self, partition: int, offset: int) -> bytes:
        """The chunk holding ``offset`` (the client skips records before it), or nothing past the end."""
        if partition >= len(self.chunks):
            return b""
        offsets, data = self.chunks[partition]
        i = bisect.bisect_right(offsets, offset) - 1
        if i < 0 or (i == len(offsets) - 1 and offset >= _next_offset(data[i])):
            return b""
        return data[i]

    def high_watermark(self, partition: int) -> int:
        offsets, data = self.chunks[partition]
        return _next_offset(data[-1]) if data else 0


class ReplayServer:
    """Listens on a free loopback port; one thread per client connection (it and its upstream relay)."""

    def __init__(self, replay: Replay) -> None:
        self.replay = replay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.replay.upstream)
        try:
            while True:
                frame = _read_frame(client)
                header, pos = decode_request_header(frame)
                if header.api_key == FETCH:
                    client.sendmsg(self._fetch(frame, header, pos))
                    continue
                upstream.sendall(_I32.pack(len(frame)) + frame)
                answer = _read_frame(upstream)
                if header.api_key == METADATA:
                    answer = self._metadata(answer, header)
                client.sendall(_I32.pack(len(answer)) + answer)
        except (ConnectionError, OSError):
            pass
        finally:
            client.close()
            upstream.close()

    def _fetch(self, frame: bytes, header, pos: int) -> list[bytes]:
        from logway.wire.protocol import body_offset

        request = decode_body(FETCH, header.api_version, frame, body_offset(frame, header, pos))
        topics = []
        for topic in request.topics:
            results = []
            for p in topic.partitions:
                records = self.replay.records(p.partition, p.fetch_offset)
                hw = self.replay.high_watermark(p.partition)
                results.append(FetchPartitionResult(p.partition, 0, hw, hw, 0, records))
            name = getattr(topic, "topic", self.replay.topic)
            topics.append(FetchTopicResult(name, getattr(topic, "topic_id", None), results))
        return encode_fetch_response(header.api_version, header.correlation_id, topics)

    def _metadata(self, answer: bytes, header) -> bytes:
        cls = response_type(METADATA, header.api_version)
        body_at = 5 if cls.__flexible__ else 4
        body = entity_reader(cls)(answer, body_at)[0]
        brokers = tuple(dataclasses.replace(b, port=self.port) for b in body.brokers)
        frame = encode_response(METADATA, header.api_version, header.correlation_id,
                                dataclasses.replace(body, brokers=brokers))
        return frame[4:]
