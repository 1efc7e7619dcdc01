"""Fixtures for storage tests: a fake clock and a factory for partition logs in tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from logway.storage.config import LogConfig
from logway.storage.partition_log import PartitionLog

# The suite runs with --import-mode=importlib, which puts no test folder on sys.path; the test
# modules here import their batch builder from the sibling storage_helpers.py.
sys.path.insert(0, str(Path(__file__).parent))

from storage_helpers import FakeClock  # noqa: E402


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_log(tmp_path: Path, clock: FakeClock):
    """Factory: open (or reopen) the partition log in tmp_path/t-0 with topic-level overrides."""
    opened: list[PartitionLog] = []

    def factory(props: dict[str, str] | None = None, **kwargs) -> PartitionLog:
        config = LogConfig.from_properties(props or {})
        plog = PartitionLog(tmp_path / "t-0", "t", 0, config, clock_ms=clock, **kwargs)
        opened.append(plog)
        return plog

    yield factory
    for plog in opened:
        plog._close_files()
