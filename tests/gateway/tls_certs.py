"""Test certificates made with `cryptography`: a CA, a server certificate for 127.0.0.1/localhost (also as
an expired one and as a PKCS12 keystore, with the CA as a PKCS12 truststore), a client certificate, one signed
by another CA (untrusted) and an expired one."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


def _name(**parts: str) -> x509.Name:
    oids = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "CN": NameOID.COMMON_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in parts.items()])


def _cert(subject, key, issuer, issuer_key, *, ca=False, server=False, days=(-1, 30)):
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now + datetime.timedelta(days=days[0]))
               .not_valid_after(now + datetime.timedelta(days=days[1]))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key, password: bytes | None = None) -> bytes:
    encryption = (serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _java_key_pem(key, password: bytes) -> bytes:
    """PKCS#8 encrypted with PBES1 (SHA1 and 3DES), by the openssl CLI: the Java runtime cannot read the
    PBES2-encrypted keys `cryptography` writes."""
    return subprocess.run(["openssl", "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-passout",
                           f"pass:{password.decode()}"], input=_key_pem(key), capture_output=True, check=True).stdout


def make_certs(d: Path) -> dict[str, str]:
    """Writes the files into ``d``; returns their paths by name."""
    ca_key, other_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name, other_name = _name(O="Logway Test", CN="Test CA"), _name(O="Elsewhere", CN="Other CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert(_name(CN="localhost"), server_key, ca_name, ca_key, server=True)
    paths = {"ca": d / "ca.pem", "server": d / "server.pem", "server_encrypted": d / "server-encrypted.pem"}
    paths["ca"].write_bytes(_pem(ca))
    paths["server"].write_bytes(_pem(server) + _pem(ca) + _key_pem(server_key))
    paths["server_encrypted"].write_bytes(_pem(server) + _key_pem(server_key, b"key-secret"))
    expired = _cert(_name(CN="localhost"), server_key, ca_name, ca_key, server=True, days=(-30, -1))
    paths["server_expired"] = d / "server-expired.pem"
    paths["server_expired"].write_bytes(_pem(expired) + _key_pem(server_key))
    paths["other_ca"] = d / "other-ca.pem"
    paths["other_ca"].write_bytes(_pem(_cert(other_name, other_key, other_name, other_key, ca=True)))
    store_secret = serialization.BestAvailableEncryption(b"store-secret")
    paths["server_p12"] = d / "server.p12"
    paths["server_p12"].write_bytes(pkcs12.serialize_key_and_certificates(b"server", server_key, server, [ca],
                                                                          store_secret))
    paths["ca_p12"] = d / "ca.p12"
    paths["ca_p12"].write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [ca], store_secret))
    clients = {
        "client": (_name(C="US", O="Acme", OU="Eng", CN="alice"), ca_key, ca_name, (-1, 30)),
        "untrusted": (_name(CN="mallory"), other_key, other_name, (-1, 30)),
        "expired": (_name(CN="old"), ca_key, ca_name, (-30, -1)),
    }
    for name, (subject, issuer_key, issuer, days) in clients.items():
        key = ec.generate_private_key(ec.SECP256R1())
        paths[name] = d / f"{name}.pem"
        paths[name + "_key"] = d / f"{name}-key.pem"
        cert = _cert(subject, key, issuer, issuer_key, days=days)
        paths[name].write_bytes(_pem(cert))
        paths[name + "_key"].write_bytes(_key_pem(key))
        # A Java client's PEM keystore (KIP-651): the certificate and its key, encrypted with "key-secret".
        paths[name + "_keystore"] = d / f"{name}-keystore.pem"
        paths[name + "_keystore"].write_bytes(_java_key_pem(key, b"key-secret") + _pem(cert))
    return {k: str(v) for k, v in paths.items()}
