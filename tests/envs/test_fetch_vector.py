"""FetchVectorEnv: env i of the vector env is the single Fetch env seeded s + i, bit for bit, in threads.

Equality is exact (``np.array_equal`` and ``==``, never a tolerance): each env of the vector env runs
the single env's own per-env code on its own ``MjData``, so nothing may differ, whatever the number
of threads or the autoreset mode.
"""

from __future__ import annotations

import copy
import pickle
import threading

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

pytest.importorskip("goalenvs.envs.fetch", reason="the Fetch tasks need mujoco (pip install goalenvs[fetch])")
if __import__("importlib").util.find_spec("gymnasium_robotics") is None:
    pytest.skip(
        "the Fetch tasks use gymnasium-robotics' assets (pip install goalenvs[fetch])",
        allow_module_level=True,
    )

import goalenvs
from goalenvs import check_goal_env
from goalenvs._util import env_info
from goalenvs.envs.fetch import FetchEnv, FetchVectorEnv

FETCH_IDS = [e.id for e in goalenvs.ENVS if e.name.startswith("Fetch")]
N_ENVS = 3  # with 2 threads: chunks of 2 and 1 envs
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


def _assert_obs_row(batch: dict, i: int, single: dict, where: str) -> None:
    assert batch.keys() == single.keys(), where
    for key in single:
        assert np.array_equal(batch[key][i], single[key]), f"{where}: {key}"


def _assert_info(vector_info: dict, i: int, single: dict, where: str) -> None:
    got = {k: v for k, v in env_info(vector_info, i).items() if k not in ("final_obs", "final_info")}
    assert got.keys() == single.keys(), f"{where}: keys {sorted(got)} != {sorted(single)}"
    for key, value in single.items():
        assert got[key] == value and np.asarray(got[key]).dtype == np.asarray(value).dtype, f"{where}: {key}"


def _check_step(vec_out: tuple, singles: list, actions: np.ndarray, pending: list, mode, t: int) -> None:
    """One vector step against each single env's step (or reset where the vector env autoresets)."""
    obs_v, reward_v, term_v, trunc_v, info_v = vec_out
    for i, env in enumerate(singles):
        where = f"step {t}, env {i}"
        if pending[i]:  # NEXT_STEP: the env starts over and ignores its action
            obs, info = env.reset()
            reward, terminated, truncated = 0.0, False, False
        else:
            obs, reward, terminated, truncated, info = env.step(actions[i])
        assert (reward_v[i], term_v[i], trunc_v[i]) == (reward, terminated, truncated), where
        ended = terminated or truncated
        if mode == AutoresetMode.SAME_STEP and ended:
            assert info_v["_final_obs"][i] and info_v["_final_info"][i], where
            final_obs = info_v["final_obs"][i]  # Gymnasium's layout: env i's own observation dict
            _assert_obs_row({k: v[None] for k, v in final_obs.items()}, 0, obs, where + " final_obs")
            _assert_info(info_v["final_info"], i, info, where + " final_info")
            obs, info = env.reset()  # what the vector env returns in its place
        elif mode == AutoresetMode.SAME_STEP and "final_obs" in info_v:
            assert not info_v["_final_obs"][i] and info_v["final_obs"][i] is None, where
        _assert_obs_row(obs_v, i, obs, where)
        _assert_info(info_v, i, info, where)
        pending[i] = mode == AutoresetMode.NEXT_STEP and ended


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("env_id", FETCH_IDS)
def test_vector_env_is_single_envs_bit_for_bit(env_id: str, mode: AutoresetMode) -> None:
    """Through several autoresets (5-step episodes), with 1 and 2 threads: the same bits as gym.make's envs."""
    seed = 10
    vecs = [
        gym.make_vec(env_id, num_envs=N_ENVS, max_steps=5, num_threads=t, autoreset_mode=mode) for t in (1, 2)
    ]
    assert [type(v) for v in vecs] == [FetchVectorEnv] * 2 and [v.num_threads for v in vecs] == [1, 2]
    singles = [[gym.make(env_id, max_steps=5) for _ in range(N_ENVS)] for _ in vecs]
    for vec, envs in zip(vecs, singles, strict=True):
        obs_v, info_v = vec.reset(seed=seed)
        assert set(info_v) == {"is_success", "_is_success", "elapsed_steps", "_elapsed_steps"}
        for i, env in enumerate(envs):
            obs, info = env.reset(seed=seed + i)
            _assert_obs_row(obs_v, i, obs, f"reset, env {i}")
            _assert_info(info_v, i, info, f"reset, env {i}")  # the step's keys, at 0 elapsed steps
            assert info["elapsed_steps"] == 0
    rng = np.random.default_rng(0)
    pending = [[False] * N_ENVS for _ in vecs]
    for t in range(13):
        # float32 and float64 actions, some outside the box (clipped alike).
        actions = rng.uniform(-1.2, 1.2, (N_ENVS, 4)).astype(np.float32 if t % 3 else np.float64)
        for vec, envs, flags in zip(vecs, singles, pending, strict=True):
            _check_step(vec.step(actions), envs, actions, flags, mode, t)
    for vec in vecs:
        vec.close()


