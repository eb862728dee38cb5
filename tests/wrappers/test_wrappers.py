"""goalenvs.wrappers: every wrapper keeps the GoalEnv contract on every goalenvs id where it applies.

The registry tests parametrize over ``goalenvs.registration.ENVS``, so new envs are covered when
they are registered. Third-party-style envs come from ``checker_envs`` (a MuJoCo-free Fetch-like
reach task and broken variants of it).
"""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

import goalenvs
from goalenvs import check_goal_env
from goalenvs.registration import ENVS, make_bitflip, make_env, make_parking
from goalenvs.wrappers import (
    DenseReward,
    FlattenGoalObservation,
    GoalContractChecker,
    GoalContractWarning,
    GoalStats,
    LegacyGoalEnv,
    NormalizeGoalObservation,
    RunningGoalStats,
    SparseReward,
    SuccessInfo,
    TimeFeature,
    VectorizedComputeReward,
)
from goalenvs.wrappers import vector as V
from tests.check import checker_envs as ce
from tests.conftest import make_params

ALL = make_params()
VECTOR = make_params([e for e in ENVS if e.vector_entry_point])
N_STEPS = 60  # check_goal_env rollout length: enough for several episodes of every goalenvs id

_NUMERIC = (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)


def _numeric_goals(space: spaces.Dict) -> bool:
    return isinstance(space["desired_goal"], _NUMERIC)


def _flat_observation(space: spaces.Dict) -> bool:
    return isinstance(space["observation"], _NUMERIC) and len(space["observation"].shape) == 1


def _normalizable(space: spaces.Dict) -> bool:
    return isinstance(space["desired_goal"], _NUMERIC) and isinstance(space["observation"], _NUMERIC)


def _stats(env_id: str) -> GoalStats:
    return GoalStats.from_rollout(gym.make(env_id), n_steps=100, seed=1)


# name -> (applies to this single observation space?, build on a single env, build on a vector env)
WRAPPERS: dict[str, tuple[Any, Any, Any]] = {
    "SparseReward": (_numeric_goals, lambda e, i: SparseReward(e, 0.5), lambda v, i: V.SparseReward(v, 0.5)),
    "DenseReward": (_numeric_goals, lambda e, i: DenseReward(e), lambda v, i: V.DenseReward(v)),
    "SuccessInfo": (_numeric_goals, lambda e, i: SuccessInfo(e, 0.5), lambda v, i: V.SuccessInfo(v, 0.5)),
    "NormalizeGoalObservation": (
        _normalizable,
        lambda e, i: NormalizeGoalObservation(e, _stats(i)),
        lambda v, i: V.NormalizeGoalObservation(v, _stats(i)),
    ),
    "TimeFeature": (_flat_observation, lambda e, i: TimeFeature(e), lambda v, i: V.TimeFeature(v)),
    "FlattenGoalObservation": (
        lambda s: True,
        lambda e, i: FlattenGoalObservation(e),
        lambda v, i: V.FlattenGoalObservation(v),
    ),
    "VectorizedComputeReward": (
        lambda s: True,
        lambda e, i: VectorizedComputeReward(e),
        lambda v, i: V.VectorizedComputeReward(v),
    ),
    "GoalContractChecker": (lambda s: True, lambda e, i: GoalContractChecker(e), None),
}


def _assert_passes(env: Any) -> None:
    report = check_goal_env(env, n_steps=N_STEPS)
    assert report.passed, report.format()


@pytest.mark.filterwarnings("ignore:VectorizedComputeReward calls")
@pytest.mark.parametrize("name", list(WRAPPERS))
@pytest.mark.parametrize("env_id", ALL)
def test_wrapper_passes_check_goal_env(env_id, name):
    applies, build, _ = WRAPPERS[name]
    env = gym.make(env_id)
    if applies(env.observation_space):
        _assert_passes(build(env, env_id))
    else:  # not applicable to this space: a clear error, not a silently broken env
        with pytest.raises(ValueError):
            build(env, env_id)


@pytest.mark.filterwarnings("ignore:VectorizedComputeReward calls")
@pytest.mark.parametrize("name", [n for n, w in WRAPPERS.items() if w[2] is not None])
@pytest.mark.parametrize("env_id", VECTOR)
def test_vector_wrapper_passes_check_goal_env(env_id, name):
    applies, _, build = WRAPPERS[name]
    env = gym.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point")
    if applies(env.single_observation_space):
        _assert_passes(build(env, env_id))
    else:
        with pytest.raises(ValueError):
            build(env, env_id)


