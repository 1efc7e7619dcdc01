"""One client connection's filter chain (sans-IO): which filters handle each API key and version, requests
through their ``on_request`` in chain order, responses through their ``on_response`` in reverse, and the
frames shown to the observers. The session (proxy/session.py) does the I/O and asks this module what a frame
needs: nothing (bytes only), a decode, or a walk of its bytes for the observers.

The order is the chain's (``Proxy.filter_chain``): the tenant filter first, so every filter after it sees the
upstream's full names; the ACL filter; the listener's own filters; address rewriting and the metrics last,
nearest the upstream, so every other filter sees the proxy's addresses and the metrics count what is exchanged
with the upstream (and learn topic ids from a Metadata response before the tenant filter strips its names).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from logway.proxy.fetch_walk import fetch_record_sets
from logway.proxy.filters.base import REQUEST, RESPONSE, Answer, ClientInfo, Filter, Frame, within
from logway.proxy.frames import (
    PRODUCE_KEY,
    SIZE,
    decode_request,
    decode_response,
    encode_request,
    encode_response_frame,
)
from logway.proxy.produce_walk import produce_record_sets
from logway.wire.errors import MalformedRequest
from logway.wire.protocol import RequestHeader

FETCH_KEY = 1
Seen = Sequence[tuple[Filter, Any]]
"""The filters whose on_response a response goes through, in chain order, each with its request."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What the chain does with one API key and version."""

    steps: tuple[tuple[Filter, bool, bool], ...]  # (filter, handles the request, handles the response), in order
    decodes_request: bool
    undecoded: tuple[tuple[Filter, None], ...]  # the response's filters when no filter decodes the request
    inspected: bool = False  # some filter that handles the request looks at its bytes first (wants_request)
    heads: tuple[Filter, ...] = ()  # the filters that read the response's first bytes


class Answered(Exception):  # noqa: N818 - a filter's answer, framed
    """A filter answered the request: ``frame`` (without its size prefix) goes to the client, nothing upstream."""

    def __init__(self, frame: bytes) -> None:
        super().__init__("answered by a proxy filter")
        self.frame = frame


