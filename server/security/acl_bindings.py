"""What DescribeAcls, CreateAcls and DeleteAcls share: the request checks Kafka's request classes make, and
ACL bindings to and from their wire form."""

from __future__ import annotations

from logway.server.security.authorizer import AclBinding, AclError, AclFilter, Operation, PatternType, ResourceType
from logway.wire.protocol import MalformedRequest


def request_filter(f) -> AclFilter:
    """A DescribeAcls request or DeleteAcls filter as an AclFilter. UNKNOWN (or unknown-numbered) elements
    close the connection: Kafka's DescribeAclsRequest/DeleteAclsRequest constructors throw while the request
    is parsed, and an unparsable request closes the connection."""
    acl_filter = AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                           f.host_filter, f.operation, f.permission_type)
    try:
        acl_filter.validate()
    except AclError as exc:
        raise MalformedRequest(f"ACL filter contains UNKNOWN elements: {exc}") from None
    return acl_filter


def creation_binding(c) -> AclBinding:
    """A CreateAcls creation as a binding; UNKNOWN elements close the connection (CreateAclsRequest.validate)."""
    for value, enum in ((c.resource_type, ResourceType), (c.resource_pattern_type, PatternType),
                        (c.operation, Operation)):
        if value == 0 or value not in enum.__members__.values():
            raise MalformedRequest(f"CreatableAcls contain unknown elements: {enum.__name__} {value}")
    if c.permission_type == 0 or not 0 <= c.permission_type <= 3:
        raise MalformedRequest(f"CreatableAcls contain unknown elements: permission type {c.permission_type}")
    return AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                      c.permission_type)


def binding_fields(acl: AclBinding) -> dict:
    """The fields of an ACL in DeleteAcls' matching_acls (and DescribeAcls' resources) wire names."""
    return {"resource_type": acl.resource_type, "resource_name": acl.name, "pattern_type": acl.pattern_type,
            "principal": acl.principal, "host": acl.host, "operation": acl.operation,
            "permission_type": acl.permission}