@pytest.mark.parametrize("env_id", ALL)
def test_plain_flatten_observation_fails_where_ours_passes(env_id):
    """Why the goal-aware wrappers exist: Gymnasium's FlattenObservation hides the goals from HER."""
    report = check_goal_env(gym.wrappers.FlattenObservation(gym.make(env_id)), n_steps=N_STEPS)
    assert not report.passed
    assert report.result("observation_space").status == "fail"
    assert report.result("wrapper_keeps_goals").status == "fail"
    _assert_passes(FlattenGoalObservation(gym.make(env_id)))


def test_plain_goal_rescaling_fails_where_normalisation_passes():
    """A TransformObservation that rescales goals keeps the Dict but feeds compute_reward wrong goals."""

    def scale(obs):
        return {k: (v * 2.0 if k != "observation" else v) for k, v in obs.items()}

    inner = ce.make_reach()
    plain = gym.wrappers.TransformObservation(inner, scale, inner.observation_space)
    report = check_goal_env(plain, n_steps=N_STEPS)
    assert report.result("wrapper_keeps_goals").status == "fail"
    stats = GoalStats(goal_mean=np.zeros(3), goal_std=np.full(3, 0.5))  # the same scaling, goal-aware
    _assert_passes(NormalizeGoalObservation(ce.make_reach(), stats))


# ---------------------------------------------------------------------------------------------------
# Vector wrappers equal N single wrappers (SAME_STEP exercises final_obs handling)


def _vector_vs_single(
    build_single, build_vector, batched: bool, n_envs: int = 3, n_steps: int = 40, seed: int = 5
):
    vec = build_vector(
        gym.make_vec("goalenvs/BitFlip-v0", num_envs=n_envs, vectorization_mode="vector_entry_point",
                     n_bits=4, autoreset_mode=AutoresetMode.SAME_STEP, batched_final_obs=batched)
    )  # fmt: skip
    singles = [build_single(gym.make("goalenvs/BitFlip-v0", n_bits=4)) for _ in range(n_envs)]
    obs, _ = vec.reset(seed=seed)
    single_obs = [s.reset(seed=seed + i)[0] for i, s in enumerate(singles)]
    rng = np.random.default_rng(seed)
    for _ in range(n_steps):
        for i in range(n_envs):
            for k in obs:
                np.testing.assert_array_equal(obs[k][i], single_obs[i][k])
        actions = rng.integers(0, 4, size=n_envs)
        obs, rewards, terminated, truncated, info = vec.step(actions)
        for i, s in enumerate(singles):
            o, r, te, tr, inf = s.step(int(actions[i]))
            assert rewards[i] == r and terminated[i] == te and truncated[i] == tr
            if "is_success" in inf:
                source = info["final_info"] if (te or tr) else info
                assert bool(source["is_success"][i]) == bool(inf["is_success"])
            if te or tr:
                final = info["final_obs"]  # Gymnasium's object array, or one dict of batched arrays
                assert isinstance(final, dict) == batched
                final_i = {k: v[i] for k, v in final.items()} if batched else final[i]
                assert final_i.keys() == o.keys()
                for k in o:
                    np.testing.assert_array_equal(final_i[k], o[k])
                o, _ = s.reset()
            single_obs[i] = o


@pytest.mark.parametrize(
    "single, vector",
    [
        (lambda e: SparseReward(e, 1.2), lambda v: V.SparseReward(v, 1.2)),
        (lambda e: DenseReward(e), lambda v: V.DenseReward(v)),
        (lambda e: SuccessInfo(_DropSuccess(e), 0.5), lambda v: V.SuccessInfo(_VectorDropSuccess(v), 0.5)),
        (lambda e: SuccessInfo(_DropSuccess(e)), lambda v: V.SuccessInfo(_VectorDropSuccess(v))),
        (lambda e: NormalizeGoalObservation(e), lambda v: V.NormalizeGoalObservation(v)),
        (lambda e: TimeFeature(e), lambda v: V.TimeFeature(v)),
        (lambda e: FlattenGoalObservation(e), lambda v: V.FlattenGoalObservation(v)),
    ],
    ids=["sparse", "dense", "success-threshold", "success-terminated", "normalize", "time", "flatten"],
)
@pytest.mark.parametrize("batched", [False, True], ids=["gymnasium-final-obs", "batched-final-obs"])
def test_vector_wrapper_equals_single_wrappers(single, vector, batched):
    _vector_vs_single(single, vector, batched)


