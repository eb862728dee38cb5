"""her.HerReplayStorage through rllte's interface (rllte-core 1.0.1's ``HerReplayStorage``).

rllte is not a dependency: the tests above the rllte section exercise the interface as rllte's
agents use it (positional construction, ``add`` with torch tensors as rllte's env wrapper gives them,
``sample()`` without argument, ``update(metrics)``); the rllte section runs only where rllte is
importable, against rllte's own classes and its DDPG agent.
"""

from __future__ import annotations

import inspect
import pickle
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

import goalenvs  # noqa: F401  (registers the goalenvs ids)
from her import GoalSelectionStrategy, HerReplayStorage
from her.rllte import DictReplayBatch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FIELDS = ("observations", "actions", "rewards", "terminateds", "truncateds", "next_observations")
# rllte 1.0.1's HerReplayStorage.__init__: (name, default); reward_fn's default there is
# `lambda x: x` (which fails when called with three arguments), here None.
RLLTE_PARAMETERS = [
    ("observation_space", inspect.Parameter.empty),
    ("action_space", inspect.Parameter.empty),
    ("device", "cpu"),
    ("storage_size", 1000000),
    ("num_envs", 1),
    ("batch_size", 1024),
    ("goal_selection_strategy", "future"),
    ("num_goals", 4),
    ("reward_fn", None),
    ("copy_info_dict", False),
]


def _has_mujoco() -> bool:
    import importlib.util

    return importlib.util.find_spec("mujoco") is not None


# (env id, kwargs) of the goalenvs vector envs used: Box actions and MultiBinary (int8) observations,
# Discrete actions and observations, float64 observations (MuJoCo).
ENVS = {
    "bitflip-continuous": ("goalenvs/BitFlip-v0", {"n_bits": 6, "continuous": True}),
    "bitflip-integer": ("goalenvs/BitFlip-v0", {"n_bits": 4, "obs_type": "integer"}),
    "fetch-reach": ("goalenvs/FetchReach-v0", {"max_steps": 10}),
}


def make_vector_env(name: str, num_envs: int = 3) -> gym.vector.VectorEnv:
    env_id, kwargs = ENVS[name]
    if "Fetch" in env_id and not _has_mujoco():
        pytest.skip("the fetch extra (mujoco) is not installed")
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        autoreset_mode=AutoresetMode.SAME_STEP,
        **kwargs,
    )


def torch_obs(obs: dict[str, np.ndarray]) -> dict[str, th.Tensor]:
    return {key: th.as_tensor(value) for key, value in obs.items()}


def run(
    env: gym.vector.VectorEnv, storage: Any, steps: int, seed: int = 0, column_actions: bool = False
) -> list[list[np.ndarray]]:
    """Step ``env`` with random actions and add every step as rllte's loop does (torch tensors,
    flags as 0.0 / 1.0, the vector env's infos, final observations as next observations).

    ``column_actions`` gives Discrete actions as ``(num_envs, 1)`` (rllte's own storage refuses the
    ``(num_envs,)`` its loop's random exploration gives). Returns, per env, the next achieved goals
    of its steps (for checking relabelled goals)."""
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    reached: list[list[np.ndarray]] = [[] for _ in range(env.num_envs)]
    for _ in range(steps):
        actions = th.as_tensor(env.action_space.sample())
        next_obs, rewards, terminated, truncated, infos = env.step(actions.numpy())
        real_next = {key: value.copy() for key, value in next_obs.items()}
        ended = infos.get("_final_obs", np.zeros(env.num_envs, bool))
        for i in np.flatnonzero(ended):  # Gymnasium's layout: an object array of per-env observations
            for key in real_next:
                real_next[key][i] = infos["final_obs"][i][key]
        storage.add(
            torch_obs(obs),
            actions.reshape(env.num_envs, -1) if column_actions else actions,
            th.as_tensor(rewards, dtype=th.float32),
            th.as_tensor(terminated, dtype=th.float32),
            th.as_tensor(truncated, dtype=th.float32),
            infos,
            torch_obs(real_next),
        )
        for i in range(env.num_envs):
            reached[i].append(np.array(real_next["achieved_goal"][i]))
        obs = next_obs
    return reached


