"""Named filters from the proxy's configuration: which filters run, in which order, with which settings.

    proxy.filters=enc,audit                      # every client connection's chain, in this order
    proxy.virtual.cluster.a.filters=validate     # a virtual cluster's own, after those
    proxy.filter.enc.type=record-encryption      # what filter "enc" is
    proxy.filter.enc.topics=enc-.*               # its settings: proxy.filter.<name>.<key>

A filter type (record-encryption, record-validation, audit, fault) is a module of proxy/filters/ that
registers itself with ``filter_type``: its name, its keys with their defaults, and a builder that turns the
settings into a factory of per-connection filters. A builder runs once, when the proxy starts, so what its
filters share (a key store, an audit file, counters) is made there; a bad setting is a ConfigError naming the
key. Topic patterns are regexes over the names clients see: behind a virtual cluster, without its prefix
(``ClientInfo.visible``).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache

from prometheus_client import CollectorRegistry

from logway.proxy.filters.base import ClientInfo, Filter
from logway.server.config import ConfigError

FilterFactory = Callable[[ClientInfo], Filter]
_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class FilterSettings:
    """One configured filter: its name, type and settings (its type's defaults with the given keys on top)."""

    name: str
    type: str
    values: Mapping[str, str]
    state_dir: str = ""  # the proxy's state directory (log.dirs): where a filter keeps files of its own
    registry: CollectorRegistry | None = None  # the proxy's Prometheus registry (/metrics): a filter's metrics

    def key(self, key: str) -> str:
        """The full property name of one of this filter's keys, for error messages."""
        return f"proxy.filter.{self.name}.{key}"

    def get(self, key: str) -> str:
        return self.values[key].strip()

    def int(self, key: str, low: int | None = None) -> int:
        try:
            value = int(self.get(key))
        except ValueError:
            raise ConfigError(f"{self.key(key)}={self.values[key]!r}: expected an integer") from None
        if low is not None and value < low:
            raise ConfigError(f"{self.key(key)}={value}: must be at least {low}")
        return value

    def float(self, key: str, low: float = 0.0, high: float | None = None) -> float:
        try:
            value = float(self.get(key))
        except ValueError:
            raise ConfigError(f"{self.key(key)}={self.values[key]!r}: expected a number") from None
        if value < low or (high is not None and value > high):
            raise ConfigError(f"{self.key(key)}={value}: expected {low} to {high if high is not None else 'more'}")
        return value

    def bool(self, key: str) -> bool:
        value = self.get(key).lower()
        if value not in ("true", "false"):
            raise ConfigError(f"{self.key(key)}={self.values[key]!r}: expected true or false")
        return value == "true"

    def pattern(self, key: str) -> re.Pattern[str]:
        """A regex setting, compiled (matched whole against client-visible names)."""
        try:
            return re.compile(self.get(key))
        except re.error as exc:
            raise ConfigError(f"{self.key(key)}={self.values[key]!r}: not a regular expression: {exc}") from None


@dataclass(frozen=True)
class FilterType:
    """What a filter module registers: its type name, its keys (with defaults; "" for required-or-empty) and
    the builder of its per-connection filters."""

    name: str
    keys: Mapping[str, str]
    build: Callable[[FilterSettings], FilterFactory]
    # Keys accepted with any suffix (e.g. "kms.file." for a KMS plug-in's own keys).
    key_prefixes: tuple[str, ...] = ()


_TYPES: dict[str, FilterType] = {}


def filter_type(name: str, keys: Mapping[str, str], key_prefixes: tuple[str, ...] = ()):
    """Register the decorated builder as filter type ``name``."""
    def register(build: Callable[[FilterSettings], FilterFactory]) -> Callable[[FilterSettings], FilterFactory]:
        _TYPES[name] = FilterType(name, dict(keys), build, key_prefixes)
        return build
    return register


def filter_types() -> Mapping[str, FilterType]:
    """Every filter type, by name (the modules of proxy/filters/ register themselves when imported)."""
    _import_filter_modules()
    return _TYPES


@cache
def _import_filter_modules() -> None:
    import logway.proxy.filters as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


@dataclass
class NamedFilters:
    """The filters the configuration names: the chain for every connection and each virtual cluster's own."""

    settings: dict[str, FilterSettings] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)  # proxy.filters
    per_cluster: dict[str, list[str]] = field(default_factory=dict)  # virtual cluster name -> its filters
    warnings: list[str] = field(default_factory=list)

    def keys_for(self, cluster: str | None) -> list[str]:
        """The filters of a connection (keys of ``settings``), in order: the proxy's chain, then its virtual
        cluster's own (a virtual cluster's filter is keyed "<cluster>/<name>": its settings are its own)."""
        own = [f"{cluster}/{name}" for name in self.per_cluster.get(cluster, [])] if cluster else []
        return self.chain + own


