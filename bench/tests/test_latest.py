"""bench/LATEST.md edits: a benchmark replaces its own "## " sections and keeps everyone else's."""

from pathlib import Path

from bench.latest import merge_run, replace_section, section_name, write_section

NEW = "## Proxy — new\n\nnew table\n"


def test_a_section_is_known_by_the_words_before_its_date_or_parenthesis() -> None:
    assert section_name("## Proxy — 2026-11-27T07:09Z (`python -m bench.proxy`)\n\nrows") == "Proxy"
    assert section_name("## Consume throughput (librdkafka consumer from earliest)\n") == "Consume throughput"
    assert section_name("## Scaling: partitions and producer connections\n") == "Scaling: partitions and producer connections"


def test_replaces_the_old_section_and_its_subsections_and_keeps_the_rest() -> None:
    text = "# T\n\n## A\n\na\n\n## Proxy — old\n\nold\n\n### sub\n\nold sub\n\n## B\n\nb\n"
    assert replace_section(text, NEW) == "# T\n\n## A\n\na\n\n## Proxy — new\n\nnew table\n\n## B\n\nb\n"


def test_appends_when_there_is_no_such_section() -> None:
    assert replace_section("# T\n\n## A\n\na\n", NEW) == "# T\n\n## A\n\na\n\n" + NEW


def test_replaces_a_section_at_the_end() -> None:
    assert replace_section("# T\n\n## Proxy — old\n\nold\n", NEW) == "# T\n\n" + NEW


def test_a_full_run_replaces_its_sections_and_keeps_the_other_benchmarks_sections() -> None:
    old = ("# Old title\n\nold intro\n\n## Produce throughput (old)\n\nold rows\n\n## TLS — 2026-11-23\n\ntls rows\n\n"
           "## Consume throughput (old)\n\nold consume\n\n### investigation kept by hand\n\nprose\n\n"
           "## Proxy — 2026-11-24\n\nproxy rows\n")
    run = "# New title\n\nnew intro\n\n## Produce throughput (new)\n\nnew rows\n\n## Consume throughput (new)\n\nnew consume\n"
    assert merge_run(old, run) == (
        "# New title\n\nnew intro\n\n## Produce throughput (new)\n\nnew rows\n\n## Consume throughput (new)\n\n"
        "new consume\n\n## TLS — 2026-11-23\n\ntls rows\n\n## Proxy — 2026-11-24\n\nproxy rows\n")


def test_write_section_twice_leaves_one_copy(tmp_path: Path) -> None:
    latest = tmp_path / "LATEST.md"
    latest.write_text("# Title\n\n## Produce\n\nrows\n")
    write_section("## Per-request cost\n\nfirst\n", latest)
    write_section("## Per-request cost\n\nsecond\n", latest)
    latest.write_text(latest.read_text() + "\n## Later\n\nkept\n")
    write_section("## Per-request cost\n\nthird\n", latest)
    assert latest.read_text() == "# Title\n\n## Produce\n\nrows\n\n## Per-request cost\n\nthird\n\n## Later\n\nkept\n"
