"""Kafka error codes (Kafka's numbers and names, from kio's generated enum) and the exception that carries one."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "MalformedRequest"]


class KafkaError(Exception):
    """An error a client should see as a Kafka error code. Subclasses set ``error_code``."""

    error_code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "", error_code: ErrorCode | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        if error_code is not None:
            self.error_code = error_code


class MalformedRequest(KafkaError):
    """The request bytes cannot be decoded: the connection is closed, as Kafka does."""
