"""Kafka's key and trust stores into a Python ssl context: PEM (KIP-651) and PKCS12; JKS is refused.

Python's ssl loads a certificate chain and key only from a file, so a PKCS12 keystore (read with the
`cryptography` package) is written as PEM to a temporary file readable by the owner only, loaded, and
deleted at once; a PKCS12 truststore's certificates go in as in-memory PEM (cadata).
"""

from __future__ import annotations

import os
import ssl
import tempfile

from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12

_JKS_ADVICE = ("Logway reads PEM and PKCS12 stores, not JKS: convert it with `keytool -importkeystore -srckeystore "
               "<file>.jks -destkeystore <file>.p12 -deststoretype PKCS12`, then set {key}=PKCS12")


class StoreError(ValueError):
    """A store that cannot be read; the message names the setting."""


def load_keystore(context: ssl.SSLContext, store_type: str, location: str, store_password: str,
                  key_password: str) -> None:
    """The server certificate chain and private key into ``context``."""
    kind = store_type.upper()
    if kind == "PEM":  # Kafka's PEM keystore: the key is encrypted with ssl.key.password, if at all
        try:
            context.load_cert_chain(location, password=key_password or store_password or None)
        except (OSError, ssl.SSLError) as exc:
            raise StoreError(f"ssl.keystore.location={location}: cannot load the certificate chain and key: {exc}") from None
        return
    if kind != "PKCS12":
        raise StoreError(f"ssl.keystore.type={store_type}: " + _JKS_ADVICE.format(key="ssl.keystore.type"))
    key, cert, extra = _read_pkcs12(location, "ssl.keystore", store_password, key_password)
    if key is None or cert is None:
        raise StoreError(f"ssl.keystore.location={location}: the PKCS12 keystore holds no private key and certificate")
    pem = cert.public_bytes(Encoding.PEM) + b"".join(c.public_bytes(Encoding.PEM) for c in extra)
    pem += key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    fd, path = tempfile.mkstemp(prefix="logway-keystore-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        context.load_cert_chain(path)
    except ssl.SSLError as exc:
        raise StoreError(f"ssl.keystore.location={location}: cannot use the PKCS12 key and certificate: {exc}") from None
    finally:
        os.unlink(path)


def load_truststore(context: ssl.SSLContext, store_type: str, location: str, password: str) -> None:
    """The CA certificates client certificates are verified against into ``context``."""
    kind = store_type.upper()
    if kind == "PEM":
        try:
            context.load_verify_locations(location)
        except (OSError, ssl.SSLError) as exc:
            raise StoreError(f"ssl.truststore.location={location}: cannot load: {exc}") from None
        return
    if kind != "PKCS12":
        raise StoreError(f"ssl.truststore.type={store_type}: " + _JKS_ADVICE.format(key="ssl.truststore.type"))
    _, cert, extra = _read_pkcs12(location, "ssl.truststore", password, "")
    certs = ([cert] if cert is not None else []) + list(extra)
    if not certs:
        raise StoreError(f"ssl.truststore.location={location}: the PKCS12 truststore holds no certificate")
    context.load_verify_locations(cadata="".join(c.public_bytes(Encoding.PEM).decode() for c in certs))


def _read_pkcs12(location: str, prefix: str, password: str, key_password: str):
    try:
        with open(location, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise StoreError(f"{prefix}.location={location}: cannot read: {exc.strerror or exc}") from None
    # One password protects a PKCS12 file as `cryptography` reads it: the store's, else the key's (Java's
    # keytool writes both the same unless told otherwise).
    failure: Exception | None = None
    for candidate in dict.fromkeys((password, key_password)):
        try:
            return pkcs12.load_key_and_certificates(data, candidate.encode() or None)
        except (ValueError, TypeError) as exc:
            failure = exc
    raise StoreError(f"{prefix}.location={location}: cannot read the PKCS12 store (wrong {prefix}.password?): "
                     f"{failure}")
