"""Per-listener security from Kafka's settings: the security protocol, the TLS context (PEM keystore and
truststore, KIP-651), ssl.client.auth, the SASL mechanisms and PLAIN's JAAS users.

A key may be given for one listener as ``listener.name.<listener>.<key>`` (Kafka's listener prefix), which
wins over the plain key; PLAIN's users come from ``listener.name.<listener>.plain.sasl.jaas.config``.
"""

from __future__ import annotations

import logging
import re
import ssl
from dataclasses import dataclass, field

from logway.server.security.keystores import StoreError, load_keystore, load_truststore
from logway.server.security.plain import parse_jaas, plain_users
from logway.server.security.principal_mapping import PrincipalMapper
from logway.server.security.scram import MECHANISMS as SCRAM_MECHANISMS

log = logging.getLogger("logway.server.config")

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)

# The security settings read (Kafka's names and defaults). ssl.protocol, ssl.endpoint.identification.algorithm
# and ssl.truststore.password are accepted without effect: OpenSSL negotiates the protocol within
# ssl.enabled.protocols, a server verifies no host name, and a PEM truststore has no password.
SECURITY_DEFAULTS: dict[str, str] = {
    "ssl.keystore.type": "JKS",
    "ssl.keystore.location": "",
    "ssl.keystore.password": "",
    "ssl.key.password": "",
    "ssl.truststore.type": "JKS",
    "ssl.truststore.location": "",
    "ssl.truststore.password": "",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.cipher.suites": "",
    "ssl.protocol": "TLSv1.3",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.principal.mapping.rules": "DEFAULT",
    "sasl.enabled.mechanisms": "GSSAPI",
    "sasl.server.max.receive.size": "524288",
    "connections.max.reauth.ms": "0",
}
_LISTENER_KEY = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_JAAS_KEY = re.compile(r"([a-z0-9\-]+)\.sasl\.jaas\.config")
_MECHANISM_REAUTH_KEY = re.compile(r"([a-z0-9\-]+)\.connections\.max\.reauth\.ms")
# Kafka (Java) names TLS 1.2 suites by their IANA names; OpenSSL by its own. The AEAD suites a Kafka
# deployment lists; other names are passed to OpenSSL as they are.
_IANA_SUITES = {
    f"TLS_{kx}_WITH_{enc}": f"{kx.replace('_', '-')}-{ossl}"
    for kx in ("ECDHE_ECDSA", "ECDHE_RSA", "DHE_RSA")
    for enc, ossl in (("AES_128_GCM_SHA256", "AES128-GCM-SHA256"), ("AES_256_GCM_SHA384", "AES256-GCM-SHA384"),
                      ("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305"))
}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                 "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class SecurityConfigError(ValueError):
    """A security setting Kafka would refuse at start-up."""


def is_listener_security_key(key: str) -> bool:
    """listener.name.<listener>.<ssl/sasl key> or .<mechanism>.sasl.jaas.config: read, not unknown."""
    match = _LISTENER_KEY.fullmatch(key)
    if match is None:
        return False
    rest = match.group(2)
    return rest in SECURITY_DEFAULTS or _JAAS_KEY.fullmatch(rest) is not None or \
        _MECHANISM_REAUTH_KEY.fullmatch(rest) is not None


