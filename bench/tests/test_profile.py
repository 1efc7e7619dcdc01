"""py-spy collapsed stacks turned into the hot-spot table."""

from pathlib import Path

from bench.profile import summarize


def test_self_and_inclusive_shares_merge_line_numbers(tmp_path: Path):
    raw = tmp_path / "raw.txt"
    raw.write_text(
        "main (cli/main.py:50);run (server/connection.py:10);read_frame (server/connection.py:40) 30\n"
        "main (cli/main.py:50);run (server/connection.py:10);read_frame (server/connection.py:41) 10\n"
        "main (cli/main.py:50);run (server/connection.py:12);append (storage/segment.py:7) 40\n"
        "main (cli/main.py:50);EpollIOManager.get_events (trio/_core/_io_epoll.py:9) 20\n"
    )
    s = summarize(raw)
    assert (s["samples"], s["idle_samples"]) == (80, 20)  # the epoll wait is idle, not work
    top = {row["function"]: row for row in s["top"]}
    assert top["read_frame (server/connection.py)"]["self_pct"] == 50.0
    assert top["append (storage/segment.py)"]["self_pct"] == 50.0
    inclusive = {row["function"]: row["total_pct"] for row in s["top_total"]}
    assert inclusive["run (server/connection.py)"] == 100.0
    assert "main (cli/main.py)" not in inclusive  # entry points say nothing about where to fix
    assert not any("trio" in f for f in top)
    assert all("(server/" in f or "(storage/" in f for f in inclusive)  # only Logway's own code
