"""Broker configuration: Kafka's property names and defaults, from a server.properties file and CLI flags."""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from logway.gateway.config_keys import NOT_APPLICABLE, check_keys, known_keys
from logway.gateway.env_config import env_settings
from logway.gateway.security.authorizer import ACL_AUTHORIZER, STANDARD_AUTHORIZER, parse_super_users
from logway.gateway.security.settings import (
    SECURITY_DEFAULTS,
    SUPPORTED_MECHANISMS,
    ListenerSecurity,
    SecurityConfigError,
    is_listener_security_key,
    listener_security,
)
from logway.storage.cleaner import CLEANER_KEYS, CleanerConfig
from logway.storage.config import BROKER_TO_TOPIC, LogConfig
from logway.storage.errors import InvalidConfig

log = logging.getLogger(__name__)

# Broker-level properties this gateway reads (Kafka's names and defaults). Log properties (log.*) are
# handled by storage.config.LogConfig.from_broker_properties.
BROKER_DEFAULTS: dict[str, str] = {
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    "log.dirs": "",
    "log.dir": "/tmp/kafka-logs",
    "node.id": "1",
    "broker.id": "-1",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "socket.request.max.bytes": "104857600",
    "queued.max.request.bytes": "-1",
    "offsets.topic.num.partitions": "50",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    # Transactions (gateway/transactions.py), Kafka's names and defaults.
    "transaction.state.log.num.partitions": "50",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    "log.retention.check.interval.ms": "300000",
    "log.flush.scheduler.interval.ms": "9223372036854775807",
    "connections.max.idle.ms": "600000",
    "max.connections": "2147483647",
    "max.connections.per.ip": "2147483647",
    "max.connections.per.ip.overrides": "",
    "cluster.id": "",
    "max.incremental.fetch.session.cache.slots": "1000",  # KIP-227 fetch sessions (gateway/fetch_sessions.py)
    # Logway's bound on one CreateTopics/CreatePartitions request (see gateway/apis/create_topics.py): Kafka's
    # controller refuses a user operation of more than 10000 metadata records (QuorumController
    # MAX_RECORDS_PER_USER_OP) with POLICY_VIOLATION; here the partitions of one request count.
    "max.partitions.per.request": "10000",
    # Logway's bound on segments holding open files (storage/open_files.py); Kafka leaves it to the OS limit.
    "log.max.open.segments": "2048",
    # ACLs (gateway/security/authorizer.py): empty = no authorization, as Kafka; Kafka's defaults.
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": "false",
    # Logway's Prometheus endpoint (gateway/metrics): off at port 0; loopback unless told otherwise, since the
    # metrics name every topic and consumer group.
    "metrics.port": "0",
    "metrics.host": "127.0.0.1",
}


AUTHORIZER_CLASSES = (STANDARD_AUTHORIZER, ACL_AUTHORIZER)


