"""Virtual clusters: a tenant sees one Kafka cluster whose names all live under its prefix (issue 11).

What is confined and how (``TenantFilter(prefix="tenant-a.")``, one per client connection):

- Topic names, group ids and transactional ids (every field kio types as ``TopicName``, ``GroupId`` or
  ``TransactionalId``, at every version) get the prefix on the way in and lose it on the way out. So do the
  untyped names: FindCoordinator keys (v0-3 ``key``, v4+ ``coordinator_keys``), config resource names
  (DescribeConfigs / AlterConfigs / IncrementalAlterConfigs, TOPIC and GROUP resources), and the regexes
  of ConsumerGroupHeartbeat v1 and ListTransactions v2 (anchored under the prefix). Every
  ``*error_message`` loses the prefix too, so "Topic 'tenant-a.x' already exists." reads "Topic 'x' ...".
- Responses only show the tenant's own things: an entry naming something outside the prefix (all-topics
  Metadata, ListGroups, ListTransactions, OffsetFetch of all topics, ...) is dropped, so other tenants'
  topics, groups and Kafka's internal topics are invisible; a tenant asking for "x" asks for "tenant-a.x".
- Topic ids (Fetch v13+, Produce v13, DeleteTopics v6, Metadata v10+, OffsetCommit/OffsetFetch v10) pass
  unchanged, but only ids of the tenant's own topics: a ``TopicIdDirectory`` shared by all connections to
  one upstream learns id -> full name from every response that carries both (Metadata, CreateTopics v7,
  DeleteTopics v6, DescribeTopicPartitions, ...). A per-connection set would not do: clients fetch on the
  partition leader's connection, not on the one where they asked for metadata. An id the directory does
  not know or that names another tenant's topic gets UNKNOWN_TOPIC_ID, which makes Kafka clients refresh
  metadata (which teaches the directory) and retry.
- A request naming a topic that is empty, "." or "..", or whose prefixed name exceeds Kafka's 249
  characters, gets INVALID_TOPIC_EXCEPTION without reaching the upstream.

A refused request is answered as a whole (``Answer``) with a response of the same API and version that
mirrors the request's entries with the error code on each (Kafka puts the error per topic/partition).

ACLs (DescribeAcls / CreateAcls / DeleteAcls) are confined the same way, whether the upstream or the
proxy's own authorizer answers them: TOPIC, GROUP and TRANSACTIONAL_ID resource names get the prefix, for
LITERAL and PREFIXED patterns alike, and a tenant's LITERAL "*" is stored as PREFIXED "<prefix>" (all of its
resources, shown back as "*"). DescribeAcls may ask broadly; the answer keeps only the tenant's resources.
DeleteAcls must name one of the tenant's resources exactly (no null name, no MATCH, no ANY type), since it
acts before anything comes back. CLUSTER, USER and DELEGATION_TOKEN ACLs get CLUSTER_AUTHORIZATION_FAILED.

Denied with CLUSTER_AUTHORIZATION_FAILED (what Kafka answers a principal without CLUSTER rights), every
version: BROKER / BROKER_LOGGER / CLIENT_METRICS config resources (broker configs carry upstream
addresses), WriteTxnMarkers, log dirs, delegation tokens, leader election and reassignments, quotas,
KRaft/controller and broker-registration APIs, features, telemetry, streams groups, ListConfigResources, and
any API key this module does not list.

Share groups (KIP-932: ShareGroupHeartbeat/Describe, ShareFetch, ShareAcknowledge, Describe/Alter/
DeleteShareGroupOffsets) are confined like consumer groups: group ids and the topics subscribed or named get the
prefix; ShareFetch and ShareAcknowledge name topics by id, which must be ids of the tenant's own topics (the
share consumer learns them from Metadata, which teaches the directory); the share.* configs of a GROUP config
resource are the tenant's group's. Passed untouched (not decoded): ApiVersions, SaslHandshake,
SaslAuthenticate, DescribeCluster, and the SCRAM user APIs, which the proxy answers from the virtual cluster's
own users (filters/realm_users.py). The proxy core should not advertise denied keys in ApiVersions
(``DENIED_API_KEYS``).

Not rewritten: opaque group protocol bytes (JoinGroup/SyncGroup member metadata and assignments carry the
names the tenant's own clients wrote, unprefixed, which stays consistent because only that tenant's members
read them).
"""

