"""Every ```python block of README.md and docs/*.md runs on its own, as written, in a fresh interpreter.

The blocks are plain user code. Each runs in its own subprocess, in an empty temporary folder, with
``OMP_NUM_THREADS=1``; a block that trains runs for ``QUICK_STEPS`` steps instead of the thousands it
shows, because the test lowers the step-count literal of its ``.learn(...)`` call (``STEPS``) before it
runs the block. A block that cannot run alone for a real reason carries
``<!-- docs-test: skip (the reason) -->`` on the line just before its fence; the skipped blocks are
listed with their reasons (``pytest -rs``). The rules are in docs/README.md ("Code blocks").
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
# The step count of a training call, as the docs write it: `.learn(10_000)` or
# `.learn(total_timesteps=10_000)`, the count an integer literal (underscores allowed).
STEPS = re.compile(r"(\.learn\(\s*(?:total_timesteps\s*=\s*)?)(\d[\d_]*)(?=\s*[,)])")
QUICK_STEPS = 1_500  # past the blocks' learning_starts=1_000, so a few hundred updates run too
TIMEOUT_S = 180  # a shortened block takes seconds; this catches one that trains for long anyway
# A switch that made user code shorten itself for this test; the docs show plain code instead.
TEST_SWITCH = "GOALENVS_DOCS_QUICK"


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


def shortened(code: str) -> str:
    """The block with the step count of each ``.learn(...)`` call lowered to ``QUICK_STEPS``."""
    return STEPS.sub(lambda m: m.group(1) + str(min(int(m.group(2).replace("_", "")), QUICK_STEPS)), code)


def test_shortened_lowers_only_the_step_counts_of_learn_calls() -> None:
    code = "model.learn(10_000)\nmodel.learn(total_timesteps=200, progress_bar=False)\nx = f(10_000)\n"
    assert (
        shortened(code)
        == "model.learn(1500)\nmodel.learn(total_timesteps=200, progress_bar=False)\nx = f(10_000)\n"
    )
    assert shortened("model.learn(n_steps)\n") == "model.learn(n_steps)\n"


@pytest.mark.parametrize("block", [b for b in BLOCKS if ".learn(" in b.code], ids=lambda b: b.where)
def test_blocks_that_train_pin_torch_and_give_a_step_count_the_test_can_lower(block: Block) -> None:
    assert "torch.set_num_threads(1)" in block.code, (
        f"{block.where}: a training block pins torch to one thread"
    )
    assert block.code.count(".learn(") == len(STEPS.findall(block.code)), (
        f"{block.where}: each .learn(...) call gives its step count as an integer literal "
        "(e.g. model.learn(total_timesteps=10_000)), so that this test can shorten it"
    )


def test_no_page_shows_a_test_switch_in_user_code() -> None:
    assert [p.name for p in PAGES if TEST_SWITCH in p.read_text(encoding="utf-8")] == []


def _env(folder: Path) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    # A home of its own, so that what a block would write there (~/.minari/datasets) is seen and
    # never lands in the user's; no MINARI_DATASETS_PATH: a block that makes datasets chooses its folder.
    env["HOME"] = str(folder / "home")
    env.pop("MINARI_DATASETS_PATH", None)
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
    _run(block, tmp_path)


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if "minari" in b.code and not b.skip], ids=lambda b: b.where
)
def test_a_block_that_makes_datasets_runs_twice_and_writes_nothing_into_home(
    block: Block, tmp_path: Path
) -> None:
    """A user runs a docs block again: Minari's "dataset ... already exists" must not stop it, and the
    user's ~/.minari stays as it was."""
    _run(block, tmp_path)
    _run(block, tmp_path)
    assert not (tmp_path / "home" / ".minari").exists(), f"{block.where} wrote into ~/.minari"


def _run(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(shortened(block.code), encoding="utf-8")
    (tmp_path / "home").mkdir(exist_ok=True)
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
        pytest.fail(
            f"{block.where}: the block ran past {TIMEOUT_S} s with its steps lowered to {QUICK_STEPS}"
        )
    if result.returncode != 0:
        error = _on_the_page(result.stderr, script, block).strip().splitlines()
        pytest.fail(
            f"{block.where}: the block failed (exit status {result.returncode}): "
            f"{error[-1] if error else 'no message'}\n" + "\n".join(error[-25:]),
            pytrace=False,
        )