def test_default_episodes_are_50_steps_and_seeds_may_be_a_list() -> None:
    vec = gym.make_vec("goalenvs/FetchReach-v0", num_envs=2, num_threads=2)
    singles = [gym.make("goalenvs/FetchReach-v0") for _ in range(2)]
    obs_v, _ = vec.reset(seed=[7, 3])
    for i, (env, seed) in enumerate(zip(singles, (7, 3), strict=True)):
        _assert_obs_row(obs_v, i, env.reset(seed=seed)[0], "reset")
    actions = np.random.default_rng(1).uniform(-1, 1, (52, 2, 4)).astype(np.float32)
    pending = [False, False]
    for t, a in enumerate(actions):
        out = vec.step(a)
        assert out[3].all() == (t == 49) and not out[2].any()
        _check_step(out, singles, a, pending, AutoresetMode.NEXT_STEP, t)
    assert pending == [False, False]  # the 51st step restarted both, the 52nd stepped them again
    vec.close()


def test_make_vec_returns_the_native_env_for_every_fetch_id() -> None:
    for env_id in FETCH_IDS:
        vec = gym.make_vec(env_id, num_envs=2, num_threads=1)
        single = gym.make(env_id).unwrapped
        assert isinstance(vec, FetchVectorEnv), env_id
        assert (vec.task, vec.reward_type) == (single.task, single.reward_type)
        assert vec.single_observation_space == single.observation_space
        assert vec.single_action_space == single.action_space
        assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        assert vec.metadata["render_fps"] == single.metadata["render_fps"] == 25
        vec.close()


def test_compute_functions_take_the_vector_batches() -> None:
    vec = gym.make_vec("goalenvs/FetchPushDense-v0", num_envs=4, max_steps=3)
    vec.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(7):
        obs, reward, terminated, truncated, info = vec.step(rng.uniform(-1, 1, (4, 4)))
        ag, dg = obs["achieved_goal"], obs["desired_goal"]
        if not info["elapsed_steps"].any():  # the step after the episodes ended: every env started over
            assert not (reward.any() or terminated.any() or truncated.any())
            continue
        assert np.array_equal(vec.compute_reward(ag, dg, info), reward)
        assert np.array_equal(vec.compute_terminated(ag, dg, info), terminated)
        assert np.array_equal(vec.compute_truncated(ag, dg, info), truncated)
    assert vec.compute_reward(ag[None], dg[None], None).shape == (1, 4)
    vec.close()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_check_goal_env_passes(mode: AutoresetMode) -> None:
    vec = gym.make_vec("goalenvs/FetchPickAndPlace-v0", num_envs=3, max_steps=10, autoreset_mode=mode)
    report = check_goal_env(vec, n_steps=25)
    assert report.passed, report.format()
    assert report.result("vector_batch_reward").status == "pass"
    vec.close()


