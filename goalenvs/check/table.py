"""Keeping the docs' checks table generated from :data:`goalenvs.check.CHECKS`.

``python -m goalenvs.check.table [PATH]`` rewrites the table between the lines
``<!-- checks-table:start -->`` and ``<!-- checks-table:end -->`` of ``PATH`` (``docs/checker.md``),
so the docs list exactly the checks the checker runs; ``--check`` only reports whether it is current
(exit status 1 when not).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from goalenvs.check.specs import CHECKS, checks_markdown

__all__ = ["END", "START", "main", "replace_table"]

START = "<!-- checks-table:start -->"
END = "<!-- checks-table:end -->"


def replace_table(text: str, table: str) -> str:
    """``text`` with the lines between the START and END marker lines replaced by ``table``."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == START]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or starts[0] > ends[0]:
        raise ValueError(f"expected one {START!r} line followed by one {END!r} line")
    return "".join(lines[: starts[0] + 1]) + table + "".join(lines[ends[0] :])


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or with ``--check`` only compare) the checks table of a Markdown file."""
    parser = argparse.ArgumentParser(prog="python -m goalenvs.check.table", description=__doc__)
    parser.add_argument("path", nargs="?", default="docs/checker.md", help="the file (docs/checker.md)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is not current")
    args = parser.parse_args(argv)
    path = Path(args.path)
    try:
        text = path.read_text(encoding="utf-8")
        new = replace_table(text, checks_markdown())
    except (OSError, ValueError) as err:
        print(f"{parser.prog}: error: {path}: {err}", file=sys.stderr)
        return 2
    if new == text:
        print(f"{path}: the checks table is current")
        return 0
    if args.check:
        print(f"{path}: the checks table is out of date; run {parser.prog} {path}", file=sys.stderr)
        return 1
    path.write_text(new, encoding="utf-8")
    print(f"{path}: checks table rewritten ({len(CHECKS)} checks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
