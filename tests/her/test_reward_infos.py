"""Rewards that read the info: declared keys (``reward_info_keys``) are stored and passed when relabelling."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import goalenvs
from her import HerStorage

gym.register_envs(goalenvs)
pytest.importorskip("stable_baselines3")


def feed(buffer, env, n_steps: int, crashed: bool) -> None:
    """``n_steps`` of one episode (observations from the env, the crash flag as given), then its end."""
    env.seed(0)
    obs = env.reset()
    action = np.zeros((1, *env.action_space.shape), np.float32)
    for t in range(n_steps):
        last = t == n_steps - 1
        nxt = {key: value + 0.1 * (t + 1) for key, value in obs.items()}  # the car moves, the goal stays
        nxt["desired_goal"] = obs["desired_goal"]
        infos = [{"crashed": crashed, "TimeLimit.truncated": last}]
        buffer.add(obs, nxt, action, np.zeros(1, np.float32), np.array([last]), infos)
        obs = nxt


def test_relabelled_parking_crashes_keep_their_penalty_by_default():
    from stable_baselines3.common.vec_env import DummyVecEnv

    from her import HerReplayBuffer

    env = DummyVecEnv([lambda: gym.make("goalenvs/Parking-v0")])
    parking = env.envs[0].unwrapped
    assert parking.reward_info_keys == ("crashed",)
    buffer = HerReplayBuffer(1000, env.observation_space, env.action_space, env, device="cpu", seed=0)
    assert buffer.storage.info_keys == ("crashed",)
    feed(buffer, env, 20, crashed=True)
    batch = buffer.storage.sample(64)
    relabelled = batch["relabelled"]
    achieved = batch["next_observations"]["achieved_goal"][relabelled]
    goals = batch["observations"]["desired_goal"][relabelled]
    crashed = parking.compute_reward(achieved, goals, {"crashed": np.ones(len(goals), bool)})
    safe = parking.compute_reward(achieved, goals, {"crashed": np.zeros(len(goals), bool)})
    np.testing.assert_allclose(batch["rewards"][relabelled], crashed, rtol=1e-6)
    assert (crashed < safe).all()  # the crash term is there


def test_an_undeclared_info_reading_reward_is_served_by_copy_info_dict():
    space = spaces.Dict(
        {key: spaces.Box(-10, 10, (2,)) for key in ("observation", "achieved_goal", "desired_goal")}
    )
    seen = []

    def reward_fn(achieved, desired, infos):  # reads "bonus", declared nowhere
        seen.append(infos)
        bonus = 0.0 if infos is None else np.array([info["bonus"] for info in infos])
        return -np.linalg.norm(achieved - desired, axis=-1) + bonus

    for copy_info_dict in (True, False):
        storage = HerStorage(100, space, ((1,), np.float32), reward_fn, copy_info_dict=copy_info_dict, seed=0)
        for t in range(10):
            obs = {key: np.full((1, 2), t, np.float32) for key in space.spaces}
            nxt = {key: np.full((1, 2), t + 1, np.float32) for key in space.spaces}
            storage.add(obs, np.zeros((1, 1)), [0.0], [False], [t == 9], [{"bonus": 5.0}], nxt)
        batch = storage.sample(20)
        expected_bonus = 5.0 if copy_info_dict else 0.0
        relabelled = batch["relabelled"]
        distance = np.linalg.norm(
            batch["next_observations"]["achieved_goal"] - batch["observations"]["desired_goal"], axis=-1
        )
        np.testing.assert_allclose(
            batch["rewards"][relabelled], (expected_bonus - distance)[relabelled], rtol=1e-6
        )
    assert isinstance(seen[0], np.ndarray) and seen[0].dtype == object and seen[1] is None


def test_info_keys_given_explicitly_with_their_specs():
    space = {key: ((2,), np.float64) for key in ("observation", "achieved_goal", "desired_goal")}

    def reward_fn(achieved, desired, infos):
        return -np.linalg.norm(achieved - desired, axis=-1) - 10.0 * infos["crashed"]

    storage = HerStorage(100, space, ((1,), np.float32), reward_fn, info_keys={"crashed": ((), bool)}, seed=0)
    for t in range(6):
        obs = {key: np.full((1, 2), t, np.float64) for key in space}
        nxt = {key: np.full((1, 2), t + 1, np.float64) for key in space}
        storage.add(obs, np.zeros((1, 1)), [0.0], [False], [t == 5], {"crashed": np.array([t == 5])}, nxt)
    batch = storage.sample(200)
    crashed = batch["observations"]["observation"][:, 0] == 5
    relabelled = batch["relabelled"]
    assert (batch["rewards"][relabelled & crashed] <= -10).all()
    assert (batch["rewards"][relabelled & ~crashed] > -10).all()
    with pytest.raises(ValueError, match="every info must hold 'crashed'"):
        storage.add(obs, np.zeros((1, 1)), [0.0], [False], [False], [{}], nxt)
