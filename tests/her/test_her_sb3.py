"""her.HerReplayBuffer as a drop-in for stable-baselines3's: same statistics, every algorithm, save/load."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

pytest.importorskip("stable_baselines3", reason="the sb3 extra (stable-baselines3) is not installed")

import torch
from scipy.stats import chi2_contingency
from stable_baselines3 import DDPG, DQN, SAC, TD3
from stable_baselines3 import HerReplayBuffer as SB3HerReplayBuffer
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import BitFlippingEnv
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

import goalenvs  # noqa: F401  (registers goalenvs/BitFlip-v0)
from her import GoalSelectionStrategy, HerReplayBuffer
from her.sb3 import _EnvMethod

BITFLIP = "goalenvs:goalenvs/BitFlip-v0"  # the module prefix lets worker processes register it too


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class EncodedEnv(gym.Env):
    """Observations are [env, episode, step]; only the spaces and compute_reward are used."""

    observation_space = spaces.Dict(
        {
            key: spaces.Box(-1e6, 1e6, (3,), np.float64)
            for key in ("observation", "achieved_goal", "desired_goal")
        }
    )
    action_space = spaces.Box(-1, 1, (2,), np.float32)

    def __init__(self):
        self.seen_infos = []

    def reset(self, *, seed=None, options=None):
        return {key: np.zeros(3) for key in self.observation_space.spaces}, {}

    def step(self, action):
        return self.reset()[0], 0.0, False, False, {}

    def compute_reward(self, achieved_goal, desired_goal, info):
        self.seen_infos.append(info)
        return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)


def feed(buffers, n_envs: int, n_steps: int, seed: int = 0) -> None:
    """The same encoded episodes (random lengths 1..12) into every buffer, through SB3's add()."""
    rng = np.random.default_rng(seed)
    ordinal = np.zeros(n_envs, int)
    step = np.zeros(n_envs, int)
    length = rng.integers(1, 13, n_envs)
    for _ in range(n_steps):
        obs = {key: np.zeros((n_envs, 3)) for key in EncodedEnv.observation_space.spaces}
        nxt = {key: np.zeros((n_envs, 3)) for key in EncodedEnv.observation_space.spaces}
        for env in range(n_envs):
            obs["observation"][env] = obs["achieved_goal"][env] = [env, ordinal[env], step[env]]
            nxt["observation"][env] = nxt["achieved_goal"][env] = [env, ordinal[env], step[env] + 1]
            obs["desired_goal"][env] = nxt["desired_goal"][env] = [env, ordinal[env], -1]
        done = step + 1 == length
        infos = [{"TimeLimit.truncated": bool(d and rng.random() < 0.5)} for d in done]
        action = rng.uniform(-1, 1, (n_envs, 2)).astype(np.float32)
        for buffer in buffers:
            buffer.add(
                {k: v.copy() for k, v in obs.items()},
                {k: v.copy() for k, v in nxt.items()},
                action.copy(),
                -np.ones(n_envs, np.float32),
                done.copy(),
                infos,
            )
        step += 1
        ordinal[done] += 1
        step[done] = 0
        length[done] = rng.integers(1, 13, done.sum())


def keys_and_offsets(samples, n_relabelled: int):
    obs = samples.observations["observation"].numpy().astype(int)
    goal = samples.observations["desired_goal"].numpy().astype(int)
    transitions = [tuple(row) for row in obs]
    relabelled = goal[-n_relabelled:]
    assert (relabelled[:, :2] == obs[-n_relabelled:, :2]).all(), "goal from another episode"
    offsets = relabelled[:, 2] - 1 - obs[-n_relabelled:, 2]
    return transitions, offsets, goal


def assert_same_distribution(ours: list, theirs: list) -> None:
    values = sorted(set(ours) | set(theirs))
    index = {value: i for i, value in enumerate(values)}
    table = np.zeros((2, len(values)))
    for row, sample in enumerate((ours, theirs)):
        np.add.at(table[row], [index[v] for v in sample], 1)
    assert chi2_contingency(table).pvalue > 1e-4


