"""`logway health`'s check against a gateway, a listener that is not Kafka, and one that never answers."""

from __future__ import annotations

import socket
import threading

import pytest

from logway.cli.health import Unhealthy, check


def test_a_gateway_is_healthy(logway):
    assert check(logway.bootstrap, 5.0) == 1


def test_a_listener_that_is_not_kafka():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def answer_http() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        thread = threading.Thread(target=answer_http, daemon=True)
        thread.start()
        with pytest.raises(Unhealthy, match="is this a Kafka listener"):
            check(f"127.0.0.1:{server.getsockname()[1]}", 5.0)
        thread.join(5)


def test_a_listener_that_never_answers():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with pytest.raises(Unhealthy, match="no answer within 0.3 s"):
            check(f"127.0.0.1:{server.getsockname()[1]}", 0.3)


@pytest.mark.parametrize("bootstrap", ["localhost", "localhost:", ":9092", "localhost:99999", "localhost:x"])
def test_a_bad_bootstrap(bootstrap):
    with pytest.raises(Unhealthy, match="HOST:PORT"):
        check(bootstrap, 1.0)
