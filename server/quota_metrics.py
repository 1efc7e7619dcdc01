"""Client quota metrics under the Prometheus JMX exporter's names for Kafka's, for the broker's and the proxy's
endpoints.

Kafka registers, per budget a quota measures (its metric tags ``user`` and ``client-id``, empty when the budget does
not name one), ``kafka.server<type=Produce|Fetch, user=U, client-id=C><>byte-rate``, ``type=Request ... request-time``,
``type=ControllerMutation ... mutation-rate`` and each type's ``throttle-time`` (the mean throttle time it gave, ms).
Kafka's JMX reporter leaves empty tags out of the name, and the exporter's quota rules turn them into
``kafka_server_quota_byte_rate{resource="Produce",user="U",clientId="C"}`` and so on, without the labels of empty
tags. They exist once a quota of their type was ever set (as in Kafka). `quota_rows` copies the numbers on the event
loop; `quota_families` formats them anywhere.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import Metric

from logway.server.quota_entities import CONTROLLER_MUTATION, REQUEST
from logway.server.quotas import ClientQuotas

QuotaRow = tuple[str, str, str, float, float]  # resource, user, client id, rate, mean throttle time (ms)

_RATE_NAMES = {REQUEST: ("request_time", "Percent of a request thread's time a second, per user/client-id"),
               CONTROLLER_MUTATION: ("mutation_rate", "Partitions created or deleted a second, per user/client-id")}
_BYTE_RATE = ("byte_rate", "Bytes a second, per user/client-id")


def quota_rows(quotas: ClientQuotas, now_ms: int) -> list[QuotaRow]:
    """Every measured budget of every quota type (on the event loop: the sensors change there)."""
    return [(resource, user, client_id, rate, throttle)
            for resource, manager in quotas.managers.items() if manager.enabled
            for user, client_id, rate, throttle in manager.metrics(now_ms)]


def quota_families(rows: list[QuotaRow], extra: dict[str, str] | None = None) -> Iterator[Metric]:
    """The kafka_server_quota_* families of ``rows`` (with ``extra`` labels on every sample)."""
    families: dict[str, Metric] = {}
    for resource, user, client_id, rate, throttle in rows:
        labels = {**(extra or {}), "resource": resource}
        if user:
            labels["user"] = user
        if client_id:
            labels["clientId"] = client_id
        for name, doc, value in ((*_RATE_NAMES.get(resource, _BYTE_RATE), rate),
                                 ("throttle_time", "Mean throttle time given in ms, per user/client-id", throttle)):
            full = "kafka_server_quota_" + name
            family = families.get(full)
            if family is None:
                family = families[full] = Metric(full, doc, "gauge")
            family.add_sample(full, labels, value)
    yield from families.values()


class QuotaCollector:
    """A prometheus_client collector of the rows last copied with ``refresh`` (the proxy's registry is rendered
    in a worker thread: the copy is made on the event loop before)."""

    def __init__(self, quotas: ClientQuotas, extra: dict[str, str] | None = None) -> None:
        self.quotas = quotas
        self.extra = extra
        self.rows: list[QuotaRow] = []

    def refresh(self, now_ms: int) -> None:
        self.rows = quota_rows(self.quotas, now_ms)

    def collect(self) -> Iterator[Metric]:
        yield from quota_families(self.rows, self.extra)
