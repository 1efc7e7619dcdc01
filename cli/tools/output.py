"""How the admin subcommands print: aligned tables (Kafka tools' column names) or JSON (`--output json`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None) -> None:
    """Left-aligned columns two spaces apart; None shows as "-" (Kafka's MISSING_COLUMN_VALUE)."""
    out = out or sys.stdout
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    for row in [list(headers), *cells]:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")


def print_json(value: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(value, out, indent=2, sort_keys=False)
    out.write("\n")


def rows_as_dicts(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Table rows as JSON objects keyed by lower_snake column names (CURRENT-OFFSET -> current_offset)."""
    keys = [h.lower().replace("-", "_").replace("#", "") for h in headers]
    return [dict(zip(keys, row, strict=True)) for row in rows]


def emit(args: Any, headers: Sequence[str], rows: Sequence[Sequence[Any]], *,
         extra: Mapping[str, Any] | None = None) -> None:
    """Print ``rows`` as a table, or with --output json as a list of objects (inside ``extra`` when given)."""
    if args.output == "json":
        value = rows_as_dicts(headers, rows)
        print_json({**extra, "rows": value} if extra else value)
    else:
        print_table(headers, rows)
