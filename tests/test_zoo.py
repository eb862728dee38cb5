"""goalenvs.zoo: the tuned settings the RL Zoo's ``--conf-file goalenvs.zoo.<algo>`` and examples/train.py
read. Every id has an entry in each module that claims it, in plain Python values, and importing the
modules imports no learning library (the RL Zoo runs are in tests/examples/test_rl_zoo.py)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import goalenvs

IDS = [entry.id for entry in goalenvs.ENVS]
# The ids each module claims (its docstring says so): dqn and tqc between them every id, the default
# algorithm of examples/train.py for each (dqn for BitFlip, tqc for the rest).
CLAIMS = {
    "dqn": [i for i in IDS if "BitFlip" in i],
    "tqc": [i for i in IDS if "BitFlip" not in i],
    "sac": ["goalenvs/Parking-v0", "goalenvs/FetchReach-v0", "goalenvs/FetchReachDense-v0"],
    "sac_cpu": ["goalenvs/Parking-v0"],
    "tqc_cpu": ["goalenvs/FetchPush-v0"],
}


def entries(algo: str) -> dict[str, dict[str, Any]]:
    return importlib.import_module(f"goalenvs.zoo.{algo}").hyperparams


@pytest.mark.parametrize("algo", list(CLAIMS))
def test_each_module_has_an_entry_for_every_id_it_claims_and_no_other(algo: str) -> None:
    assert sorted(entries(algo)) == sorted(CLAIMS[algo])


def test_every_id_has_an_entry() -> None:
    assert sorted(i for algo in ("dqn", "tqc") for i in entries(algo)) == sorted(IDS)


@pytest.mark.parametrize("algo", list(CLAIMS))
def test_the_values_are_plain_python_the_rl_zoo_takes(algo: str) -> None:
    """JSON-able values (what run.json and the RL Zoo's config.yml hold); the buffer named as the RL Zoo
    ``eval``s it; policy_kwargs and replay_buffer_kwargs mappings (the RL Zoo passes them as they are)."""
    for env_id, entry in entries(algo).items():
        assert json.loads(json.dumps(entry)) == entry, env_id
        assert entry["policy"] == "MultiInputPolicy" and entry["n_timesteps"] >= 1
        assert entry["replay_buffer_class"] == "__import__('her').HerReplayBuffer"
        assert isinstance(entry["policy_kwargs"], dict) and isinstance(entry["replay_buffer_kwargs"], dict)


def test_importing_the_modules_imports_no_learning_library() -> None:
    script = (
        "import importlib, json, sys\n"
        f"for algo in {list(CLAIMS)!r}:\n"
        "    importlib.import_module('goalenvs.zoo.' + algo)\n"
        "heavy = ('torch', 'stable_baselines3', 'sb3_contrib', 'rl_zoo3', 'her')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=root, check=True
    )
    assert json.loads(result.stdout) == []


@pytest.mark.parametrize("algo", list(CLAIMS))
def test_examples_train_accepts_every_entry(algo: str) -> None:
    """Each entry passes examples/train.py's key-by-key check for its algorithm."""
    pytest.importorskip("sb3_contrib")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from sb3_run import algorithms, check_hyperparams, evaluate_entry

    for env_id, entry in entries(algo).items():
        params = evaluate_entry(check_hyperparams(entry, algo, algorithms()[algo.split("_")[0]], env_id))
        assert params.keys() == entry.keys()
