"""The benchmarks' own arithmetic: what a row divides by must count what it says."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from benchmarks.bench_ddpg_update import update_flop  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import her_ddpg  # noqa: E402


@pytest.mark.parametrize(("hidden", "layers", "batch"), [(256, 3, 64), (32, 2, 16)])
def test_update_flop_counts_every_pass_of_one_update(hidden: int, layers: int, batch: int) -> None:
    """Torch's count of one update's matrix products, against the passes counted by hand: the targets'
    forward (actor a, critic c), the critic's forward and twice-as-costly backward (3c), the actor's
    forward and backward (3a) through the critic's forward and its backward to its input (2c), less
    the two first layers' gradients by their input, which no update needs (the batch's inputs)."""
    obs_dim, goal_dim, act_dim = 25, 3, 4
    cfg = her_ddpg.Config(hidden=hidden, layers=layers, bf16=False)
    agent = her_ddpg.Agent(cfg, obs_dim, goal_dim, act_dim)
    rng = np.random.default_rng(0)

    def obs() -> dict[str, np.ndarray]:
        return {
            "observation": rng.standard_normal((batch, obs_dim)).astype(np.float32),
            "desired_goal": rng.standard_normal((batch, goal_dim)).astype(np.float32),
        }

    arrays = {
        "observations": obs(),
        "next_observations": obs(),
        "actions": rng.uniform(-1, 1, (batch, act_dim)).astype(np.float32),
        "rewards": -np.ones(batch, np.float32),
        "terminateds": np.zeros(batch, np.float32),
    }

    def macs(n_in: int, n_out: int) -> int:
        dims = [n_in] + [hidden] * layers + [n_out]
        return sum(a * b for a, b in zip(dims[:-1], dims[1:], strict=False))

    actor, critic = macs(obs_dim + goal_dim, act_dim), macs(obs_dim + goal_dim + act_dim, 1)
    by_hand = 2 * batch * (4 * actor + 6 * critic)
    first_layers = 2 * batch * ((obs_dim + goal_dim) * hidden + (obs_dim + goal_dim + act_dim) * hidden)
    assert update_flop(agent, arrays) == by_hand - first_layers
