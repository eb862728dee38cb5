"""Smoke test of the training entry point: a short run per env family writes outputs that load."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")
pytest.importorskip("matplotlib")
pytest.importorskip("imageio")
pytest.importorskip("yaml")
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))  # as the scripts import their modules

import enjoy  # noqa: E402
import train  # noqa: E402

# (argv, whether a GIF is expected). Timesteps pass learning_starts, so some gradient steps run.
RUNS = {
    "bitflip": (["--env", "goalenvs/BitFlip-v0", "--algo", "dqn", "--timesteps", "1200",
                 "--env-kwargs", '{"n_bits": 4}'], True),
    "parking": (["--env", "goalenvs/Parking-v0", "--algo", "tqc", "--timesteps", "600"], True),
    "fetch": (["--env", "goalenvs/FetchReach-v0", "--algo", "sac", "--timesteps", "1100"], True),
}  # fmt: skip


def _mujoco_renders() -> bool:
    """Whether MuJoCo's offscreen renderer works here (it needs an EGL or OSMesa library)."""
    import gymnasium as gym

    try:
        gym.make("goalenvs/FetchReach-v0", render_mode="rgb_array").render()
    except Exception:  # any GL failure: no library, no device
        return False
    return True


@pytest.mark.parametrize(
    "family",
    [pytest.param(f, marks=pytest.mark.slow) if f == "parking" else f for f in RUNS],  # parking: 20 s
)
def test_train_writes_outputs_that_load(family: str, tmp_path: Path) -> None:
    if family == "fetch":
        pytest.importorskip("mujoco")
        pytest.importorskip("gymnasium_robotics")
    argv, gif = RUNS[family]
    gif = gif and (family != "fetch" or _mujoco_renders())
    out = tmp_path / family
    argv = [*argv, "--seed", "0", "--output", str(out), "--eval-episodes", "2", "--no-progress"]
    if not gif:
        argv.append("--no-gif")
    success = train.main(argv)
    assert 0.0 <= success <= 1.0

    run = json.loads((out / "run.json").read_text())
    assert run["env"] == argv[1] and run["algo"] == argv[3] and run["success_rate"] == success
    assert run["timesteps"] >= int(argv[5])
    with (out / "eval.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 2 and int(rows[-1]["timesteps"]) == run["timesteps"]
    assert all(0.0 <= float(r["success_rate"]) <= 1.0 for r in rows)
    assert run["commands"] and run["status"] == "finished" and run["threads"] == 1
    assert torch.get_num_threads() == 1, "train.py chooses its torch threads (default 1)"
    assert all(float(r["cpu_time_s"]) >= 0 for r in rows)
    assert (out / "success.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "policy.gif").exists() == gif
    if gif:
        assert (out / "policy.gif").read_bytes()[:6] == b"GIF89a"

    # FetchReach trains on VecNormalize (normalize: True in the hyperparameter files): its statistics
    # are saved, and enjoy.load puts them back, frozen.
    assert (out / "vecnormalize.pkl").exists() == (family == "fetch")
    model, loaded_run = enjoy.load(out)
    normalizer = model.get_vec_normalize_env()
    assert (normalizer is not None) == (family == "fetch")
    if normalizer is not None:
        assert not normalizer.training and not normalizer.norm_reward
    assert loaded_run == run
    obs = model.get_env().reset()
    action, _ = model.predict(obs, deterministic=True)
    assert model.action_space.contains(action[0])
