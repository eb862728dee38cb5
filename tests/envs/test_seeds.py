"""Any seed Gymnasium accepts works on every goalenvs id, single and vector (issue 45).

``np.random.SeedSequence`` takes any int >= 0, and so does ``gym.Env.reset(seed=...)``; tools seed with
64-bit draws (Minari's DataCollector: ``secrets.randbits(64)``), so seeds >= 2**63 are everyday values.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tests.conftest import make_params

ALL = make_params()
HUGE = [2**100, 2**64 + 5, 2**64 - 1, 2**63]
N = 3


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return set(a) == set(b) and all(np.array_equal(a[key], b[key]) for key in a)


def _rows(obs: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    return {key: value[i] for key, value in obs.items()}


@pytest.mark.parametrize("env_id", ALL)
def test_a_huge_seed_resets_every_id_deterministically(env_id: str) -> None:
    env, twin = gym.make(env_id), gym.make(env_id)
    for seed in HUGE:
        first = env.reset(seed=seed)[0]
        assert _same(first, twin.reset(seed=seed)[0]), seed
        action = env.action_space.sample()
        assert _same(env.step(action)[0], twin.step(action)[0]), seed
    # Seeds that differ above bit 64 give different episodes (not the seed modulo 2**64).
    starts = [env.reset(seed=seed)[0] for seed in (5, 2**64 + 5, 2**65 + 5)]
    assert not _same(starts[0], starts[1]) or not _same(starts[1], starts[2])
    env.close()
    twin.close()


@pytest.mark.parametrize("env_id", ALL)
def test_a_huge_seed_resets_every_vector_env_as_the_single_envs_seeded_s_plus_i(env_id: str) -> None:
    vec = gym.make_vec(env_id, num_envs=N)
    single = gym.make(env_id)
    for seed in (2**100, 2**64 - 2):  # the second crosses 2**64 inside the batch
        obs = vec.reset(seed=seed)[0]
        for i in range(N):
            assert _same(_rows(obs, i), single.reset(seed=seed + i)[0]), (seed, i)
        assert _same(obs, vec.reset(seed=seed)[0])
        vec.step(vec.action_space.sample())
    obs = vec.reset(seed=[2**70, 1, 2**64 + 5])[0]
    for i, seed in enumerate([2**70, 1, 2**64 + 5]):
        assert _same(_rows(obs, i), single.reset(seed=seed)[0])
    vec.close()
    single.close()


@pytest.mark.parametrize("env_id", ALL)
def test_a_negative_seed_is_refused_in_one_line_as_gymnasium_refuses_it(env_id: str) -> None:
    with pytest.raises(gym.error.Error, match="Seed must be greater or equal to zero") as single:
        gym.make(env_id).reset(seed=-1)
    vec = gym.make_vec(env_id, num_envs=2)
    for seed in (-1, [0, -(2**70)]):
        with pytest.raises(gym.error.Error, match=r"seed.* must be >= 0") as vector:
            vec.reset(seed=seed)
        assert isinstance(vector.value, ValueError) and "\n" not in str(vector.value)
    assert "\n" not in str(single.value)
    vec.close()
