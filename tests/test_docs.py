"""The README and docs/ hold together: relative links resolve, nothing links outside the repository,
the front page keeps its two commands, and the checker page keeps its generated-table markers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKS_START = "<!-- checks-table:start -->"
CHECKS_END = "<!-- checks-table:end -->"


def _prose(text: str) -> str:
    """The page without its fenced code blocks (a `#` there is a comment, a `](` is code)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _anchor(heading: str) -> str:
    """The anchor a repository host gives a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_anchor(h) for h in re.findall(r"^#+ (.*)$", _prose(page.read_text(encoding="utf-8")), re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_stay_inside_the_repository_and_resolve(page: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
            broken.append(f"{target}: links outside the repository")
            continue
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in _anchors(resolved):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == []


def test_the_front_page_keeps_its_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # .ci/run runs the second; the first is the main job.
    assert 'pip install torch==2.13.0 && pip install -e ".[examples]" && python examples/train.py' in readme
    assert 'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q' in readme


def test_the_checks_table_sits_between_its_markers() -> None:
    lines = (ROOT / "docs" / "checker.md").read_text(encoding="utf-8").splitlines()
    assert lines.count(CHECKS_START) == 1 and lines.count(CHECKS_END) == 1
    table = lines[lines.index(CHECKS_START) + 1 : lines.index(CHECKS_END)]
    assert table and all(line.startswith("|") for line in table)
    assert table[0].startswith("| check |")
