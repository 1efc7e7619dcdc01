"""The audit log's events, the same in both processes: who authenticated (or failed to), what the ACLs refused,
and what changed (topics, partitions, configs, ACLs, SCRAM users, quotas, group and offset deletions, aborted
transactions). Sans-IO: an event is a small dict of plain values, made where the thing happens
(server/security/sasl.py, server/tls_connection.py, the ACL path, the broker's handlers, the proxy's audit
filter) and handed to an ``Audit``; audit_writer.py's AuditLog writes them as JSON lines.

One line per event, its fields in this order (absent when they do not apply):

    {"time": "2026-11-27T10:00:00.123Z", "event": "authentication" | "authorization" | "change",
     "action": the Kafka API (CreateTopics, ...), "outcome": "success" | "failure" | "denied",
     "principal": "User:alice", "client_address": "127.0.0.1:50312", "listener": "SASL_PLAINTEXT",
     "client_id": "...", "mechanism": "SCRAM-SHA-256", "operation": "WRITE",
     "resource_type": "TOPIC", "resource_name": "orders", "error": "TOPIC_ALREADY_EXISTS",
     "message": "...", "details": {...}}

A change names one resource (a request creating three topics is three lines), with its outcome as the answer
gave it: the error's Kafka name when it failed. Record data, passwords, SASL tokens and SCRAM salts are never
part of an event; strings are cut to MAX_STRING characters and lists to MAX_ITEMS entries when written.

Kafka has no audit log (its kafka.authorizer.logger logs each denied check, one line per resource, which the
"authorization" events follow); the JSON shape here is Logway's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

AUTHENTICATION, AUTHORIZATION, CHANGE = "authentication", "authorization", "change"
SUCCESS, FAILURE, DENIED = "success", "failure", "denied"
MAX_STRING = 1000
MAX_ITEMS = 100

Event = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Client:
    """Who an event is about: the principal (User:ANONYMOUS before authentication), the client's address
    (host:port), the listener it connected to and the client id of its request (None if unknown)."""

    principal: str | None
    address: str
    listener: str = ""
    client_id: str | None = None

    def fields(self) -> Event:
        out: Event = {"principal": self.principal, "client_address": self.address, "listener": self.listener}
        if self.client_id is not None:
            out["client_id"] = self.client_id
        return out


class Audit:
    """Where audit events go. This one keeps none (audit off): callers may skip building events when
    ``enabled`` is False. audit_writer.AuditLog writes them; ``audit_of`` joins several."""

    enabled = False

    def record(self, event: Event) -> None:
        """Take one event (never blocks, never raises)."""

    def close(self) -> None:
        """Write what is queued, within a bound, and stop."""


NO_AUDIT = Audit()


class _Fanout(Audit):
    enabled = True

    def __init__(self, sinks: Sequence[Audit]) -> None:
        self.sinks = tuple(sinks)

    def record(self, event: Event) -> None:
        for sink in self.sinks:
            sink.record(event)


def audit_of(sinks: Sequence[Audit]) -> Audit:
    """One Audit for ``sinks``: NO_AUDIT for none, the sink itself for one, else each gets every event."""
    sinks = [s for s in sinks if s.enabled]
    if not sinks:
        return NO_AUDIT
    return sinks[0] if len(sinks) == 1 else _Fanout(sinks)


# --- the events -----------------------------------------------------------------------------------------


def authentication(client: Client, mechanism: str, error: str | None = None) -> Event:
    """A completed authentication (``error`` None) or a failed one (``error``: why, as the client was told).
    ``client.principal`` is the authenticated one, or on failure the user the client claimed (if any)."""
    event: Event = {"event": AUTHENTICATION, "outcome": FAILURE if error else SUCCESS, **client.fields(),
                    "mechanism": mechanism}
    if error:
        event["message"] = error
    return event


def denial(client: Client, action: str, operation: str, resource_type: str, resource_name: str | None) -> Event:
    """An ACL check the principal failed, as Kafka's authorizer logs it: one resource per event."""
    return {"event": AUTHORIZATION, "action": action, "outcome": DENIED, **client.fields(), "operation": operation,
            "resource_type": resource_type, "resource_name": resource_name}


def denials(audit: Audit, client: Client, action: str, denied: Iterable[tuple[Any, Any, str | None]]) -> None:
    """Record each of ``denied`` (acl_decisions.Acl.take_denials: operation, resource type, name)."""
    for operation, resource_type, name in denied:
        audit.record(denial(client, action, operation.name, resource_type.name, name))


def change(client: Client | None, action: str, resource_type: str, resource_name: str | None, error: str | None = None,
           message: str | None = None, details: Mapping[str, Any] | None = None) -> Event:
    """One resource changed by a request (``error`` None), or refused (``error``: its Kafka error name);
    ``client`` None for a change the server made itself (a transaction aborted at its timeout)."""
    event: Event = {"event": CHANGE, "action": action, "outcome": FAILURE if error else SUCCESS,
                    **(client.fields() if client is not None else {}),
                    "resource_type": resource_type, "resource_name": resource_name}
    if error:
        event["error"] = error
        if message:
            event["message"] = message
    if details:
        event["details"] = dict(details)
    return event


def bounded(value: Any) -> Any:
    """``value`` with every string cut to MAX_STRING characters and every list to MAX_ITEMS entries (the
    count of those left out added), so one hostile request cannot make a line unbounded."""
    if isinstance(value, str):
        return value if len(value) <= MAX_STRING else value[:MAX_STRING] + "..."
    if isinstance(value, Mapping):
        out = {str(k)[:MAX_STRING]: bounded(v) for k, v in list(value.items())[:MAX_ITEMS]}
        if len(value) > MAX_ITEMS:
            out["..."] = f"{len(value) - MAX_ITEMS} more"
        return out
    if isinstance(value, list | tuple):
        kept = [bounded(v) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            kept.append(f"... {len(value) - MAX_ITEMS} more")
        return kept
    return value
