"""Encoded steps for the her tests: observations ``[env, episode, step]``, so a sample says where it came from."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

KEYS = ("observation", "achieved_goal", "desired_goal")
SPACE = spaces.Dict({key: spaces.Box(-1e6, 1e6, (3,), np.float64) for key in KEYS})
ACTION_SPACE = spaces.Box(-1, 1, (2,), np.float32)


def reward_fn(achieved_goal: np.ndarray, desired_goal: np.ndarray, infos: Any) -> np.ndarray:
    return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)


def terminated_fn(achieved_goal: np.ndarray, desired_goal: np.ndarray, infos: Any) -> np.ndarray:
    return np.all(achieved_goal == desired_goal, axis=-1)


class EncodedGoalEnv(gym.Env):
    """Only the spaces and ``compute_reward`` of a goal env (the stable-baselines3 buffer's env)."""

    observation_space = SPACE
    action_space = ACTION_SPACE

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return {key: np.zeros(3) for key in KEYS}, {}

    def step(self, action: Any):
        return self.reset()[0], 0.0, False, False, {}

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        return reward_fn(achieved_goal, desired_goal, info)


def encoded_steps(n_envs: int, n_steps: int, lengths: list[list[int]], start: int = 0):
    """``n_steps`` steps of every env: observations ``[env, episode, step]``, episode lengths cycled
    from ``lengths[env]``, odd episodes terminated and even ones truncated; steps before ``start``
    are generated and skipped (so a feed can go on where an earlier one stopped)."""
    ordinal = [0] * n_envs
    step = [0] * n_envs
    for k in range(start + n_steps):
        obs = {key: np.zeros((n_envs, 3)) for key in KEYS}
        nxt = {key: np.zeros((n_envs, 3)) for key in KEYS}
        terminated = np.zeros(n_envs, bool)
        truncated = np.zeros(n_envs, bool)
        for env in range(n_envs):
            o, t = ordinal[env], step[env]
            obs["observation"][env] = obs["achieved_goal"][env] = [env, o, t]
            nxt["observation"][env] = nxt["achieved_goal"][env] = [env, o, t + 1]
            obs["desired_goal"][env] = nxt["desired_goal"][env] = [env, o, -1]
            ends = t + 1 == lengths[env][o % len(lengths[env])]
            terminated[env] = ends and o % 2 == 1
            truncated[env] = ends and o % 2 == 0
            step[env] = 0 if ends else t + 1
            ordinal[env] += ends
        if k >= start:
            actions = np.full((n_envs, 2), k % 7 / 7, np.float32)
            rewards = np.full(n_envs, k % 5, np.float32)
            infos = [{"k": k, "env": env} for env in range(n_envs)]
            yield obs, actions, rewards, terminated, truncated, infos, nxt


BUFFER_LENGTHS = [[4, 2, 6], [3, 5]]
BUFFER_STEPS = 41


def feed_buffer(buffer: Any, n_steps: int, start: int = 0) -> None:
    """Feed the stable-baselines3 buffer as an algorithm does (``done`` and ``TimeLimit.truncated``)."""
    for obs, actions, rewards, terminated, truncated, _, nxt in encoded_steps(
        2, n_steps, BUFFER_LENGTHS, start
    ):
        infos = [{"TimeLimit.truncated": bool(t)} for t in truncated]
        buffer.add(obs, nxt, actions, rewards, terminated | truncated, infos)


def build_buffer() -> Any:
    from stable_baselines3.common.vec_env import DummyVecEnv

    from her import HerReplayBuffer

    env = DummyVecEnv([EncodedGoalEnv] * 2)
    buffer = HerReplayBuffer(80, SPACE, ACTION_SPACE, env, device="cpu", n_envs=2, seed=11)
    feed_buffer(buffer, BUFFER_STEPS)
    return buffer
