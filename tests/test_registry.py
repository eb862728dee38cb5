"""Every registered goalenvs id: API checks, determinism, pickling, vector env == N single envs."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

from goalenvs._util import env_info
from goalenvs.registration import ENVS
from tests.conftest import make_params

ALL = make_params()
VECTOR = make_params([e for e in ENVS if e.vector_entry_point])
N_STEPS = 60


def _equal(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return np.array_equal(np.asarray(a), np.asarray(b))


def _rollout(env: gym.Env, seed: int, n_steps: int = N_STEPS):
    """Obs/reward/flags of ``n_steps`` random steps (actions seeded too), resetting on episode end."""
    env.action_space.seed(seed)
    obs, info = env.reset(seed=seed)
    out = [(obs, info)]
    for _ in range(n_steps):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        out.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            out.append(env.reset())
    return out


def test_registry_ids_are_namespaced_and_described():
    assert ENVS, "the registry is empty"
    for entry in ENVS:
        assert entry.id.startswith("goalenvs/") and entry.id in gym.registry
        assert entry.description.strip()


def test_entry_points_are_strings_that_build_the_entry_class():
    """Gymnasium writes a spec as JSON (Minari datasets) only when its entry points are strings."""
    from gymnasium.envs.registration import load_env_creator

    for entry in ENVS:
        spec = gym.spec(entry.id)
        assert spec.entry_point == entry.maker and entry.maker.startswith("goalenvs.registration:make_")
        assert spec.vector_entry_point is None or isinstance(spec.vector_entry_point, str)
        assert load_env_creator(entry.maker).__name__ == entry.maker.split(":")[1]
        spec.to_json()  # raises for a callable entry point
    for param in ALL:  # the class each maker builds is its entry's (ids whose dependencies are installed)
        if not param.marks:
            entry = next(e for e in ENVS if e.id == param.values[0])
            assert type(gym.make(entry.id).unwrapped) is load_env_creator(entry.entry_point)


def test_import_is_light():
    code = "import sys, goalenvs; print(sorted(m for m in ('mujoco', 'torch', 'stable_baselines3') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# Warnings a family may raise on purpose, with the reason. Fetch keeps Gymnasium-Robotics' unbounded
# observation boxes (positions, velocities; users and VecNormalize rely on the same spaces): made-up
# finite bounds could be left by a block knocked off the table, which would be a real defect.
ALLOWED_CHECK_ENV_WARNINGS = {
    "goalenvs/Fetch": r".*Box observation space (minimum|maximum) value is (-)?infinity",
    "goalenvs/Hand": r".*Box observation space (minimum|maximum) value is (-)?infinity",  # as Fetch
}


@pytest.mark.parametrize("env_id", ALL)
def test_gymnasium_check_env(env_id):
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning from the checker is a defect too
        for prefix, pattern in ALLOWED_CHECK_ENV_WARNINGS.items():
            if env_id.startswith(prefix):
                warnings.filterwarnings("ignore", message=pattern)
        gym_check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", ALL)
def test_sb3_check_env(env_id):
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    sb3_checker.check_env(gym.make(env_id).unwrapped, warn=True)


@pytest.mark.parametrize("env_id", ALL)
def test_same_seed_same_rollout(env_id):
    first, second = _rollout(gym.make(env_id), seed=7), _rollout(gym.make(env_id), seed=7)
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert all(_equal(x, y) for x, y in zip(a, b, strict=True))
    other = _rollout(gym.make(env_id), seed=8)
    assert not _equal(first[0][0], other[0][0]), "a different seed should give a different start"


@pytest.mark.parametrize("env_id", ALL)
def test_reward_is_compute_reward(env_id):
    env = gym.make(env_id)
    env.action_space.seed(0)
    env.reset(seed=0)
    goal_env = env.unwrapped
    for _ in range(N_STEPS):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        args = (obs["achieved_goal"], obs["desired_goal"], info)
        assert reward == goal_env.compute_reward(*args)
        assert terminated == goal_env.compute_terminated(*args)
        assert truncated == goal_env.compute_truncated(*args)
        if terminated or truncated:
            env.reset()


@pytest.mark.parametrize("env_id", ALL)
def test_pickle_and_deepcopy_continue_identically(env_id):
    env = gym.make(env_id)
    env.reset(seed=3)
    env.action_space.seed(3)
    for _ in range(3):  # mid-episode
        env.step(env.action_space.sample())
    clones = [pickle.loads(pickle.dumps(env)), copy.deepcopy(env)]
    for _ in range(8):  # the original itself steps on beside its copies, across an episode end
        action = env.action_space.sample()
        a = env.step(action)
        for clone in clones:
            b = clone.step(action)
            assert all(_equal(x, y) for x, y in zip(a, b, strict=True))
        if a[2] or a[3]:
            seed = int(env.np_random.integers(1000))
            for e in (env, *clones):
                e.reset(seed=seed)


@pytest.mark.parametrize("env_id", VECTOR)
@pytest.mark.parametrize("num_envs", [1, 5])
def test_vector_env_equals_single_envs(env_id, num_envs):
    """Env i of the native vector env seeded s is the single env seeded s + i, autoreset included."""
    seed = 11
    vec = gym.make_vec(env_id, num_envs=num_envs)
    assert vec.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    reference = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync")
    vec.action_space.seed(seed)
    obs_v, _ = vec.reset(seed=seed)
    obs_r, _ = reference.reset(seed=seed)
    assert _equal(obs_v, obs_r)
    for _ in range(N_STEPS):
        actions = vec.action_space.sample()
        out_v, out_r = vec.step(actions), reference.step(actions)
        for name, x, y in zip(
            ("obs", "reward", "terminated", "truncated"), out_v[:4], out_r[:4], strict=True
        ):
            assert _equal(x, y), name
        for i in range(num_envs):  # each env's own info (a key may be absent, as after a reset)
            assert _equal(env_info(out_v[4], i), env_info(out_r[4], i))