from __future__ import annotations

import dataclasses
import re
import typing
import uuid
from functools import cache
from typing import Any

from kio.schema.index import api_key_map
from kio.schema.types import GroupId, TopicName, TransactionalId

from logway.proxy.filters.base import Answer, ClientInfo, Filter, every_version
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, field_entity, response_type

MAX_TOPIC_LENGTH = 249  # Kafka's Topic.MAX_NAME_LENGTH

# Config resource types (ConfigResource.Type).
_TOPIC_RESOURCE, _GROUP_RESOURCE = 2, 32
# ACL resource types (ResourceType) a tenant owns, and ACL pattern types (PatternType).
_ACL_TENANT_TYPES = frozenset({2, 3, 5})  # TOPIC, GROUP, TRANSACTIONAL_ID
_ACL_ANY_TYPE = 1
_ANY, _MATCH, _LITERAL, _PREFIXED = 1, 2, 3, 4
_WILDCARD = "*"

PASS_THROUGH_API_KEYS = frozenset({17, 18, 36, 50, 51, 60})
"""SaslHandshake, ApiVersions, SaslAuthenticate, DescribeCluster: nothing in them names a tenant's things; the SCRAM
user APIs (50, 51): a virtual cluster's own users, answered by the proxy (filters/realm_users.py)."""

CONFINED_API_KEYS = frozenset(
    {
        0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 20, 21, 22, 23, 24, 25, 26, 28, 29, 30, 31, 32, 33,
        37, 42, 44, 47, 61, 65, 66, 68, 69, 75, 76, 77, 78, 79, 90, 91, 92,
    }
)  # fmt: skip
"""The APIs this filter rewrites and confines, at every version kio knows."""

DENIED_API_KEYS = frozenset(api_key_map) - CONFINED_API_KEYS - PASS_THROUGH_API_KEYS
"""Every other API kio knows: answered with CLUSTER_AUTHORIZATION_FAILED."""

_ZERO_ID = uuid.UUID(int=0)
DESCRIBE_TOPIC_PARTITIONS = 75
_RESPONSE_HOOKS = frozenset({10, 29, 31, 32, 33, 44, 69})  # strip untyped names after the generic walk


def check_prefixes(prefixes: typing.Iterable[str]) -> None:
    """Raise ValueError unless the virtual clusters' prefixes are disjoint namespaces.

    With "team." and "team.b.", tenant "team." could name "b.x", which is tenant "team.b."'s "x": no prefix
    may start with another (the proxy's configuration must call this with every ``topic.prefix``).
    """
    ordered = sorted(prefixes)
    for shorter, longer in zip(ordered, ordered[1:], strict=False):
        if longer.startswith(shorter):
            raise ValueError(f"topic.prefix {longer!r} starts with topic.prefix {shorter!r}: tenants would overlap")


class TopicIdDirectory:
    """Topic id -> full upstream topic name, learned from upstream responses; one per upstream cluster.

    Only upstream responses feed it (never client input), so it is bounded by the upstream's topic count.
    """

    def __init__(self) -> None:
        self._names: dict[uuid.UUID, str] = {}

    def learn(self, topic_id: uuid.UUID, name: str) -> None:
        if topic_id != _ZERO_ID and name:
            self._names[topic_id] = name

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return self._names.get(topic_id)

    def learn_metadata(self, response: Any) -> None:
        """Every topic id and name of a Metadata response (v10+ carries both)."""
        for t in response.topics:
            if getattr(t, "topic_id", None) is not None and t.name:
                self.learn(t.topic_id, t.name)


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_DROP = object()  # a response entry naming something outside the prefix