class FilterChain:
    """The filters of one client connection, in chain order, with what each handles, asked once per API key and
    version."""

    def __init__(self, filters: Sequence[Filter], client: ClientInfo) -> None:
        self.filters = tuple(filters)
        self.client = client
        self.observers = tuple(f for f in self.filters if f.observes)
        self.delaying = tuple(f for f in self.filters if f.delays)
        self.hold = 0.0  # after ``request``: seconds the session holds that request back (fault injection)
        self._plans: dict[tuple[int, int], Plan] = {}

    def plan(self, api_key: int, api_version: int) -> Plan:
        plan = self._plans.get((api_key, api_version))
        if plan is None:
            steps = tuple((f, f.handles_request(api_key, api_version), f.handles_response(api_key, api_version))
                          for f in self.filters)
            steps = tuple(step for step in steps if step[1] or step[2])
            heads = tuple(f for f in self.filters if within(f.response_heads, api_key, api_version))
            plan = self._plans[api_key, api_version] = Plan(
                steps, any(request for _, request, _ in steps),
                tuple((f, None) for f, _, response in steps if response),
                any(request and f.inspects for f, request, _ in steps), heads)
        return plan

    def wanted(self, plan: Plan, api_key: int, api_version: int, frame: memoryview, pos: int) -> Plan:
        """``plan`` for this request: without the filters whose ``wants_request`` declines its bytes."""
        steps = tuple(step for step in plan.steps
                      if not (step[1] and step[0].inspects and not step[0].wants_request(api_key, api_version,
                                                                                       frame, pos)))
        if len(steps) == len(plan.steps):
            return plan
        return Plan(steps, any(request for _, request, _ in steps),
                    tuple((f, None) for f, _, response in steps if response), heads=plan.heads)

    # --- requests ---------------------------------------------------------------------------------------

    async def request(self, header: RequestHeader, frame: memoryview, pos: int, upstream_correlation_id: int,
                      plan: Plan) -> tuple[bytes | None, Seen]:
        """The request through the filters that handle it (and want it: ``wanted``): the frame to forward (None:
        the client's bytes, as they came) and the filters its response goes through. Raises Answered, or a
        filter's Disconnect. A filter that ``prepares`` is awaited just before its ``on_request``. Sets ``hold``."""
        key, version = header.api_key, header.api_version
        if plan.inspected:
            plan = self.wanted(plan, key, version, frame, pos)
            if not plan.decodes_request:
                self.hold = 0.0  # no filter saw it: none asked to hold it
                return None, plan.undecoded
        original = request = decode_request(header, bytes(frame), pos)
        seen: list[tuple[Filter, Any]] = []
        try:
            for f, handles_request, handles_response in plan.steps:
                if handles_request:
                    if f.prepares:
                        await f.prepare(self.client, key, version, request)
                    request = f.on_request(self.client, key, version, request)
                if handles_response and (not handles_request or f.needs_response(key, version, request)):
                    seen.append((f, request))
        except Answer as answer:
            # The filters before the one that answered see the answer as a response (the tenant filter strips
            # its names from an ACL denial).
            response = self.response(key, version, seen, answer.response)
            raise Answered(encode_response_frame(key, version, header.correlation_id, response)) from None
        finally:
            self.hold = sum(f.request_delay() for f in self.delaying) if self.delaying else 0.0
        if request is original:
            return None, seen
        upstream_header = RequestHeader(key, version, upstream_correlation_id, header.client_id)
        return encode_request(upstream_header, request), seen

    # --- responses --------------------------------------------------------------------------------------

    def must_decode(self, api_key: int, api_version: int, seen: Seen, frame: bytearray) -> bool:
        """Whether a whole response must be decoded: some filter it goes through needs it."""
        return any(f.must_decode(api_key, api_version, frame) for f, _ in seen)

    def response_frame(self, api_key: int, api_version: int, seen: Seen, frame: bytearray,
                       correlation_id: int) -> bytes:
        """The upstream's response frame decoded, through the filters, encoded for the client (MalformedRequest
        when it does not decode)."""
        response = self.response(api_key, api_version, seen, decode_response(api_key, api_version, bytes(frame)))
        return encode_response_frame(api_key, api_version, correlation_id, response)

    def response(self, api_key: int, api_version: int, seen: Seen, response: Any) -> Any:
        """``response`` through the on_response of ``seen``, last filter first."""
        for f, request in reversed(seen):
            response = f.on_response(self.client, api_key, api_version, request, response)
        return response

    def streamed_tail(self, api_key: int, api_version: int, seen: Seen, tail: bytes) -> bytes:
        """A streamed Fetch response's top-level tagged fields through the filters that let it stream."""
        for f, _ in reversed(seen):
            tail = f.streamed_tail(api_key, api_version, tail)
        return tail

    def may_stream(self, api_key: int, api_version: int, seen: Seen) -> bool:
        """Whether a large response may be streamed past the filters it goes through: none (the common case),
        or, for a Fetch response, each of them agreeing to see only its tail."""
        if not seen:
            return True
        return api_key == FETCH_KEY and all(f.may_stream(api_key, api_version) for f, _ in seen)

    def response_head(self, api_key: int, api_version: int, heads: Sequence[Filter], head: bytes) -> None:
        """A response's first bytes (from its correlation id) to the filters that read them."""
        for f in heads:
            f.on_response_head(self.client, api_key, api_version, head)

    # --- observers --------------------------------------------------------------------------------------

    def observe(self, frame: Frame) -> None:
        for f in self.observers:
            f.on_frame(self.client, frame)

    def observe_request(self, api_key: int, api_version: int, frame: bytes | memoryview, body: int) -> None:
        """A request frame (no size prefix, its body from ``body``) forwarded whole: a Produce request's record
        sets walked."""
        sets = None
        if api_key == PRODUCE_KEY:
            sets = _walked(produce_record_sets, api_version, memoryview(frame)[body:])
        self.observe(Frame(REQUEST, api_key, api_version, SIZE.size + len(frame), sets))

    def observe_response(self, api_key: int, api_version: int, frame: bytes | bytearray) -> None:
        """A response frame (no size prefix) as the upstream sent it: a Fetch response's record sets walked."""
        sets = _walked(fetch_record_sets, api_version, frame) if api_key == FETCH_KEY else None
        self.observe(Frame(RESPONSE, api_key, api_version, SIZE.size + len(frame), sets))


def _walked(walk, version: int, data: bytes | bytearray | memoryview):
    """Record sets from ``walk``; None when the bytes do not walk (the upstream answers bad bytes; the metrics
    only lose that frame's per-topic counts)."""
    try:
        return walk(version, data)
    except MalformedRequest:
        return None
