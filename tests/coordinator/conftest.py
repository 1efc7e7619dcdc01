"""Fixtures for the coordinator tests: a loaded coordinator on a fake log and clock."""

from __future__ import annotations

import pytest
from coordinator_harness import Cluster


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


@pytest.fixture
def make_cluster() -> type[Cluster]:
    return Cluster
