"""The layering ARCHITECTURE.md describes, checked on the source: imports go down only, the broker (gateway) and
the proxy are peers on the server layer, no package uses another's private names, and no module grows past 800
lines. A failure names the file and the import to move."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Each source package and the packages it may import (besides itself). storage.fs and storage.checkpoints (the
# durable file primitives: fsync, rename, crash-safe writes) are the storage modules the coordinator and the
# server use, for their own state files.
ALLOWED: dict[str, set[str]] = {
    "wire": set(),
    "storage": {"wire"},
    "coordinator": {"wire", "storage.checkpoints", "storage.fs"},
    "server": {"wire", "storage.checkpoints", "storage.fs"},
    "gateway": {"wire", "storage", "coordinator", "server"},
    "proxy": {"wire", "server"},
    "cli": {"wire", "storage", "coordinator", "server", "gateway", "proxy"},
    "spark": set(),  # a client: it talks TCP, it imports no internals
}
MAX_LINES = 800


def _modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "node_modules" not in p.parts)


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names imported from it) for every `logway.*` import of the file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("logway."):
            out.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.startswith("logway.")]
    return out


def _allowed(package: str, module: str) -> bool:
    target = module.removeprefix("logway.")
    if target.split(".")[0] == package:
        return True
    return any(target == rule or target.startswith(rule + ".") for rule in ALLOWED[package])


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_go_down_only(package: str):
    wrong = [f"{path.relative_to(ROOT)}:{line}: imports {module}"
             for path in _modules(package) for line, module, names in _imports(path)
             if not _allowed(package, module)
             and not (names and all(_allowed(package, f"{module}.{name}") for name in names))]
    assert not wrong, f"{package}/ may import only {sorted(ALLOWED[package]) or 'nothing'} of Logway:\n" + "\n".join(wrong)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_private_name_of_another_package(package: str):
    wrong = [f"{path.relative_to(ROOT)}:{line}: {module} import {name}"
             for path in _modules(package) for line, module, names in _imports(path)
             for name in names
             if name.startswith("_") and module.removeprefix("logway.").split(".")[0] != package]
    assert not wrong, "private names of another package:\n" + "\n".join(wrong)


def test_no_module_over_800_lines():
    long = [f"{path.relative_to(ROOT)} ({n} lines)" for package in ALLOWED for path in _modules(package)
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert not long, "split by idea (DESIGN: one idea per module):\n" + "\n".join(long)
