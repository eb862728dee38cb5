"""What the run-folder tests of both training scripts assert with: one-line exits, folder snapshots."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def fails(
    capsys: pytest.CaptureFixture[str], main: Callable[[list[str]], Any], argv: list[str], code: int = 2
) -> str:
    """``main(argv)`` must exit with ``code`` and exactly one stderr line; returns that line."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return err.rstrip("\n")


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (but the lock, whose content is its last holder's pid) and its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def copy_run(run: Path, tmp_path: Path, name: str = "copy") -> Path:
    """A copy of the run folder ``run`` in ``tmp_path / name``, for a test to change."""
    out = tmp_path / name
    shutil.copytree(run, out)
    return out


def checkpoint_dir(out: Path) -> Path:
    """The one whole checkpoint folder of a run."""
    (found,) = [p for p in (out / "checkpoints").iterdir() if p.name.isdigit()]
    return found


def _zero(path: Path) -> None:
    path.write_bytes(b"")


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _random(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


DAMAGES = [_zero, _truncate, _random]  # what a damaged file may be: empty, cut short, or noise
