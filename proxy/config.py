"""Proxy configuration: the client-side listeners (the broker's own keys: listeners, advertised.listeners,
security, SASL, ACLs) and the upstream cluster under ``proxy.*`` names."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from logway.proxy.addresses import BrokerAddressing, parse_node_id_range
from logway.proxy.filter_config import is_filter_key, named_filters
from logway.server.config import ConfigError, Listener, ServerConfig, int_setting, load_properties
from logway.server.security.plain import parse_jaas
from logway.server.security.settings import ProtocolSecurity

PROXY_DEFAULTS: dict[str, str] = {
    "proxy.upstream.bootstrap.servers": "",
    "proxy.upstream.security.protocol": "PLAINTEXT",
    "proxy.upstream.sasl.mechanism": "PLAIN",
    "proxy.upstream.sasl.jaas.config": "",
    "proxy.upstream.ssl.truststore.location": "",
    "proxy.upstream.ssl.keystore.location": "",
    "proxy.upstream.ssl.key.password": "",
    "proxy.upstream.ssl.endpoint.identification.algorithm": "https",
    # Kafka's client defaults: socket.connection.setup.timeout.max.ms, reconnect.backoff(.max).ms.
    "proxy.upstream.connect.timeout.ms": "10000",
    "proxy.upstream.reconnect.backoff.ms": "50",
    "proxy.upstream.reconnect.backoff.max.ms": "1000",
    # The longest the proxy waits for an upstream response (a JoinGroup may wait for the whole rebalance,
    # max.poll.interval.ms = 300 s by default, as the Java client allows for it).
    "proxy.upstream.request.timeout.ms": "330000",
    "proxy.metadata.refresh.interval.ms": "5000",
    "proxy.broker.address.pattern": "",
    "proxy.broker.port.offset": "1",
    "proxy.node.id.range": "0-99",
    "proxy.max.in.flight.requests.per.connection": "100",
    # Virtual clusters (multi-tenancy): proxy.virtual.cluster.<name>.listener / .topic.prefix for each name.
    "proxy.virtual.clusters": "",
}
VIRTUAL_CLUSTER_KEYS = ("listener", "topic.prefix")
VIRTUAL_CLUSTERS_DIR = "virtual-clusters"
UPSTREAM_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
UPSTREAM_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass
class VirtualCluster:
    """A tenant's view of the upstream: everything its clients name lives under ``topic_prefix``."""

    name: str
    listener: str
    topic_prefix: str


@dataclass
class UpstreamSecurity(ProtocolSecurity):
    """How the proxy connects and authenticates to the upstream brokers (its own credentials)."""

    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = ""


@dataclass
class ProxyConfig:
    """The proxy's settings; ``server`` holds the client-side ones, read by the gateway's own code."""

    properties: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        given = dict(self.properties)
        p = {**PROXY_DEFAULTS, **{k: v for k, v in given.items() if k.startswith("proxy.")}}
        broker_keys = {k: v for k, v in given.items() if not k.startswith("proxy.")}
        self.server = ServerConfig(broker_keys)
        self.warnings = list(self.server.warnings)
        unknown = sorted(k for k in given if k.startswith("proxy.") and k not in PROXY_DEFAULTS
                         and not _virtual_cluster_key(k) and not is_filter_key(k))
        self.warnings += [f"unknown proxy config {k} ignored" for k in unknown]
        self.upstream_bootstrap = _servers(p["proxy.upstream.bootstrap.servers"])
        self.upstream = _upstream_security(p)
        self.connect_timeout = _ms(p, "proxy.upstream.connect.timeout.ms")
        self.request_timeout = _ms(p, "proxy.upstream.request.timeout.ms")
        self.backoff = _ms(p, "proxy.upstream.reconnect.backoff.ms")
        self.backoff_max = _ms(p, "proxy.upstream.reconnect.backoff.max.ms")
        self.metadata_refresh = _ms(p, "proxy.metadata.refresh.interval.ms")
        self.port_offset = int_setting(p, "proxy.broker.port.offset")
        self.max_in_flight = int_setting(p, "proxy.max.in.flight.requests.per.connection")
        if self.max_in_flight < 1:
            raise ConfigError("proxy.max.in.flight.requests.per.connection: must be at least 1")
        try:
            self.node_ids = parse_node_id_range(p["proxy.node.id.range"])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.address_pattern = p["proxy.broker.address.pattern"].strip()
        self.addressing = {lst.name: self._addressing(lst) for lst in self.server.listeners}
        self.virtual_clusters = _virtual_clusters(p, [lst.name for lst in self.server.listeners], self.warnings)
        self.named_filters = named_filters(p, [c.name for c in self.virtual_clusters.values()],
                                           self.server.log_dirs[0] if self.server.log_dirs else "")
        self.warnings += self.named_filters.warnings
        for name, addressing in self.addressing.items():
            if addressing.port_span.start < 1 or addressing.port_span.stop - 1 > 65535:
                raise ConfigError(f"listener {name}: port {addressing.bind_port} + proxy.broker.port.offset="
                                  f"{self.port_offset} + node ids {self.node_ids[0]}-{self.node_ids[1]} leaves 1-65535 "
                                  "(change proxy.node.id.range or proxy.broker.port.offset)")

    def _addressing(self, listener: Listener) -> BrokerAddressing:
        advertised = self.server.advertised_for(listener.name)
        if listener.port == 0:
            raise ConfigError(f"listeners: {listener}: the proxy needs a fixed port (port per broker)")
        return BrokerAddressing(bind_port=listener.port, advertised_host=advertised.host or "localhost",
                                advertised_port=advertised.port, port_offset=self.port_offset,
                                min_node_id=self.node_ids[0], max_node_id=self.node_ids[1],
                                address_pattern=self.address_pattern)

    def realm_dir(self, cluster: VirtualCluster) -> Path:
        """Where a virtual cluster's SCRAM users and ACLs are kept: under the proxy's state dir (log.dirs)."""
        return Path(self.server.log_dirs[0]) / VIRTUAL_CLUSTERS_DIR / cluster.name

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: dict[str, str] | None = None) -> ProxyConfig:
        return cls(load_properties(path, overrides))


