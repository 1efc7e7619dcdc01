"""SASL/PLAIN server side (RFC 4616) against the users of Kafka's PlainLoginModule JAAS config, sans-IO."""

from __future__ import annotations

import hmac
import re


class PlainError(Exception):
    """The exchange failed; the message is what the client is told (Kafka's PlainSaslServer wording)."""


def authenticate(token: bytes, users: dict[str, str]) -> str:
    """The authenticated username for a PLAIN token ``[authzid] NUL authcid NUL passwd``."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise PlainError("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
    try:
        authzid, username, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise PlainError("Invalid SASL/PLAIN response: not UTF-8") from None
    if not username:
        raise PlainError("Authentication failed: username not specified")
    if not password:
        raise PlainError("Authentication failed: password not specified")
    expected = users.get(username)
    # Compare in constant time whether or not the user exists.
    ok = hmac.compare_digest(password.encode(), (expected or "\0" + password).encode())
    if expected is None or not ok:
        raise PlainError("Authentication failed: Invalid username or password")
    if authzid and authzid != username:
        raise PlainError("Authentication failed: Client requested an authorization id that is different from username")
    return username


_JAAS_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def parse_jaas(value: str) -> tuple[str, dict[str, str]]:
    """Kafka's sasl.jaas.config: ``LoginModuleClass required|optional|... key="value" ...;`` as
    (login module class, options); raises ValueError on a malformed entry (Kafka refuses to start)."""
    text = value.strip()
    if not text.endswith(";"):
        raise ValueError("JAAS config entry not terminated by semi-colon")
    head = text[:-1].split(None, 2)
    if len(head) < 2 or head[1].lower() not in ("required", "requisite", "sufficient", "optional"):
        raise ValueError("JAAS config entry must be 'LoginModule flag option=value ...;'")
    options: dict[str, str] = {}
    rest = head[2] if len(head) == 3 else ""
    pos = 0
    while pos < len(rest.rstrip()):
        match = _JAAS_OPTION.match(rest, pos)
        if match is None:
            raise ValueError(f"malformed JAAS option near {rest[pos:pos + 20]!r}")
        quoted, bare = match.group(2), match.group(3)
        options[match.group(1)] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        pos = match.end()
    return head[0], options


def plain_users(jaas: str) -> dict[str, str]:
    """The user_<name>="<password>" options of a PlainLoginModule entry."""
    _, options = parse_jaas(jaas)
    return {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_")}
