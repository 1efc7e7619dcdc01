"""What an API handler is given besides its request: the RequestContext of the request it answers.

Every handler in gateway/apis/ is ``async def handle(ctx: RequestContext, request)``. The context is the one
surface a handler reads the world through: the broker (its logs, groups, transactions, config), the connection
(its listener, realm, principal), the request header and version, and the principal's view of the ACLs. ACL
rules are not applied here: dispatch applies them before the handler runs (server/security/request_acls.py),
and the two RAW handlers (Produce, Fetch) call the same rules by name through ``acl``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from logway.server.audit import Client, denials
from logway.server.audit_changes import change_events
from logway.server.security.acl_decisions import Acl, Decision
from logway.server.security.authorizer import (
    ANONYMOUS,
    SUPPORTED_OPERATIONS,
    ResourceType,
    client_host,
    operations_bitfield,
)
from logway.server.stats import request_label
from logway.wire.protocol import RequestHeader

if TYPE_CHECKING:
    from logway.gateway.broker import Broker
    from logway.server.config import Listener
    from logway.server.connection import Connection
    from logway.server.security.authorizer import Authorizer
    from logway.server.security.realm import Realm


@dataclass(slots=True)
class RequestContext:
    """One request being answered. ``frame`` is the whole request frame and ``body_pos`` where its body starts
    (RAW handlers read the body from there); ``decision`` is the ACL decision the request is served under
    (None without an authorizer, and for RAW APIs, which apply their rules themselves)."""

    connection: Connection
    broker: Broker
    header: RequestHeader
    frame: memoryview | bytearray
    body_pos: int
    decision: Decision | None = None

    @property
    def version(self) -> int:
        """The request's API version."""
        return self.header.api_version

    @property
    def realm(self) -> Realm:
        """The SCRAM users and ACLs of the connection's listener."""
        return self.connection.realm

    @property
    def authorizer(self) -> Authorizer | None:
        """The listener's ACLs; None when no authorizer is configured (every request is then allowed)."""
        return self.connection.realm.authorizer

    @property
    def advertised(self) -> Listener:
        """The address clients of this connection's listener are told to connect to."""
        return self.broker.config.advertised_for(self.connection.listener.name)

    @property
    def principal(self) -> str:
        """The connection's authenticated principal (User:ANONYMOUS on an unauthenticated listener, as Kafka)."""
        return getattr(self.connection, "principal", ANONYMOUS)

    @property
    def owner(self) -> tuple[str, str]:
        """Who state this request makes belongs to (server/security/ownership.py): listener and principal."""
        return self.connection.listener.name, self.principal

    @property
    def acl(self) -> Acl:
        """The principal's view of the ACLs, for server/security/request_acls.py's rules (with the broker's
        topics, so ids are resolved and partitions checked as KafkaApis does)."""
        return Acl(self.authorizer, self.principal, client_host(self.connection.peer), BrokerTopics(self.broker))

    def audit_denials(self, acl: Acl) -> None:
        """Record the ACL checks ``acl`` failed deciding this request in the audit log (and stop recording)."""
        denied = acl.take_denials()
        audit = self.connection.audit
        if denied and audit.enabled:
            denials(audit, self.audit_client, request_label(self.header.api_key), denied)

    def audit_changes(self, request: Any, response: Any) -> None:
        """Record what ``request`` changed, as ``response`` answers it, in the audit log."""
        audit = self.connection.audit
        if audit.enabled:
            for event in change_events(self.audit_client, self.header.api_key, request, response):
                audit.record(event)

    @property
    def audit_client(self) -> Client:
        """The client as the audit log names it."""
        return self.connection.audit_client(self.header.client_id)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The *_authorized_operations bitfield of a resource (Kafka's AuthHelper.authorizedOperations): every
        supported operation without an authorizer, else the principal's."""
        authorizer = self.authorizer
        if authorizer is None:
            return operations_bitfield(SUPPORTED_OPERATIONS[resource_type])
        return authorizer.authorized_operations(self.principal, client_host(self.connection.peer), resource_type, name)


class BrokerTopics:
    """The broker's topics as the ACL rules ask about them (request_acls.LocalTopics)."""

    def __init__(self, broker: Broker) -> None:
        self.logs = broker.logs
        self.auto_create = broker.config.auto_create_topics

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return next((t.name for t in self.logs.topics.values() if t.topic_id == topic_id), None)

    def has_partition(self, name: str, index: int) -> bool:
        topic = self.logs.topics.get(name)
        return topic is not None and 0 <= index < len(topic.partitions)
