"""DQN + HER on BitFlip: ``--conf-file goalenvs.zoo.dqn`` (RL Zoo, ``examples/train.py``'s default for BitFlip)."""

from __future__ import annotations

from typing import Any

from goalenvs.zoo import HER_BUFFER

hyperparams: dict[str, dict[str, Any]] = {
    "goalenvs/BitFlip-v0": {
        "env_kwargs": {"n_bits": 15},
        "n_timesteps": 10_000,
        "policy": "MultiInputPolicy",
        # Decayed linearly to 0 (the RL Zoo's lin_ schedule): no late dips in success, which a constant 1e-3 has.
        "learning_rate": "lin_2e-3",
        "buffer_size": 100_000,
        "learning_starts": 1000,
        "batch_size": 256,
        "gamma": 0.95,
        "target_update_interval": 500,
        "exploration_fraction": 0.1,
        "exploration_final_eps": 0.02,
        "replay_buffer_class": HER_BUFFER,
        "replay_buffer_kwargs": {"goal_selection_strategy": "future", "n_sampled_goal": 4},
        "policy_kwargs": {"net_arch": [256, 256]},
    },
}