class TenantFilter(Filter):
    """One tenant's view of the upstream: everything it names is under ``prefix``; see the module doc."""

    requests = every_version(CONFINED_API_KEYS | DENIED_API_KEYS)
    responses = every_version(CONFINED_API_KEYS)  # narrowed by version: handles_response

    def __init__(self, prefix: str, topic_ids: TopicIdDirectory | None = None) -> None:
        if not prefix or len(prefix) >= MAX_TOPIC_LENGTH or not _LEGAL_TOPIC.fullmatch(prefix):
            raise ValueError(f"topic.prefix {prefix!r} must be 1-248 characters of [a-zA-Z0-9._-]")
        self.prefix = prefix
        self.topic_ids = topic_ids if topic_ids is not None else TopicIdDirectory()
        self._escaped = re.escape(prefix)

    # --- the Filter protocol ------------------------------------------------------------------------

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        if api_key not in CONFINED_API_KEYS:
            name = api_key_map.get(api_key, str(api_key))
            raise Answer(
                error_response(
                    api_key, api_version, request, ErrorCode.cluster_authorization_failed,
                    f"{name} is not available through a virtual cluster",
                )
            )  # fmt: skip
        try:
            names_in = self._in_keeping_ids if api_key == 68 else self._in
            request = _walk(self._before_request(api_key, api_version, request), names_in)
            return self._listing_from_prefix(request) if api_key == DESCRIBE_TOPIC_PARTITIONS else request
        except _Refused as refused:  # answered in the tenant's own names: mirror the request as it came
            raise Answer(error_response(api_key, api_version, request, refused.code, refused.message)) from None

    def handles_response(self, api_key: int, api_version: int) -> bool:
        """False when the response of this API and version carries nothing to strip or filter (Fetch v13+:
        topic ids and records only), so the proxy may forward it undecoded."""
        if not super().handles_response(api_key, api_version):
            return False
        return api_key in _RESPONSE_HOOKS or _carries_names(response_type(api_key, api_version))

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        response = _walk(response, self._out, self.topic_ids.learn)
        return self._after_response(api_key, response)

    # --- names on the way in ------------------------------------------------------------------------

    def _in(self, kind: str, value: Any) -> Any:
        if value is None:
            return None
        if kind == "topic":
            return self._topic_in(value)
        if kind in ("group", "txn"):
            return self.prefix + value
        if kind == "topic_id":
            self._check_topic_id(value)
        return value

    def _in_keeping_ids(self, kind: str, value: Any) -> Any:
        """ConsumerGroupHeartbeat's owned partitions: ids the group coordinator assigned to this tenant's
        group and checks against its own assignment; refusing them after a proxy restart (empty directory)
        would be fatal to the consumer, and reading still needs a Fetch, where ids are checked."""
        return value if kind == "topic_id" else self._in(kind, value)

    def _topic_in(self, name: str) -> str:
        if name in ("", ".", ".."):
            raise _Refused(ErrorCode.invalid_topic_exception, f"Topic name {name!r} is illegal")
        full = self.prefix + name
        if len(full) > MAX_TOPIC_LENGTH:
            raise _Refused(
                ErrorCode.invalid_topic_exception,
                f"Topic name is illegal, it can't be longer than {MAX_TOPIC_LENGTH - len(self.prefix)} characters",
            )
        return full

    def _check_topic_id(self, topic_id: uuid.UUID) -> None:
        if topic_id == _ZERO_ID:
            return  # "no id": the entry names its topic instead
        name = self.topic_ids.name_of(topic_id)
        if name is None or not name.startswith(self.prefix):
            # Kafka answers an id it does not know with UNKNOWN_TOPIC_ID; another tenant's id is unknown here.
            raise _Refused(ErrorCode.unknown_topic_id, "This server does not host this topic ID.")

    def _before_request(self, api_key: int, version: int, request: Any) -> Any:
        """The untyped names: FindCoordinator keys, config resources, regexes."""
        if api_key == 10:
            if version >= 4:
                return dataclasses.replace(
                    request, coordinator_keys=tuple(self.prefix + k for k in request.coordinator_keys)
                )
            return dataclasses.replace(request, key=self.prefix + request.key)
        if api_key in (32, 33, 44):
            return dataclasses.replace(request, resources=tuple(self._resource_in(r) for r in request.resources))
        if api_key == 29:
            return self._acl_filter_in(request, refuse_broad=False)
        if api_key == 30:
            return dataclasses.replace(request, creations=tuple(map(self._acl_creation_in, request.creations)))
        if api_key == 31:
            return dataclasses.replace(
                request, filters=tuple(self._acl_filter_in(f, refuse_broad=True) for f in request.filters)
            )
        if api_key == 68 and version >= 1 and request.subscribed_topic_regex:
            regex = self._anchor(request.subscribed_topic_regex, ErrorCode.invalid_regular_expression)
            return dataclasses.replace(request, subscribed_topic_regex=regex)
        if api_key == 66 and version >= 2 and request.transactional_id_pattern:
            pattern = self._anchor(request.transactional_id_pattern, ErrorCode.invalid_request)
            return dataclasses.replace(request, transactional_id_pattern=pattern)
        return request

    def _listing_from_prefix(self, request: Any) -> Any:
        """DescribeTopicPartitions of every topic from the start: from the first name under the prefix (Kafka lists
        names in order from the cursor's, existing or not), so a page is never spent on other tenants' topics;
        the listing ends where the tenant's names do (``_after_response`` drops a cursor past them)."""
        if request.topics or request.cursor is not None:
            return request
        cursor = field_entity(type(request), "cursor")(topic_name=self.prefix, partition_index=0)
        return dataclasses.replace(request, cursor=cursor)

    def _resource_in(self, resource: Any) -> Any:
        if resource.resource_type == _TOPIC_RESOURCE:
            return dataclasses.replace(resource, resource_name=self._topic_in(resource.resource_name))
        if resource.resource_type == _GROUP_RESOURCE:
            return dataclasses.replace(resource, resource_name=self.prefix + resource.resource_name)
        # Broker, broker-logger and client-metrics configs belong to the operator (and broker configs carry
        # the upstream's addresses): Kafka answers a principal without CLUSTER rights this way.
        raise _Refused(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")

    def _acl_name_in(self, name: str, pattern: int) -> tuple[str, int]:
        """A tenant's ACL resource upstream: LITERAL "*" (all its topics/groups/ids) is PREFIXED by the prefix."""
        if pattern == _LITERAL and name == _WILDCARD:
            return self.prefix, _PREFIXED
        return self.prefix + name, pattern

    def _acl_creation_in(self, creation: Any) -> Any:
        if creation.resource_type not in _ACL_TENANT_TYPES:
            raise _Refused(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
        if creation.resource_pattern_type not in (_LITERAL, _PREFIXED):
            raise _Refused(ErrorCode.invalid_request, "Invalid resource pattern type for an ACL binding")
        name, pattern = self._acl_name_in(creation.resource_name, creation.resource_pattern_type)
        return dataclasses.replace(creation, resource_name=name, resource_pattern_type=pattern)

    def _acl_filter_in(self, acl_filter: Any, refuse_broad: bool) -> Any:
        """DescribeAcls may ask broadly (ANY type, any name, MATCH): the answer is filtered on the way out.
        DeleteAcls acts before anything comes back, so it must name one of the tenant's resources exactly."""
        kind, name, pattern = (
            acl_filter.resource_type_filter,
            acl_filter.resource_name_filter,
            acl_filter.pattern_type_filter,
        )
        broad_type = kind == _ACL_ANY_TYPE and not refuse_broad
        if not broad_type and kind not in _ACL_TENANT_TYPES:
            raise _Refused(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
        if refuse_broad and (name is None or pattern not in (_ANY, _LITERAL, _PREFIXED)):
            raise _Refused(
                ErrorCode.cluster_authorization_failed,
                "A virtual cluster deletes ACLs of one named resource (LITERAL, PREFIXED or ANY pattern).",
            )
        if name is None:
            return acl_filter
        name, pattern = self._acl_name_in(name, pattern)
        return dataclasses.replace(acl_filter, resource_name_filter=name, pattern_type_filter=pattern)

    def _anchor(self, regex: str, code: ErrorCode) -> str:
        """``^prefix(?:regex)``: a match can only be a name under the prefix. Inline flags that open the regex
        (``(?i)...``) become the group's own (``^prefix(?i:...)``): Java and RE2 take flags anywhere, but Python's
        re (a Logway upstream's) only at the start, and scoped there they cannot loosen the prefix's match.

        Only regexes whose group structure is unambiguous are taken (no character classes, ``\\Q..\\E`` or
        comments, balanced parentheses): otherwise a ``)`` could close the wrapper and match outside it.
        """
        if not _regex_is_wrappable(regex):
            raise _Refused(code, "This regular expression is not supported through a virtual cluster.")
        flags, rest = _leading_flags(regex.removeprefix("^"))
        return f"^{self._escaped}(?{flags}:{rest.removeprefix('^')})"

    # --- names on the way out -----------------------------------------------------------------------

    def _out(self, kind: str, value: Any) -> Any:
        if kind in ("topic", "group", "txn"):
            if not value:
                return value
            if value.startswith(self.prefix):
                return value[len(self.prefix) :]
            return _DROP
        if kind == "message":
            return value.replace(self.prefix, "") if value else value
        return value

    def _after_response(self, api_key: int, response: Any) -> Any:
        if api_key == 10 and hasattr(response, "coordinators"):
            kept = [c for c in response.coordinators if c.key.startswith(self.prefix)]
            stripped = tuple(dataclasses.replace(c, key=c.key[len(self.prefix) :]) for c in kept)
            return dataclasses.replace(response, coordinators=stripped)
        if api_key in (32, 33, 44):
            field = "results" if api_key == 32 else "responses"
            kept = _kept(map(self._resource_out, getattr(response, field)))
            return dataclasses.replace(response, **{field: kept})
        if api_key == 29:
            return dataclasses.replace(response, resources=_kept(map(self._acl_resource_out, response.resources)))
        if api_key == 31:
            results = tuple(
                dataclasses.replace(r, matching_acls=_kept(map(self._acl_resource_out, r.matching_acls)))
                for r in response.filter_results
            )
            return dataclasses.replace(response, filter_results=results)
        if api_key == 69:
            groups = tuple(
                dataclasses.replace(g, members=tuple(map(self._unanchor, g.members))) for g in response.groups
            )
            return dataclasses.replace(response, groups=groups)
        return response

    def _resource_out(self, resource: Any) -> Any:
        if resource.resource_type not in (_TOPIC_RESOURCE, _GROUP_RESOURCE):
            return None  # never asked for (refused on the way in): not the tenant's to see
        if not resource.resource_name.startswith(self.prefix):
            return None
        return dataclasses.replace(resource, resource_name=resource.resource_name[len(self.prefix) :])

    def _acl_resource_out(self, resource: Any) -> Any:
        """The tenant's view of an ACL resource upstream, or None when it is not the tenant's (other tenants',
        the cluster's, the operator's wildcard and broader prefixes)."""
        name, pattern = resource.resource_name, resource.pattern_type
        if resource.resource_type not in _ACL_TENANT_TYPES or not name.startswith(self.prefix):
            return None
        if pattern == _PREFIXED and name == self.prefix:
            return dataclasses.replace(resource, resource_name=_WILDCARD, pattern_type=_LITERAL)
        return dataclasses.replace(resource, resource_name=name[len(self.prefix) :])

    def _unanchor(self, member: Any) -> Any:
        """A regex as the tenant wrote it (``_anchor`` undone)."""
        regex = getattr(member, "subscribed_topic_regex", None)
        match = re.fullmatch(rf"\^{re.escape(self._escaped)}\(\?([a-zA-Z]*):(.*)\)", regex or "", re.S)
        if match is None:
            return member
        flags, rest = match.groups()
        return dataclasses.replace(member, subscribed_topic_regex=f"(?{flags}){rest}" if flags else rest)


def _kept(items: typing.Iterable[Any]) -> tuple:
    return tuple(item for item in items if item is not None)


_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


_FLAGS = re.compile(r"\(\?([a-zA-Z]+)\)")


def _leading_flags(regex: str) -> tuple[str, str]:
    """The inline flags that open ``regex`` (``(?i)``) and the rest."""
    match = _FLAGS.match(regex)
    return (match.group(1), regex[match.end():]) if match else ("", regex)


def _regex_is_wrappable(regex: str) -> bool:
    if any(token in regex for token in ("[", "]", "#", "\\Q", "\\E")):
        return False
    depth = 0
    escaped = False
    for char in regex:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0 and not escaped


# --- the schema walk: which fields of a kio type carry names, ids, messages -------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Slot:
    name: str
    kind: str  # "topic" | "group" | "txn" | "topic_id" | "message" | "entity"
    many: bool
    entity: type | None = None


def _leaves(hint: Any) -> set[Any]:
    args = typing.get_args(hint)
    if not args:
        return {hint}
    out: set[Any] = set()
    for arg in args:
        if arg is not Ellipsis:
            out |= _leaves(arg)
    return out


_KINDS = {TopicName: "topic", GroupId: "group", TransactionalId: "txn"}


@cache
def _slots(cls: type) -> tuple[_Slot, ...]:
    """The fields of ``cls`` that carry a name, a topic id or an error message, or nest entities that do."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        leaves = _leaves(hint)
        many = typing.get_origin(hint) is tuple or any(typing.get_origin(a) is tuple for a in typing.get_args(hint))
        entity = next((leaf for leaf in leaves if dataclasses.is_dataclass(leaf)), None)
        kind = next((_KINDS[leaf] for leaf in leaves if leaf in _KINDS), None)
        if entity is not None:
            if _slots(entity):
                out.append(_Slot(f.name, "entity", many, entity))
        elif kind is not None:
            out.append(_Slot(f.name, kind, many))
        elif f.name == "topic_id" and uuid.UUID in leaves:
            out.append(_Slot(f.name, "topic_id", many))
        elif f.name.endswith("error_message") and str in leaves:
            out.append(_Slot(f.name, "message", many))
    return tuple(out)


@cache
def _carries_names(cls: type) -> bool:
    """Whether a name or an error message can appear anywhere in ``cls`` (topic ids alone do not count)."""
    return any(
        _carries_names(slot.entity) if slot.kind == "entity" else slot.kind != "topic_id" for slot in _slots(cls)
    )


def _walk(
    obj: Any,
    fn: typing.Callable[[str, Any], Any],
    learn: typing.Callable[[uuid.UUID, str], None] | None = None,
) -> Any:
    """``obj`` with ``fn(kind, value)`` applied to every name, id and message in it.

    ``learn(topic_id, name)`` is told every entry that carries both, before ``fn`` changes the name.

    ``fn`` returning ``_DROP`` for a name removes the entry that carries it from its array (and the name
    from an array of names); a single nested entry with such a name becomes None.
    """
    changes = {}
    name = topic_id = None
    for slot in _slots(type(obj)):
        value = getattr(obj, slot.name)
        if slot.kind == "topic" and not slot.many:
            name = value
        elif slot.kind == "topic_id" and not slot.many:
            topic_id = value
        if value is None:
            continue
        if slot.kind == "entity":
            if slot.many:
                new = tuple(item for item in (_walk(v, fn, learn) for v in value) if item is not _DROP)
            else:
                new = _walk(value, fn, learn)
                new = None if new is _DROP else new
        elif slot.many:
            new = tuple(item for item in (fn(slot.kind, v) for v in value) if item is not _DROP)
        else:
            new = fn(slot.kind, value)
            if new is _DROP:
                return _DROP
        if new is not value:
            changes[slot.name] = new
    if learn is not None and name and topic_id is not None:
        learn(topic_id, name)  # the upstream's full name, before it is stripped
    return dataclasses.replace(obj, **changes) if changes else obj


# --- answering without the upstream: a response that mirrors the request's entries ----------------

_ARRAY_ALIASES = {
    "responses": ("topic_data", "topics", "resources", "topic_names"),
    "partition_responses": ("partition_data",),
    "results": ("topics", "resources", "groups_names", "creations", "filters"),
    "results_by_topic_v3_and_below": ("v3_and_below_topics",),
    "results_by_transaction": ("transactions",),
    "topic_results": ("topics",),
    "results_by_partition": ("partitions",),
    "coordinators": ("coordinator_keys",),
    "filter_results": ("filters",),
    "groups": ("group_ids",),
    "transaction_states": ("transactional_ids",),
    "partitions": ("partition_indexes",),
}
_IDENTITY = {
    "name": ("name", "topic", "topic_name"),
    "topic": ("topic", "name"),
    "topic_name": ("topic_name", "name", "topic"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition", "index"),
    "index": ("index", "partition_index"),
    "group_id": ("group_id",),
    "key": ("key",),
    "transactional_id": ("transactional_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
}


def error_response(api_key: int, version: int, request: Any, code: ErrorCode, message: str | None = None) -> Any:
    """A response of ``api_key``/``version`` that gives ``code`` for every entry ``request`` names.

    The error goes on the innermost entries (topics, partitions, groups, resources), as Kafka reports
    per-entry errors; a response without entries carries it at the top. Built by wire.protocol.build, so every
    field the request does not give (or gives as null where the response may not hold one, such as a topic
    named only by its id) takes the default Kafka's error responses have.
    """
    data, _ = _mirror(response_type(api_key, version), request, code, message)
    return build(response_type(api_key, version), {"throttle_time": 0, **data})


def _mirror(cls: type, source: Any, code: ErrorCode, message: str | None) -> tuple[dict[str, Any], bool]:
    """The fields of ``cls`` the request gives (its names and indexes), its entries mirrored, the error code on
    the innermost ones; and whether the error landed somewhere inside."""
    hints = typing.get_type_hints(cls)
    data: dict[str, Any] = {}
    has_entries = False
    error_fields = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        entity = next((leaf for leaf in _leaves(hint) if dataclasses.is_dataclass(leaf)), None)
        is_array = typing.get_origin(hint) is tuple or any(typing.get_origin(a) is tuple for a in typing.get_args(hint))
        if f.metadata.get("kafka_type") == "error_code":
            error_fields.append(f.name)
        elif f.name.endswith("error_message"):
            data[f.name] = message
        elif entity is not None and is_array:
            mirrored = [_mirror(entity, _as_source(item), code, message) for item in _source_array(source, f.name)]
            has_entries = has_entries or any(carried for _, carried in mirrored)
            data[f.name] = [item for item, _ in mirrored]
        elif entity is None and not is_array:
            found, value = _source_value(source, f.name)
            if found:
                data[f.name] = value
    for name in error_fields:
        data[name] = ErrorCode.none if has_entries else code
    return data, has_entries or bool(error_fields)


def _as_source(item: Any) -> Any:
    if dataclasses.is_dataclass(item):
        return item
    if isinstance(item, str):
        return {"name": item, "group_id": item, "key": item, "transactional_id": item}
    return {"partition_index": item, "index": item}


def _get(source: Any, name: str) -> tuple[bool, Any]:
    if source is None:
        return False, None
    if isinstance(source, dict):
        return name in source, source.get(name)
    return hasattr(source, name), getattr(source, name, None)


def _source_array(source: Any, name: str) -> tuple:
    for candidate in (name, *_ARRAY_ALIASES.get(name, ())):
        found, value = _get(source, candidate)
        if found and isinstance(value, tuple):
            return value
    return ()


def _source_value(source: Any, name: str) -> tuple[bool, Any]:
    for candidate in _IDENTITY.get(name, ()):
        found, value = _get(source, candidate)
        if found:
            return True, value
    return False, None
