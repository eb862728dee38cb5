"""SAC + HER on FetchReach and Parking: ``--conf-file goalenvs.zoo.sac``.

FetchReach (and its Dense twin): the RL Zoo's values (rl_zoo3 2.9.2 hyperparams/sac.yml, FetchReach-v1).
Parking: the values of ``tqc``'s entry, which the RL Zoo has no SAC entry for; ``sac_cpu`` is Parking
sized for a CPU.
"""

from __future__ import annotations

from typing import Any

from goalenvs.zoo import HER_BUFFER

FETCH_REACH: dict[str, Any] = {
    "n_timesteps": 10_000,
    "policy": "MultiInputPolicy",
    "buffer_size": 1_000_000,
    "ent_coef": "auto",
    "batch_size": 256,
    "gamma": 0.95,
    "learning_rate": 1e-3,
    "learning_starts": 1000,
    # VecNormalize, as the RL Zoo: FetchReach does not learn in 10k steps without it (docs/training.md)
    "normalize": True,
    "replay_buffer_class": HER_BUFFER,
    "replay_buffer_kwargs": {"goal_selection_strategy": "future", "n_sampled_goal": 4},
    "policy_kwargs": {"net_arch": [64, 64]},
}

PARKING: dict[str, Any] = {
    "n_timesteps": 100_000,
    "policy": "MultiInputPolicy",
    "buffer_size": 1_000_000,
    "batch_size": 512,
    "gamma": 0.98,
    "learning_rate": 1.5e-3,
    "learning_starts": 500,
    "tau": 0.005,
    "replay_buffer_class": HER_BUFFER,
    "replay_buffer_kwargs": {"goal_selection_strategy": "episode", "n_sampled_goal": 4},
    "policy_kwargs": {"net_arch": [512, 512, 512]},
}

hyperparams: dict[str, dict[str, Any]] = {
    "goalenvs/FetchReach-v0": FETCH_REACH,
    "goalenvs/FetchReachDense-v0": FETCH_REACH,
    "goalenvs/Parking-v0": PARKING,
}
