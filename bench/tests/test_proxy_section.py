"""bench.proxy's LATEST.md edit: the Proxy section is replaced in place, or appended when there is none."""

from bench.proxy import replace_section

NEW = "## Proxy — new\n\nnew table\n"


def test_replaces_the_old_proxy_section_and_keeps_the_rest() -> None:
    text = "# T\n\n## A\n\na\n\n## Proxy — old\n\nold\n\n### sub\n\nold sub\n\n## B\n\nb\n"
    out = replace_section(text, NEW)
    assert "old" not in out
    assert out == "# T\n\n## A\n\na\n\n## Proxy — new\n\nnew table\n\n## B\n\nb\n"


def test_appends_when_there_is_no_proxy_section() -> None:
    out = replace_section("# T\n\n## A\n\na\n", NEW)
    assert out == "# T\n\n## A\n\na\n\n" + NEW


def test_replaces_a_proxy_section_at_the_end() -> None:
    assert replace_section("# T\n\n## Proxy — old\n\nold\n", NEW) == "# T\n\n" + NEW
