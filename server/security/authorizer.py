"""Kafka's StandardAuthorizer, sans-IO: ACL bindings, their index, and the (principal, host, operation,
resource) -> allowed decision, with Kafka's codes and rules (StandardAuthorizerData.findAclRule):

- super.users are allowed everything;
- the ACLs that apply to a resource are its LITERAL ones, the PREFIXED ones whose name starts the resource
  name, and the LITERAL '*' ones; an ACL matches a request when its principal is the request's or 'User:*',
  its host is the request's or '*', and its operation is the request's, ALL, or (ALLOW only) one implying it:
  READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS;
- a matching DENY wins over any ALLOW; an ALLOW allows; otherwise the request is denied, except that
  allow.everyone.if.no.acl.found allows it when no ACL at all applies to the resource.

Checks look up dicts by (type, name) and by (type, prefix) for the prefix lengths present: no scan of all ACLs.
"""

from __future__ import annotations

import ipaddress
import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from enum import IntEnum
from pathlib import Path

from logway.storage.checkpoints import write_atomically

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ANONYMOUS = "User:ANONYMOUS"
CLUSTER_NAME = "kafka-cluster"
ACL_FILE = "logway-acls.json"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# The pre-KRaft name, still found in old server.properties files; Logway serves both with the same semantics.
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# StandardAuthorizerData.IMPLIES_DESCRIBE / IMPLIES_DESCRIBE_CONFIGS (ALLOW ACLs only).
_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


# AclEntry.supportedOperations: the operations an *_authorized_operations bitfield covers, per resource type.
SUPPORTED_OPERATIONS: dict[int, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}


def operations_bitfield(operations) -> int:
    """Kafka's Utils.to32BitField: bit ``code`` set for each operation."""
    return sum(1 << int(op) for op in set(operations))