def reward_fn_of(env: gym.vector.VectorEnv):
    from her import resolve_env_function

    return resolve_env_function(env, "compute_reward")


# ------------------------------------------------------------------ construction
def test_the_constructor_has_rllte_s_parameters() -> None:
    parameters = inspect.signature(HerReplayStorage).parameters.values()
    assert [(p.name, p.default) for p in parameters] == RLLTE_PARAMETERS
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters)


def test_positional_and_keyword_construction_agree() -> None:
    env = make_vector_env("bitflip-continuous", num_envs=2)
    reward_fn = reward_fn_of(env)
    positional = HerReplayStorage(
        env.single_observation_space, env.single_action_space, "cpu", 1000, 2, 64, "final", 2, reward_fn, True
    )
    keywords = HerReplayStorage(
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
        device="cpu",
        storage_size=1000,
        num_envs=2,
        batch_size=64,
        goal_selection_strategy="final",
        num_goals=2,
        reward_fn=reward_fn,
        copy_info_dict=True,
    )
    for storage in (positional, keywords):
        assert storage.device == th.device("cpu")
        assert storage.storage_size == 500  # per env, as rllte's
        assert (storage.num_envs, storage.batch_size, storage.num_goals) == (2, 64, 2)
        assert storage.goal_selection_strategy == "final"
        assert storage.storage.goal_selection_strategy is GoalSelectionStrategy.FINAL
        assert storage.her_ratio == 1 - 1 / 3
        assert storage.reward_fn is reward_fn and storage.copy_info_dict is True
        assert storage.obs_shape == {"observation": (6,), "achieved_goal": (6,), "desired_goal": (6,)}
        assert (storage.action_dim, storage.policy_action_dim, storage.action_type) == (6, 6, "Box")
        assert (storage.step, storage.full) == (0, False)
    defaults = HerReplayStorage(env.single_observation_space, env.single_action_space, storage_size=100)
    assert (defaults.num_envs, defaults.batch_size, defaults.num_goals) == (1, 1024, 4)
    assert defaults.goal_selection_strategy == "future" and defaults.reward_fn is None


def test_what_rllte_accepts_by_mistake_is_refused_when_built() -> None:
    env = make_vector_env("bitflip-continuous", num_envs=1)
    obs_space, act_space = env.single_observation_space, env.single_action_space
    # rllte accepts "random" here, then raises ValueError at every sample.
    with pytest.raises(ValueError, match="unknown goal_selection_strategy 'random'"):
        HerReplayStorage(obs_space, act_space, goal_selection_strategy="random", storage_size=10)
    with pytest.raises(TypeError, match=r"spaces.Dict"):
        HerReplayStorage(spaces.Box(0, 1, (3,)), act_space, storage_size=10)
    with pytest.raises(ValueError, match="num_goals must be >= 0"):
        HerReplayStorage(obs_space, act_space, num_goals=-1, storage_size=10)
    with pytest.raises(TypeError, match="reward_fn must be callable"):
        HerReplayStorage(obs_space, act_space, reward_fn="compute_reward", storage_size=10)  # type: ignore[arg-type]


