"""What a proxy filter is: a sans-IO object that may change or answer the requests it asks to see.

The proxy forwards frames as bytes. A filter names the API keys whose requests and responses it must see
decoded (``api_keys``); for those the proxy decodes the request with kio, passes it through every filter's
``on_request`` in chain order, encodes what comes out and forwards it; the upstream's response is decoded and
passed through ``on_response`` in reverse chain order before it is encoded for the client. A filter that must
answer without the upstream (a tenant naming another tenant's topic, a denied ACL) raises ``Answer`` with a
complete kio response object. Filters are made per client connection by a factory, so they may keep state
for that connection; they never do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class ClientInfo:
    """What a filter knows of the client connection it serves."""

    principal: str = "User:ANONYMOUS"
    host: str = ""
    client_id: str | None = None
    listener: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Answer(Exception):  # noqa: N818 - it is an answer, not an error
    """Raised by ``on_request``: send ``response`` (a kio response object of the request's API and version)
    to the client and do not forward the request upstream."""

    def __init__(self, response: Any) -> None:
        super().__init__("answered by a proxy filter")
        self.response = response


class Filter(Protocol):
    api_keys: frozenset[int]
    """The API keys this filter must see decoded; every other frame passes through it untouched."""

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        """Return the request to forward (the same object, changed, or a new one), or raise ``Answer``."""
        ...

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        """Return the response to send to the client. ``request`` is what this filter returned for it."""
        ...
