"""Kafka's key and trust stores as Java's keytool writes them, loaded into a Python ssl context
(server/security/keystores.py): PKCS12 keystores and truststores, wrong passwords, JKS refused."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path

import pytest

from logway.server.security.keystores import StoreError, load_keystore, load_truststore

pytestmark = pytest.mark.skipif(shutil.which("keytool") is None, reason="needs Java's keytool")


def _keytool(*args: str) -> None:
    subprocess.run(["keytool", *args, "-storepass", "store-secret", "-noprompt"], check=True, capture_output=True,
                   timeout=60)


def test_keytool_pkcs12_stores_load(tmp_path: Path):
    keystore, truststore, cert = tmp_path / "server.p12", tmp_path / "trust.p12", tmp_path / "server.crt"
    _keytool("-genkeypair", "-keyalg", "EC", "-alias", "server", "-dname", "CN=localhost", "-keystore", str(keystore),
             "-storetype", "PKCS12")
    _keytool("-exportcert", "-rfc", "-alias", "server", "-keystore", str(keystore), "-file", str(cert))
    _keytool("-importcert", "-alias", "ca", "-file", str(cert), "-keystore", str(truststore), "-storetype", "PKCS12")
    before = set(Path(tempfile.gettempdir()).glob("logway-keystore-*"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_keystore(context, "PKCS12", str(keystore), "store-secret", "")
    load_truststore(context, "PKCS12", str(truststore), "store-secret")
    assert context.cert_store_stats()["x509"] == 1
    # The key went through a temporary PEM file (Python's ssl reads keys from files only), deleted at once.
    assert set(Path(tempfile.gettempdir()).glob("logway-keystore-*")) == before
    with pytest.raises(StoreError, match="wrong ssl.keystore.password"):
        load_keystore(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), "PKCS12", str(keystore), "nope", "")


def test_jks_is_refused_with_how_to_convert(tmp_path: Path):
    keystore = tmp_path / "server.jks"  # refused by its type, whatever the file holds
    with pytest.raises(StoreError, match="not JKS: convert it with `keytool -importkeystore"):
        load_keystore(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), "JKS", str(keystore), "store-secret", "")