# ------------------------------------------------------------------ add / sample with a real env
@pytest.mark.parametrize("name", list(ENVS))
@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_add_and_sample_with_a_goalenvs_vector_env(name: str, strategy: str) -> None:
    env = make_vector_env(name)
    compute_reward = reward_fn_of(env)
    storage = HerReplayStorage(
        env.single_observation_space,
        env.single_action_space,
        "cpu",
        3000,
        env.num_envs,
        128,
        strategy,
        4,
        compute_reward,
    )
    reached = run(env, storage, steps=60)  # several episodes per env (at most 10 steps each)
    assert storage.step == 60 and storage.storage.num_transitions == 180
    batch = storage.sample()

    # rllte's own DictReplayBatch where rllte is installed, else her.rllte's: the same NamedTuple.
    assert type(batch).__name__ == "DictReplayBatch" and batch._fields == FIELDS == DictReplayBatch._fields
    obs_shape = storage.obs_shape
    for field in ("observations", "next_observations"):
        entries = getattr(batch, field)
        assert set(entries) == set(env.single_observation_space.spaces)
        for key, tensor in entries.items():
            assert tensor.shape == (128, *obs_shape[key]) and tensor.dtype == th.float32
            assert tensor.device == th.device("cpu")
    assert batch.actions.shape == (128, storage.action_dim) and batch.actions.dtype == th.float32
    for field in ("rewards", "terminateds", "truncateds"):
        tensor = getattr(batch, field)
        assert tensor.shape == (128, 1) and tensor.dtype == th.float32 and tensor.device == th.device("cpu")
        if field != "rewards":
            assert set(tensor.unique().tolist()) <= {0.0, 1.0}

    # The last int(her_ratio * B) transitions are relabelled: their goal is in both observations,
    # and their reward is compute_reward(next achieved goal, new goal).
    n_virtual = int(storage.her_ratio * 128)
    assert n_virtual == 102
    virtual = slice(128 - n_virtual, None)
    goal = batch.observations["desired_goal"].numpy()
    np.testing.assert_array_equal(goal[virtual], batch.next_observations["desired_goal"].numpy()[virtual])
    dtype = env.single_observation_space["desired_goal"].dtype
    achieved = batch.next_observations["achieved_goal"].numpy().astype(dtype)
    expected = compute_reward(achieved, goal.astype(dtype), None)
    np.testing.assert_allclose(batch.rewards.numpy()[:, 0], np.asarray(expected, np.float32), rtol=1e-6)
    # Every relabelled goal is a goal some step reached (float32 as rllte's batch holds it).
    seen = {np.asarray(g, np.float32).tobytes() for steps in reached for g in steps}
    assert all(np.asarray(g, np.float32).reshape(-1).tobytes() in seen for g in goal[virtual])


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_sample_lands_on_the_storage_s_device(device: str) -> None:
    if device == "cuda" and not th.cuda.is_available():
        pytest.skip("no CUDA device")
    env = make_vector_env("bitflip-continuous", num_envs=2)
    storage = HerReplayStorage(
        env.single_observation_space,
        env.single_action_space,
        device,
        1000,
        2,
        16,
        "future",
        4,
        reward_fn_of(env),
    )
    run(env, storage, steps=20)
    batch = storage.sample()
    tensors = [*batch.observations.values(), *batch.next_observations.values(), *batch[1:5]]
    assert all(t.device.type == device and t.dtype == th.float32 for t in tensors)


def _encoded_storage(strategy: str, num_envs: int = 2) -> tuple[HerReplayStorage, list[int]]:
    """A storage fed with observations that say where they come from: the achieved goal after step
    ``t`` of episode ``e`` of env ``i`` is ``[i, e, t + 1]``; episode lengths cycle through ``lengths``."""
    goal = spaces.Box(-np.inf, np.inf, (3,), np.float64)
    space = spaces.Dict({"observation": goal, "achieved_goal": goal, "desired_goal": goal})

    def reward_fn(achieved_goal, desired_goal, infos):
        return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)

    storage = HerReplayStorage(
        space, spaces.Box(-1, 1, (2,), np.float32), "cpu", 2000, num_envs, 512, strategy, 4, reward_fn
    )
    lengths = [3, 1, 5, 2, 4]
    episode, step = [0] * num_envs, [0] * num_envs
    for _ in range(40):
        obs, next_obs = [], []
        terminated = []
        for i in range(num_envs):
            length = lengths[(episode[i] + i) % len(lengths)]
            obs.append([i, episode[i], step[i]])
            next_obs.append([i, episode[i], step[i] + 1])
            terminated.append(step[i] + 1 == length)
            step[i] += 1
            if step[i] == length:
                episode[i], step[i] = episode[i] + 1, 0
        o, n = th.tensor(obs, dtype=th.float64), th.tensor(next_obs, dtype=th.float64)
        storage.add(
            {"observation": o, "achieved_goal": o, "desired_goal": th.full_like(o, -1)},
            th.zeros(num_envs, 2),
            th.zeros(num_envs),
            th.tensor(terminated, dtype=th.float32),
            th.zeros(num_envs),
            {},
            {"observation": n, "achieved_goal": n, "desired_goal": th.full_like(n, -1)},
        )
    return storage, lengths


