"""bench/LATEST.md, edited section by section: a benchmark replaces only the "## " sections it writes, so a
full `python -m bench` run keeps the sections of the other benchmarks (TLS, per-request cost, proxy, cold
reads) and the investigations written under their own headings.

A section runs from its "## " heading to the next one ("### " subsections belong to it) and is known by its
name: the heading's words before " — " or " (", so "## Proxy — 2026-11-27T07:09Z (...)" replaces "## Proxy — <an
older date>".
"""

from __future__ import annotations

import re
from pathlib import Path

LATEST = Path(__file__).resolve().parent / "LATEST.md"
_HEADING = re.compile(r"^(?=## (?!#))", flags=re.M)


def section_name(section: str) -> str:
    """The name of the section whose text starts with its "## " heading."""
    heading = section.split("\n", 1)[0].removeprefix("## ")
    return re.split(r" — | \(", heading, maxsplit=1)[0].strip()


def split_sections(text: str) -> tuple[str, list[str]]:
    """What comes before the first "## " heading (the title and introduction), and the sections."""
    head, *sections = _HEADING.split(text)
    return head, sections


def join_sections(head: str, sections: list[str]) -> str:
    parts = ([head.rstrip("\n") + "\n"] if head.strip() else []) + [s.rstrip("\n") + "\n" for s in sections]
    return "\n".join(parts)


def replace_section(text: str, section: str) -> str:
    """``text`` with the section named as ``section`` replaced by it in place (any later namesake dropped), or
    with ``section`` appended when it has none."""
    head, sections = split_sections(text)
    name, out, placed = section_name(section), [], False
    for old in sections:
        if section_name(old) != name:
            out.append(old)
        elif not placed:
            out.append(section)
            placed = True
    if not placed:
        out.append(section)
    return join_sections(head, out)


def merge_run(old: str, run: str) -> str:
    """A full run's report (its title, introduction and sections), followed by the sections of ``old`` it does not
    write, in their order."""
    head, sections = split_sections(run)
    names = {section_name(s) for s in sections}
    kept = [s for s in split_sections(old)[1] if section_name(s) not in names]
    return join_sections(head, sections + kept)


def write_section(section: str, path: Path = LATEST) -> None:
    """Replace (or append) one section of LATEST.md."""
    path.write_text(replace_section(path.read_text() if path.exists() else "", section))


def write_run(run: str, path: Path = LATEST) -> None:
    """A full run's report into LATEST.md, keeping the sections it does not write."""
    path.write_text(merge_run(path.read_text() if path.exists() else "", run))