@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_statistically_equivalent_to_stable_baselines3(strategy):
    n_envs, capacity, batch = 2, 120, 20_000
    env = DummyVecEnv([EncodedEnv] * n_envs)
    space, action_space = EncodedEnv.observation_space, EncodedEnv.action_space
    kwargs = dict(n_envs=n_envs, goal_selection_strategy=strategy, n_sampled_goal=4, device="cpu")
    ours = HerReplayBuffer(capacity, space, action_space, env, seed=1, **kwargs)
    theirs = SB3HerReplayBuffer(capacity, space, action_space, env, **kwargs)
    feed([ours, theirs], n_envs, n_steps=150)  # wraps around: 150 steps into 60 rows per env
    np.random.seed(2)  # noqa: NPY002  (stable-baselines3 samples from the global state)
    ours_batch, their_batch = ours.sample(batch), theirs.sample(batch)
    n_relabelled = int((1 - 1 / 5) * batch)
    ours_t, ours_offsets, ours_goal = keys_and_offsets(ours_batch, n_relabelled)
    their_t, their_offsets, their_goal = keys_and_offsets(their_batch, n_relabelled)
    # Same relabelled share, same real goals, the same set of sampleable transitions.
    assert (ours_goal[:-n_relabelled, 2] == -1).all() and (their_goal[:-n_relabelled, 2] == -1).all()
    assert (ours_goal[-n_relabelled:, 2] >= 1).all() and (their_goal[-n_relabelled:, 2] >= 1).all()
    assert set(ours_t) == set(their_t)
    assert_same_distribution(ours_t, their_t)
    assert_same_distribution(ours_offsets.tolist(), their_offsets.tolist())
    if strategy == "future":
        assert ours_offsets.min() == 0  # inclusive of the current transition, as stable-baselines3
    # Same rewards and done flags for the same transitions.
    for samples in (ours_batch, their_batch):
        achieved = samples.next_observations["achieved_goal"].numpy()
        goal = samples.observations["desired_goal"].numpy()
        expected = -np.any(achieved != goal, axis=-1).astype(np.float32)
        np.testing.assert_array_equal(samples.rewards.numpy().ravel(), expected)
    ours_flags = dict(zip(ours_t, ours_batch.dones.numpy().ravel(), strict=True))
    their_flags = dict(zip(their_t, their_batch.dones.numpy().ravel(), strict=True))
    assert all(ours_flags[key] == their_flags[key] for key in ours_flags)
    ours_next = dict(
        zip(ours_t, map(tuple, ours_batch.next_observations["observation"].numpy()), strict=True)
    )
    their_next = dict(
        zip(their_t, map(tuple, their_batch.next_observations["observation"].numpy()), strict=True)
    )
    assert all(ours_next[key] == their_next[key] for key in ours_next)


STOCK_ARRAYS = ("actions", "rewards", "dones", "timeouts", "ep_start", "ep_length", "_current_ep_start")


@pytest.mark.parametrize(
    ("n_envs", "capacity", "n_steps", "handle_timeouts"),
    [(1, 40, 30, True), (1, 40, 150, True), (3, 120, 150, False), (3, 120, 400, True), (2, 30, 333, True)],
    ids=["1env", "1env-wrapped", "3envs-wrapped-no-timeouts", "3envs-wrapped-twice", "2envs-tiny-ring"],
)
def test_stock_arrays_equal_stable_baselines3s(n_envs, capacity, n_steps, handle_timeouts):
    """Code reading the stock buffer's arrays reads the same values from ours, also after truncation."""
    env = DummyVecEnv([EncodedEnv] * n_envs)
    space, action_space = EncodedEnv.observation_space, EncodedEnv.action_space
    kwargs = dict(n_envs=n_envs, handle_timeout_termination=handle_timeouts)
    ours = HerReplayBuffer(capacity, space, action_space, env, seed=1, **kwargs)
    theirs = SB3HerReplayBuffer(capacity, space, action_space, env, **kwargs)
    for seed, steps in ((0, n_steps), (1, 7)):  # the second feed goes on mid-episode
        feed([ours, theirs], n_envs, n_steps=steps, seed=seed)
        for truncate in (False, True):
            if truncate:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # both warn that the last episodes are cut
                    ours.truncate_last_trajectory()
                    theirs.truncate_last_trajectory()
            assert ours.pos == theirs.pos and ours.full == theirs.full
            for name in STOCK_ARRAYS:
                a, b = getattr(ours, name), getattr(theirs, name)
                assert a.dtype == b.dtype and a.shape == b.shape, name
                np.testing.assert_array_equal(a, b, err_msg=name)
            for name in ("observations", "next_observations"):
                a, b = getattr(ours, name), getattr(theirs, name)
                assert a.keys() == b.keys()
                for key in a:
                    assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape
                    np.testing.assert_array_equal(a[key], b[key], err_msg=f"{name}[{key!r}]")


