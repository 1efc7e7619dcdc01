"""The broker's APIs, found from the modules of this package: one module per Kafka API key (franz-go's kfake).

A module serves an API by declaring, at its top level::

    API_KEY = 68                       # the Kafka API key
    MIN_VERSION, MAX_VERSION = 0, 1    # the versions it serves (its docstring says what changes per version)
    RAW = True                         # optional: it reads the request frame itself (the hot paths)

    async def handle(ctx: RequestContext, request: <kio request>) -> <kio response> | list[bytes] | None: ...

Adding an API is adding its module: the dispatch table and ApiVersions' advertised ranges come from here, and
server/security/request_acls.py must hold its ACL rule (dispatch refuses to start without one). A module
without API_KEY is a helper and is skipped.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from logway.gateway import apis

if TYPE_CHECKING:
    from logway.gateway.context import RequestContext

Handler = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Api:
    """One served API: its key, version range, handler, and whether the handler reads the frame itself."""

    key: int
    min_version: int
    max_version: int
    raw: bool
    handle: Handler
    module: str  # the module's short name (metadata, produce, ...), for logs


def _discover() -> dict[int, Api]:
    """Import every module of gateway/apis/ and collect those that declare API_KEY, by key."""
    found: dict[int, Api] = {}
    for info in pkgutil.iter_modules(apis.__path__):
        if info.name == "registry":
            continue
        module = importlib.import_module(f"{apis.__name__}.{info.name}")
        key = getattr(module, "API_KEY", None)
        if key is None:
            continue
        if key in found:
            raise ImportError(f"API key {key} is served by both gateway/apis/{found[key].module}.py and {info.name}.py")
        found[key] = Api(key, module.MIN_VERSION, module.MAX_VERSION, getattr(module, "RAW", False), module.handle,
                         info.name)
    return dict(sorted(found.items()))


APIS: dict[int, Api] = _discover()


def supported_versions() -> list[tuple[int, int, int]]:
    """(api_key, min, max) of every served API in key order: what ApiVersions advertises."""
    return [(api.key, api.min_version, api.max_version) for api in APIS.values()]
