"""Checks the MuJoCo families' tests (Fetch, HandReach, HandManipulate) make alike."""

from __future__ import annotations

import gymnasium as gym


def assert_ids_truncate_themselves(ids: list[str], *, after: int) -> None:
    """Every id's spec has no ``TimeLimit`` (the env truncates itself after ``after`` steps,
    Gymnasium-Robotics' ``TimeLimit``, so that ``compute_truncated`` agrees with ``step``) and the reward
    type its name says; an episode of the first id is truncated at step ``after`` and never terminated."""
    for env_id in ids:
        spec = gym.spec(env_id)
        assert spec.max_episode_steps is None
        assert spec.kwargs["reward_type"] == ("dense" if "Dense" in env_id else "sparse")
    env = gym.make(ids[0])
    assert env.unwrapped.max_steps == after
    env.reset(seed=0)
    flags = [env.step(env.action_space.sample())[2:4] for _ in range(after)]
    assert flags == [(False, False)] * (after - 1) + [(False, True)]
