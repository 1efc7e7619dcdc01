from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

# Random kio requests for the request fuzz test live beside the wire tests, the raw-request helpers here (the
# suite runs with --import-mode=importlib, which puts no test folder on sys.path).
sys.path.insert(0, str(Path(__file__).parent.parent / "wire"))
sys.path.insert(0, str(Path(__file__).parent))
# The adversarial sweep's helpers are imported as tests.gateway.* (shared with tests/proxy): the repository root.
sys.path.insert(0, str(Path(__file__).parents[2]))

_names = itertools.count()


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique within the test session."""
    return f"{request.node.name.split('[')[0][:40]}-{next(_names)}".replace("_", "-")
