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

from logway.gateway.security.plain import parse_jaas, plain_users
from logway.gateway.security.scram import MECHANISMS as SCRAM_MECHANISMS

log = logging.getLogger("logway.gateway.config")

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
}
_LISTENER_KEY = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_JAAS_KEY = re.compile(r"([a-z0-9\-]+)\.sasl\.jaas\.config")
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class SecurityConfigError(ValueError):
    """A security setting Kafka would refuse at start-up."""


def is_listener_security_key(key: str) -> bool:
    """listener.name.<listener>.<ssl/sasl key> or .<mechanism>.sasl.jaas.config: read, not unknown."""
    match = _LISTENER_KEY.fullmatch(key)
    if match is None:
        return False
    rest = match.group(2)
    return rest in SECURITY_DEFAULTS or _JAAS_KEY.fullmatch(rest) is not None


@dataclass
class ListenerSecurity:
    """What a connection on one listener goes through before its requests are served."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)
    sasl_max_receive: int = 524288

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def listener_security(props: dict[str, str], name: str, protocol: str) -> ListenerSecurity:
    """The security of listener ``name`` (upper case, as parsed) speaking ``protocol``."""
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(f"listener {name}: unknown security protocol {protocol}")
    prefix = f"listener.name.{name.lower()}."

    def get(key: str) -> str:
        return props.get(prefix + key, props.get(key, SECURITY_DEFAULTS[key])).strip()

    out = ListenerSecurity(protocol)
    if out.tls:
        if get("ssl.principal.mapping.rules") != "DEFAULT":
            log.warning("config ssl.principal.mapping.rules: only DEFAULT is supported (the principal is the "
                        "certificate's full subject DN); ignored")
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
        try:
            out.sasl_max_receive = int(get("sasl.server.max.receive.size"))
        except ValueError:
            raise SecurityConfigError(f"sasl.server.max.receive.size={get('sasl.server.max.receive.size')}: "
                                      "expected an integer") from None
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


def _ssl_context(get, name: str, client_auth: str) -> ssl.SSLContext:
    """A server TLS context from PEM files (Kafka's PEM keystore: the certificate chain and the private key
    in one file, the key encrypted with ssl.key.password if set)."""
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if get(key).upper() != "PEM" and (key == "ssl.keystore.type" or get("ssl.truststore.location")):
            raise SecurityConfigError(f"{key}={get(key)}: listener {name}: Logway reads PEM stores only "
                                      "(convert with openssl, then ssl.keystore.type=PEM)")
    location = get("ssl.keystore.location")
    if not location:
        raise SecurityConfigError(f"ssl.keystore.location is required for the {name} listener")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    password = get("ssl.key.password") or get("ssl.keystore.password") or None
    try:
        context.load_cert_chain(location, password=password)
    except (OSError, ssl.SSLError) as exc:
        raise SecurityConfigError(f"ssl.keystore.location={location}: cannot load the certificate chain and "
                                  f"key: {exc}") from None
    truststore = get("ssl.truststore.location")
    if truststore:
        try:
            context.load_verify_locations(truststore)
        except (OSError, ssl.SSLError) as exc:
            raise SecurityConfigError(f"ssl.truststore.location={truststore}: cannot load: {exc}") from None
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
        try:  # OpenSSL names; TLS 1.3's suites are OpenSSL's defaults
            context.set_ciphers(":".join(s.strip() for s in suites.split(",") if s.strip()))
        except ssl.SSLError:
            raise SecurityConfigError(f"ssl.cipher.suites={suites}: no cipher suite matches (use OpenSSL names, "
                                      "e.g. ECDHE-RSA-AES128-GCM-SHA256)") from None
    return context
