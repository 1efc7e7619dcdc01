"""What a client names by an id it was handed, kept to the client it was handed to (issue 24): upstream fetch
sessions and producer ids, on every connection of a virtual cluster's listener or, under ACLs, of any listener.

Behind the proxy every client is the proxy's one principal to the upstream, so the upstream cannot tell whose a
fetch session or a producer id is. Here the owner is the listener and the principal (``server.security.
ownership``):

- A fetch session belongs to the client whose Fetch created it (its response's session id, read from the head of
  the response before any of it is sent on). An incremental Fetch naming a session of another owner is answered
  FETCH_SESSION_ID_NOT_FOUND by the proxy, whatever its epoch, as an id never issued is (no existence oracle);
  a Fetch that closes or replaces another's session (epoch -1 or 0) is forwarded with session id 0, so the other's
  session is untouched.
- A producer id belongs to the client whose InitProducerId returned it. A Produce whose batches carry another
  owner's producer id is refused whole, INVALID_PRODUCER_ID_MAPPING, and nothing reaches the upstream: no client
  can write into another's sequence (making its next batch a "duplicate" the upstream drops).

Ids the proxy has not seen handed out (after a restart, or forgotten to stay bounded) go to the first client that
uses them: trust on first use. Transactional ids, and the producer ids the upstream ties to them, are confined by
the tenant filter's prefixes and by the upstream itself.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from logway.proxy.filters.base import Answer, ClientInfo, Filter, every_version
from logway.proxy.filters.tenant import error_response
from logway.server.security.ownership import Owner, Owners
from logway.wire.batch import PRODUCER_ID_POS
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type, skip_tagged_fields

PRODUCE, FETCH, INIT_PRODUCER_ID = 0, 1, 22
SESSIONS_FROM = 7  # Fetch v7: fetch sessions (KIP-227)
FLEXIBLE_FETCH_FROM = 12  # its response header has tagged fields from here
FINAL_EPOCH, INITIAL_EPOCH = -1, 0
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id


@dataclasses.dataclass
class OwnedIds:
    """The owners of the ids the upstream handed to the proxy's clients: one for the whole proxy."""

    sessions: Owners = dataclasses.field(default_factory=lambda: Owners(20_000))
    producers: Owners = dataclasses.field(default_factory=lambda: Owners(200_000))


class OwnershipFilter(Filter):
    """One client connection's requests checked against what it was handed (see the module doc)."""

    requests = {FETCH: (SESSIONS_FROM, 0x7FFF), PRODUCE: (3, 0x7FFF)}
    responses = every_version([INIT_PRODUCER_ID])
    response_heads = {FETCH: (SESSIONS_FROM, 0x7FFF)}

    def __init__(self, ids: OwnedIds) -> None:
        self.ids = ids

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        owner = (client.listener, client.principal)
        if api_key == FETCH:
            return self._fetch(owner, api_version, request)
        foreign = self._foreign_producer(owner, request)
        if foreign is not None:
            raise _refusal(api_version, request, f"producer id {foreign} was not issued to this client")
        return request

    def needs_response(self, api_key: int, api_version: int, request: Any) -> bool:
        return api_key == INIT_PRODUCER_ID

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        if response.error_code == ErrorCode.none and response.producer_id >= 0:
            self.ids.producers.grant(response.producer_id, (client.listener, client.principal))
        return response

    def on_response_head(self, client: ClientInfo, api_key: int, api_version: int, head: bytes) -> None:
        """A Fetch response's session id is its requester's (a new session, or its own it went on with)."""
        try:
            pos = skip_tagged_fields(head, 4) if api_version >= FLEXIBLE_FETCH_FROM else 4
            _, error, session_id = _HEAD.unpack_from(head, pos)
        except (struct.error, IndexError, ValueError):
            return  # a response too short to hold one: no session to hand out
        if error == ErrorCode.none and session_id:
            self.ids.sessions.grant(session_id, (client.listener, client.principal))

    def _fetch(self, owner: Owner, version: int, request: Any) -> Any:
        """The Fetch as it may go upstream; raise the answer to a Fetch naming another's session."""
        session_id, epoch = request.session_id, request.session_epoch
        if not session_id:
            return request
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if self.ids.sessions.holds(session_id, owner):
                return request
            return dataclasses.replace(request, session_id=0)  # closes nothing of another's
        if self.ids.sessions.claim(session_id, owner):
            return request
        raise Answer(build(response_type(FETCH, version), {
            "throttle_time": 0, "error_code": ErrorCode.fetch_session_id_not_found, "session_id": 0}))

    def _foreign_producer(self, owner: Owner, request: Any) -> int | None:
        """The first producer id of the request's batches that is another owner's, or None."""
        for topic in request.topic_data:
            for partition in topic.partition_data:
                records = partition.records
                if records is None or len(records) < PRODUCER_ID_POS + 8:
                    continue
                (producer_id,) = _I64.unpack_from(records, PRODUCER_ID_POS)
                if producer_id >= 0 and not self.ids.producers.claim(producer_id, owner):
                    return producer_id
        return None


def _refusal(version: int, request: Any, message: str) -> Answer:
    return Answer(error_response(PRODUCE, version, request, ErrorCode.invalid_producer_id_mapping, message))


def ownership_filter_factory(ids: OwnedIds):
    """A filter factory for the chain: one OwnershipFilter per connection, one OwnedIds for the proxy."""
    return lambda client: OwnershipFilter(ids)

