"""The sans-IO SASL pieces on their own: SCRAM against RFC 7677's and RFC 5802's test vectors, PLAIN, the JAAS
parser, and the credential file `logway users` writes."""

from __future__ import annotations

import base64
import json

import pytest

from logway.cli.main import main
from logway.server.security.credentials import FILE_NAME, CredentialStore
from logway.server.security.plain import PlainError, authenticate, parse_jaas, plain_users
from logway.server.security.scram import ScramAuthenticationError, ScramError, ScramServer, make_credential

# RFC 7677 section 3 (SCRAM-SHA-256) and RFC 5802 section 5 uses user "user", password "pencil".
RFC7677 = {
    "salt": "W22ZaJ0SNY7soEsUEjb6gQ==",
    "server_nonce": "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


def _rfc7677_server():
    cred = make_credential("SCRAM-SHA-256", "pencil", 4096, base64.b64decode(RFC7677["salt"]))
    return ScramServer("SCRAM-SHA-256", lambda user: cred if user == "user" else None, nonce=RFC7677["server_nonce"])


def test_scram_sha256_matches_rfc7677():
    server = _rfc7677_server()
    assert server.respond(RFC7677["client_first"]) == RFC7677["server_first"]
    assert not server.complete
    assert server.respond(RFC7677["client_final"]) == RFC7677["server_final"]
    assert server.complete and server.username == "user"


def test_scram_wrong_proof_and_unknown_user_fail():
    server = _rfc7677_server()
    server.respond(RFC7677["client_first"])
    bad = RFC7677["client_final"].replace(b"p=dHzb", b"p=dHzc")
    with pytest.raises(ScramError):
        server.respond(bad)
    assert not server.complete
    with pytest.raises(ScramError, match="Invalid user credentials"):
        _rfc7677_server().respond(b"n,,n=mallory,r=abc")
    with pytest.raises(ScramAuthenticationError):
        _rfc7677_server().respond(b"n,a=admin,n=user,r=abc")


@pytest.mark.parametrize("message", [b"", b"garbage", b"n,,", b"n,,n=user", b"p,,n=user,r=x", b"\xff\xfe"])
def test_scram_malformed_first_message_fails_cleanly(message):
    with pytest.raises(ScramError):
        _rfc7677_server().respond(message)


def test_plain_against_jaas_users():
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice \\"quoted\\" secret";')
    users = plain_users(jaas)
    assert users == {"admin": "admin-secret", "alice": 'alice "quoted" secret'}
    assert parse_jaas(jaas)[0].endswith("PlainLoginModule")
    assert authenticate(b"\0admin\0admin-secret", users) == "admin"
    for token in (b"\0admin\0wrong", b"\0nobody\0admin-secret"):
        with pytest.raises(PlainError, match="^Authentication failed: Invalid username or password$"):
            authenticate(token, users)
    with pytest.raises(PlainError):
        authenticate(b"no separators", users)
    with pytest.raises(ValueError):
        parse_jaas("org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"x\"")  # no ';'


def test_users_cli_stores_hashes_never_the_password(tmp_path, capsys):
    assert main(["users", "add", "--log-dirs", str(tmp_path), "--user", "alice", "--password", "alice-secret"]) == 0
    text = (tmp_path / FILE_NAME).read_text()
    assert "alice-secret" not in text
    assert set(json.loads(text)["users"]["alice"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert (tmp_path / FILE_NAME).stat().st_mode & 0o077 == 0
    main(["users", "list", "--log-dirs", str(tmp_path)])
    assert "alice: SCRAM-SHA-256 (iterations=4096), SCRAM-SHA-512 (iterations=4096)" in capsys.readouterr().out
    store = CredentialStore(tmp_path)
    cred = store.lookup("SCRAM-SHA-512", "alice")
    assert cred == make_credential("SCRAM-SHA-512", "alice-secret", 4096, cred.salt)
    assert main(["users", "delete", "--log-dirs", str(tmp_path), "--user", "alice",
                 "--mechanism", "SCRAM-SHA-512"]) == 0
    assert store.lookup("SCRAM-SHA-512", "alice") is None and store.lookup("SCRAM-SHA-256", "alice") is not None
    assert main(["users", "delete", "--log-dirs", str(tmp_path), "--user", "bob"]) == 1


def _client_final(without_proof: str, server_first: bytes, password: str = "pencil") -> bytes:
    """RFC 5802's client proof for this client-final-message-without-proof (the RFC 7677 exchange)."""
    import hashlib
    import hmac

    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(RFC7677["salt"]), 4096)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    auth = b"n=user,r=rOprNGfwEbeRWgbNEkqO," + server_first + b"," + without_proof.encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth, "sha256")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    return without_proof.encode() + b",p=" + proof


def test_scram_accepts_the_nonce_librdkafka_2_0_sends_twice():
    # librdkafka 2.0.2 (Debian's kcat) puts its own nonce before the combined one; Kafka's ScramSaslServer only
    # checks that the final nonce ends with the server-first one, so it authenticates there, and here.
    server = _rfc7677_server()
    server_first = server.respond(RFC7677["client_first"])
    nonce = server_first.split(b",")[0][2:].decode()
    server.respond(_client_final(f"c=biws,r=rOprNGfwEbeRWgbNEkqO{nonce}", server_first))
    assert server.complete
    other = _rfc7677_server()
    other.respond(RFC7677["client_first"])
    with pytest.raises(ScramError, match="Invalid client nonce"):
        other.respond(_client_final(f"c=biws,r={nonce}x", server_first))