def test_vector_next_step_autoreset_rows_keep_the_env_reward():
    """NEXT_STEP: the step that only resets a sub-env is no transition; its reward stays the env's 0."""
    env = V.SparseReward(gym.make_vec("goalenvs/BitFlip-v0", num_envs=4, n_bits=2), 0.5)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    pending = np.zeros(4, bool)
    for _ in range(30):
        obs, rewards, terminated, truncated, _ = env.step(rng.integers(0, 2, size=4))
        assert np.all(rewards[pending] == 0)
        expected = env.compute_reward(obs["achieved_goal"], obs["desired_goal"], None)
        np.testing.assert_array_equal(rewards[~pending], expected[~pending])
        pending = terminated | truncated


class _DropSuccess(gym.Wrapper):
    """A goal env whose info lacks is_success (compute_* stay reachable through get_wrapper_attr)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = {k: v for k, v in info.items() if k != "is_success"}
        return obs, reward, terminated, truncated, info


class _VectorDropSuccess(gym.vector.VectorWrapper):
    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        info = {k: v for k, v in info.items() if k not in ("is_success", "_is_success")}
        if "final_info" in info:
            info["final_info"] = {k: v for k, v in info["final_info"].items() if "is_success" not in k}
        return obs, rewards, terminated, truncated, info

    def compute_reward(self, *args):
        return self.env.compute_reward(*args)

    def compute_terminated(self, *args):
        return self.env.compute_terminated(*args)

    def compute_truncated(self, *args):
        return self.env.compute_truncated(*args)


# ---------------------------------------------------------------------------------------------------
# Reward switches


def test_sparse_and_dense_rewards_on_bitflip():
    env = gym.make("goalenvs/BitFlip-v0", n_bits=6)
    ag = np.array([[0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]], np.int8)
    dg = np.zeros_like(ag)
    sparse, dense = SparseReward(env, threshold=1.5), DenseReward(env)
    np.testing.assert_array_equal(sparse.compute_reward(ag, dg, None), [0.0, 0.0, -1.0])
    assert sparse.compute_reward(ag, dg, None).dtype == np.float32
    np.testing.assert_allclose(dense.compute_reward(ag, dg, None), -np.sqrt([0, 2, 6]), rtol=1e-6)
    # threshold 0.5 on bits is BitFlip's own sparse reward, for any goals
    own = SparseReward(gym.make("goalenvs/BitFlip-v0", n_bits=6), 0.5)
    goals = np.random.default_rng(0).integers(0, 2, size=(2, 50, 6)).astype(np.int8)
    np.testing.assert_array_equal(
        own.compute_reward(goals[0], goals[1], None), env.unwrapped.compute_reward(goals[0], goals[1], None)
    )
    assert str(own.compute_reward(goals[0, 0], goals[0, 0], None)) == "0.0"  # no -0.0


def test_sparse_reward_matches_reach_env_reward():
    env = SparseReward(ce.make_reach(), ce.THRESHOLD)
    obs, _ = env.reset(seed=0)
    for _ in range(30):
        obs, reward, *_, info = env.step(env.action_space.sample())
        inner = env.unwrapped.compute_reward(obs["achieved_goal"], obs["desired_goal"], info)
        assert reward == float(inner)


def test_reward_switch_arguments_are_checked():
    env = gym.make("goalenvs/BitFlip-v0")
    for bad, err in ((-1.0, ValueError), (float("nan"), ValueError), (True, TypeError), ("0.1", TypeError)):
        with pytest.raises(err, match="threshold"):
            SparseReward(env, bad)
    with pytest.raises(TypeError, match="distance"):
        DenseReward(env, distance=3)
    with pytest.raises(ValueError, match="threshold"):
        SuccessInfo(env, distance=lambda a, b: a)
    integer = gym.make("goalenvs/BitFlip-v0", n_bits=5, obs_type="integer")
    with pytest.raises(ValueError, match="Discrete.*distance="):
        SparseReward(integer, 0.5)
    with pytest.raises(TypeError, match="goalenvs.wrappers.vector"):
        SparseReward(gym.make_vec("goalenvs/BitFlip-v0", num_envs=2), 0.5)
    with pytest.raises(TypeError, match="VectorEnv"):
        V.SparseReward(env, 0.5)


def hamming(a, b):
    """Integer-coded bit strings: the Hamming distance is the popcount of the XOR (module level: picklable)."""
    x = np.bitwise_xor(np.asarray(a, np.int64), np.asarray(b, np.int64))
    return np.unpackbits(x[..., None].view(np.uint8), axis=-1).sum(axis=-1)


def test_custom_distance_for_integer_goals():
    env = DenseReward(gym.make("goalenvs/BitFlip-v0", n_bits=5, obs_type="integer"), distance=hamming)
    np.testing.assert_array_equal(
        env.compute_reward(np.array([0, 31, 5]), np.array([0, 0, 6]), None), [0, -5, -2]
    )
    _assert_passes(env)


def test_success_info_fills_only_where_missing():
    bare = ce.make_reach(ce.NoSuccessInfoEnv)
    assert check_goal_env(bare, n_steps=N_STEPS).result("is_success").status == "warn"
    env = SuccessInfo(ce.make_reach(ce.NoSuccessInfoEnv), threshold=ce.THRESHOLD)
    _assert_passes(env)
    assert check_goal_env(env, n_steps=N_STEPS).result("is_success").status == "pass"
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.action_space.sample())
    d = np.linalg.norm(env.unwrapped.pos - env.unwrapped.goal)
    assert info["is_success"] == (d <= ce.THRESHOLD) and isinstance(info["is_success"], bool)
    kept = SuccessInfo(gym.make("goalenvs/BitFlip-v0"), threshold=100.0)  # would say True everywhere
    kept.reset(seed=0)
    assert kept.step(0)[4]["is_success"] is False  # BitFlip's own entry is kept


# ---------------------------------------------------------------------------------------------------
# Normalisation


def test_normalised_goals_map_back_exactly():
    env = gym.make("goalenvs/BitFlip-v0", n_bits=7)
    stats = GoalStats.from_rollout(gym.make("goalenvs/BitFlip-v0", n_bits=7), n_steps=50, seed=3)
    assert not np.allclose(stats.goal_mean, 0.5)  # running statistics, not the bounds
    wrapped = NormalizeGoalObservation(env, stats)
    goals = np.random.default_rng(1).integers(0, 2, size=(2, 64, 7)).astype(np.int8)
    norm = wrapped.observation({"observation": goals[0], "achieved_goal": goals[0], "desired_goal": goals[1]})
    assert norm["achieved_goal"].dtype == np.float32
    np.testing.assert_array_equal(wrapped.goal_to_inner(norm["achieved_goal"]), goals[0])
    np.testing.assert_array_equal(
        wrapped.compute_reward(norm["achieved_goal"], norm["desired_goal"], None),
        env.unwrapped.compute_reward(goals[0], goals[1], None),
    )


def test_normalisation_of_float_goals_keeps_float64():
    stats = GoalStats.from_rollout(ce.make_reach(), n_steps=200, seed=0)
    env = NormalizeGoalObservation(ce.make_reach(), stats)
    assert env.observation_space["desired_goal"].dtype == np.float64
    obs, _ = env.reset(seed=0)
    raw, _ = env.env.reset(seed=0)
    np.testing.assert_allclose(obs["desired_goal"], (raw["desired_goal"] - stats.goal_mean) / stats.goal_std)
    np.testing.assert_allclose(
        env.goal_to_inner(obs["desired_goal"]), raw["desired_goal"], rtol=0, atol=1e-15
    )
    assert abs(float(np.mean(obs["observation"]))) < 3  # roughly standardised


def test_running_goal_stats_equal_batch_moments():
    space = gym.make("goalenvs/BitFlip-v0", n_bits=4).observation_space
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, 2, size=(n, 3, 4)).astype(np.int8) for n in (1, 5, 17)]
    running = RunningGoalStats(space)
    for b in batches:
        running.update({"observation": b[:, 0], "achieved_goal": b[:, 1], "desired_goal": b[:, 2]})
    running.update(
        {"observation": batches[0][0, 0], "achieved_goal": batches[0][0, 1], "desired_goal": batches[0][0, 2]}
    )
    all_rows = np.concatenate(batches + [batches[0][:1]])
    goals = np.concatenate([all_rows[:, 1], all_rows[:, 2]]).astype(float)
    stats = running.freeze(min_std=1e-9)
    assert running.count == len(goals)
    np.testing.assert_allclose(stats.goal_mean, goals.mean(axis=0))
    np.testing.assert_allclose(stats.goal_std, goals.std(axis=0))
    np.testing.assert_allclose(stats.observation_mean, all_rows[:, 0].mean(axis=0))


def test_goal_stats_are_frozen_and_checked():
    stats = GoalStats(goal_mean=[0.0, 1.0], goal_std=[1.0, 2.0])
    with pytest.raises(ValueError):
        stats.goal_mean[0] = 5.0  # read-only: stored normalised goals keep their meaning
    with pytest.raises(ValueError, match="goal_std"):
        GoalStats(goal_mean=[0.0], goal_std=[0.0])
    with pytest.raises(ValueError, match="both"):
        GoalStats(goal_mean=[0.0], goal_std=[1.0], observation_mean=[0.0])
    env = gym.make("goalenvs/BitFlip-v0", n_bits=3)
    with pytest.raises(TypeError, match="freeze"):
        NormalizeGoalObservation(env, RunningGoalStats(env.observation_space))
    with pytest.raises(ValueError, match="does not broadcast"):
        NormalizeGoalObservation(env, GoalStats(goal_mean=np.zeros(5), goal_std=np.ones(5)))
    with pytest.raises(ValueError, match="unbounded.*from_rollout"):
        NormalizeGoalObservation(ce.make_reach())  # "bounds" of an unbounded observation
    with pytest.raises(ValueError, match="Discrete"):
        NormalizeGoalObservation(gym.make("goalenvs/BitFlip-v0", obs_type="integer"))
    with pytest.raises(ValueError, match="at least 2"):
        RunningGoalStats(env.observation_space).freeze()


class _NaiveRunningNormalize(NormalizeGoalObservation):
    """What the docs warn against: statistics that keep updating while transitions are stored."""

    def __init__(self, env):
        super().__init__(env, GoalStats(goal_mean=np.zeros(3), goal_std=np.ones(3)))
        self._seen: list[np.ndarray] = []

    def observation(self, obs):
        self._seen += [obs["achieved_goal"], obs["desired_goal"]]
        seen = np.asarray(self._seen)
        mean, std = seen.mean(axis=0), seen.std(axis=0) + 1e-3
        for key in ("achieved_goal", "desired_goal"):
            self._params[key] = (mean, std, np.dtype(np.float64))
        return super().observation(obs)


def test_running_statistics_during_use_break_the_contract():
    """Why GoalStats is frozen: de-normalising stored goals with later statistics gives other goals."""
    report = check_goal_env(_NaiveRunningNormalize(ce.make_reach()), n_steps=N_STEPS)
    assert report.result("reward_contract").status == "fail"


# ---------------------------------------------------------------------------------------------------
# Time feature


def test_time_feature_values_and_limits():
    env = TimeFeature(gym.make("goalenvs/BitFlip-v0", n_bits=4))  # max_steps from the task
    assert env.max_steps == 4
    assert env.observation_space["observation"] == spaces.Box(0, 1, (5,), np.float32)
    assert env.observation_space["desired_goal"] == spaces.MultiBinary(4)  # goals untouched
    obs, _ = env.reset(seed=0)
    features = [obs["observation"][-1]]
    for a in range(4):
        obs, _, terminated, truncated, _ = env.step(a)
        features.append(obs["observation"][-1])
        if terminated or truncated:
            break
    np.testing.assert_allclose(features, [1 - t / 4 for t in range(len(features))])
    assert TimeFeature(ce.make_reach(max_episode_steps=30)).max_steps == 30  # from the TimeLimit
    assert TimeFeature(ce.ReachEnv(), max_steps=7).max_steps == 7
    with pytest.raises(ValueError, match="max_steps=..."):
        TimeFeature(ce.ReachEnv())
    with pytest.raises(ValueError, match="max_steps"):
        TimeFeature(ce.ReachEnv(), max_steps=0)
    with pytest.raises(ValueError, match="1-d observation"):
        TimeFeature(gym.make("goalenvs/BitFlip-v0", obs_type="image"))


def test_time_feature_leaves_the_wrapped_space_alone():
    """sb3-contrib's TimeFeatureWrapper edits the inner env's Dict space in place; ours does not."""
    inner = ce.make_reach()
    before = copy.deepcopy(inner.observation_space)
    TimeFeature(inner)
    assert inner.observation_space == before


# ---------------------------------------------------------------------------------------------------
# Flat view


@pytest.mark.parametrize("obs_type", ["image", "integer"])
def test_flat_view_of_image_and_integer_bitflip(obs_type):
    env = FlattenGoalObservation(gym.make("goalenvs/BitFlip-v0", n_bits=5, obs_type=obs_type))
    size = 36 * 36 if obs_type == "image" else 2**5
    assert all(env.observation_space[k].shape == (size,) for k in goalenvs.GOAL_KEYS)
    _assert_passes(env)
    obs, _ = env.reset(seed=0)
    flat = env.flatten(obs)
    assert flat.shape == (3 * size,) and flat.dtype == np.float32
    assert env.flat_observation_space.contains(flat)
    np.testing.assert_array_equal(flat[env.slices["desired_goal"]], obs["desired_goal"])
    back = env.unflatten(flat)
    for k in obs:
        np.testing.assert_array_equal(back[k], obs[k])
    # relabelling in flat form: a goal sliced from a float32 vector still works
    ag = flat[env.slices["achieved_goal"]]
    assert env.compute_reward(ag, ag, None) == 0.0
    batch = env.flatten({k: np.stack([v, v]) for k, v in obs.items()})
    assert batch.shape == (2, 3 * size)


def test_flat_view_refuses_huge_one_hot():
    with pytest.raises(ValueError, match="one-hot"):
        FlattenGoalObservation(gym.make("goalenvs/BitFlip-v0", n_bits=20, obs_type="integer"))


# ---------------------------------------------------------------------------------------------------
# Adapters


def test_vectorized_compute_reward_fixes_a_one_at_a_time_env():
    assert not check_goal_env(ce.make_reach(ce.NotVectorizedEnv), n_steps=N_STEPS).passed
    with pytest.warns(UserWarning, match="once per transition"):
        env = VectorizedComputeReward(ce.make_reach(ce.NotVectorizedEnv))
    _assert_passes(env)
    ag = np.zeros((2, 4, 3))
    dg = np.zeros((2, 4, 3))
    dg[1, 2] = 1.0
    rewards = env.compute_reward(ag, dg, None)
    assert rewards.shape == (2, 4) and rewards[1, 2] == -1 and rewards.sum() == -1


def test_vectorized_compute_reward_on_a_sync_vector_env():
    vec = gym.vector.SyncVectorEnv([lambda: ce.make_reach(ce.NotVectorizedEnv)] * 3)
    assert not check_goal_env(vec, n_steps=20).passed
    with pytest.warns(UserWarning, match="once per transition"):
        env = V.VectorizedComputeReward(vec)
    report = check_goal_env(env, n_steps=20)
    assert report.passed, report.format()


class _OldBox:
    """Shaped like an old ``gym.spaces.Box`` (not a Gymnasium space)."""

    def __init__(self, low, high, shape, dtype=np.float32):
        self.low, self.high, self.shape, self.dtype = (
            np.full(shape, low, dtype),
            np.full(shape, high, dtype),
            shape,
            np.dtype(dtype),
        )


_OldBox.__name__ = "Box"


class _OldDict:
    def __init__(self, spaces_):
        self.spaces = spaces_


_OldDict.__name__ = "Dict"


class OldPointEnv:
    """A goal env in the legacy gym.GoalEnv style: reset() -> obs, seed(), 4-tuple step, old spaces,
    a time limit reported as info["TimeLimit.truncated"], and a compute_reward for one goal only."""

    def __init__(self, max_steps: int = 15):
        self.max_steps = max_steps
        goal = _OldBox(-1.0, 1.0, (2,), np.float64)
        self.observation_space = _OldDict(
            {"observation": _OldBox(-1.0, 1.0, (2,), np.float64), "achieved_goal": goal, "desired_goal": goal}
        )
        self.action_space = _OldBox(-1.0, 1.0, (2,))
        self._rng = np.random.default_rng()

    def seed(self, seed=None):
        self._rng = np.random.default_rng(seed)
        return [seed]

    def reset(self):
        self.goal = self._rng.uniform(-0.2, 0.2, 2)
        self.pos = self.goal + self._rng.uniform(-0.1, 0.1, 2)
        self.t = 0
        return self._obs()

    def _obs(self):
        return {
            "observation": self.pos.copy(),
            "achieved_goal": self.pos.copy(),
            "desired_goal": self.goal.copy(),
        }

    def step(self, action):
        self.pos = np.clip(self.pos + 0.05 * np.clip(action, -1, 1), -1, 1)
        self.t += 1
        obs = self._obs()
        info = {"is_success": float(np.linalg.norm(self.pos - self.goal) < 0.05)}
        done = self.t >= self.max_steps
        if done:
            info["TimeLimit.truncated"] = True
        return obs, self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info), done, info

    def compute_reward(self, achieved_goal, desired_goal, info):
        return -float(np.linalg.norm(achieved_goal - desired_goal) > 0.05)  # one goal at a time


def test_legacy_goal_env_adapter():
    env = LegacyGoalEnv(OldPointEnv())
    assert isinstance(env.observation_space, spaces.Dict)
    assert env.observation_space["desired_goal"] == spaces.Box(-1.0, 1.0, (2,), np.float64)
    obs, info = env.reset(seed=3)
    assert info == {} and env.reset(seed=3)[0]["desired_goal"].tolist() == obs["desired_goal"].tolist()
    for _ in range(14):
        result = env.step(env.action_space.sample())
        assert len(result) == 5 and result[2:4] == (False, False)
    *_, terminated, truncated, info = env.step(env.action_space.sample())
    assert (terminated, truncated) == (False, True) and info["TimeLimit.truncated"] is True
    report = check_goal_env(env, n_steps=N_STEPS)
    assert report.result("compute_reward_vectorized").status == "fail"  # the legacy function is one-at-a-time
    with pytest.warns(UserWarning, match="once per transition"):
        _assert_passes(VectorizedComputeReward(LegacyGoalEnv(OldPointEnv())))


class _SuccessEnds:
    """compute_terminated for an env that ends episodes on success (a class, so the env stays picklable)."""

    def __init__(self, env):
        self.env = env

    def __call__(self, achieved_goal, desired_goal, info):
        return self.env.compute_reward(achieved_goal, desired_goal, info) == 0


def test_legacy_adapter_on_sb3_bitflipping_env():
    """SB3's BitFlippingEnv has no compute_terminated; it ends episodes on success."""
    sb3_envs = pytest.importorskip("stable_baselines3.common.envs")
    bare = LegacyGoalEnv(sb3_envs.BitFlippingEnv(n_bits=3, max_steps=6))
    bare.reset(seed=0)
    with pytest.warns(UserWarning, match="Pass compute_terminated"):
        for a in [0, 1, 2, 0, 1, 2] * 3:
            if bare.step(a)[2]:
                bare.reset()

    inner = sb3_envs.BitFlippingEnv(n_bits=3, max_steps=6)
    env = LegacyGoalEnv(inner, compute_terminated=_SuccessEnds(inner))
    report = check_goal_env(env, n_steps=N_STEPS)
    assert report.passed, (
        report.format()
    )  # warnings remain: SB3's compute_reward returns shape (1,) for one goal
    assert report.result("compute_truncated").status == "pass", report.format()