@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_relabelled_goals_follow_the_strategy(strategy: str) -> None:
    storage, lengths = _encoded_storage(strategy)
    batch = storage.sample()
    n_virtual = int(storage.her_ratio * storage.batch_size)
    obs = batch.observations["observation"].numpy()
    goal = batch.observations["desired_goal"].numpy()
    real, virtual = slice(None, -n_virtual), slice(-n_virtual, None)
    assert (goal[real] == -1).all()  # stored goals untouched
    env, episode, t = obs[virtual].T
    goal_env, goal_episode, goal_step = goal[virtual].T
    np.testing.assert_array_equal(goal_env, env)  # the same env
    np.testing.assert_array_equal(goal_episode, episode)  # and the same episode
    length = np.array([lengths[int(e + i) % len(lengths)] for i, e in zip(env, episode, strict=True)])
    if strategy == "final":
        np.testing.assert_array_equal(goal_step, length)
    elif strategy == "future":  # inclusive: the next achieved goal of step t or later
        assert (goal_step >= t + 1).all() and (goal_step <= length).all()
        assert (goal_step == t + 1).any() and (goal_step > t + 1).any()
    else:
        assert (goal_step >= 1).all() and (goal_step <= length).all() and (goal_step < t + 1).any()
    # The reward of a relabelled transition compares its next achieved goal with the new goal.
    achieved = batch.next_observations["achieved_goal"].numpy()[virtual]
    expected = -np.any(achieved != goal[virtual], axis=1).astype(np.float32)
    np.testing.assert_array_equal(batch.rewards.numpy()[virtual, 0], expected)
    assert (batch.rewards.numpy()[real] == 0).all()  # the stored rewards


@pytest.mark.parametrize("num_goals", [0, 1, 4])
def test_num_goals_sets_the_relabelled_share(num_goals: int) -> None:
    env = make_vector_env("bitflip-continuous", num_envs=2)
    compute_reward = reward_fn_of(env)
    calls: list[int] = []

    def reward_fn(achieved_goal, desired_goal, infos):
        calls.append(len(achieved_goal))
        return compute_reward(achieved_goal, desired_goal, infos)

    storage = HerReplayStorage(
        env.single_observation_space,
        env.single_action_space,
        "cpu",
        1000,
        2,
        100,
        "future",
        num_goals,
        reward_fn,
    )
    run(env, storage, steps=30)
    storage.sample()
    expected = int((1 - 1 / (num_goals + 1)) * 100)  # rllte's (and stable-baselines3's) count
    assert calls == ([expected] if expected else [])
    if num_goals == 0:  # nothing to relabel: no reward_fn needed
        storage.reward_fn = None
        assert storage.sample().rewards.shape == (100, 1)


def test_reward_fn_gets_the_infos_rllte_passes() -> None:
    env = make_vector_env("bitflip-continuous", num_envs=2)
    compute_reward = reward_fn_of(env)
    received: list = []

    def reward_fn(achieved_goal, desired_goal, infos):
        assert isinstance(achieved_goal, np.ndarray) and isinstance(desired_goal, np.ndarray)
        received.append(infos)
        for info in infos:
            info["touched"] = True  # a reward function that writes into its infos changes no stored one
        return th.as_tensor(compute_reward(achieved_goal, desired_goal, None))  # a tensor is accepted

    without = HerReplayStorage(
        env.single_observation_space, env.single_action_space, "cpu", 1000, 2, 50, "future", 4, reward_fn
    )
    run(env, without, steps=30)
    without.sample()
    infos = received.pop()
    assert isinstance(infos, list) and len(infos) == 40 and infos[0] == {"touched": True}

    with_infos = HerReplayStorage(
        env.single_observation_space,
        env.single_action_space,
        "cpu",
        1000,
        2,
        50,
        "future",
        4,
        reward_fn,
        True,
    )
    run(env, with_infos, steps=30)
    for _ in range(2):
        with_infos.sample()
        infos = received.pop()
        assert len(infos) == 40
        # Each transition's own env's info (split from the vector env's dict of arrays), a copy.
        assert all(isinstance(info, dict) and np.ndim(info["elapsed_steps"]) == 0 for info in infos)
        assert all(info["touched"] is True for info in infos)
        received.clear()
    stored = with_infos.storage.rows("infos")
    assert not any("touched" in info for info in stored.reshape(-1) if info)


