"""ApiVersions answers (built once per version and error, then sent with each request's correlation id)."""

from __future__ import annotations

import socket
import struct

from kio.serial import entity_reader
from raw_requests import read_frame, request_frame

from logway.gateway.apis.registry import supported_versions
from logway.wire.errors import ErrorCode
from logway.wire.protocol import response_type


def ask(s: socket.socket, version: int, correlation_id: int, name: str = "ok-client") -> tuple[int, object]:
    data = {"client_software_name": name, "client_software_version": "1.0"} if version >= 3 else {}
    s.sendall(request_frame(18, version, data, correlation_id=correlation_id))
    frame = read_frame(s)
    return struct.unpack_from(">i", frame)[0], entity_reader(response_type(18, version))(frame, 4)[0]


def test_every_version_answers_with_its_correlation_id_and_the_served_apis(logway):
    served = [(k, lo, hi) for k, lo, hi in supported_versions()]
    with socket.create_connection(("127.0.0.1", logway.port), timeout=10) as s:
        for round_ in range(2):  # the second round gets the cached bodies
            for version in range(5):
                cid = 1000 * round_ + version
                got_cid, response = ask(s, version, cid)
                assert got_cid == cid and response.error_code == ErrorCode.none
                assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == served


def test_a_bad_client_software_name_gets_invalid_request_and_a_good_one_after_it_none(logway):
    with socket.create_connection(("127.0.0.1", logway.port), timeout=10) as s:
        assert ask(s, 3, 1, name="bad name!")[1].error_code == ErrorCode.invalid_request
        assert ask(s, 3, 2)[1].error_code == ErrorCode.none
        assert ask(s, 3, 3, name="-bad")[1].error_code == ErrorCode.invalid_request