def _virtual_cluster_key(key: str) -> bool:
    return key.startswith("proxy.virtual.cluster.") and key.endswith(tuple(f".{k}" for k in VIRTUAL_CLUSTER_KEYS))


def _virtual_clusters(p: dict[str, str], listeners: list[str], warnings: list[str]) -> dict[str, VirtualCluster]:
    """The virtual clusters by listener name, checked: one listener each, prefixes that cannot overlap."""
    from logway.proxy.filters.tenant import TenantFilter, check_prefixes

    names = [n.strip() for n in p["proxy.virtual.clusters"].split(",") if n.strip()]
    out: dict[str, VirtualCluster] = {}
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"proxy.virtual.clusters: {name!r} is listed twice")
        keys = {k: f"proxy.virtual.cluster.{name}.{k}" for k in VIRTUAL_CLUSTER_KEYS}
        listener, prefix = (p.get(keys["listener"], "").strip().upper(), p.get(keys["topic.prefix"], "").strip())
        if listener not in listeners:
            raise ConfigError(f"{keys['listener']}={listener!r}: expected one of the listeners' names "
                              f"({', '.join(listeners)})")
        if listener in out:
            raise ConfigError(f"{keys['listener']}={listener}: the listener of virtual cluster {out[listener].name} "
                              "already (one virtual cluster per listener)")
        try:
            TenantFilter(prefix)
        except ValueError as exc:
            raise ConfigError(f"{keys['topic.prefix']}: {exc}") from None
        out[listener] = VirtualCluster(name, listener, prefix)
    try:
        check_prefixes(c.topic_prefix for c in out.values())
    except ValueError as exc:
        raise ConfigError(f"proxy.virtual.clusters: {exc}") from None
    listed = {f"proxy.virtual.cluster.{n}." for n in names}
    warnings += [f"{k}: {k.split('.')[3]} is not in proxy.virtual.clusters, ignored" for k in sorted(p)
                 if _virtual_cluster_key(k) and not k.startswith(tuple(listed))]
    return out


def _servers(value: str) -> list[tuple[str, int]]:
    out = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"proxy.upstream.bootstrap.servers={value!r}: {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ConfigError("proxy.upstream.bootstrap.servers is required (--upstream-bootstrap-servers host:port,...)")
    return out


def _ms(p: dict[str, str], key: str) -> float:
    value = int_setting(p, key)
    if value < 0:
        raise ConfigError(f"{key}={value}: must not be negative")
    return value / 1000


def _upstream_security(p: dict[str, str]) -> UpstreamSecurity:
    protocol = p["proxy.upstream.security.protocol"].strip().upper()
    if protocol not in UPSTREAM_PROTOCOLS:
        raise ConfigError(f"proxy.upstream.security.protocol={protocol}: expected one of {', '.join(UPSTREAM_PROTOCOLS)}")
    out = UpstreamSecurity(protocol)
    if out.tls:
        out.ssl_context = _client_ssl_context(p)
        out.check_hostname = p["proxy.upstream.ssl.endpoint.identification.algorithm"].strip().lower() == "https"
        out.ssl_context.check_hostname = out.check_hostname
    if out.sasl:
        out.mechanism = p["proxy.upstream.sasl.mechanism"].strip().upper()
        if out.mechanism not in UPSTREAM_MECHANISMS:
            raise ConfigError(f"proxy.upstream.sasl.mechanism={out.mechanism}: expected one of "
                              f"{', '.join(UPSTREAM_MECHANISMS)}")
        jaas = p["proxy.upstream.sasl.jaas.config"]
        try:
            module, options = parse_jaas(jaas)
        except ValueError as exc:
            raise ConfigError(f"proxy.upstream.sasl.jaas.config: {exc}") from None
        if "username" not in options or "password" not in options:
            module = "ScramLoginModule" if out.mechanism.startswith("SCRAM") else "PlainLoginModule"
            raise ConfigError(f'proxy.upstream.sasl.jaas.config: expected {module} required username="..." '
                              'password="...";')
        out.username, out.password = options["username"], options["password"]
    return out


def _client_ssl_context(p: dict[str, str]) -> ssl.SSLContext:
    """The TLS context for upstream connections: PEM truststore (else the system's), optional PEM keystore."""
    context = ssl.create_default_context()
    trust = p["proxy.upstream.ssl.truststore.location"].strip()
    try:
        if trust:
            context.load_verify_locations(trust)
        keystore = p["proxy.upstream.ssl.keystore.location"].strip()
        if keystore:
            context.load_cert_chain(keystore, password=p["proxy.upstream.ssl.key.password"] or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"proxy.upstream.ssl.*: cannot load {exc}") from None
    return context
