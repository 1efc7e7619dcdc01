"""The filter chain (proxy/chain.py, proxy/filters/base.py), sans-IO: a request is decoded only for the filters
that declared it, at the versions they declared; a response only for those that declared it and still want it;
an answer goes back through the filters before the one that gave it; and the proxy's chain is in the order its
docstring gives (tenant, ACLs, the listener's own, address rewriting, metrics)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import trio

from logway.proxy.chain import Answered, FilterChain
from logway.proxy.config import ProxyConfig
from logway.proxy.filters.acl import AclFilter
from logway.proxy.filters.address_rewrite import AddressRewrite
from logway.proxy.filters.base import Answer, ClientInfo, Filter
from logway.proxy.filters.client_metrics import ClientMetrics
from logway.proxy.filters.ownership import OwnershipFilter
from logway.proxy.filters.realm_users import RealmUsersFilter
from logway.proxy.filters.tenant import TenantFilter
from logway.proxy.frames import decode_response, encode_request, encode_response_frame, read_request_header
from logway.proxy.server import Proxy
from logway.wire.protocol import RequestHeader, build, request_type, response_type

CLIENT = ClientInfo(client_id="app")
METADATA, FIND_COORDINATOR = 3, 10


class Recorder(Filter):
    """Declares what it is given and records every call."""

    def __init__(self, name: str, calls: list, requests=None, responses=None, needs=True, answer=None) -> None:
        self.name, self.calls, self.needs, self.answer = name, calls, needs, answer
        self.requests = requests or {}
        self.responses = responses or {}

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        self.calls.append((self.name, "request", api_version))
        if self.answer is not None:
            raise Answer(self.answer)
        return dataclasses.replace(request, allow_auto_topic_creation=False)

    def needs_response(self, api_key: int, api_version: int, request: Any) -> bool:
        return self.needs

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        self.calls.append((self.name, "response", request is None))
        return dataclasses.replace(response, cluster_id=f"{response.cluster_id}<{self.name}")


def _metadata_frame(version: int) -> tuple[RequestHeader, memoryview, int]:
    header = RequestHeader(METADATA, version, 42, "app")
    request = build(request_type(METADATA, version), {"topics": None, "allow_auto_topic_creation": True,
                                                     "include_topic_authorized_operations": False})
    frame = memoryview(bytearray(encode_request(header, request)))
    return header, frame, read_request_header(frame)[1]


def _response_frame(version: int, cluster_id: str = "c") -> bytearray:
    body = build(response_type(METADATA, version), {"brokers": [], "cluster_id": cluster_id, "controller_id": 1,
                                                    "topics": [], "throttle_time": 0})
    return bytearray(encode_response_frame(METADATA, version, 7, body))


def test_only_the_declared_requests_and_versions_are_decoded() -> None:
    calls: list = []
    chain = FilterChain([Recorder("old", calls, requests={METADATA: (0, 8)}),
                         Recorder("new", calls, requests={METADATA: (9, 12)})], CLIENT)
    assert not chain.plan(FIND_COORDINATOR, 4).decodes_request  # nobody declared it: bytes only
    header, frame, pos = _metadata_frame(12)
    plan = chain.plan(METADATA, 12)
    out, seen = trio.run(chain.request, header, frame, pos, 99, plan)
    assert calls == [("new", "request", 12)] and seen == []
    assert read_request_header(out)[0].correlation_id == 99  # re-encoded with the proxy's upstream id
    assert chain.plan(METADATA, 12) is plan  # asked once per API key and version


def test_responses_go_through_the_filters_that_want_them_last_first() -> None:
    calls: list = []
    both = {METADATA: (0, 12)}
    chain = FilterChain([Recorder("a", calls, requests=both, responses=both),
                         Recorder("b", calls, requests=both, responses=both, needs=False),
                         Recorder("c", calls, responses=both)], CLIENT)
    header, frame, pos = _metadata_frame(12)
    _, seen = trio.run(chain.request, header, frame, pos, 99, chain.plan(METADATA, 12))
    assert [f.name for f, _ in seen] == ["a", "c"]  # b did not need this one
    assert seen[0][1].allow_auto_topic_creation is False  # a gets the request it returned
    calls.clear()
    frame = chain.response_frame(METADATA, 12, seen, _response_frame(12), 42)
    assert calls == [("c", "response", False), ("a", "response", False)]
    assert decode_response(METADATA, 12, bytes(frame)).cluster_id == "c<c<a"
    # a response-only filter, when no filter decodes the request: its on_response gets no request
    chain = FilterChain([Recorder("d", calls, responses=both)], CLIENT)
    plan = chain.plan(METADATA, 12)
    assert not plan.decodes_request and [f.name for f, _ in plan.undecoded] == ["d"]
    calls.clear()
    chain.response_frame(METADATA, 12, plan.undecoded, _response_frame(12), 42)
    assert calls == [("d", "response", True)]


def test_an_answer_goes_back_through_the_filters_before_the_one_that_gave_it() -> None:
    calls: list = []
    both = {METADATA: (0, 12)}
    answer = build(response_type(METADATA, 12), {"brokers": [], "cluster_id": "proxy", "controller_id": -1,
                                                 "topics": [], "throttle_time": 0})
    chain = FilterChain([Recorder("first", calls, requests=both, responses=both),
                         Recorder("answers", calls, requests=both, responses=both, answer=answer),
                         Recorder("never", calls, requests=both, responses=both)], CLIENT)
    header, frame, pos = _metadata_frame(12)
    with pytest.raises(Answered) as answered:
        trio.run(chain.request, header, frame, pos, 99, chain.plan(METADATA, 12))
    assert calls == [("first", "request", 12), ("answers", "request", 12), ("first", "response", False)]
    response = decode_response(METADATA, 12, answered.value.frame)
    assert response.cluster_id == "proxy<first"
    assert int.from_bytes(answered.value.frame[:4], "big") == 42  # the client's correlation id


def test_the_proxys_chain_is_tenant_acls_own_addresses_metrics(tmp_path) -> None:
    config = ProxyConfig({
        "proxy.upstream.bootstrap.servers": "127.0.0.1:1", "listeners": "TENANT://127.0.0.1:19092",
        "listener.security.protocol.map": "TENANT:PLAINTEXT", "inter.broker.listener.name": "TENANT",
        "log.dirs": str(tmp_path), "metrics.port": "19999",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "proxy.virtual.clusters": "a", "proxy.virtual.cluster.a.listener": "TENANT",
        "proxy.virtual.cluster.a.topic.prefix": "tenant-a."})
    own = Filter()
    proxy = Proxy(config, {"TENANT": [lambda client: own]})
    chain = [factory(CLIENT) for factory in proxy.filter_chain("TENANT")]
    assert [type(f) for f in chain] == [TenantFilter, AclFilter, OwnershipFilter, RealmUsersFilter, Filter,
                                        AddressRewrite, ClientMetrics]
    assert chain[4] is own
