"""The audit log at the proxy (filter type ``audit``): the same events as the broker's (server/audit.py), to a
file that rotates by size, or to stderr.

    proxy.filters=audit
    proxy.filter.audit.type=audit
    proxy.filter.audit.file=/var/log/logway/audit.log   # or "-": stderr (the default)
    proxy.filter.audit.file.max.bytes=104857600          # rotate past this size ...
    proxy.filter.audit.file.backups=9                    # ... keeping this many old files (audit.log.1, ...)
    proxy.filter.audit.queue.max.events=10000            # events waiting for the disk; more are dropped, counted

Where its events come from, for the client connections whose chain holds it (``proxy.filters``, or a virtual
cluster's ``filters``): their authentications at the proxy (SASL, mTLS: server/security/sasl.py,
server/tls_connection.py, through the listener's audit), the ACL filter's denials (when the proxy has an
authorizer), and the change operations this filter sees go upstream and come back, with the outcome the
upstream's answer gives each resource (server/audit_changes.py). Names are the upstream's: behind a virtual
cluster, with its prefix. One file is opened at start-up and shared by every connection; a worker thread
writes it (server/audit_writer.py), so no connection waits on the disk.
"""

from __future__ import annotations

import weakref
from typing import Any

from prometheus_client import CollectorRegistry

from logway.proxy.filter_config import FilterSettings, filter_type
from logway.proxy.filters.base import ClientInfo, Filter, every_version
from logway.server.audit import Audit, Client
from logway.server.audit_changes import CHANGE_APIS, change_events, changes_anything
from logway.server.audit_writer import KEYS, STDERR, AuditLog, AuditSettings, audit_families
from logway.server.config import ConfigError


def audit_client(client: ClientInfo) -> Client:
    """A proxy client connection as the audit log names it."""
    return Client(client.principal, client.address, client.listener, client.client_id)


class AuditFilter(Filter):
    """Records the change operations of one client connection, with their outcome."""

    requests = responses = every_version(CHANGE_APIS)

    def __init__(self, audit: Audit) -> None:
        self.audit = audit

    def needs_response(self, api_key: int, api_version: int, request: Any) -> bool:
        return changes_anything(api_key, request)  # (a commit, a validate_only request: nothing to record)

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        for event in change_events(audit_client(client), api_key, request, response):
            self.audit.record(event)
        return response


class AuditFilters:
    """The audit filter type's factory: one AuditLog for the proxy, an AuditFilter per connection. The proxy
    also gives ``audit`` to the listeners and ACL checks of the connections whose chain holds it."""

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit

    def __call__(self, client: ClientInfo) -> AuditFilter:
        return AuditFilter(self.audit)


class _Counters:
    """The audit logs' counters in the proxy's registry, each labelled with its filter's name."""

    def __init__(self) -> None:
        self.logs: list[tuple[dict[str, str], AuditLog]] = []

    def collect(self):
        return audit_families(self.logs)


_COUNTERS: weakref.WeakKeyDictionary[CollectorRegistry, _Counters] = weakref.WeakKeyDictionary()


@filter_type("audit", {**KEYS, "file": STDERR})
def build(settings: FilterSettings) -> AuditFilters:
    options = AuditSettings.read(settings.values, settings.key, ConfigError)
    if not options.file:
        raise ConfigError(f"{settings.key('file')}: empty (a path, or - for stderr)")
    try:
        audit = AuditLog(options)
    except OSError as exc:
        raise ConfigError(f"{settings.key('file')}={options.file}: cannot open: {exc.strerror or exc}") from None
    if settings.registry is not None:
        counters = _COUNTERS.get(settings.registry)
        if counters is None:
            counters = _COUNTERS[settings.registry] = _Counters()
            settings.registry.register(counters)
        counters.logs.append(({"filter": settings.name}, audit))
    return AuditFilters(audit)
