"""Kafka frame headers as the proxy reads them, sans-IO: just enough to route and correlate a frame.

Request header v1/v2: api key, api version, correlation id, client id, and (v2, flexible versions) tagged
fields; response header v0/v1: the correlation id and (v1) tagged fields, v1 for flexible versions except
ApiVersions (KIP-511). The correlation id sits at a fixed offset in both (bytes 4-8 of a request, 0-4 of a
response), so the proxy renumbers a frame in place without parsing the rest. Bodies are decoded only when
a filter of the connection's chain declared them (proxy/chain.py), and every length in them is checked
first (wire.request_check), whoever sent them.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
from typing import Any

from logway.proxy.api_versions import kio_range
from logway.wire.errors import MalformedRequest
from logway.wire.protocol import (
    API_VERSIONS_KEY,
    RequestHeader,
    body_offset,
    decode_body,
    decode_request_header,
    encode_body,
    is_flexible,
    read_uvarint,
    reader_for,
    response_header_bytes,
    response_type,
    skip_tagged_fields,
)
from logway.wire.request_check import check_body

PRODUCE_KEY = 0
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
SIZE = _I32


class Received:
    """Bytes received from a peer and not yet taken: a frame is read, or a streamed frame's fields, from here."""

    _buf: bytearray

    @property
    def buffered(self) -> int:
        """Bytes received and not yet taken."""
        return len(self._buf)

    def head(self, n: int) -> memoryview:
        """A view of the first ``n`` buffered bytes (at most): release it before the next take or receive."""
        return memoryview(self._buf)[:n]

    def take(self, n: int) -> bytes:
        """The first ``n`` buffered bytes, removed from the buffer (copied once; deleting from the front of a
        bytearray moves nothing)."""
        out = bytes(memoryview(self._buf)[:n])
        del self._buf[:n]
        return out


def read_request_header(frame: memoryview | bytes) -> tuple[RequestHeader, int]:
    """The request header and where the body starts (after a v2 header's tagged fields)."""
    header, pos = decode_request_header(frame)
    known = kio_range(header.api_key)
    if known is None or not known[0] <= header.api_version <= known[1]:
        return header, pos  # a key or version kio does not know: refused by the advertised ranges
    return header, body_offset(frame, header, pos)


def set_request_correlation_id(frame: memoryview | bytearray, correlation_id: int) -> None:
    _I32.pack_into(frame, 4, correlation_id)


def response_correlation_id(frame: memoryview | bytes) -> int:
    return _I32.unpack_from(frame, 0)[0]


def set_response_correlation_id(frame: memoryview | bytearray, correlation_id: int) -> None:
    _I32.pack_into(frame, 0, correlation_id)


def produce_expects_response(frame: memoryview | bytes, header: RequestHeader, pos: int) -> bool:
    """False for acks=0 Produce, which Kafka never answers: transactional_id (v3+), then acks."""
    if header.api_version >= 3:
        if is_flexible(PRODUCE_KEY, header.api_version):
            length, pos = read_uvarint(frame, pos)
            pos += max(length - 1, 0)
        else:
            (length,) = _I16.unpack_from(frame, pos)
            pos += 2 + max(length, 0)
    if pos + 2 > len(frame):
        raise MalformedRequest("Produce request too short for its acks")
    return _I16.unpack_from(frame, pos)[0] != 0


def decode_request(header: RequestHeader, frame: bytes, pos: int) -> Any:
    """A request body as a kio object, its lengths checked first (the client is hostile)."""
    return decode_body(header.api_key, header.api_version, frame, pos)


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """A request frame without its size prefix: header v1, or v2 with an empty tagged-field section."""
    client = None if header.client_id is None else header.client_id.encode()
    out = [struct.pack(">hhi", header.api_key, header.api_version, header.correlation_id)]
    out.append(_I16.pack(-1) if client is None else _I16.pack(len(client)) + client)
    if is_flexible(header.api_key, header.api_version):
        out.append(b"\x00")
    out.append(encode_body(body))
    return b"".join(out)


