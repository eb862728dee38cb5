"""docs/training.md's RL Zoo commands: ours run, the plain one fails as the page says (skipped without rl_zoo3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rl_zoo3")
pytest.importorskip("optuna")  # rl_zoo3.train imports it

ROOT = Path(__file__).resolve().parents[2]


def _zoo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "rl_zoo3.train", "--algo", "dqn", "--env", "goalenvs/BitFlip-v0"]
    command += ["--gym-packages", "goalenvs", "her", "--num-threads", "1", "--seed", "0", *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_the_plain_rl_zoo_command_fails_on_the_policy(tmp_path: Path) -> None:
    result = _zoo(tmp_path, "-n", "1200")
    assert result.returncode != 0
    assert "You must use `MultiInputPolicy` when working with dict observation space" in result.stderr


def test_the_rl_zoo_runs_our_hyperparameter_file(tmp_path: Path) -> None:
    result = _zoo(tmp_path, "-n", "1200", "--conf-file", str(ROOT / "examples" / "hyperparams" / "dqn.yml"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert list((tmp_path / "logs" / "dqn").glob("goalenvs-BitFlip-v0_*/goalenvs-BitFlip-v0.zip"))