def test_update_changes_nothing_and_reset_forgets() -> None:
    env = make_vector_env("bitflip-continuous", num_envs=2)
    storage = HerReplayStorage(
        env.single_observation_space,
        env.single_action_space,
        "cpu",
        1000,
        2,
        32,
        "future",
        4,
        reward_fn_of(env),
    )
    run(env, storage, steps=30)
    before = (storage.step, storage.full, storage.storage.num_transitions, storage.storage.num_sampleable)
    assert storage.update({"train/critic_loss": 1.0}) is None  # rllte's agents pass their metrics
    assert storage.update() is None
    assert (
        storage.step,
        storage.full,
        storage.storage.num_transitions,
        storage.storage.num_sampleable,
    ) == before
    storage.sample()
    storage.reset()
    assert (storage.step, storage.storage.num_transitions) == (0, 0)
    with pytest.raises(RuntimeError, match="num_init_steps"):
        storage.sample()


def test_bad_steps_are_refused_whole() -> None:
    env = make_vector_env("bitflip-continuous", num_envs=2)
    storage = HerReplayStorage(env.single_observation_space, env.single_action_space, "cpu", 1000, 2, 32)
    obs, _ = env.reset(seed=0)
    o = torch_obs(obs)
    actions = th.zeros(2, 6)
    with pytest.raises(ValueError, match=r"terminateds must hold 0.0 or 1.0"):
        storage.add(o, actions, th.zeros(2), th.tensor([0.5, 0.0]), th.zeros(2), {}, o)
    with pytest.raises(ValueError, match=r"actions must have shape"):
        storage.add(o, th.zeros(2, 5), th.zeros(2), th.zeros(2), th.zeros(2), {}, o)
    with pytest.raises(TypeError, match="dicts of the observation space's keys"):
        storage.add(o["observation"], actions, th.zeros(2), th.zeros(2), th.zeros(2), {}, o)  # type: ignore[arg-type]
    assert storage.storage.num_transitions == 0
    # Bools and integers are flags too (rllte's wrapper gives floats).
    storage.add(o, actions, th.zeros(2), th.tensor([True, False]), th.tensor([0, 1]), {}, o)
    assert storage.storage.num_transitions == 2


def test_without_reward_fn_relabelling_names_it() -> None:
    env = make_vector_env("bitflip-continuous", num_envs=2)
    storage = HerReplayStorage(env.single_observation_space, env.single_action_space, "cpu", 1000, 2, 32)
    run(env, storage, steps=20)
    with pytest.raises(RuntimeError, match="no reward_fn"):
        storage.sample()
    storage.reward_fn = reward_fn_of(env)
    assert storage.sample().rewards.shape == (32, 1)


def _module_reward(achieved_goal, desired_goal, infos):
    return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)


def test_pickles_with_its_episodes() -> None:
    env = make_vector_env("bitflip-continuous", num_envs=2)
    storage = HerReplayStorage(
        env.single_observation_space, env.single_action_space, "cpu", 1000, 2, 32, "final", 4, _module_reward
    )
    run(env, storage, steps=20)
    loaded = pickle.loads(pickle.dumps(storage))
    assert (loaded.step, loaded.storage.num_sampleable) == (storage.step, storage.storage.num_sampleable)
    assert loaded.sample().rewards.shape == (32, 1)


def test_an_rllte_that_does_not_import_is_named_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import importlib.util

    import her.rllte

    find_spec, import_module = importlib.util.find_spec, importlib.import_module

    def broken(name: str, *args: Any) -> Any:
        if name.startswith("rllte"):
            raise ImportError("No module named 'pynvml'")
        return import_module(name, *args)

    monkeypatch.setattr(her.rllte, "_RLLTE_BATCH", None)  # not looked up yet in this process
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "rllte" else find_spec(name, *a)
    )
    monkeypatch.setattr(importlib, "import_module", broken)
    env = make_vector_env("bitflip-continuous", num_envs=1)
    with pytest.warns(RuntimeWarning, match=r"rllte is installed but could not be imported \(ImportError"):
        storage = HerReplayStorage(
            env.single_observation_space,
            env.single_action_space,
            "cpu",
            100,
            1,
            8,
            "future",
            4,
            reward_fn_of(env),
        )
    with warnings.catch_warnings():  # looked up once: no second warning
        warnings.simplefilter("error")
        HerReplayStorage(env.single_observation_space, env.single_action_space, "cpu", 100, 1, 8)
    run(env, storage, steps=12)
    assert type(storage.sample()) is DictReplayBatch


