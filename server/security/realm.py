"""A realm: the security state a listener's clients authenticate against (SCRAM credentials) and are authorized
in (ACLs), kept in one directory. The broker has one realm for all its listeners; the proxy can give each
virtual cluster its own, so that one tenant's users and ACLs are never another's."""

from __future__ import annotations

from pathlib import Path

import trio

from logway.server.security.authorizer import ACL_FILE, Authorizer
from logway.server.security.credentials import CredentialStore
from logway.storage.checkpoints import write_atomically


class Realm:
    """SCRAM users (``<directory>/scram-credentials.json``) and, when authorization is on, the ACLs
    (``<directory>/logway-acls.json``); None for ``authorizer`` means no authorization at all, as Kafka."""

    def __init__(self, directory: str | Path, authorizer: Authorizer | None = None) -> None:
        self.directory = Path(directory)
        self.credentials = CredentialStore(self.directory)
        self.authorizer = authorizer
        self._acl_write_lock = trio.Lock()

    @property
    def acl_path(self) -> Path:
        return self.directory / ACL_FILE

    def load_acls(self, super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        """Turn authorization on with the stored ACLs (OSError, ValueError: the file cannot be read)."""
        authorizer = Authorizer(super_users, allow_if_no_acl)
        authorizer.load(self.acl_path)
        self.authorizer = authorizer

    async def save_acls(self) -> None:
        """Persist the ACLs (after CreateAcls/DeleteAcls changed them) off the event loop, one write at a time."""
        async with self._acl_write_lock:
            assert self.authorizer is not None
            await trio.to_thread.run_sync(write_atomically, self.acl_path, self.authorizer.snapshot())
