"""Parking steps/s: our single and native vector env against highway-env's ``parking-v0``.

Each loop steps with uniform random actions and resets on episode end, as a training loop does
(random driving crashes into a wall after ~50-150 steps, so resets are part of the measure).
Both single envs are made with ``gym.make`` (same wrappers). highway-env has no vector env, so the
vector rows compare env-steps/s against its single env's steps/s. The vector env autoresets next-step
(Gymnasium's default) unless the row says same-step.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

import goalenvs
from benchmarks.common import Row, median_rate, single_env_loop
from goalenvs.envs.parking import ParkingVectorEnv

gym.register_envs(goalenvs)


def _single_loop(env: gym.Env, n_steps: int):
    return single_env_loop(
        env, list(np.random.default_rng(0).uniform(-1, 1, (n_steps, 2)).astype(np.float32))
    )


def _vector_loop(env: ParkingVectorEnv, n_steps: int):
    actions = np.random.default_rng(0).uniform(-1, 1, (n_steps, env.num_envs, 2)).astype(np.float32)

    def loop() -> None:
        env.reset(seed=0)
        for step_actions in actions:
            env.step(step_actions)  # autoreset within the vector env: no Python work per env

    return loop


def run(quick: bool) -> list[Row]:
    import highway_env

    gym.register_envs(highway_env)
    repeats = 3 if quick else 5
    peer_steps, single_steps, vec_steps = (100, 2_000, 50) if quick else (500, 20_000, 400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # highway-env's deprecation noise
        peer_env = gym.make("parking-v0")
        peer = median_rate(_single_loop(peer_env, peer_steps), peer_steps, repeats)
    ours = median_rate(_single_loop(gym.make("goalenvs/Parking-v0"), single_steps), single_steps, repeats)
    rows = [Row("parking", "single env", "steps/s", ours, peer, "highway-env parking-v0")]
    parked = gym.make("goalenvs/Parking-v0", vehicles_count=10)
    ours_parked = median_rate(_single_loop(parked, single_steps), single_steps, repeats)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer_parked_env = gym.make("parking-v0", config={"vehicles_count": 10})
        peer_parked = median_rate(_single_loop(peer_parked_env, peer_steps), peer_steps, repeats)
    rows.append(
        Row("parking", "single env, 10 parked cars", "steps/s", ours_parked, peer_parked, "highway-env")
    )
    for num_envs in (256,) if quick else (16, 256, 1024):
        vec = ParkingVectorEnv(num_envs=num_envs)
        rate = median_rate(_vector_loop(vec, vec_steps), vec_steps * num_envs, repeats)
        rows.append(
            Row("parking", f"vector env x{num_envs}", "env-steps/s", rate, peer, "highway-env parking-v0")
        )
    vec = ParkingVectorEnv(num_envs=256, vehicles_count=10)
    rate = median_rate(_vector_loop(vec, vec_steps), vec_steps * 256, repeats)
    rows.append(
        Row("parking", "vector env x256, 10 parked cars", "env-steps/s", rate, peer_parked, "highway-env")
    )
    same_step = ParkingVectorEnv(num_envs=256, autoreset_mode=AutoresetMode.SAME_STEP)
    rate = median_rate(_vector_loop(same_step, vec_steps), vec_steps * 256, repeats)
    rows.append(
        Row(
            "parking",
            "vector env x256, same-step autoreset",
            "env-steps/s",
            rate,
            peer,
            "highway-env parking-v0",
        )
    )
    return rows