class ConfigError(ValueError):
    """A configuration value Kafka would reject at start-up."""


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties format: `key=value`, `key: value` or `key value`; # and ! comments; \\ continuations."""
    props: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        key_chars: list[str] = []
        i = 0
        while i < len(entry):
            ch = entry[i]
            if ch == "\\" and i + 1 < len(entry):
                key_chars.append(entry[i + 1])
                i += 2
                continue
            if ch in "=: \t":
                break
            key_chars.append(ch)
            i += 1
        rest = entry[i:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        props["".join(key_chars)] = rest.encode("latin-1", "backslashreplace").decode("unicode_escape")
    return props


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(
    value: str, key: str = "listeners", protocols: dict[str, str] | None = None, skip: frozenset[str] = frozenset()
) -> list[Listener]:
    """Kafka's listener list: `PLAINTEXT://host:port,NAME://host:port`; empty host means all interfaces.

    A listener name maps to its security protocol through ``protocols`` (listener.security.protocol.map);
    names in ``skip`` (KRaft's controller.listener.names) are left out with a warning: there is no controller.
    """
    out = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        # Listener names may hold '_' (SASL_SSL), which URL schemes may not: split the name off first.
        scheme, sep, address = item.partition("://")
        parts = urlsplit("listener://" + address)
        try:
            port = parts.port
        except ValueError as exc:  # a port that is not a number or out of 0-65535
            raise ConfigError(f"{key}={value!r}: listener {item!r}: {exc}") from None
        if not sep or not scheme or port is None:
            raise ConfigError(f"{key}={value!r}: invalid listener {item!r}, expected NAME://host:port")
        name = scheme.upper()
        if name in skip:
            log.warning("%s: ignoring controller listener %s (Logway has no KRaft controller)", key, item)
            continue
        protocol = (protocols or {}).get(name, name)
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigError(f"{key}={value!r}: listener {item!r}: unknown security protocol {protocol} "
                              "(map the name in listener.security.protocol.map)")
        out.append(Listener(name, parts.hostname or "", port, protocol))
    return out


def _protocol_map(value: str) -> dict[str, str]:
    """listener.security.protocol.map: `NAME:PROTOCOL,...` (Kafka's default maps each protocol to itself)."""
    out = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep:
            raise ConfigError(f"listener.security.protocol.map={value!r}: expected NAME:PROTOCOL pairs")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def parse_connection_overrides(value: str) -> dict[str, int]:
    """max.connections.per.ip.overrides, `host:count,host:count` (Kafka splits each at its last colon, so
    IPv6 addresses work), as {IP address: count}; host names are resolved at start-up, as Kafka does."""
    out: dict[str, int] = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        try:
            limit = int(count)
        except ValueError:
            limit = -1
        if not sep or not host or limit < 0:
            raise ConfigError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
        except OSError:
            raise ConfigError(f"max.connections.per.ip.overrides contains invalid addresses : {host}") from None
        for address in addresses:
            out[canonical_ip(address)] = limit
    return out


def canonical_ip(address: str) -> str:
    """One spelling per address: IPv4-mapped IPv6 (a dual-stack listener's view of an IPv4 peer) as IPv4."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip)


def _bool(props: dict[str, str], key: str) -> bool:
    value = props[key].strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{key}={props[key]!r}: expected true or false")
    return value == "true"


def _int(props: dict[str, str], key: str) -> int:
    try:
        return int(props[key])
    except ValueError:
        raise ConfigError(f"{key}={props[key]!r}: expected an integer") from None


def _topic_defaults(props: dict[str, str]) -> LogConfig:
    """The topic defaults from the broker's log.* keys; a bad value is a ConfigError naming the broker key."""
    for key in BROKER_TO_TOPIC:
        if key in props:
            try:
                LogConfig.from_broker_properties({key: props[key]})
            except InvalidConfig as exc:
                raise ConfigError(f"{key}={props[key]!r}: {exc}") from None
    try:
        return LogConfig.from_broker_properties(props)
    except InvalidConfig as exc:
        raise ConfigError(str(exc)) from None


@dataclass
class ServerConfig:
    """The effective broker configuration (file, then CLI flags/overrides, over Kafka's defaults)."""

    properties: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        given = dict(self.properties)
        self.given_properties = given
        merged = dict(BROKER_DEFAULTS)
        merged.update(given)
        self.properties = merged
        p = merged
        protocols = _protocol_map(p.get("listener.security.protocol.map", ""))
        controllers = frozenset(n.strip().upper() for n in p.get("controller.listener.names", "").split(",") if n.strip())
        self.listeners = parse_listeners(p["listeners"], "listeners", protocols, controllers)
        if not self.listeners:
            raise ConfigError(f"listeners={p['listeners']!r}: no listener to serve on")
        try:
            self.security: dict[str, ListenerSecurity] = {
                lst.name: listener_security(p, lst.name, lst.protocol) for lst in self.listeners}
        except SecurityConfigError as exc:
            raise ConfigError(str(exc)) from None
        if "sasl.mechanism.inter.broker.protocol" in given:
            log.warning("config sasl.mechanism.inter.broker.protocol: Logway has no inter-broker traffic; ignored")
        self.advertised_listeners = (
            parse_listeners(p["advertised.listeners"], "advertised.listeners", protocols, controllers) or self.listeners
        )
        dirs = p["log.dirs"] or p["log.dir"]
        self.log_dirs = [d.strip() for d in dirs.split(",") if d.strip()]
        # KRaft's node.id; the ZooKeeper-era broker.id is honoured when only it is given.
        self.node_id = _int(p, "node.id")
        if "node.id" not in given and _int(p, "broker.id") >= 0:
            self.node_id = _int(p, "broker.id")
        self.num_partitions = _int(p, "num.partitions")
        self.auto_create_topics = _bool(p, "auto.create.topics.enable")
        self.delete_topic_enable = _bool(p, "delete.topic.enable")
        self.socket_request_max_bytes = _int(p, "socket.request.max.bytes")
        self.offsets_topic_num_partitions = _int(p, "offsets.topic.num.partitions")
        self.group_initial_rebalance_delay_ms = _int(p, "group.initial.rebalance.delay.ms")
        self.retention_check_interval_ms = _int(p, "log.retention.check.interval.ms")
        self.max_partitions_per_request = _int(p, "max.partitions.per.request")
        self.max_open_segments = _int(p, "log.max.open.segments")
        if self.max_open_segments < 1:
            raise ConfigError(f"log.max.open.segments={p['log.max.open.segments']!r}: must be at least 1")
        for key, default in BROKER_DEFAULTS.items():  # every numeric broker setting must parse
            if default.lstrip("-").isdigit():
                _int(p, key)
        if self.num_partitions < 1:
            raise ConfigError(f"num.partitions={p['num.partitions']!r}: must be at least 1")
        if self.max_partitions_per_request < 1:
            raise ConfigError(f"max.partitions.per.request={p['max.partitions.per.request']!r}: must be at least 1")
        self._read_connection_limits(p)
        self._read_authorizer(p)
        self.metrics_port = _int(p, "metrics.port")
        self.metrics_host = p["metrics.host"].strip()
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"metrics.port={p['metrics.port']!r}: expected a port number (0 = no metrics endpoint)")
        self.log_config = _topic_defaults(p)
        try:
            self.cleaner_config = CleanerConfig.from_broker_properties(p)
        except InvalidConfig as exc:
            raise ConfigError(str(exc)) from None
        self.warnings = check_keys([k for k in given if not is_listener_security_key(k)], broker_keys())

    def _read_connection_limits(self, p: dict[str, str]) -> None:
        """Socket-server limits, validated as Kafka's KafkaConfig does (names and messages are Kafka's)."""
        self.connections_max_idle_ms = _int(p, "connections.max.idle.ms")
        self.queued_max_request_bytes = _int(p, "queued.max.request.bytes")
        self.max_connections = _int(p, "max.connections")
        self.max_connections_per_ip = _int(p, "max.connections.per.ip")
        for key in ("max.connections", "max.connections.per.ip"):
            if _int(p, key) < 0:
                raise ConfigError(f"Invalid value {p[key]} for configuration {key}: Value must be at least 0")
        self.max_connections_per_ip_overrides = parse_connection_overrides(p["max.connections.per.ip.overrides"])
        if self.max_connections_per_ip == 0 and not self.max_connections_per_ip_overrides:
            raise ConfigError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                              "property is set.")
        if 0 < self.queued_max_request_bytes < self.socket_request_max_bytes:
            raise ConfigError("queued.max.request.bytes must be larger or equal to socket.request.max.bytes")

    def _read_authorizer(self, p: dict[str, str]) -> None:
        """authorizer.class.name turns ACLs on: Kafka's StandardAuthorizer (or the old AclAuthorizer name)."""
        name = p["authorizer.class.name"].strip()
        if name and name not in AUTHORIZER_CLASSES:
            raise ConfigError(f"authorizer.class.name={name!r}: only {AUTHORIZER_CLASSES[0]} is supported")
        self.authorizer_enabled = bool(name)
        self.super_users = parse_super_users(p["super.users"])
        self.allow_everyone_if_no_acl_found = _bool(p, "allow.everyone.if.no.acl.found")

    @property
    def advertised(self) -> Listener:
        return self.advertised_listeners[0]

    def advertised_for(self, name: str) -> Listener:
        """What clients on listener ``name`` are told to connect to: the advertised listener of the same name
        (as Kafka answers Metadata per listener), else the first one."""
        for listener in self.advertised_listeners:
            if listener.name == name:
                return listener
        return self.advertised_listeners[0]

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: dict[str, str] | None = None) -> ServerConfig:
        props: dict[str, str] = {}
        if path is not None:
            props.update(parse_properties(read_properties_file(Path(path))))
        props.update(overrides or {})
        return cls(props)