class AclError(ValueError):
    """A binding or filter Kafka refuses with INVALID_REQUEST."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def validate(self) -> None:
        """Kafka's AclControlManager.validateNewAcl and AclApis' resource-name checks."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or self.resource_type not in ResourceType.__members__.values():
            raise AclError(f"Invalid resourceType {self.resource_type}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"Invalid patternType {self.pattern_type}")
        if self.operation in (Operation.UNKNOWN, Operation.ANY) or self.operation not in Operation.__members__.values():
            raise AclError(f"Invalid operation {self.operation}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclError(f"Invalid permissionType {self.permission}")
        if not self.name:
            raise AclError("Invalid empty resource name")
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        kind, sep, who = self.principal.partition(":")
        if not sep or not kind or not who:
            raise AclError(f"Could not parse principal from `{self.principal}` (no colon is present separating "
                           "the principal type from the principal name)")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls/DeleteAcls filter: None (null) and ANY match everything; MATCH matches the ACLs that
    would apply to the named resource (literal, '*' and prefixes), as Kafka's ResourcePatternFilter."""

    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def validate(self) -> None:
        """The UNKNOWN elements Kafka's DescribeAclsRequest/DeleteAclsRequest refuse."""
        if PatternType.UNKNOWN in (self.pattern_type,) or self.pattern_type not in PatternType.__members__.values():
            raise AclError(f"Filter contains UNKNOWN pattern type {self.pattern_type}")
        for value, enum in ((self.resource_type, ResourceType), (self.operation, Operation), (self.permission, Permission)):
            if value == 0 or value not in enum.__members__.values():
                raise AclError(f"Filter contains UNKNOWN {enum.__name__} {value}")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation != Operation.ANY and acl.operation != self.operation:
            return False
        return self.permission == Permission.ANY or acl.permission == self.permission

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            if self.name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.name in (self.name, WILDCARD)
            return self.name.startswith(acl.name)
        if self.pattern_type != PatternType.ANY and acl.pattern_type != self.pattern_type:
            return False
        return self.name is None or acl.name == self.name


class Authorizer:
    """The ACLs with their index, super users and the no-ACL default; ``authorize`` is the decision."""

    def __init__(self, super_users: frozenset[str] = frozenset(), allow_if_no_acl: bool = False) -> None:
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self.acls: set[AclBinding] = set()
        self._literal: defaultdict[tuple[int, str], list[AclBinding]] = defaultdict(list)
        self._prefixed: defaultdict[tuple[int, str], list[AclBinding]] = defaultdict(list)
        # Per resource type, how many PREFIXED ACLs have a name of each length: a check looks up only those.
        self._prefix_lengths: defaultdict[int, defaultdict[int, int]] = defaultdict(lambda: defaultdict(int))

    # --- the decision -------------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Kafka's StandardAuthorizer.authorize for one literal resource."""
        if principal in self.super_users:
            return True
        found_acl = False
        allowed = False
        for acl in self._applicable(resource_type, name):
            found_acl = True
            result = _result(acl, principal, host, operation)
            if result is Permission.DENY:
                return False
            if result is Permission.ALLOW:
                allowed = True
        return allowed or (not found_acl and self.allow_if_no_acl)

    def _applicable(self, resource_type: int, name: str):
        yield from self._literal.get((resource_type, name), ())
        lengths = self._prefix_lengths.get(resource_type)
        if lengths:
            for length in lengths:
                if length <= len(name):
                    yield from self._prefixed.get((resource_type, name[:length]), ())
        if name != WILDCARD:
            yield from self._literal.get((resource_type, WILDCARD), ())

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """Kafka's AuthHelper.authorizedOperations: the bitfield of the supported operations allowed."""
        return operations_bitfield(op for op in SUPPORTED_OPERATIONS[resource_type]
                                   if self.authorize(principal, host, op, resource_type, name))

    def any_allowed(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: may the principal do ``operation`` on some resource of
        this type (an ALLOW on some pattern that no DENY on '*' or a covering prefix cancels)?"""
        if principal in self.super_users:
            return True
        if self.allow_if_no_acl and not any(acl.resource_type == resource_type for acl in self.acls):
            return True
        denied = [acl for acl in self.acls if acl.resource_type == resource_type
                  and _result(acl, principal, host, operation) is Permission.DENY]
        for acl in self.acls:
            if acl.resource_type != resource_type or _result(acl, principal, host, operation) is not Permission.ALLOW:
                continue
            if not any(_covers(d, acl) for d in denied):
                return True
        return False

    # --- changes ------------------------------------------------------------------------------------

    def add(self, acl: AclBinding) -> None:
        if acl in self.acls:
            return
        self.acls.add(acl)
        key = (acl.resource_type, acl.name)
        if acl.pattern_type == PatternType.PREFIXED:
            self._prefixed[key].append(acl)
            self._prefix_lengths[acl.resource_type][len(acl.name)] += 1
        else:
            self._literal[key].append(acl)

    def remove(self, acl: AclBinding) -> None:
        if acl not in self.acls:
            return
        self.acls.discard(acl)
        key = (acl.resource_type, acl.name)
        table = self._prefixed if acl.pattern_type == PatternType.PREFIXED else self._literal
        table[key].remove(acl)
        if not table[key]:
            del table[key]
        if acl.pattern_type == PatternType.PREFIXED:
            lengths = self._prefix_lengths[acl.resource_type]
            lengths[len(acl.name)] -= 1
            if not lengths[len(acl.name)]:
                del lengths[len(acl.name)]

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        return sorted((a for a in self.acls if acl_filter.matches(a)), key=_sort_key)

    # --- persistence --------------------------------------------------------------------------------

    def snapshot(self) -> str:
        """All ACLs as the file's text (taken on the event loop; written off it)."""
        return json.dumps({"version": 1, "acls": [asdict(a) for a in sorted(self.acls, key=_sort_key)]}, indent=1)

    def save(self, path: Path) -> None:
        write_atomically(path, self.snapshot())

    def load(self, path: Path) -> None:
        """The ACLs saved in ``path``, if it exists; a damaged file raises ValueError (a start-up error)."""
        if not path.exists():
            return
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            for item in data["acls"]:
                acl = AclBinding(**item)
                acl.validate()
                self.add(acl)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: cannot read the ACLs: {exc}") from None



def _result(acl: AclBinding, principal: str, host: str, operation: int) -> Permission | None:
    """StandardAuthorizerData.findResult: ALLOW, DENY, or None when the ACL does not match the request."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != Operation.ALL:
        if acl.permission == Permission.ALLOW:
            implied = _IMPLIED_BY.get(operation)  # type: ignore[call-overload]
            if (acl.operation not in implied) if implied is not None else acl.operation != operation:
                return None
        elif acl.operation != operation:
            return None
    return Permission.ALLOW if acl.permission == Permission.ALLOW else Permission.DENY


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Does a DENY pattern cancel every resource an ALLOW pattern could grant?"""
    if deny.pattern_type == PatternType.LITERAL:
        return deny.name == WILDCARD or (allow.pattern_type == PatternType.LITERAL and allow.name == deny.name)
    return allow.name.startswith(deny.name)


def _sort_key(acl: AclBinding) -> tuple:
    return (acl.resource_type, acl.name, acl.pattern_type, acl.principal, acl.host, acl.operation, acl.permission)


def parse_super_users(value: str) -> frozenset[str]:
    """super.users: principals separated by ';' (Kafka's format: User:alice;User:bob)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


def client_host(peer: str) -> str:
    """The client's address from a Connection.peer ("host:port"), as Kafka's clientAddress().getHostAddress():
    an IPv4 peer on a dual-stack listener (::ffff:10.0.0.1) is its IPv4 address, as Java's InetAddress gives it."""
    host = peer.rsplit(":", 1)[0].strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)