def test_legacy_adapter_argument_errors():
    with pytest.raises(TypeError, match="needs 'reset'"):
        LegacyGoalEnv(object())
    with pytest.raises(TypeError, match="compute_terminated"):
        LegacyGoalEnv(OldPointEnv(), compute_terminated=1)


# ---------------------------------------------------------------------------------------------------
# The passive checker, applied by gym.make


def _checker_in(env) -> bool:
    layer = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, GoalContractChecker):
            return True
        layer = layer.env
    return False


@pytest.mark.parametrize("env_id", ALL)
def test_gym_make_applies_the_checker_unless_disabled(env_id):
    assert _checker_in(gym.make(env_id))
    assert _checker_in(gym.make(env_id, check_goal_contract=True))
    assert not _checker_in(gym.make(env_id, check_goal_contract=False))
    # Gymnasium's own flag governs Gymnasium's PassiveEnvChecker only; ours has its own switch.
    assert _checker_in(gym.make(env_id, disable_env_checker=True))
    # The spec records the choice (a make kwarg), so remaking agrees.
    assert _checker_in(gym.make(gym.make(env_id).spec))
    assert not _checker_in(gym.make(gym.make(env_id, check_goal_contract=False).spec))
    assert _checker_in(gym.make_vec(env_id, num_envs=2, vectorization_mode="sync").envs[0])
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GoalContractWarning)
        env.reset(seed=0)
        for _ in range(20):
            if any(env.step(env.action_space.sample())[2:4]):
                env.reset()
    pickle.loads(pickle.dumps(env))


