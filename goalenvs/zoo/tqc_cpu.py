"""TQC + HER on FetchPush sized for a CPU: ``--conf-file goalenvs.zoo.tqc_cpu`` (results: docs/training.md).

A [256, 256, 256] network and batch 256 (``tqc``'s FetchPush entry, the RL Zoo's, uses [512, 512, 512]
x 2048 and 1M steps), 4 envs with 2 gradient steps per 4 transitions (the HER paper's DDPG did 0.4 per
transition), observations normalised as in the HER paper. Short of 90% success after 200k steps: it
needs about 1M.
"""

from __future__ import annotations

from typing import Any

from goalenvs.zoo import HER_BUFFER

hyperparams: dict[str, dict[str, Any]] = {
    "goalenvs/FetchPush-v0": {
        "n_timesteps": 200_000,
        "policy": "MultiInputPolicy",
        "n_envs": 4,
        "buffer_size": 1_000_000,
        "batch_size": 256,
        "gamma": 0.95,
        "learning_rate": 1e-3,
        "tau": 0.05,
        "learning_starts": 1000,
        "train_freq": 1,
        "gradient_steps": 2,
        "normalize": {"norm_obs": True, "norm_reward": False},
        "replay_buffer_class": HER_BUFFER,
        "replay_buffer_kwargs": {"goal_selection_strategy": "future", "n_sampled_goal": 4},
        "policy_kwargs": {"net_arch": [256, 256, 256], "n_critics": 2},
    },
}
