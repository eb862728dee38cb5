"""The README and docs/ hold together: relative links resolve, nothing links outside the repository,
the front page starts with its two commands and stays a front page, the changelog stays one line per
change, and the checker page keeps its generated-table markers."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKS_START = "<!-- checks-table:start -->"
CHECKS_END = "<!-- checks-table:end -->"
MAIN_JOB = 'pip install torch==2.13.0 && pip install -e ".[examples]" && python examples/train.py'
TEST_COMMAND = 'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q'
README_MAX_LINES = 150  # a front page: what and why, two commands, quickstart, one row per task
CHANGELOG_MAX_LINES = 250  # one line per user-visible change; git holds the history


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


def _fenced_blocks(text: str) -> list[str]:
    return [block.strip() for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)]


def test_the_front_page_starts_with_its_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # The first installs and runs the main job; the second installs and runs the tests.
    assert _fenced_blocks(readme)[:2] == [MAIN_JOB, TEST_COMMAND]
    # Nothing but a title and the blocks' one-line captions before them.
    before = readme[: readme.index(MAIN_JOB)].splitlines()
    assert len([line for line in before if line.strip() and not line.startswith("```")]) <= 2


def test_ci_runs_the_front_pages_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # .ci/run splits the command over lines (a failed install must stop it), in the same order.
    install, test = "pip install --quiet torch==2.13.0", 'pip install --quiet -e ".[test]"'
    assert ci.index(install) < ci.index(test) < ci.index("\npython -m pytest -q\n")


@pytest.mark.parametrize(
    ("name", "limit"), [("README.md", README_MAX_LINES), ("CHANGELOG.md", CHANGELOG_MAX_LINES)]
)
def test_the_front_page_and_the_changelog_stay_short(name: str, limit: int) -> None:
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    assert len(lines) <= limit, f"{name} has {len(lines)} lines; at most {limit}: details belong in docs/"


def test_the_changelog_keeps_one_line_per_change() -> None:
    lines = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").splitlines()
    entries = [line for line in lines if line.startswith("- ")]
    assert entries, "the changelog lists its changes as '- ' lines"
    # An entry is one line: the line after it is another entry, a heading or a blank line.
    continued = [
        f"line {i + 2}: {after}"
        for i, (line, after) in enumerate(itertools.pairwise(lines))
        if line.startswith("- ") and after.strip() and not after.startswith(("- ", "#"))
    ]
    assert continued == []
    headings = [line for line in lines if line.startswith("### ")]
    kinds = {"### Added", "### Changed", "### Deprecated", "### Removed", "### Fixed", "### Security"}
    assert set(headings) <= kinds, sorted(set(headings) - kinds)


def test_the_checks_table_sits_between_its_markers() -> None:
    lines = (ROOT / "docs" / "checker.md").read_text(encoding="utf-8").splitlines()
    assert lines.count(CHECKS_START) == 1 and lines.count(CHECKS_END) == 1
    table = lines[lines.index(CHECKS_START) + 1 : lines.index(CHECKS_END)]
    assert table and all(line.startswith("|") for line in table)
    assert table[0].startswith("| check |")
