"""SCRAM users stored salted and hashed (never the password) in the first log dir, as Kafka keeps them in
its metadata log; written offline by `logway users`, re-read by the broker when the file changes."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from logway.server.security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential, make_credential
from logway.storage import fs
from logway.storage.checkpoints import write_atomically

FILE_NAME = "scram-credentials.json"


class CredentialStore:
    """{user: {mechanism: ScramCredential}} backed by ``<log dir>/scram-credentials.json``."""

    def __init__(self, log_dir: str | Path) -> None:
        self.path = Path(log_dir) / FILE_NAME
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """The stored users, re-read if the file changed since the last call (one stat otherwise)."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._users = None, {}
            return self._users
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._users = _decode(json.loads(self.path.read_text()))
            self._stamp = stamp
        return self._users

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.users().get(user, {}).get(mechanism)

    def set(self, user: str, mechanism: str, password: str, iterations: int = MIN_ITERATIONS) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r} (expected one of {', '.join(MECHANISMS)})")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
        users = dict(self.users())
        users[user] = {**users.get(user, {}), mechanism: make_credential(mechanism, password, iterations)}
        self._write(users)

    def delete(self, user: str, mechanism: str | None = None) -> bool:
        users = dict(self.users())
        if user not in users or (mechanism is not None and mechanism not in users[user]):
            return False
        if mechanism is None:
            del users[user]
        else:
            users[user] = {m: c for m, c in users[user].items() if m != mechanism}
            if not users[user]:
                del users[user]
        self._write(users)
        return True

    def alter(self, upsertions: dict[tuple[str, str], ScramCredential], deletions: set[tuple[str, str]]) -> None:
        """Apply (user, mechanism) upsertions and deletions in one write (AlterUserScramCredentials)."""
        users = {user: dict(mechs) for user, mechs in self.users().items()}
        for user, mechanism in deletions:
            users.get(user, {}).pop(mechanism, None)
        for (user, mechanism), credential in upsertions.items():
            users.setdefault(user, {})[mechanism] = credential
        self._write({user: mechs for user, mechs in users.items() if mechs})

    def _write(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """Atomically (a temporary file renamed over the old one), readable by the owner only."""
        fs.make_dirs(self.path.parent)
        write_atomically(self.path, json.dumps(_encode(users), indent=1, sort_keys=True), mode=0o600)
        self._stamp = None


def _encode(users: dict[str, dict[str, ScramCredential]]) -> dict:
    b64 = base64.b64encode
    return {"version": 1, "users": {
        user: {mech: {"salt": b64(c.salt).decode(), "stored_key": b64(c.stored_key).decode(),
                      "server_key": b64(c.server_key).decode(), "iterations": c.iterations}
               for mech, c in mechs.items()}
        for user, mechs in users.items()}}


def _decode(data: dict) -> dict[str, dict[str, ScramCredential]]:
    b64 = base64.b64decode
    return {user: {mech: ScramCredential(b64(c["salt"]), b64(c["stored_key"]), b64(c["server_key"]), int(c["iterations"]))
                   for mech, c in mechs.items()}
            for user, mechs in data.get("users", {}).items()}