@dataclass
class ProtocolSecurity:
    """A Kafka security protocol (security.protocol): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""

    protocol: str = "PLAINTEXT"

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass
class ListenerSecurity(ProtocolSecurity):
    """What a connection on one listener goes through before its requests are served."""

    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)
    sasl_max_receive: int = 524288
    # KIP-368, by mechanism: a SASL session lasts this long, then the client must re-authenticate (0: forever,
    # Kafka's default).
    reauth_ms: dict[str, int] = field(default_factory=dict)
    # ssl.principal.mapping.rules: the mTLS subject DN -> the principal name.
    principal_mapper: PrincipalMapper = field(default_factory=lambda: PrincipalMapper("DEFAULT"))


def listener_security(props: dict[str, str], name: str, protocol: str) -> ListenerSecurity:
    """The security of listener ``name`` (upper case, as parsed) speaking ``protocol``."""
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(f"listener {name}: unknown security protocol {protocol}")
    prefix = f"listener.name.{name.lower()}."

    def get(key: str) -> str:
        return props.get(prefix + key, props.get(key, SECURITY_DEFAULTS[key])).strip()

    out = ListenerSecurity(protocol)
    if out.tls:
        try:
            out.principal_mapper = PrincipalMapper(get("ssl.principal.mapping.rules"))
        except ValueError as exc:
            raise SecurityConfigError(f"ssl.principal.mapping.rules={get('ssl.principal.mapping.rules')}: "
                                      f"{exc}") from None
        # Kafka applies ssl.client.auth to SASL_SSL listeners only when listener-prefixed (KIP-684).
        client_auth = get("ssl.client.auth") if protocol == "SSL" else props.get(prefix + "ssl.client.auth", "none")
        out.ssl_context = _ssl_context(get, name, client_auth.strip().lower())
    if out.sasl:
        mechanisms = tuple(m.strip().upper() for m in get("sasl.enabled.mechanisms").split(",") if m.strip())
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported or not mechanisms:
            raise SecurityConfigError(
                f"sasl.enabled.mechanisms={','.join(mechanisms)}: listener {name}: Logway supports "
                f"{', '.join(SUPPORTED_MECHANISMS)} (not {', '.join(unsupported) or 'an empty list'})")
        out.mechanisms = mechanisms
        out.sasl_max_receive = _integer(get, "sasl.server.max.receive.size")
        # connections.max.reauth.ms, or per listener (listener.name.<l>.connections.max.reauth.ms) and mechanism
        # (listener.name.<l>.<mechanism>.connections.max.reauth.ms), as Kafka's SaslChannelBuilder reads it.
        for mechanism in mechanisms:
            value = props.get(f"{prefix}{mechanism.lower()}.connections.max.reauth.ms",
                              get("connections.max.reauth.ms")).strip()
            out.reauth_ms[mechanism] = _integer(lambda _key, v=value: v, "connections.max.reauth.ms")
        if "PLAIN" in mechanisms:
            key = prefix + "plain.sasl.jaas.config"
            jaas = props.get(key, props.get("sasl.jaas.config", ""))
            if not jaas:
                raise SecurityConfigError(f"{key} is required for PLAIN on listener {name} "
                                          '(PlainLoginModule required user_<name>="<password>" ...;)')
            try:
                module, _ = parse_jaas(jaas)
                out.plain_users = plain_users(jaas)
            except ValueError as exc:
                raise SecurityConfigError(f"{key}: {exc}") from None
            if not module.endswith("PlainLoginModule"):
                raise SecurityConfigError(f"{key}: expected org.apache.kafka.common.security.plain.PlainLoginModule")
    return out


def _integer(get, key: str) -> int:
    try:
        return int(get(key))
    except ValueError:
        raise SecurityConfigError(f"{key}={get(key)}: expected an integer") from None


def _ssl_context(get, name: str, client_auth: str) -> ssl.SSLContext:
    """A server TLS context from the listener's key and trust stores (PEM or PKCS12, keystores.py), client
    authentication, ssl.enabled.protocols and ssl.cipher.suites."""
    location = get("ssl.keystore.location")
    if not location:
        raise SecurityConfigError(f"ssl.keystore.location is required for the {name} listener")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    truststore = get("ssl.truststore.location")
    try:
        load_keystore(context, get("ssl.keystore.type"), location, get("ssl.keystore.password"),
                      get("ssl.key.password"))
        if truststore:
            load_truststore(context, get("ssl.truststore.type"), truststore, get("ssl.truststore.password"))
    except StoreError as exc:
        raise SecurityConfigError(f"{exc} (listener {name})") from None
    modes = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
    if client_auth not in modes:
        raise SecurityConfigError(f"ssl.client.auth={client_auth}: expected none, requested or required")
    if client_auth != "none" and not truststore:
        raise SecurityConfigError(f"ssl.client.auth={client_auth} needs ssl.truststore.location (listener {name})")
    context.verify_mode = modes[client_auth]
    versions = [v.strip() for v in get("ssl.enabled.protocols").split(",") if v.strip()]
    unknown = [v for v in versions if v not in _TLS_VERSIONS]
    if unknown or not versions:
        raise SecurityConfigError(f"ssl.enabled.protocols={','.join(versions)}: expected TLSv1.2 and/or TLSv1.3")
    context.minimum_version = min(_TLS_VERSIONS[v] for v in versions)
    context.maximum_version = max(_TLS_VERSIONS[v] for v in versions)
    suites = get("ssl.cipher.suites")
    if suites:
        # OpenSSL names. set_ciphers restricts TLS 1.2 and below only: Python's ssl has no call for TLS 1.3's
        # suites (OpenSSL's SSL_CTX_set_ciphersuites), so TLS 1.3 connections use OpenSSL's default suites.
        names = [s.strip() for s in suites.split(",") if s.strip()]
        tls12 = [_IANA_SUITES.get(n, n) for n in names if n not in _TLS13_SUITES]
        try:
            if tls12:
                context.set_ciphers(":".join(tls12))
            else:  # only TLS 1.3 suites named: TLS 1.2 cannot be used
                context.minimum_version = ssl.TLSVersion.TLSv1_3
        except ssl.SSLError:
            raise SecurityConfigError(f"ssl.cipher.suites={suites}: no cipher suite matches (Java/IANA names such "
                                      "as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, or OpenSSL's)") from None
    return context
