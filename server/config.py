"""The server's configuration: listeners, their security, connection limits, the request memory budget, the
authorizer settings and the metrics endpoint, under Kafka's property names and defaults; and the properties
file format itself. The broker (gateway/config.py) and the proxy (proxy/config.py) read their own keys on top.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from logway.server.config_keys import check_keys, known_keys
from logway.server.quota_sensors import Windows
from logway.server.security.authorizer import ACL_AUTHORIZER, STANDARD_AUTHORIZER, parse_super_users
from logway.server.security.settings import (
    SECURITY_DEFAULTS,
    ListenerSecurity,
    SecurityConfigError,
    is_listener_security_key,
    listener_security,
)

log = logging.getLogger(__name__)

# The properties the server layer reads (Kafka's names and defaults).
SERVER_DEFAULTS: dict[str, str] = {
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    # Where the process keeps its state (the broker's log; the SCRAM users and ACLs of both processes).
    "log.dirs": "",
    "log.dir": "/tmp/kafka-logs",
    "socket.request.max.bytes": "104857600",
    "queued.max.request.bytes": "-1",
    "connections.max.idle.ms": "600000",
    "max.connections": "2147483647",
    "max.connections.per.ip": "2147483647",
    "max.connections.per.ip.overrides": "",
    # ACLs (server/security/authorizer.py): empty = no authorization, as Kafka; Kafka's defaults.
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": "false",
    # The Prometheus endpoint (server/metrics_http.py): off at port 0; loopback unless told otherwise, since the
    # metrics name every topic and consumer group.
    "metrics.port": "0",
    "metrics.host": "127.0.0.1",
    # Client quotas (server/quotas.py): the sample windows rates are measured over, Kafka's names and defaults.
    "quota.window.num": "11",
    "quota.window.size.seconds": "1",
    "controller.quota.window.num": "11",
    "controller.quota.window.size.seconds": "1",
}
AUTHORIZER_CLASSES = (STANDARD_AUTHORIZER, ACL_AUTHORIZER)
# Keys read outside the tables: KRaft listener settings that shape how `listeners` is read.
READ_ELSEWHERE = ("listener.security.protocol.map", "controller.listener.names", "sasl.jaas.config",
                  "sasl.mechanism.inter.broker.protocol")


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
        key, value = _split_entry(entry)
        props[key] = value
    return props


def _split_entry(entry: str) -> tuple[str, str]:
    """One logical line as (key, value): the key ends at an unescaped `=`, `:` or white space."""
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
    return "".join(key_chars), rest.encode("latin-1", "backslashreplace").decode("unicode_escape")


def read_properties_file(path: Path) -> str:
    """The text of a properties file; a missing, unreadable or binary file is a ConfigError."""
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


def load_properties(path: str | Path | None, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The properties of a file (if any) with ``overrides`` on top."""
    props: dict[str, str] = {}
    if path is not None:
        props.update(parse_properties(read_properties_file(Path(path))))
    props.update(overrides or {})
    return props


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


def _windows(p: Mapping[str, str], prefix: str) -> Windows:
    """<prefix>.num samples of <prefix>.size.seconds (Kafka: each at least 1)."""
    num, size = int_setting(p, f"{prefix}.num"), int_setting(p, f"{prefix}.size.seconds")
    for key, value in ((f"{prefix}.num", num), (f"{prefix}.size.seconds", size)):
        if value < 1:
            raise ConfigError(f"Invalid value {value} for configuration {key}: Value must be at least 1")
    return Windows(num, size * 1000)


def bool_setting(props: Mapping[str, str], key: str) -> bool:
    value = props[key].strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{key}={props[key]!r}: expected true or false")
    return value == "true"


def int_setting(props: Mapping[str, str], key: str) -> int:
    try:
        return int(props[key])
    except ValueError:
        raise ConfigError(f"{key}={props[key]!r}: expected an integer") from None


@dataclass
class ServerConfig:
    """The effective configuration (file, then CLI flags/overrides, over Kafka's defaults) of what the server
    layer runs: listeners and their security, connection limits, the request memory budget, ACL settings and
    the metrics endpoint. A subclass adds its own keys (``DEFAULTS``) and reads them in ``_read_more``."""

    properties: dict[str, str] = field(default_factory=dict)
    DEFAULTS: ClassVar[Mapping[str, str]] = SERVER_DEFAULTS

    def __post_init__(self) -> None:
        given = dict(self.properties)
        self.given_properties = given
        p = {**self.DEFAULTS, **given}
        self.properties = p
        self._read_listeners(p, given)
        dirs = p["log.dirs"] or p["log.dir"]
        self.log_dirs = [d.strip() for d in dirs.split(",") if d.strip()]
        self.socket_request_max_bytes = int_setting(p, "socket.request.max.bytes")
        for key, default in self.DEFAULTS.items():  # every numeric setting must parse
            if default.lstrip("-").isdigit():
                int_setting(p, key)
        self._read_more(p, given)
        self._read_connection_limits(p)
        self._read_authorizer(p)
        self.quota_windows = _windows(p, "quota.window")
        self.controller_quota_windows = _windows(p, "controller.quota.window")
        self.metrics_port = int_setting(p, "metrics.port")
        self.metrics_host = p["metrics.host"].strip()
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"metrics.port={p['metrics.port']!r}: expected a port number (0 = no metrics endpoint)")
        self.warnings = check_keys([k for k in given if not is_listener_security_key(k)], self.known_keys())

    def _read_more(self, p: dict[str, str], given: dict[str, str]) -> None:
        """A subclass's own keys, read after the listeners and before the limits."""

    @classmethod
    def known_keys(cls) -> frozenset[str]:
        """Every key this configuration reads (what is not here is warned about as unknown)."""
        return known_keys(cls.DEFAULTS, SECURITY_DEFAULTS, READ_ELSEWHERE)

    def _read_listeners(self, p: dict[str, str], given: dict[str, str]) -> None:
        """listeners, advertised.listeners and each listener's security (TLS context, SASL mechanisms)."""
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

    def _read_connection_limits(self, p: dict[str, str]) -> None:
        """Socket-server limits, validated as Kafka's KafkaConfig does (names and messages are Kafka's)."""
        self.connections_max_idle_ms = int_setting(p, "connections.max.idle.ms")
        self.queued_max_request_bytes = int_setting(p, "queued.max.request.bytes")
        self.max_connections = int_setting(p, "max.connections")
        self.max_connections_per_ip = int_setting(p, "max.connections.per.ip")
        for key in ("max.connections", "max.connections.per.ip"):
            if int_setting(p, key) < 0:
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
        self.allow_everyone_if_no_acl_found = bool_setting(p, "allow.everyone.if.no.acl.found")

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
    def load(cls, path: str | Path | None = None, overrides: dict[str, str] | None = None):
        """The configuration of a properties file (if any) with ``overrides`` on top."""
        return cls(load_properties(path, overrides))
