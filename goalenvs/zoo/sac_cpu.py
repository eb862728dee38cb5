"""SAC + HER on Parking sized for a CPU: ``--conf-file goalenvs.zoo.sac_cpu`` (results: docs/training.md).

A [256, 256] network and batch 256 (about 15x less compute per gradient step than the RL Zoo's
[512, 512, 512] x 512), with the fast-learning values the RL Zoo uses for SAC/TQC + HER on Fetch:
gamma 0.95, tau 0.05, learning rate 1e-3, 'future' goals.
"""

from __future__ import annotations

from typing import Any

from goalenvs.zoo import HER_BUFFER

hyperparams: dict[str, dict[str, Any]] = {
    "goalenvs/Parking-v0": {
        "n_timesteps": 100_000,
        "policy": "MultiInputPolicy",
        "buffer_size": 1_000_000,
        "batch_size": 256,
        "gamma": 0.95,
        "learning_rate": 1e-3,
        "learning_starts": 1000,
        "tau": 0.05,
        "replay_buffer_class": HER_BUFFER,
        "replay_buffer_kwargs": {"goal_selection_strategy": "future", "n_sampled_goal": 4},
        "policy_kwargs": {"net_arch": [256, 256]},
    },
}
