"""A pytest plugin (entry point `logway`): an in-process Kafka for your tests.

    def test_my_app(logway):
        producer = KafkaProducer(bootstrap_servers=logway.bootstrap)

It registers the `logway` fixture and nothing else: the gateway is imported only when a test asks for it,
so the plugin costs nothing in the other pytest runs of an environment.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from logway.gateway.in_process import InProcessGateway


@pytest.fixture
def logway(tmp_path: Path) -> Iterator[InProcessGateway]:
    """A running in-process gateway with its own temporary data directory."""
    from logway.gateway.in_process import InProcessGateway

    gateway = InProcessGateway(tmp_path / "logway-data").start()
    try:
        yield gateway
    finally:
        gateway.stop()
