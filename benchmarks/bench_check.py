"""How long ``check_goal_env`` takes with the default ``n_steps``, next to stable-baselines3's ``check_env``.

The peer checks far less (three goal-env properties on a few steps), so it is expected to be faster;
the row shows what our extra checks cost. The target is a Fetch-sized env (observation 25, goal 3)
checked in under 10 s: goalenvs' FetchPush (MuJoCo, 20 physics substeps per step); PointMaze is a
Gymnasium-Robotics env, for a third-party one.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym

from benchmarks.common import Row, median_seconds
from goalenvs import check_goal_env


def _cases() -> list[tuple[str, Any]]:
    import goalenvs

    gym.register_envs(goalenvs)
    cases: list[tuple[str, Any]] = [("goalenvs/FetchPush-v0", lambda: gym.make("goalenvs/FetchPush-v0"))]
    try:
        import gymnasium_robotics

        gym.register_envs(gymnasium_robotics)
        cases.append(("PointMaze_UMaze-v3", lambda: gym.make("PointMaze_UMaze-v3")))
    except ImportError:
        pass
    return cases


def run(quick: bool) -> list[Row]:
    from stable_baselines3.common.env_checker import check_env

    repeats = 1 if quick else 3
    rows = []
    for name, make in _cases():
        env = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert check_goal_env(env).passed or name.startswith("PointMaze")
            ours = median_seconds(lambda env=env: check_goal_env(env), repeats)
            # SB3's check_env calls env.compute_reward directly, which a Gymnasium 1.x wrapper no longer
            # forwards, so it gets the bare env.
            bare = env.unwrapped
            peer = median_seconds(
                lambda bare=bare: check_env(bare, warn=False, skip_render_check=True), repeats
            )
        env.close()
        rows.append(Row("check", f"{name}, n_steps=200", "s per check", ours, peer, "SB3 check_env", False))
    return rows
