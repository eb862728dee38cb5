"""Every ```python block of README.md and docs/*.md runs on its own, as written, in a fresh interpreter.

Each block runs in its own subprocess, in an empty temporary folder, with ``GOALENVS_DOCS_QUICK=1``
(blocks that train take a few hundred steps instead of thousands) and ``OMP_NUM_THREADS=1``. A block
that cannot run alone for a real reason carries ``<!-- docs-test: skip (the reason) -->`` on the line
just before its fence; the skipped blocks are listed with their reasons (``pytest -rs``). The rules
are in docs/README.md ("Code blocks").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"^<!-- docs-test: skip \((?P<reason>.*\S.*)\) -->$")
QUICK = "GOALENVS_DOCS_QUICK"
TIMEOUT_S = 180  # a block in quick mode takes seconds; this catches one that ignores quick mode


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # the line of the opening fence (1-based)
    code: str
    skip: str | None  # the reason given in the skip marker, if any

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if re.fullmatch(r"```\S*", lines[i].strip()):  # any opening fence: skip to its end
            language, start = lines[i].strip()[3:], i
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                i += 1
            if language == "python":
                previous = lines[start - 1].strip() if start else ""
                marker = SKIP.match(previous)
                blocks.append(
                    Block(
                        page.relative_to(ROOT).as_posix(),
                        start + 1,
                        "\n".join(lines[start + 1 : i]) + "\n",
                        marker.group("reason") if marker else None,
                    )
                )
        i += 1
    return blocks


BLOCKS = [block for page in PAGES for block in _blocks(page)]


def test_the_pages_have_python_blocks() -> None:
    assert len(BLOCKS) >= 10, [b.where for b in BLOCKS]


def test_every_skip_marker_stands_before_a_python_block_and_gives_a_reason() -> None:
    marked = {(b.page, b.line - 1) for b in BLOCKS if b.skip is not None}
    stray = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if (
                line.strip().startswith("<!-- docs-test")
                and (page.relative_to(ROOT).as_posix(), number) not in marked
            ):
                stray.append(f"{page.relative_to(ROOT).as_posix()}:{number}: {line.strip()}")
    assert stray == [], (
        "a docs-test marker must read '<!-- docs-test: skip (reason) -->', just before a ```python fence"
    )


@pytest.mark.parametrize("block", [b for b in BLOCKS if ".learn(" in b.code], ids=lambda b: b.where)
def test_blocks_that_train_pin_torch_and_have_a_quick_mode(block: Block) -> None:
    assert "torch.set_num_threads(1)" in block.code, (
        f"{block.where}: a training block pins torch to one thread"
    )
    assert QUICK in block.code, (
        f"{block.where}: a training block reads {QUICK} to shorten itself for this test"
    )


def _env(folder: Path) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    env[QUICK] = "1"
    # What a block writes stays in its folder: Minari datasets too (else ~/.minari/datasets).
    env["MINARI_DATASETS_PATH"] = str(folder / "minari")
    # This checkout first, whatever else is installed (an editable install of another clone).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _on_the_page(text: str, script: Path, block: Block) -> str:
    """The traceback with the script's line numbers turned into the page's."""
    return re.sub(
        rf'File "{re.escape(str(script))}", line (\d+)',
        lambda m: f"{block.page} line {block.line + int(m.group(1))}",
        text,
    )


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b, marks=pytest.mark.skip(reason=f"{b.where}: {b.skip}") if b.skip else ())
        for b in BLOCKS
    ],
    ids=lambda b: b.where,
)
def test_the_block_runs_on_its_own(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(block.code, encoding="utf-8")
    try:
        result = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: the block ran past {TIMEOUT_S} s with {QUICK}=1")
    if result.returncode != 0:
        error = _on_the_page(result.stderr, script, block).strip().splitlines()
        pytest.fail(
            f"{block.where}: the block failed (exit status {result.returncode}): "
            f"{error[-1] if error else 'no message'}\n" + "\n".join(error[-25:]),
            pytrace=False,
        )
