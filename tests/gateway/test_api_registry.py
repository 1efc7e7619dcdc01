"""The broker's APIs come from the modules of gateway/apis/ alone: each module registers itself, ApiVersions
advertises exactly what they serve, and none is served without an ACL rule (fail closed)."""

from __future__ import annotations

import ast
from pathlib import Path

from logway.gateway import apis
from logway.gateway.apis.registry import APIS, supported_versions
from logway.server.security.request_acls import NO_ACL, RULES

APIS_DIR = Path(apis.__file__).parent


def declared(path: Path) -> dict[str, object]:
    """The module-level constants a module declares (read from its source, not imported)."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return out


def test_every_module_declaring_an_api_key_is_served_with_its_versions():
    files = {p.stem: declared(p) for p in APIS_DIR.glob("*.py") if p.stem not in ("__init__", "registry")}
    assert {api.module for api in APIS.values()} == set(files)
    for api in APIS.values():
        if "API_KEY" in files[api.module]:  # (SASL's modules take their key and range from server/security/sasl)
            assert (api.key, api.min_version, api.max_version) == (files[api.module]["API_KEY"], files[api.module][
                "MIN_VERSION"], files[api.module]["MAX_VERSION"])
    assert supported_versions() == sorted(supported_versions())
    assert len({k for k, _, _ in supported_versions()}) == len(APIS)


def test_every_served_api_has_an_acl_rule_or_is_served_before_authentication():
    assert {key for key in APIS if key not in RULES} == set(NO_ACL)  # ApiVersions, SaslHandshake, SaslAuthenticate