# Keys read outside the tables above: KRaft listener settings that shape how `listeners` is read.
_READ_ELSEWHERE = ("listener.security.protocol.map", "controller.listener.names", "sasl.jaas.config",
                   "sasl.mechanism.inter.broker.protocol")


def broker_keys() -> frozenset[str]:
    """Every server.properties key the broker reads (what is not here is warned about as unknown)."""
    return known_keys(BROKER_DEFAULTS, BROKER_TO_TOPIC, CLEANER_KEYS, SECURITY_DEFAULTS, _READ_ELSEWHERE)


def environment_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """Broker properties given as LOGWAY_<KAFKA_NAME> variables (see gateway/env_config.py)."""
    return env_settings(environ, broker_keys() | NOT_APPLICABLE, SECURITY_DEFAULTS, SUPPORTED_MECHANISMS)


def read_properties_file(path: Path) -> str:
    """The text of a server.properties file; a missing, unreadable or binary file is a ConfigError."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"--config {str(path)!r}: cannot read: {exc.strerror or exc}") from None
    if b"\0" in data:
        raise ConfigError(f"--config {str(path)!r}: not a properties file (binary data at byte {data.index(0)})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Java reads .properties as ISO-8859-1; a file that is not UTF-8 text is taken as that too.
        if sum(b < 32 and b not in b"\t\r\n\f" for b in data) > 0:
            raise ConfigError(f"--config {str(path)!r}: not a properties file (binary data at byte {exc.start})") from None
        return data.decode("latin-1")


def command_line_properties(overrides: list[str], flags: Mapping[str, str | None]) -> dict[str, str]:
    """`--override KEY=VALUE` items, then the named flags' values (``flags``: property -> value or None)."""
    properties: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--override {item!r}: expected KEY=VALUE")
        properties[key.strip()] = value.strip()
    properties.update({key: value for key, value in flags.items() if value is not None})
    return properties
