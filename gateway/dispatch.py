"""Route a request frame to its API module and encode the answer.

Each module in gateway/apis/ declares API_KEY, MIN_VERSION, MAX_VERSION and ``async def handle(ctx,
request)``. A module with RAW = True gets the undecoded frame (the hot paths: Produce, Fetch); the others get the
kio message. A handler returns a kio response (encoded here), a list of already-framed chunks (Fetch's
zero-copy response), or None (acks=0 Produce: no response at all, as Kafka does).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from logway.gateway.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_partition_reassignments,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    sync_group,
    txn_offset_commit,
)
from logway.server.connection import Connection, RequestHandler
from logway.server.security.authorizer import (
    ANONYMOUS,
    SUPPORTED_OPERATIONS,
    Operation,
    ResourceType,
    client_host,
    operations_bitfield,
)
from logway.server.security.realm import Realm
from logway.server.security.request_acls import Acl, authorize_request
from logway.wire.fetch import Chunk
from logway.wire.protocol import (
    MalformedRequest,
    RequestHeader,
    api_name,
    body_offset,
    decode_body,
    decode_request_header,
    encode_response,
)

if TYPE_CHECKING:
    from logway.gateway.broker import Broker
    from logway.server.config import Listener

log = logging.getLogger(__name__)

API_MODULES: tuple[ModuleType, ...] = (
    produce,
    fetch,
    list_offsets,
    metadata,
    api_versions,
    create_topics,
    delete_topics,
    init_producer_id,
    find_coordinator,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    describe_cluster,
    describe_configs,
    create_partitions,
    offset_for_leader_epoch,
    describe_acls,
    create_acls,
    delete_acls,
    sasl_handshake,
    sasl_authenticate,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    alter_configs,
    incremental_alter_configs,
    delete_records,
    describe_log_dirs,
    describe_topic_partitions,
    elect_leaders,
    list_partition_reassignments,
    alter_partition_reassignments,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    txn_offset_commit,
    describe_producers,
    describe_transactions,
    list_transactions,
    consumer_group_heartbeat,
    consumer_group_describe,
    share_group_heartbeat,
    share_group_describe,
    share_fetch,
    share_acknowledge,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
)
REGISTRY: dict[int, ModuleType] = {m.API_KEY: m for m in API_MODULES}
# The APIs whose ACL checks are the shared ones (applied here, not in their handlers).
SHARED_ACL_CHECKS = frozenset({
    find_coordinator.API_KEY, join_group.API_KEY, heartbeat.API_KEY, leave_group.API_KEY, sync_group.API_KEY,
    describe_groups.API_KEY, list_groups.API_KEY, delete_groups.API_KEY, init_producer_id.API_KEY,
    add_offsets_to_txn.API_KEY, end_txn.API_KEY, offset_commit.API_KEY, offset_delete.API_KEY,
    txn_offset_commit.API_KEY, create_acls.API_KEY, delete_acls.API_KEY, describe_acls.API_KEY,
    describe_log_dirs.API_KEY, list_partition_reassignments.API_KEY, describe_user_scram_credentials.API_KEY,
    alter_user_scram_credentials.API_KEY, alter_partition_reassignments.API_KEY, create_partitions.API_KEY,
    delete_records.API_KEY, describe_producers.API_KEY, offset_fetch.API_KEY, list_offsets.API_KEY,
    offset_for_leader_epoch.API_KEY, list_transactions.API_KEY, describe_transactions.API_KEY, elect_leaders.API_KEY,
    consumer_group_heartbeat.API_KEY, consumer_group_describe.API_KEY, share_group_heartbeat.API_KEY,
    share_group_describe.API_KEY, share_fetch.API_KEY, share_acknowledge.API_KEY, describe_share_group_offsets.API_KEY,
    alter_share_group_offsets.API_KEY, delete_share_group_offsets.API_KEY,
})


def supported_versions() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for ApiVersions: exactly what the modules serve."""
    return [(m.API_KEY, m.MIN_VERSION, m.MAX_VERSION) for m in sorted(API_MODULES, key=lambda m: m.API_KEY)]