@pytest.mark.parametrize("clone", [pickle.loads, copy.deepcopy], ids=["pickle", "deepcopy"])
def test_pickled_vector_env_continues_identically(clone) -> None:
    vec = FetchVectorEnv(3, "pick_and_place", max_steps=4, num_threads=2)
    vec.reset(seed=5)
    actions = np.random.default_rng(1).uniform(-1, 1, (12, 3, 4)).astype(np.float32)
    for a in actions[:2]:
        vec.step(a)
    twin = clone(pickle.dumps(vec)) if clone is pickle.loads else clone(vec)
    assert twin.data[0] is not vec.data[0] and twin.num_threads == 2
    for a in actions[2:]:  # across autoresets: the random streams were copied too
        for x, y in zip(vec.step(a), twin.step(a), strict=True):
            if isinstance(x, dict):
                assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
            else:
                assert np.array_equal(x, y)
    vec.close()
    twin.close()


def test_threads_and_close() -> None:
    before = threading.active_count()
    vec = FetchVectorEnv(5, "reach", num_threads=3)
    assert vec.num_threads == 3 and vec._state.chunks == [(0, 2), (2, 3), (3, 5)]
    vec.reset(seed=0)
    vec.step(np.zeros((5, 4)))
    assert threading.active_count() >= before + 1  # the pool's threads (the caller steps a chunk too)
    vec.close()
    assert vec._state.pool is None and threading.active_count() == before
    assert FetchVectorEnv(2, "reach", num_threads=8).num_threads == 2  # capped at num_envs
    assert FetchVectorEnv(1, "reach", num_threads=None)._state.pool is None  # one env: no pool


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"num_envs": 0}, ValueError, "num_envs must be >= 1"),
        ({"num_threads": 0}, ValueError, "num_threads must be >= 1"),
        ({"num_threads": 1.5}, TypeError, "num_threads must be an int"),
        ({"autoreset_mode": "Sometimes"}, ValueError, "autoreset_mode must be one of"),
        ({"render_mode": "human"}, ValueError, "render_mode must be None or one of"),
        ({"task": "stack"}, ValueError, "task must be one of"),
        ({"distance_threshold": -1.0}, ValueError, "distance_threshold must be a finite number > 0"),
    ],
)
def test_bad_arguments(kwargs: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        FetchVectorEnv(**{"num_envs": 2, **kwargs})


def test_bad_actions_and_step_before_reset() -> None:
    vec = FetchVectorEnv(2, "reach", num_threads=1)
    with pytest.raises(gym.error.ResetNeeded):
        vec.step(np.zeros((2, 4)))
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must have shape \(num_envs, 4\) = \(2, 4\)"):
        vec.step(np.zeros(4))


def test_render_returns_one_frame_per_env_and_does_not_change_the_episodes() -> None:
    vec = FetchVectorEnv(2, "push", render_mode="rgb_array", width=64, height=48, num_threads=1)
    plain = FetchVectorEnv(2, "push", num_threads=1)
    vec.reset(seed=0)
    plain.reset(seed=0)
    try:
        frames = vec.render()
    except gym.error.DependencyNotInstalled as exc:
        pytest.skip(f"no OpenGL backend for offscreen rendering here: {exc}")
    single = FetchEnv("push", render_mode="rgb_array", width=64, height=48)
    single.reset(seed=1)
    assert isinstance(frames, tuple) and len(frames) == 2
    assert all(f.shape == (48, 64, 3) and f.dtype == np.uint8 for f in frames)
    assert np.array_equal(frames[1], single.render())  # env 1 is the single env seeded 0 + 1
    for a in np.random.default_rng(0).uniform(-1, 1, (4, 2, 4)).astype(np.float32):
        o1 = vec.step(a)[0]
        vec.render()
        o2 = plain.step(a)[0]
        assert np.array_equal(o1["observation"], o2["observation"])
    assert plain.render() is None
    for env in (vec, plain, single):
        env.close()
