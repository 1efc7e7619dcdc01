"""What a proxy filter is: a sans-IO object that declares the requests and the responses it handles, and may
change or answer them, or watch the frames go by (Kroxylicious's RequestFilter / ResponseFilter).

The proxy forwards frames as bytes. It decodes a request with kio only when some filter of the connection's
chain declared it (``requests``, by API key and version range), passes it through the ``on_request`` of those
filters in chain order, encodes what comes out and forwards it. It decodes the upstream's response only when
some filter declared that response (``responses``) and still wants this one (``needs_response`` after its
``on_request``, ``must_decode`` on the response's bytes); the response then passes through the ``on_response``
of those filters in reverse chain order before it is encoded for the client. Everything else passes as bytes:
a large Fetch response or Produce request is streamed, its record data spliced socket to socket.

A filter that must answer without the upstream (a tenant naming another tenant's topic, a denied ACL) raises
``Answer`` with a complete kio response object; the filters before it in the chain that declared that response
see the answer in their ``on_response``. One that must close the client connection instead (fault injection)
raises ``Disconnect``; one that holds requests back (fault injection's latency) declares ``delays`` and says
for how long in ``request_delay``: the session waits that long before forwarding or answering the request
(that connection only: its later requests wait behind it, as behind a slow broker, and no other does).

Bytes-level hooks, for what must not cost a decode: ``wants_request`` (a cheap look at a declared request's
bytes before decoding it: a filter of some topics lets the others' requests pass as bytes), ``must_decode`` (a
cheap look at a response's bytes before decoding it), ``may_stream`` / ``streamed_tail`` (a Fetch response streamed past the filter: it sees only the
top-level tagged fields at its end, and must give back as many bytes), and ``observes`` / ``on_frame`` (every
frame's API, size and, for Produce requests and Fetch responses, each topic's record bytes, counted as the
frame is read or streamed: never decoded, never held back).

Filters are made per client connection by a factory, so they may keep state for that connection (a factory
may also hand every connection one shared object, as the metrics do). They do no I/O in their hooks, but for
one: a filter that must look something up before it can decide (a schema registry, a remote KMS) sets
``prepares`` and does it in ``prepare``, awaited before its ``on_request`` (the client's later requests wait
behind it, as they wait behind the upstream: answers stay in order).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from logway.proxy.api_versions import Ranges  # API key -> (lowest, highest) version, inclusive
from logway.proxy.walk import RecordSets

EVERY_VERSION = (0, 0x7FFF)
RESPONSE_HEAD = 64  # the bytes of a response ``on_response_head`` gets (fewer when the response is shorter)
REQUEST, RESPONSE = "request", "response"


def every_version(api_keys: Iterable[int]) -> Ranges:
    """A declaration of ``api_keys`` at every version."""
    return dict.fromkeys(api_keys, EVERY_VERSION)


@dataclass
class ClientInfo:
    """What a filter knows of the client connection it serves."""

    principal: str = "User:ANONYMOUS"
    host: str = ""
    address: str = ""  # host:port, as the audit log names the client
    client_id: str | None = None
    listener: str = ""
    topic_prefix: str = ""  # the virtual cluster's, when the connection is a tenant's ("" otherwise)
    extra: dict[str, Any] = field(default_factory=dict)

    def visible(self, name: str) -> str | None:
        """The name this client sees for upstream name ``name`` (None: not its virtual cluster's)."""
        if not self.topic_prefix:
            return name
        return name[len(self.topic_prefix):] if name.startswith(self.topic_prefix) else None


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame between the client and the upstream as an observer sees it: never decoded."""

    direction: Literal["request", "response"]
    api_key: int
    api_version: int
    size: int  # the whole frame with its size prefix, as exchanged with the upstream
    record_sets: RecordSets | None = None  # a Produce request's / Fetch response's, if its bytes walk


class Answer(Exception):  # noqa: N818 - it is an answer, not an error
    """Raised by ``on_request``: send ``response`` (a kio response object of the request's API and version)
    to the client and do not forward the request upstream."""

    def __init__(self, response: Any) -> None:
        super().__init__("answered by a proxy filter")
        self.response = response


class Disconnect(Exception):  # noqa: N818 - an instruction to the session, not an error
    """Raised by ``on_request``: do not forward the request; close the client connection (the client sees a
    network error and retries), or with ``silent``, stop forwarding and answering anything on it, as a network
    that drops every packet, until the client gives up on it (request.timeout.ms) and closes it."""

    def __init__(self, silent: bool = False) -> None:
        super().__init__("connection dropped by a proxy filter" if silent else "connection closed by a proxy filter")
        self.silent = silent


def within(ranges: Ranges, api_key: int, api_version: int) -> bool:
    """Whether ``ranges`` declares this API key and version."""
    bounds = ranges.get(api_key)
    return bounds is not None and bounds[0] <= api_version <= bounds[1]


class Filter:
    """A filter that handles nothing: subclasses declare and override what they need."""

    requests: Ranges = {}
    """The requests this filter sees decoded (``on_request``); every other request passes it untouched."""
    responses: Ranges = {}
    """The responses this filter may need decoded (``on_response``)."""
    observes = False
    """Whether ``on_frame`` sees every frame forwarded between the client and the upstream."""
    delays = False
    """Whether ``request_delay`` may hold requests back."""
    response_heads: Ranges = {}
    """The responses whose first bytes ``on_response_head`` reads, whole or streamed, before any reach the client."""
    inspects = False
    """Whether ``wants_request`` is asked, per declared request, before it is decoded."""
    prepares = False
    """Whether ``prepare`` is awaited before ``on_request``."""

    def handles_request(self, api_key: int, api_version: int) -> bool:
        """Whether ``on_request`` sees this request: ``requests`` declares it (asked once per API key and version
        per connection)."""
        return within(self.requests, api_key, api_version)

    def handles_response(self, api_key: int, api_version: int) -> bool:
        """Whether ``on_response`` may need this response: ``responses`` declares it (a filter may narrow it by
        version, asked once per API key and version per connection)."""
        return within(self.responses, api_key, api_version)

    def wants_request(self, api_key: int, api_version: int, frame: memoryview, body: int) -> bool:
        """When ``inspects``: a declared request's bytes before any decode (``frame`` without its size prefix, its
        body from ``body``; the client's bytes, hostile). False when they hold nothing for this filter: neither
        its ``on_request`` nor its ``on_response`` sees this request (if no other filter wants it, it passes as
        bytes)."""
        return True

    async def prepare(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> None:
        """When ``prepares``: awaited before ``on_request`` with the same request, for the lookups ``on_request``
        needs (bounded in time by the filter; ``on_request`` then decides without waiting)."""

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        """Return the request to forward (the same object, changed, or a new one), or raise ``Answer``."""
        return request

    def request_delay(self) -> float:
        """Asked (of filters that declare ``delays``) after ``on_request`` saw a request, whether it returned or
        raised: seconds to hold that request back before it is forwarded or answered. Takes the value: the next
        request starts from none."""
        return 0.0

    def needs_response(self, api_key: int, api_version: int, request: Any) -> bool:
        """After ``on_request`` returned ``request``: whether this request's response must be decoded for this
        filter (the ACL filter: only when it denied some of it). Asked only of filters that handle both."""
        return True

    def must_decode(self, api_key: int, api_version: int, frame: bytes | bytearray) -> bool:
        """A declared response, whole, before it is decoded (``frame`` from its correlation id): False when its
        bytes show it holds nothing for this filter (then ``on_response`` is not called, unless another filter
        had it decoded)."""
        return True

    def may_stream(self, api_key: int, api_version: int) -> bool:
        """Whether a large Fetch response this filter declared may be streamed past it instead, the filter
        seeing only its top-level tagged fields (``streamed_tail``)."""
        return False

    def streamed_tail(self, api_key: int, api_version: int, tail: bytes) -> bytes:
        """The top-level tagged fields of a streamed Fetch response (its last bytes, after every record), as the
        client is to get them: exactly ``len(tail)`` bytes, since the frame's size is sent first. Raise
        MalformedRequest when that cannot be: the client connection closes."""
        return tail

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        """Return the response to send to the client. ``request`` is what this filter returned for it (or the
        request as it passed this filter, None when no filter decoded it)."""
        return response

    def on_response_head(self, client: ClientInfo, api_key: int, api_version: int, head: bytes) -> None:
        """The first bytes (at most RESPONSE_HEAD, from the correlation id on) of a response declared in
        ``response_heads``, never decoded: read what sits at fixed places (a Fetch response's session id).
        MalformedRequest closes the client connection."""

    def on_frame(self, client: ClientInfo, frame: Frame) -> None:
        """Watch one frame forwarded (an observer only; answers a filter gives are not frames)."""
