"""Write pickles of a ``HerStorage`` and a ``her.HerReplayBuffer`` for the unpickling tests in tests/her.

The files committed here were written by the code of the commit before the storage was split into
``her/_layout.py``, ``her/_episodes.py`` and ``her/_sampling.py`` (the storage state was then one
flat ``__dict__``); ``examples/her_ddpg.py`` checkpoints and stable-baselines3's
``save_replay_buffer`` files of that time are pickles of the same kind. The tests load them with
today's code and compare the result with the same storages built and fed here by today's code.
The tests import this module for the feeds; run it only to record again, from the repository root,
with the code whose pickles must keep loading (recording with today's code would test nothing old)::

    python tests/her/data/record_legacy_pickles.py --overwrite

It writes ``tests/her/data/storage_v1.pkl`` (a dict of two ``HerStorage``) and
``tests/her/data/sb3_buffer_v1.pkl`` (a ``HerReplayBuffer``, without its env, as stable-baselines3
saves it).
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

HERE = Path(__file__).resolve().parent
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


#: name: (constructor arguments, episode lengths per env, steps fed before pickling)
STORAGES: dict[str, tuple[dict[str, Any], list[list[int]], int]] = {
    # One env, a small ring wrapped twice, steps still staged and an episode unfinished when pickled.
    "one_env": (dict(capacity=12, n_envs=1, flush_every=1000, seed=3), [[3, 1, 5, 2, 7]], 30),
    # Three envs: many short episodes (the episode table grows), an episode longer than the ring
    # (damaged), infos kept, the "episode" strategy, recomputed terminations.
    "three_envs": (
        dict(
            capacity=60,
            n_envs=3,
            copy_info_dict=True,
            goal_selection_strategy="episode",
            recompute_terminated=True,
            terminated_fn=terminated_fn,
            flush_every=7,
            seed=5,
        ),
        [[1], [4, 3], [2, 25, 3]],
        55,
    ),
}


def build_storages() -> dict[str, Any]:
    from her import HerStorage

    storages = {}
    for name, (kwargs, lengths, n_steps) in STORAGES.items():
        kwargs = dict(kwargs)
        storage = HerStorage(kwargs.pop("capacity"), SPACE, ACTION_SPACE, reward_fn, **kwargs)
        for args in encoded_steps(storage.n_envs, n_steps, lengths):
            storage.add(*args)
        storages[name] = storage
    return storages


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


def main() -> None:
    if "--overwrite" not in sys.argv[1:]:
        sys.exit("refusing to replace the recorded pickles without --overwrite (see the docstring)")
    storages = build_storages()
    for storage in storages.values():
        storage.reward_fn = storage.terminated_fn = None  # as examples/her_ddpg.py saves: no functions
    with (HERE / "storage_v1.pkl").open("wb") as f:
        pickle.dump(storages, f, protocol=5)
    with (HERE / "sb3_buffer_v1.pkl").open("wb") as f:
        pickle.dump(build_buffer(), f, protocol=5)


if __name__ == "__main__":
    main()
