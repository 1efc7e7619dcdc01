"""Fixtures for the coordinator tests: a loaded coordinator on a fake log and clock."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The suite runs with --import-mode=importlib, which puts no test folder on sys.path; the test
# modules here import their fakes and request helpers from the sibling coordinator_harness.py.
sys.path.insert(0, str(Path(__file__).parent))

from coordinator_harness import Cluster  # noqa: E402


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


@pytest.fixture
def make_cluster() -> type[Cluster]:
    return Cluster
