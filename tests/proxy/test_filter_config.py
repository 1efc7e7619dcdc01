"""Named filters in the proxy's configuration (proxy.filters, proxy.filter.<name>.*, a virtual cluster's
filters): the chain they make, and the one-line errors for what cannot work."""

from __future__ import annotations

import pytest

from logway.proxy.config import ProxyConfig
from logway.proxy.filter_config import FilterSettings, filter_type
from logway.proxy.filters.base import ClientInfo, Filter
from logway.proxy.server import Proxy
from logway.server.config import ConfigError

BASE = {"proxy.upstream.bootstrap.servers": "127.0.0.1:9", "listeners": "A://127.0.0.1:19192,B://127.0.0.1:19292",
        "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
        "proxy.virtual.clusters": "a", "proxy.virtual.cluster.a.listener": "A",
        "proxy.virtual.cluster.a.topic.prefix": "tenant-a."}


class Tagged(Filter):
    def __init__(self, settings: FilterSettings) -> None:
        self.settings = settings


@filter_type("test-tag", {"label": "", "rate": "0.5"})
def _build(settings: FilterSettings):
    settings.float("rate", 0.0, 1.0)  # a bad value is a ConfigError naming the key
    return lambda client: Tagged(settings)


def _chain(props: dict[str, str], listener: str, tmp_path) -> list[Filter]:
    proxy = Proxy(ProxyConfig({**BASE, "log.dirs": str(tmp_path), **props}))
    return [factory(None) for factory in proxy.filter_chain(listener)]


def test_named_filters_run_in_the_order_given_then_the_virtual_clusters_own(tmp_path):
    props = {"proxy.filters": "second,first", "proxy.filter.first.type": "test-tag",
             "proxy.filter.first.label": "one", "proxy.filter.second.type": "test-tag",
             "proxy.virtual.cluster.a.filters": "own", "proxy.filter.own.type": "test-tag"}
    tagged = [f.settings.name for f in _chain(props, "A", tmp_path) if isinstance(f, Tagged)]
    assert tagged == ["second", "first", "own"]
    outside = [f.settings.name for f in _chain(props, "B", tmp_path) if isinstance(f, Tagged)]
    assert outside == ["second", "first"]  # B serves no virtual cluster: only the proxy's chain


def test_settings_are_the_types_defaults_with_the_given_keys_on_top(tmp_path):
    props = {"proxy.filters": "t", "proxy.filter.t.type": "test-tag", "proxy.filter.t.label": "x"}
    (tagged,) = [f for f in _chain(props, "B", tmp_path) if isinstance(f, Tagged)]
    assert dict(tagged.settings.values) == {"label": "x", "rate": "0.5"}


def test_a_tenants_client_sees_names_without_its_prefix():
    tenant, plain = ClientInfo(topic_prefix="tenant-a."), ClientInfo()
    assert (tenant.visible("tenant-a.orders"), tenant.visible("tenant-b.orders")) == ("orders", None)
    assert plain.visible("tenant-a.orders") == "tenant-a.orders"


@pytest.mark.parametrize(("props", "message"), [
    ({"proxy.filters": "x"}, "proxy.filter.x.type='': expected one of"),
    ({"proxy.filters": "x", "proxy.filter.x.type": "nope"}, "proxy.filter.x.type='nope': expected one of"),
    ({"proxy.filters": "x", "proxy.filter.x.type": "test-tag", "proxy.filter.x.colour": "red"},
     "proxy.filter.x.colour: not a setting of a test-tag filter"),
    ({"proxy.filters": "x,x", "proxy.filter.x.type": "test-tag"}, "filter 'x' is listed twice"),
    ({"proxy.filters": "a b"}, "filter name 'a b'"),
    ({"proxy.filters": "x", "proxy.filter.x.type": "test-tag", "proxy.filter.x.rate": "2"},
     "proxy.filter.x.rate=2.0: expected 0.0 to 1.0"),
])
def test_what_cannot_work_is_one_config_error(tmp_path, props, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        Proxy(ProxyConfig({**BASE, "log.dirs": str(tmp_path), **props}))


def test_a_filter_in_no_chain_is_a_warning(tmp_path):
    config = ProxyConfig({**BASE, "log.dirs": str(tmp_path), "proxy.filter.lost.type": "test-tag"})
    assert config.warnings == ["proxy.filter.lost.type: filter 'lost' is in no chain (proxy.filters, "
                               "proxy.virtual.cluster.*.filters); ignored"]
