"""The checks table: well-formed as data, rendered to Markdown, and the docs show exactly that rendering."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from goalenvs.check import CHECKS, checks_markdown
from goalenvs.check.table import END, START, main, replace_table

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "checker.md"


def test_table_is_well_formed() -> None:
    names = [c.name for c in CHECKS]
    assert len(set(names)) == len(names)
    for i, check in enumerate(CHECKS):
        assert check.run.__name__ == f"check_{check.name}"
        assert check.severity in ("fail", "warn") and check.envs in ("any", "single", "vector")
        # Prerequisites run earlier (the runner reads their outcome) and can block others.
        assert all(name in names[:i] for name in check.after), check.name
        assert all(CHECKS[names.index(name)].skip_reason for name in check.after), check.name
        assert check.verifies and "|" not in check.verifies and "\n" not in check.verifies


def test_markdown_has_one_row_per_check() -> None:
    lines = checks_markdown().splitlines()
    assert lines[0] == "| check | verdict when broken | what HER needs |"
    rows = lines[2:]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{c.name}`" for c in CHECKS]
    assert [row.split(" | ")[1] for row in rows] == [c.severity for c in CHECKS]


def test_docs_table_is_generated_from_the_checks() -> None:
    text = DOCS.read_text(encoding="utf-8")
    start, end = text.index(START + "\n"), text.index(END)
    assert text[start + len(START) + 1 : end] == checks_markdown(), (
        "the checks table in docs/checker.md is out of date: run python -m goalenvs.check.table"
    )


def test_table_script_rewrites_only_between_the_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "checker.md"
    doc.write_text(f"# Checker\n\nintro\n{START}\n| old | table |\n{END}\n\nafter\n", encoding="utf-8")
    assert main([str(doc), "--check"]) == 1
    assert main([str(doc)]) == 0
    assert (
        doc.read_text(encoding="utf-8") == f"# Checker\n\nintro\n{START}\n{checks_markdown()}{END}\n\nafter\n"
    )
    assert main([str(doc), "--check"]) == 0
    assert "current" in capsys.readouterr().out
    with pytest.raises(ValueError, match="checks-table:start"):
        replace_table("no markers\n", checks_markdown())


def test_python_dash_m_entry_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "goalenvs.check.table", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0 and "checks-table:start" in result.stdout
    assert "RuntimeWarning" not in result.stderr