def response_body_offset(api_key: int, version: int, frame: bytes | memoryview) -> int:
    """Where a response body starts: after the correlation id and, for header v1, its tagged fields."""
    if api_key != API_VERSIONS_KEY and is_flexible(api_key, version):
        return skip_tagged_fields(frame, 4)
    return 4


def decode_response(api_key: int, version: int, frame: bytes) -> Any:
    """A response frame (no size prefix) as a kio object; MalformedRequest if it does not parse."""
    pos = response_body_offset(api_key, version, frame)
    if api_key == DESCRIBE_TRANSACTIONS:
        return _decode_describe_transactions(version, frame, pos)
    return _decode(response_type(api_key, version), frame, pos)


DESCRIBE_TRANSACTIONS = 65
# A transaction that is not ongoing has no start time: Kafka sends -1 (TransactionState's "no timestamp"). kio
# reads the field as a datetime and refuses a negative one; it writes -1 for the datetime 1 ms before the epoch.
NO_START_TIME = datetime.datetime.fromtimestamp(-0.001, datetime.UTC)


def _decode_describe_transactions(version: int, frame: bytes, pos: int) -> Any:
    """A DescribeTransactions response whose -1 start times are read as NO_START_TIME (written back as -1)."""
    patched = bytearray(frame)
    absent = _negative_start_times(patched, pos)
    response = _decode(response_type(DESCRIBE_TRANSACTIONS, version), bytes(patched), pos)
    if not absent:
        return response
    states = tuple(dataclasses.replace(state, transaction_start_time=NO_START_TIME) if i in absent else state
                   for i, state in enumerate(response.transaction_states))
    return dataclasses.replace(response, transaction_states=states)


def _negative_start_times(frame: bytearray, pos: int) -> set[int]:
    """The indexes of the states whose transaction_start_time_ms is negative, set to 0 in ``frame`` (v0, the
    only version: throttle_time_ms, then a compact array of states, each error_code, transactional_id,
    transaction_state, transaction_timeout_ms, transaction_start_time_ms, ...). Bytes that do not walk are left
    to the decoder, which refuses them."""
    absent = set()
    try:
        count, pos = read_uvarint(frame, pos + 4)
        for i in range(count - 1):
            pos += 2  # error_code
            for _ in range(2):  # transactional_id, transaction_state: compact strings
                length, pos = read_uvarint(frame, pos)
                pos += max(length - 1, 0)
            pos += 4  # transaction_timeout_ms
            if _I64.unpack_from(frame, pos)[0] < 0:
                _I64.pack_into(frame, pos, 0)
                absent.add(i)
            pos = _skip_state_rest(frame, pos + 8)
    except (MalformedRequest, struct.error):
        pass
    return absent


def _skip_state_rest(frame: bytearray, pos: int) -> int:
    """Past a state's producer_id, producer_epoch, topics (name and partitions each) and tagged fields."""
    pos += 10
    topics, pos = read_uvarint(frame, pos)
    for _ in range(topics - 1):
        length, pos = read_uvarint(frame, pos)
        pos += max(length - 1, 0)
        partitions, pos = read_uvarint(frame, pos)
        pos += 4 * max(partitions - 1, 0)
        pos = skip_tagged_fields(frame, pos)
    return skip_tagged_fields(frame, pos)


def encode_response_frame(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A response frame without its size prefix."""
    return response_header_bytes(api_key, version, correlation_id) + encode_body(body)


def _decode(cls: type, frame: bytes, pos: int) -> Any:
    check_body(cls, frame, pos)
    try:
        return reader_for(cls)(frame, pos)[0]
    except Exception as exc:  # kio raises a variety of errors on bad bytes
        raise MalformedRequest(f"cannot decode {cls.__name__} v{cls.__version__}: {exc}") from exc