def test_make_env_works_for_any_caller():
    """The registered entry point is an ordinary function: no caller inspection, usable directly."""
    env = make_env("goalenvs.envs.bitflip:BitFlipEnv", n_bits=3)
    assert _checker_in(env) and env.unwrapped.task.n_bits == 3
    assert not _checker_in(make_env("goalenvs.envs.bitflip:BitFlipEnv", check_goal_contract=False))
    # the registered makers are make_env for one class each
    assert _checker_in(make_bitflip(n_bits=3)) and not _checker_in(make_bitflip(check_goal_contract=False))
    assert type(make_parking().unwrapped).__name__ == "ParkingEnv"
    with pytest.raises(TypeError, match="check_goal_contract must be True or False"):
        gym.make("goalenvs/BitFlip-v0", check_goal_contract="no")


def test_checker_warns_once_with_the_cause():
    env = GoalContractChecker(ce.make_reach(ce.RewardBeforeMoveEnv), n_steps=50)
    env.reset(seed=6)
    env.action_space.seed(6)  # these actions leave and re-enter the goal region: the rewards differ
    with pytest.warns(GoalContractWarning, match="before") as record:
        for _ in range(50):
            env.step(env.action_space.sample())
    assert len([w for w in record if issubclass(w.category, GoalContractWarning)]) == 1


