"""Learning regression: DQN with her.HerReplayBuffer solves BitFlip quickly (kept small and seeded)."""

from __future__ import annotations

import pytest

pytest.importorskip("stable_baselines3", reason="the sb3 extra (stable-baselines3) is not installed")

import gymnasium as gym
import torch
from stable_baselines3 import DQN
from stable_baselines3.common.env_util import make_vec_env

import goalenvs  # noqa: F401  (registers goalenvs/BitFlip-v0)
from her import HerReplayBuffer

N_BITS = 8


def success_rate(model: DQN, episodes: int = 100) -> float:
    env = gym.make("goalenvs/BitFlip-v0", n_bits=N_BITS)
    successes = 0
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + episode)
        terminated = truncated = False
        while not (terminated or truncated):
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(int(action))
        successes += bool(info["is_success"])
    return successes / episodes


@pytest.mark.slow  # learning to solve a task: the slow tier
def test_dqn_with_her_solves_bitflip():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny network: extra threads only contend on a shared machine
    try:
        env = make_vec_env("goalenvs/BitFlip-v0", n_envs=1, env_kwargs=dict(n_bits=N_BITS), seed=0)
        model = DQN(
            "MultiInputPolicy",
            env,
            replay_buffer_class=HerReplayBuffer,
            replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"),
            learning_starts=100,
            exploration_fraction=0.3,
            exploration_final_eps=0.02,
            batch_size=128,
            learning_rate=1e-3,
            gamma=0.95,
            target_update_interval=250,
            policy_kwargs=dict(net_arch=[64, 64]),
            seed=0,
        )
        model.learn(5000)
    finally:
        torch.set_num_threads(threads)
    assert success_rate(model) > 0.9
