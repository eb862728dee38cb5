"""BitFlip steps/s: our single and native vector env against stable-baselines3's ``BitFlippingEnv``.

Each loop steps with random discrete actions and resets on episode end, as a training loop does.
The vector env autoresets next-step (Gymnasium's default) unless the row says same-step; the
same-step rows time Gymnasium's ``info["final_obs"]`` layout (an object array of per-env
observation dicts) against the opt-in ``batched_final_obs=True`` (one dict of batched arrays),
interleaved.
"""

from __future__ import annotations

import numpy as np
from gymnasium.vector import AutoresetMode

from benchmarks.common import Row, interleaved_rates, median_rate, single_env_loop
from goalenvs.envs.bitflip import BitFlipEnv, BitFlipVectorEnv

N_BITS = 10


def _single_loop(env, n_steps: int):
    return single_env_loop(env, np.random.default_rng(0).integers(0, N_BITS, n_steps).tolist())


def _vector_loop(env: BitFlipVectorEnv, n_steps: int):
    actions = np.random.default_rng(0).integers(0, N_BITS, (n_steps, env.num_envs))

    def loop() -> None:
        env.reset(seed=0)
        for step_actions in actions:
            env.step(step_actions)  # autoreset: no Python work per env

    return loop


def run(quick: bool) -> list[Row]:
    from stable_baselines3.common.envs import BitFlippingEnv

    repeats, n_steps, vec_steps = (3, 2_000, 50) if quick else (15, 20_000, 500)
    ours, peer = interleaved_rates(
        [
            _single_loop(BitFlipEnv(n_bits=N_BITS), n_steps),
            _single_loop(BitFlippingEnv(n_bits=N_BITS), n_steps),
        ],
        n_steps,
        repeats,
    )
    rows = [Row("bitflip", f"single env, n_bits={N_BITS}", "steps/s", ours, peer, "sb3 BitFlippingEnv")]
    for num_envs in (64, 1024):
        vec = BitFlipVectorEnv(num_envs=num_envs, n_bits=N_BITS)
        rate = median_rate(_vector_loop(vec, vec_steps), vec_steps * num_envs, repeats)
        rows.append(
            Row(
                "bitflip",
                f"vector env x{num_envs}, n_bits={N_BITS}",
                "env-steps/s",
                rate,
                peer,
                "sb3 BitFlippingEnv",
            )
        )
    same_step = [
        BitFlipVectorEnv(
            num_envs=1024, n_bits=N_BITS, autoreset_mode=AutoresetMode.SAME_STEP, batched_final_obs=b
        )
        for b in (False, True)
    ]
    rates = interleaved_rates([_vector_loop(vec, vec_steps) for vec in same_step], vec_steps * 1024, repeats)
    for rate, layout in zip(rates, ("object-array final_obs", "batched_final_obs"), strict=True):
        rows.append(
            Row(
                "bitflip",
                f"vector env x1024, n_bits={N_BITS}, same-step autoreset, {layout}",
                "env-steps/s",
                rate,
                peer,
                "sb3 BitFlippingEnv",
            )
        )
    return rows