def test_checker_flags_a_one_at_a_time_compute_reward_and_then_stops():
    env = GoalContractChecker(ce.make_reach(ce.NotVectorizedEnv), n_steps=3)
    env.reset(seed=0)
    with pytest.warns(GoalContractWarning, match="VectorizedComputeReward"):
        env.step(env.action_space.sample())
    env.step(env.action_space.sample())
    env.step(env.action_space.sample())
    assert env.steps_left == 0
    with pytest.raises(ValueError, match="n_steps"):
        GoalContractChecker(ce.make_reach(), n_steps=0)


def test_checker_flags_a_wrapper_that_changes_rewards():
    inner = ce.make_reach()
    shaped = gym.wrappers.TransformReward(inner, lambda r: r + 1.0)
    env = GoalContractChecker(shaped)
    env.reset(seed=0)
    with pytest.warns(GoalContractWarning, match="compute_reward"):
        env.step(env.action_space.sample())


# ---------------------------------------------------------------------------------------------------
# Packaging and learning


def test_wrappers_import_is_light():
    code = (
        "import sys, goalenvs.wrappers, goalenvs.wrappers.vector; "
        "print(sorted(m for m in ('mujoco', 'torch', 'stable_baselines3') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow  # learning to solve a task: the slow tier
def test_dqn_her_learns_bitflip_through_normalisation():
    """DQN + HER on BitFlip (8 bits) through NormalizeGoalObservation still solves it (~10 s)."""
    pytest.importorskip("stable_baselines3")
    import torch
    from stable_baselines3 import DQN

    from her import HerReplayBuffer

    torch.set_num_threads(1)
    n_bits, seed = 8, 0
    stats = GoalStats.from_rollout(gym.make("goalenvs/BitFlip-v0", n_bits=n_bits), n_steps=500, seed=seed)
    env = NormalizeGoalObservation(gym.make("goalenvs/BitFlip-v0", n_bits=n_bits), stats)
    model = DQN(
        "MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        learning_rate=1e-3, buffer_size=20_000, learning_starts=200, batch_size=64, gamma=0.9,
        target_update_interval=250, exploration_fraction=0.1, exploration_final_eps=0.02,
        train_freq=1, gradient_steps=1, policy_kwargs={"net_arch": [64]}, seed=seed, device="cpu",
    )  # fmt: skip
    model.learn(3000)
    test_env = NormalizeGoalObservation(gym.make("goalenvs/BitFlip-v0", n_bits=n_bits), stats)
    obs, _ = test_env.reset(seed=seed + 100)
    successes = 0
    for _ in range(100):
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = test_env.step(action)
            done = terminated or truncated
        successes += bool(info["is_success"])
        obs, _ = test_env.reset()
    assert successes > 90, f"success rate {successes}% after 3000 steps"


def test_wrapped_spec_rebuilds_the_wrapper_stack():
    env = TimeFeature(NormalizeGoalObservation(SparseReward(gym.make("goalenvs/BitFlip-v0", n_bits=4), 0.5)))
    names = [w.name for w in env.spec.additional_wrappers]
    assert names == ["SparseReward", "NormalizeGoalObservation", "TimeFeature"]
    remade = gym.make(env.spec)
    assert remade.observation_space == env.observation_space
    for a, b in zip(env.reset(seed=1)[0].values(), remade.reset(seed=1)[0].values(), strict=True):
        np.testing.assert_array_equal(a, b)