# ------------------------------------------------------------------ inside rllte (when installed)
def _rllte():
    return pytest.importorskip("rllte.xploit.storage", reason="rllte-core is not installed")


def test_rllte_takes_it_as_a_storage_and_gets_its_own_batch_type() -> None:
    _rllte()
    from rllte.common.prototype.base_storage import BaseStorage
    from rllte.common.type_alias import DictReplayBatch as RllteBatch
    from rllte.xploit.storage import HerReplayStorage as RllteHerReplayStorage

    assert [(p.name, p.default) for p in inspect.signature(RllteHerReplayStorage).parameters.values()][
        :8
    ] == (RLLTE_PARAMETERS[:8])
    env = make_vector_env("bitflip-continuous", num_envs=2)
    storage = HerReplayStorage(
        env.single_observation_space,
        env.single_action_space,
        "cpu",
        1000,
        2,
        32,
        "future",
        4,
        reward_fn_of(env),
    )
    assert isinstance(storage, BaseStorage)
    run(env, storage, steps=20)
    assert type(storage.sample()) is RllteBatch


@pytest.mark.parametrize("name", ["bitflip-continuous", "bitflip-integer"])
def test_the_batch_is_laid_out_as_rllte_s(name: str) -> None:
    _rllte()
    from rllte.xploit.storage import HerReplayStorage as RllteHerReplayStorage

    env = make_vector_env(name, num_envs=2)
    compute_reward = reward_fn_of(env)

    def column_rewards(achieved_goal, desired_goal, infos):  # rllte's sample needs (B, 1) rewards
        return np.asarray(compute_reward(achieved_goal, desired_goal, infos)).reshape(-1, 1)

    args = (env.single_observation_space, env.single_action_space, "cpu", 1000, 2, 64, "future", 4)
    ours, theirs = HerReplayStorage(*args, compute_reward), RllteHerReplayStorage(*args, column_rewards)
    run(env, ours, steps=30)
    run(make_vector_env(name, num_envs=2), theirs, steps=30, column_actions=True)  # the same steps
    assert (ours.step, ours.storage_size, ours.her_ratio) == (
        theirs.step,
        theirs.storage_size,
        theirs.her_ratio,
    )
    a, b = ours.sample(), theirs.sample()
    assert type(a) is type(b)
    for field in FIELDS:
        x, y = getattr(a, field), getattr(b, field)
        if isinstance(x, dict):
            assert x.keys() == y.keys()
            assert all(
                (x[k].shape, x[k].dtype, x[k].device) == (y[k].shape, y[k].dtype, y[k].device) for k in x
            )
        else:
            assert (x.shape, x.dtype, x.device) == (y.shape, y.dtype, y.device)


def test_rllte_s_ddpg_trains_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _rllte()
    pytest.importorskip("rllte.agent")
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import rllte_ddpg_her

    sampled: list[int] = []
    sample = HerReplayStorage.sample

    def counting_sample(self: HerReplayStorage):
        batch = sample(self)
        sampled.append(batch.rewards.shape[0])
        return batch

    monkeypatch.setattr(HerReplayStorage, "sample", counting_sample)
    result = rllte_ddpg_her.main(
        [
            "--steps", "240", "--init-steps", "160", "--num-envs", "2", "--batch-size", "32",
            "--hidden-dim", "32", "--eval-episodes", "2", "--workdir", str(tmp_path),
        ]
    )  # fmt: skip
    assert result["storage"] == "HerReplayStorage"
    assert result["transitions"] == 240 and result["sampleable"] > 0
    assert len(sampled) == 40 and set(sampled) == {32}  # an update per env step after num_init_steps
    assert any((tmp_path / "logs").rglob("model"))
    assert "rllte_ddpg_her" in sys.modules
