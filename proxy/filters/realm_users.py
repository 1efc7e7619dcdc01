"""A virtual cluster's own SCRAM users, managed through its listener: DescribeUserScramCredentials and
AlterUserScramCredentials answered by the proxy from the cluster's realm (server/security/scram_admin.py, the
broker's own answers), never forwarded: the upstream's users are the proxy's business, not a tenant's. Under
ACLs the ACL filter before this one has checked CLUSTER DESCRIBE / ALTER in the cluster's realm."""

from __future__ import annotations

from typing import Any

from logway.proxy.filters.base import Answer, ClientInfo, Filter
from logway.server.security.realm import Realm
from logway.server.security.scram_admin import (
    ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    alter_users,
    describe_users,
)

VERSIONS = {DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0), ALTER_USER_SCRAM_CREDENTIALS: (0, 0)}


class RealmUsersFilter(Filter):
    """Answers the SCRAM user APIs from one realm's credential store."""

    requests = VERSIONS

    def __init__(self, realm: Realm) -> None:
        self.realm = realm

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        store = self.realm.credentials
        if api_key == DESCRIBE_USER_SCRAM_CREDENTIALS:
            raise Answer(describe_users(store, api_version, request))
        raise Answer(alter_users(store, api_version, request))


def realm_users_factory(realm: Realm):
    """A filter factory for a virtual cluster's listener: its realm's users."""
    return lambda client: RealmUsersFilter(realm)