@dataclass(slots=True)
class RequestContext:
    connection: Connection
    broker: Broker
    header: RequestHeader
    frame: memoryview | bytearray
    body_pos: int

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def realm(self) -> Realm:
        """The SCRAM users and ACLs of the connection's listener."""
        return self.connection.realm

    @property
    def advertised(self) -> Listener:
        """The address clients of this connection's listener are told to connect to."""
        return self.broker.config.advertised_for(self.connection.listener.name)

    @property
    def principal(self) -> str:
        """The connection's authenticated principal (User:ANONYMOUS on an unauthenticated listener, as Kafka)."""
        return getattr(self.connection, "principal", ANONYMOUS)

    def authorized(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """May this request's principal do ``operation`` on the resource? Always yes without an authorizer."""
        authorizer = self.realm.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(self.principal, client_host(self.connection.peer), operation, resource_type, name)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The *_authorized_operations bitfield for a resource: every supported operation without an authorizer."""
        authorizer = self.realm.authorizer
        if authorizer is None:
            return operations_bitfield(SUPPORTED_OPERATIONS[resource_type])
        return authorizer.authorized_operations(self.principal, client_host(self.connection.peer), resource_type, name)

    def denied_topics(self, operation: Operation, names) -> set[str]:
        """The topics among ``names`` the principal may not ``operation`` (one branch without an authorizer)."""
        authorizer = self.realm.authorizer
        if authorizer is None:
            return set()
        principal, host = self.principal, client_host(self.connection.peer)
        return {n for n in set(names) if not authorizer.authorize(principal, host, operation, ResourceType.TOPIC, n)}


class BrokerHandler(RequestHandler):
    """The broker's answer to every request frame of its connections (one instance serves them all)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def __call__(self, conn: Connection) -> BrokerHandler:
        """The handler factory of the broker's listeners: this one handler for every connection."""
        return self

    async def handle(self, conn: Connection, frame: memoryview) -> list[Chunk] | None:
        return await dispatch(self.broker, conn, frame)

    @asynccontextmanager
    async def session(self, conn: Connection) -> AsyncIterator[None]:
        """A share session ends with the connection that opened it (its member's records are released)."""
        try:
            yield
        finally:
            self.broker.shares.connection_closed(conn)


async def dispatch(broker: Broker, conn: Connection, frame: memoryview | bytearray) -> list[Chunk] | None:
    """Decode the request header, check the version, apply the shared ACL checks, run the API's handler."""
    header, pos = decode_request_header(frame)
    module = REGISTRY.get(header.api_key)
    if module is None:
        raise MalformedRequest(f"unknown or unsupported api key {header.api_key} ({api_name(header.api_key)})")
    conn.api_key, conn.api_version = header.api_key, header.api_version  # for the request metrics
    if not module.MIN_VERSION <= header.api_version <= module.MAX_VERSION:
        if header.api_key == api_versions.API_KEY:
            # Kafka answers an ApiVersions request it cannot parse with a v0 response carrying
            # UNSUPPORTED_VERSION and its ranges, so the client can retry with a version it shares.
            return [api_versions.unsupported_version_response(header.correlation_id)]
        raise MalformedRequest(
            f"{api_name(header.api_key)} v{header.api_version} is not supported "
            f"(v{module.MIN_VERSION}-v{module.MAX_VERSION})"
        )
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s: %s v%d correlation %d from %s", conn.peer, module.__name__.rsplit(".", 1)[-1],
                  header.api_version, header.correlation_id, header.client_id)
    ctx = RequestContext(conn, broker, header, frame, 0)
    if getattr(module, "RAW", False):
        ctx.body_pos = body_offset(frame, header, pos)
        request: Any = None
    else:
        ctx.body_pos = body_offset(frame, header, pos)
        request = decode_body(header.api_key, header.api_version, bytes(frame), ctx.body_pos)
    decision = None
    authorizer = conn.realm.authorizer
    if header.api_key in SHARED_ACL_CHECKS and authorizer is not None:
        # Kafka's per-API ACL checks, shared with the proxy (server/security/request_acls.py): the handler
        # serves what the principal may use; the denied entries are added to its answer.
        acl = Acl(authorizer, ctx.principal, client_host(conn.peer))
        decision = authorize_request(header.api_key, header.api_version, request, acl)
        if decision.request is None:
            return [encode_response(header.api_key, header.api_version, header.correlation_id, decision.response)]
        request = decision.request
    try:
        result = await module.handle(ctx, request)
        if result is None or isinstance(result, list):
            return result
        if decision is not None:
            result = decision.finish(result)
        return [encode_response(header.api_key, header.api_version, header.correlation_id, result)]
    except MalformedRequest:
        raise
    except Exception as exc:  # a bug: the connection logs it with its traceback; name the request in it
        exc.add_note(f"while answering {api_name(header.api_key)} v{header.api_version} from {header.client_id}")
        raise
