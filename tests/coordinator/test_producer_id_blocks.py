"""Producer ids stay unique across restarts, including a kill without any shutdown."""

from __future__ import annotations

from pathlib import Path

from logway.coordinator.producer_ids import ProducerIdManager


def test_ids_are_sequential_within_a_block(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path / "producer_ids")
    assert [manager.next_producer_id() for _ in range(5)] == [0, 1, 2, 3, 4]
    # The whole block was reserved on disk before the first id was handed out.
    assert (tmp_path / "producer_ids").read_text().strip() == "1000"


def test_a_restarted_process_never_reuses_ids(tmp_path: Path) -> None:
    path = tmp_path / "producer_ids"
    seen: set[int] = set()
    for handed_out in (5, 1000, 1001, 0, 3):
        # Each "process" stops abruptly: nothing but what it already wrote survives.
        manager = ProducerIdManager(path)
        ids = [manager.next_producer_id() for _ in range(handed_out)]
        assert not seen & set(ids)
        seen |= set(ids)
    assert ProducerIdManager(path).next_producer_id() == 5000  # blocks 0, 1, 2+3, none, 4 were reserved


def test_a_new_block_is_reserved_when_one_runs_out(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path / "producer_ids", block_size=3)
    assert [manager.next_producer_id() for _ in range(7)] == [0, 1, 2, 3, 4, 5, 6]
    assert (tmp_path / "producer_ids").read_text().strip() == "9"