def is_filter_key(key: str) -> bool:
    """proxy.filters, proxy.filter.<name>.<key>, proxy.virtual.cluster.<name>.filters: read here."""
    return key == "proxy.filters" or key.startswith("proxy.filter.") or (
        key.startswith("proxy.virtual.cluster.") and key.endswith(".filters"))


def named_filters(props: Mapping[str, str], clusters: Iterable[str], state_dir: str) -> NamedFilters:
    """The named filters of ``props`` (the proxy's properties), checked: every listed name has a known type and
    known keys. ``clusters``: the virtual clusters' names."""
    out = NamedFilters(chain=_names(props, "proxy.filters"))
    for cluster in clusters:
        out.per_cluster[cluster] = _names(props, f"proxy.virtual.cluster.{cluster}.filters")
    for cluster, names in [(None, out.chain), *out.per_cluster.items()]:
        for name in names:
            out.settings[f"{cluster}/{name}" if cluster else name] = _settings(props, name, state_dir)
    out.warnings = _unused(props, set(out.chain) | {n for names in out.per_cluster.values() for n in names})
    return out


def _names(props: Mapping[str, str], key: str) -> list[str]:
    names = [n.strip() for n in props.get(key, "").split(",") if n.strip()]
    for name in names:
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{key}: filter name {name!r}: letters, digits, '-' and '_' only")
        if names.count(name) > 1:
            raise ConfigError(f"{key}: filter {name!r} is listed twice")
    return names


def _settings(props: Mapping[str, str], name: str, state_dir: str) -> FilterSettings:
    head = f"proxy.filter.{name}."
    type_name = props.get(head + "type", "").strip()
    types = filter_types()
    if type_name not in types:
        known = ", ".join(sorted(types)) or "none"
        raise ConfigError(f"{head}type={type_name!r}: expected one of {known}")
    kind = types[type_name]
    given = {k[len(head):]: v for k, v in props.items() if k.startswith(head) and k != head + "type"}
    unknown = sorted(k for k in given if k not in kind.keys and not k.startswith(kind.key_prefixes or ("\0",)))
    if unknown:
        raise ConfigError(f"{head}{unknown[0]}: not a setting of a {type_name} filter "
                          f"(its settings: {', '.join(sorted(kind.keys))})")
    return FilterSettings(name, type_name, {**kind.keys, **given}, state_dir)


def _unused(props: Mapping[str, str], listed: set[str]) -> list[str]:
    """Warnings for filters configured but in no chain (most likely a typo in proxy.filters)."""
    return [f"{key}: filter {key.split('.')[2]!r} is in no chain (proxy.filters, proxy.virtual.cluster.*.filters); "
            "ignored" for key in sorted(props)
            if key.startswith("proxy.filter.") and key.split(".")[2] not in listed]


def build_factories(filters: NamedFilters, registry: CollectorRegistry | None = None) -> dict[str, FilterFactory]:
    """Each configured filter's factory, by the key of its settings (built once, at start-up); their metrics
    go to ``registry``."""
    types = filter_types()
    return {key: types[s.type].build(replace(s, registry=registry)) for key, s in filters.settings.items()}
