"""SCRAM-SHA-256/512 server side (RFC 5802, RFC 7677), and the client side the proxy authenticates upstream
with; sans-IO: messages in, messages out.

Credentials are stored as Kafka's ScramCredential (salt, StoredKey, ServerKey, iterations), never the password.
Failures raise ScramError with Kafka's wording (ScramSaslServer): the caller turns it into
SASL_AUTHENTICATION_FAILED and closes the connection.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism type ids (DescribeUserScramCredentials, AlterUserScramCredentials).
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
# Kafka's ScramMechanism.minIterations (4096 for both) and the maximum it accepts (16384).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramError(Exception):
    """The exchange failed (Kafka's SaslException: the client is told only that its credentials were invalid)."""


class ScramAuthenticationError(ScramError):
    """A failure whose message the client is told as is (Kafka's SaslAuthenticationException)."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted_password(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials sends (the client salts and hashes the password) made into a credential."""
    digest = MECHANISMS[mechanism]
    client_key = hmac.digest(salted, b"Client Key", digest)
    server_key = hmac.digest(salted, b"Server Key", digest)
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(), server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None) -> ScramCredential:
    """Salt and hash a password as RFC 5802 section 3 does (what the broker stores instead of the password)."""
    digest = MECHANISMS[mechanism]
    salt = os.urandom(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise ScramError(f"Invalid SCRAM message: attribute {part!r}")
        out[name] = value
    return out


def _username(saslname: str) -> str:
    """RFC 5802 saslname: '=2C' is ',' and '=3D' is '='; any other '=' is invalid."""
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid username")
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange. ``lookup(username)`` returns the user's credential for this mechanism, or None."""

    def __init__(self, mechanism: str, lookup, nonce: str | None = None) -> None:
        self.digest = MECHANISMS[mechanism]
        self.mechanism = mechanism
        self.lookup = lookup
        self.server_nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self.username: str | None = None
        self.complete = False
        self._state = "first"

    def respond(self, message: bytes) -> bytes:
        """The answer to the client's next message; ``complete`` is True after the final one verified."""
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._first(text)
        if self._state == "final":
            return self._final(text)
        raise ScramError("Unexpected SCRAM message after authentication")

    def _first(self, text: str) -> bytes:
        # client-first-message = gs2-header client-first-message-bare; gs2-header = "n,[a=authzid],"
        gs2_flag, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not (sep and sep2) or gs2_flag not in ("n", "y"):
            raise ScramError("Invalid SCRAM client first message")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs:
            raise ScramError("Invalid SCRAM client first message")
        self.username = _username(attrs["n"])
        if authzid and authzid != "a=" + attrs["n"]:
            # Kafka: "Authentication failed: Client requested an authorization id that is different from username"
            raise ScramAuthenticationError("Authentication failed: Client requested an authorization id that is different from username")
        self._credential = self.lookup(self.username)
        if self._credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self._gs2_header = f"{gs2_flag},{authzid},"
        self._client_first_bare = bare
        self._nonce = attrs["r"] + self.server_nonce
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise ScramError("Invalid SCRAM client final message")
        attrs = _attributes(without_proof)
        # Kafka's ScramSaslServer checks that the nonce *ends with* the server-first nonce, not equality:
        # librdkafka before 2.x (Debian's kcat 1.7.1 on librdkafka 2.0.2) sends the client nonce twice.
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("Invalid client nonce in the final client message.")
        if attrs.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise ScramError("Invalid SCRAM client final message: channel binding mismatch")
        try:
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM client final message: proof") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        cred = self._credential
        signature = hmac.digest(cred.stored_key, auth_message, self.digest)
        if len(proof) != len(signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), cred.stored_key):
            raise ScramError("Invalid client credentials")
        self._state = "done"
        self.complete = True
        server_signature = hmac.digest(cred.server_key, auth_message, self.digest)
        return b"v=" + base64.b64encode(server_signature)


def _saslname(username: str) -> str:
    """RFC 5802 saslname: ',' and '=' escaped as '=2C' and '=3D'."""
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """The client side of one SCRAM exchange (Kafka's ScramSaslClient), for the proxy's upstream connections:
    ``first()``, then ``final(server_first)``, then ``verify(server_final)``. Failures raise ScramError."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.digest = MECHANISMS[mechanism]
        self.password = password
        self._bare = f"n={_saslname(username)},r={nonce if nonce is not None else secrets.token_urlsafe(24)}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final-message with the proof; checks the server's nonce extends ours and its iterations."""
        text = server_first.decode("utf-8", errors="replace")
        if text.startswith("e="):
            raise ScramError(f"the server refused the client's first message: {text[2:]}")
        attrs = _attributes(text)
        nonce, iterations = attrs.get("r", ""), attrs.get("i", "")
        client_nonce = self._bare.rpartition(",r=")[2]
        if not nonce.startswith(client_nonce) or nonce == client_nonce:
            raise ScramError("Invalid server nonce: does not start with the client nonce")
        if not iterations.isdigit() or not MIN_ITERATIONS <= int(iterations) <= MAX_ITERATIONS:
            raise ScramError(f"Invalid iterations {iterations!r} from the server")
        try:
            salt = base64.b64decode(attrs.get("s", ""), validate=True)
        except ValueError:
            raise ScramError("Invalid salt from the server") from None
        salted = hashlib.pbkdf2_hmac(self.digest, self.password.encode(), salt, int(iterations))
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self.digest)
        signature = hmac.digest(hashlib.new(self.digest, client_key).digest(), auth_message, self.digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = hmac.digest(hmac.digest(salted, b"Server Key", self.digest), auth_message,
                                             self.digest)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """The server proved it knows the credential (RFC 5802 ServerSignature), or ScramError."""
        text = server_final.decode("utf-8", errors="replace")
        attrs = _attributes(text) if text else {}
        if "e" in attrs:
            raise ScramError(f"the server refused the proof: {attrs['e']}")
        try:
            signature = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            signature = b""
        if not self._server_signature or not hmac.compare_digest(signature, self._server_signature):
            raise ScramError("Invalid server signature in the server final message")