def test_stock_arrays_are_read_only_and_follow_adds():
    env = DummyVecEnv([EncodedEnv] * 2)
    space, action_space = EncodedEnv.observation_space, EncodedEnv.action_space
    buffer = HerReplayBuffer(100, space, action_space, env, n_envs=2, seed=0, copy_info_dict=True)
    feed([buffer], 2, 20)
    observations = buffer.observations["observation"]
    # Views of the storage: two reads share memory (copies would not).
    assert observations.shape == (50, 2, 3)
    assert np.shares_memory(observations, buffer.storage.rows("observations")["observation"])
    for name in ("actions", "rewards", "dones", "ep_length"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(buffer, name)[0] = 1
    with pytest.raises(ValueError, match="read-only"):
        observations[0] = 1
    for name in (*STOCK_ARRAYS, "observations", "next_observations", "pos", "full"):
        with pytest.raises(AttributeError, match=f"HerReplayBuffer.{name} is read-only"):
            setattr(buffer, name, getattr(buffer, name))
    # Rows written later show in a view taken before (it views the storage, as the stock arrays are).
    feed([buffer], 2, 5, seed=1)
    assert buffer.pos == 25
    np.testing.assert_array_equal(observations[20:25], buffer.observations["observation"][20:25])
    assert observations[20:25].any()
    # infos: the kept dicts (copy_info_dict=True), empty dicts on rows never written.
    infos = buffer.infos
    assert infos.shape == (50, 2) and set(infos[0, 0]) == {"TimeLimit.truncated"} and infos[30, 1] == {}


def bitflip_env(n_envs=1, continuous=False, n_bits=5, vec_env_cls=None):
    return make_vec_env(
        BITFLIP, n_envs=n_envs, env_kwargs=dict(n_bits=n_bits, continuous=continuous), vec_env_cls=vec_env_cls
    )


def small(algo, env, **kwargs):
    kwargs.setdefault("learning_starts", 40)
    return algo(
        "MultiInputPolicy",
        env,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs=dict(n_sampled_goal=2, goal_selection_strategy="future"),
        batch_size=32,
        buffer_size=1000,
        policy_kwargs=dict(net_arch=[16]),
        seed=0,
        **kwargs,
    )


def algorithms():
    from sb3_contrib import QRDQN, TQC

    return [
        pytest.param(DQN, False, 1, id="DQN"),
        pytest.param(DQN, False, 3, id="DQN-3envs"),
        pytest.param(QRDQN, False, 2, id="QRDQN"),
        pytest.param(SAC, True, 1, id="SAC"),
        pytest.param(SAC, True, 2, id="SAC-2envs"),
        pytest.param(TD3, True, 1, id="TD3"),
        pytest.param(DDPG, True, 1, id="DDPG"),
        pytest.param(TQC, True, 2, id="TQC"),
    ]


@pytest.mark.parametrize(("algo", "continuous", "n_envs"), algorithms())
def test_algorithms_train_with_the_buffer(algo, continuous, n_envs):
    env = bitflip_env(n_envs, continuous)
    model = small(algo, env)
    model.learn(200)
    buffer = model.replay_buffer
    assert isinstance(buffer, HerReplayBuffer)
    assert model._n_updates > 0
    assert buffer.storage.reward_fn is not None and not isinstance(buffer.storage.reward_fn, _EnvMethod)
    assert buffer.storage.num_sampleable > 0
    assert (buffer.storage.episode_lengths() <= 5).all()


def test_subproc_vec_env_rewards_are_computed_in_process():
    env = bitflip_env(2, vec_env_cls=SubprocVecEnv)
    try:
        model = small(DQN, env)
        reward_fn = model.replay_buffer.storage.reward_fn
        assert not isinstance(reward_fn, _EnvMethod)  # rebuilt from the env spec, called here
        model.learn(120)
        samples = model.replay_buffer.sample(64)
        achieved = samples.next_observations["achieved_goal"].numpy()
        goal = samples.observations["desired_goal"].numpy()
        expected = -np.any(achieved != goal, axis=-1).astype(np.float32)
        np.testing.assert_array_equal(samples.rewards.numpy().ravel(), expected)
    finally:
        env.close()


def test_subproc_env_without_spec_falls_back_to_env_method():
    env = make_vec_env(lambda: BitFlippingEnv(n_bits=4), n_envs=2, vec_env_cls=SubprocVecEnv)
    try:
        with pytest.warns(UserWarning, match="env_method") as record:
            model = small(DQN, env)
        assert isinstance(model.replay_buffer.storage.reward_fn, _EnvMethod)
        model.learn(60)
    finally:
        env.close()
    message = str(record[0].message)
    assert (
        "its envs run in other processes, and its spec ('BitFlippingEnv-v0') has no entry point to rebuild "
        "it from (the env was not made by gym.make)" in message
    )
    # Envs made by class are what users fall back on when "goalenvs/..." ids are unknown in the
    # workers: the warning says why that happens and how to use the ids there.
    assert "are unknown in SubprocVecEnv workers that did not run that import" in message
    assert 'e.g. "goalenvs:goalenvs/Parking-v0"' in message and 'start_method="fork"' in message


def _bitflip_with_unmakeable_spec():
    env = gym.make("goalenvs:goalenvs/BitFlip-v0", n_bits=4)
    env.unwrapped.spec = gym.envs.registration.EnvSpec("Gone-v0", entry_point="no_such_module:Env")
    return env


def test_subproc_env_whose_spec_cannot_be_made_here_says_why():
    env = make_vec_env(_bitflip_with_unmakeable_spec, n_envs=2, vec_env_cls=SubprocVecEnv)
    try:
        with pytest.warns(UserWarning, match="env_method") as record:
            small(DQN, env)
    finally:
        env.close()
    assert (
        "making its spec 'Gone-v0' here failed (ModuleNotFoundError: No module named 'no_such_module')"
        in str(record[0].message)
    )


def test_goalenvs_ids_are_unknown_in_fresh_workers_without_the_prefix(tmp_path):
    # What the warnings' note is about: a worker started fresh does not know "goalenvs/..." ids
    # unless something imports goalenvs there; the "goalenvs:" prefix does.
    code = (
        "import gymnasium as gym\n"
        "for env_id in ('goalenvs/BitFlip-v0', 'goalenvs:goalenvs/BitFlip-v0'):\n"
        "    try:\n"
        "        gym.make(env_id)\n"
        "        print(env_id, 'ok')\n"
        "    except gym.error.NamespaceNotFound:\n"
        "        print(env_id, 'not found')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["goalenvs/BitFlip-v0 not found", "goalenvs:goalenvs/BitFlip-v0 ok"]


@pytest.mark.parametrize("truncate_last_traj", [False, True])
def test_save_and_load_mid_episode(tmp_path, truncate_last_traj):
    env = bitflip_env(2, n_bits=6)
    model = small(DQN, env)
    model.learn(103)  # stops mid-episode
    buffer = model.replay_buffer
    storage = buffer.storage
    cut_lengths = storage.current_episode_lengths
    assert cut_lengths.any()
    before = storage.num_sampleable
    path = tmp_path / "buffer.pkl"
    model.save_replay_buffer(path)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.load_replay_buffer(path, truncate_last_traj=truncate_last_traj)
    loaded = model.replay_buffer
    assert isinstance(loaded, HerReplayBuffer) and loaded is not buffer and loaded.env is model.env
    assert loaded.storage.reward_fn is not None
    if truncate_last_traj:
        assert any("will be truncated" in str(w.message) for w in caught)
        assert loaded.storage.num_sampleable == before + cut_lengths.sum()
        assert not loaded.storage.current_episode_lengths.any()
    else:
        assert loaded.storage.num_sampleable == before
        # Same state, same generator: the same batch as the buffer that was saved.
        a, b = buffer.sample(64), loaded.sample(64)
        for key in a.observations:
            torch.testing.assert_close(a.observations[key], b.observations[key])
        torch.testing.assert_close(a.rewards, b.rewards)
        torch.testing.assert_close(a.dones, b.dones)
    # stable-baselines3 issue #1542: episode lengths stay right when training goes on after loading,
    # whether the saved episode is cut (and the env reset) or continued (same env, same episode).
    model.learn(150, reset_num_timesteps=truncate_last_traj)
    lengths = model.replay_buffer.storage.episode_lengths()
    assert len(lengths) and (lengths <= 6).all()
    assert model.replay_buffer.storage.num_sampleable == lengths.sum()


def test_pickle_drops_the_env_and_set_env_restores_it():
    env = bitflip_env(1)
    model = small(DQN, env)
    model.learn(60)
    clone = pickle.loads(pickle.dumps(model.replay_buffer))
    assert clone.env is None and clone.storage.reward_fn is None
    clone.set_env(env)
    assert clone.storage.reward_fn is not None
    clone.sample(8)
    with pytest.raises(ValueError, match="already initialized"):
        clone.set_env(env)


def test_truncation_bootstraps_only_with_timeout_handling():
    env = DummyVecEnv([EncodedEnv])
    space, action_space = EncodedEnv.observation_space, EncodedEnv.action_space
    dones = {}
    for handle in (True, False):
        buffer = HerReplayBuffer(
            200, space, action_space, env, handle_timeout_termination=handle, n_sampled_goal=0, seed=0
        )
        feed([buffer], 1, 100)
        samples = buffer.sample(2000)
        last = (
            samples.next_observations["observation"].numpy()[:, 2] - 1
            == samples.observations["observation"].numpy()[:, 2]
        )
        dones[handle] = samples.dones.numpy().ravel()
        assert (dones[handle] <= 1).all()
    # Without timeout handling every episode end is a done; with it, time-limit ends are not.
    assert dones[False].sum() > dones[True].sum() > 0
    assert last.any()


def test_recompute_terminated_uses_compute_terminated():
    env = bitflip_env(1, n_bits=4)
    for recompute in (False, True):
        model = small(DQN, env, learning_starts=1000)
        model.replay_buffer_kwargs = {}
        buffer = HerReplayBuffer(
            400, env.observation_space, env.action_space, env, recompute_terminated=recompute, seed=0
        )
        model.replay_buffer = buffer
        model.learn(150)
        samples = buffer.sample(1000)
        relabelled = slice(1000 - int(0.8 * 1000), None)
        reached = samples.rewards.numpy().ravel()[relabelled] == 0
        dones = samples.dones.numpy().ravel()[relabelled]
        if recompute:
            np.testing.assert_array_equal(dones, reached.astype(np.float32))
        else:
            assert (dones[reached] == 0).any()  # stable-baselines3 issue #627: stale done flags


def test_recompute_terminated_needs_the_env_function():
    env = make_vec_env(lambda: BitFlippingEnv(n_bits=4), n_envs=1)
    with pytest.raises(ValueError, match="compute_terminated"):
        HerReplayBuffer(100, env.observation_space, env.action_space, env, recompute_terminated=True)


def test_infos_are_passed_only_with_copy_info_dict():
    for copy in (False, True):
        env = DummyVecEnv([EncodedEnv])
        buffer = HerReplayBuffer(
            100, EncodedEnv.observation_space, EncodedEnv.action_space, env, copy_info_dict=copy, seed=0
        )
        feed([buffer], 1, 40)
        buffer.sample(16)
        infos = env.envs[0].seen_infos[-1]
        if copy:
            assert infos.dtype == object and all("TimeLimit.truncated" in info for info in infos)
        else:
            assert infos is None


def test_seeded_algorithms_are_reproducible():
    batches = []
    for _ in range(2):
        model = small(DQN, bitflip_env(1))
        model.learn(80)
        batches.append(model.replay_buffer.sample(32).observations["desired_goal"])
    torch.testing.assert_close(batches[0], batches[1])


def test_rejected_arguments_are_named():
    env = bitflip_env(1)
    with pytest.raises(ValueError, match="optimize_memory_usage"):
        HerReplayBuffer(100, env.observation_space, env.action_space, env, optimize_memory_usage=True)
    with pytest.raises(ValueError, match="accepted values"):
        HerReplayBuffer(100, env.observation_space, env.action_space, env, goal_selection_strategy="later")
    with pytest.raises(TypeError, match="spaces.Dict"):
        HerReplayBuffer(100, spaces.Box(0, 1, (2,)), env.action_space, env)


def test_stable_baselines3_strategy_enum_is_accepted():
    from stable_baselines3.her import GoalSelectionStrategy as SB3Strategy

    env = bitflip_env(1)
    buffer = HerReplayBuffer(
        100, env.observation_space, env.action_space, env, goal_selection_strategy=SB3Strategy.FINAL
    )
    assert buffer.goal_selection_strategy is SB3Strategy.FINAL  # stable-baselines3's enum, as its buffer
    assert buffer.storage.goal_selection_strategy is GoalSelectionStrategy.FINAL


def test_a_registered_strategy_trains_with_stable_baselines3():
    from her import register_strategy

    # The episode's second half only: offsets from the later of t and the middle step.
    def second_half(steps, remaining, uniforms):
        lengths = steps + remaining
        first = np.maximum(steps, lengths // 2)
        return (
            first - steps + np.minimum((uniforms * (lengths - first)).astype(np.int64), lengths - first - 1)
        )

    register_strategy("second_half", second_half)
    env = bitflip_env(1)
    kwargs = dict(goal_selection_strategy="second_half", n_sampled_goal=4, seed=0)
    model = DQN(
        "MultiInputPolicy",
        env,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs=kwargs,
        learning_starts=40,
        batch_size=32,
        buffer_size=1000,
        policy_kwargs=dict(net_arch=[16]),
        seed=0,
    )
    model.learn(80)
    assert model.replay_buffer.goal_selection_strategy == "second_half"
    assert len(model.replay_buffer.sample(32).observations["desired_goal"]) == 32
    with pytest.raises(
        ValueError, match=r"^unknown goal_selection_strategy 'secondhalf'; accepted values: \["
    ):
        HerReplayBuffer(
            100, env.observation_space, env.action_space, env, goal_selection_strategy="secondhalf"
        )


def test_import_her_is_light():
    code = "import sys, her; print('torch' in sys.modules, 'stable_baselines3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".")
    assert out.stdout.split() == ["False", "False"]


def test_vec_normalize_is_seen_through_and_normalizes_samples():
    from stable_baselines3.common.vec_env import VecNormalize

    venv = VecNormalize(DummyVecEnv([EncodedEnv]), norm_obs_keys=["observation"], norm_reward=False)
    venv.obs_rms["observation"].mean[:] = 1.0
    buffer = HerReplayBuffer(100, EncodedEnv.observation_space, EncodedEnv.action_space, venv, seed=0)
    assert buffer.storage.reward_fn.__self__ is venv.venv.envs[0]  # resolved through the wrapper
    feed([buffer], 1, 40)
    buffer.storage.rng = np.random.default_rng(0)
    raw = buffer.sample(32)
    buffer.storage.rng = np.random.default_rng(0)
    normalized = buffer.sample(32, env=venv)
    expected = venv.normalize_obs({"observation": raw.observations["observation"].numpy()})["observation"]
    np.testing.assert_allclose(normalized.observations["observation"].numpy(), expected, rtol=1e-6)
    torch.testing.assert_close(normalized.observations["desired_goal"], raw.observations["desired_goal"])


@pytest.mark.parametrize("obs_kind", ["discrete_obs_space", "image_obs_space"])
def test_discrete_and_image_observation_entries(obs_kind):
    """stable-baselines3's BitFlippingEnv variants: Discrete entries (shape (1,)) and image entries."""
    env = make_vec_env(lambda: BitFlippingEnv(n_bits=4, **{obs_kind: True}), n_envs=2)
    model = small(DQN, env, learning_starts=30)
    model.learn(80)
    samples = model.replay_buffer.sample(16)
    for key, space in env.observation_space.spaces.items():
        expected = (16, 1) if isinstance(space, spaces.Discrete) else (16, *space.shape)
        assert tuple(samples.observations[key].shape) == expected
