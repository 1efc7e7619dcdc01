from __future__ import annotations

import itertools

import pytest

_names = itertools.count()


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique within the test session."""
    return f"{request.node.name.split('[')[0][:40]}-{next(_names)}".replace("_", "-")
