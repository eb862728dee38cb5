"""The RL Zoo on our ids with the settings goalenvs ships (``--conf-file goalenvs.zoo.<algo>``), one id of
each family, as the README and docs/training.md give the command; and the plain command's failure
(skipped without rl_zoo3). Each run: a few hundred steps with some gradient steps, about ten seconds."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

# Looked up, not imported: importing rl_zoo3 swaps Gymnasium's TimeLimit for one that adds
# info["TimeLimit.truncated"] at time-limit steps, in this whole test process (the Zoo runs in subprocesses).
if importlib.util.find_spec("rl_zoo3") is None or importlib.util.find_spec("optuna") is None:
    pytest.skip("rl_zoo3 and optuna (which rl_zoo3.train imports) are not installed", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]


def _zoo(tmp_path: Path, algo: str, env_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m rl_zoo3.train`` in an empty folder: no file of the clone, only importable modules (this
    tree's, on PYTHONPATH, so that an install of another tree is not what is tested)."""
    command = [sys.executable, "-m", "rl_zoo3.train", "--algo", algo, "--env", env_id]
    command += ["--gym-packages", "goalenvs", "--num-threads", "1", "--seed", "0", *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_the_plain_rl_zoo_command_fails_on_the_policy(tmp_path: Path) -> None:
    result = _zoo(tmp_path, "dqn", "goalenvs/BitFlip-v0", "-n", "300")
    assert result.returncode != 0
    assert "You must use `MultiInputPolicy` when working with dict observation space" in result.stderr


@pytest.mark.parametrize(
    ("algo", "env_id", "files"),
    [
        ("dqn", "goalenvs/BitFlip-v0", []),
        ("tqc", "goalenvs/Parking-v0", []),
        ("sac", "goalenvs/FetchReach-v0", ["vecnormalize.pkl"]),  # the entry's normalize: True
    ],
)
def test_the_rl_zoo_trains_with_the_shipped_settings(
    algo: str, env_id: str, files: list[str], tmp_path: Path
) -> None:
    if env_id.startswith("goalenvs/Fetch"):
        pytest.importorskip("mujoco")
    # learning_starts lowered so that a few hundred steps include gradient steps (HER sampling);
    # batch_size lowered to keep them quick: every other setting is the module's own.
    result = _zoo(tmp_path, algo, env_id, "--conf-file", f"goalenvs.zoo.{algo}", "-n", "300",
                  "--hyperparams", "learning_starts:200", "batch_size:32")  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    name = env_id.replace("/", "-")
    run = tmp_path / "logs" / algo / f"{name}_1"
    assert (run / f"{name}.zip").is_file()
    assert all((run / name / file).is_file() for file in files)
    data = json.loads(zipfile.ZipFile(run / f"{name}.zip").read("data"))
    assert data["replay_buffer_class"]["__module__"] == "her.sb3"  # our buffer, not stable-baselines3's
