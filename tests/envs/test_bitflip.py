"""BitFlip specifics: observation types, vectorized GoalEnv functions, seeding, rendering, bad arguments."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import goalenvs  # registers the ids
import goalenvs.core
from goalenvs.envs.bitflip import BitFlipEnv, BitFlipTask, BitFlipVectorEnv, random_bits

OBS_KWARGS = [
    {"obs_type": "bits"},
    {"obs_type": "integer"},
    {"obs_type": "image"},
    {"obs_type": "image", "channel_first": False},
    {"continuous": True},
    {"random_goal": False},
]


def _make(**kwargs) -> BitFlipEnv:
    return gym.make("goalenvs/BitFlip-v0", **kwargs).unwrapped


def test_make_with_n_bits_15():
    env = gym.make("goalenvs/BitFlip-v0", n_bits=15)
    obs, _ = env.reset(seed=0)
    assert obs["observation"].shape == (15,) and env.action_space.n == 15


@pytest.mark.parametrize("kwargs", OBS_KWARGS, ids=str)
def test_flipping_the_differing_bits_solves_the_episode(kwargs):
    env = _make(n_bits=6, max_steps=6, **kwargs)
    obs, info = env.reset(seed=1)
    assert obs in env.observation_space and not info["is_success"]
    state, goal = env._state.bits[0].copy(), env._state.goal[0].copy()
    differing = np.flatnonzero(state != goal)
    for k, bit in enumerate(differing):
        if env.task.continuous:
            action = np.full(6, -1.0, np.float32)
            action[bit] = 1.0
        else:
            action = int(bit)
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs in env.observation_space
        last = k == len(differing) - 1
        assert reward == (0.0 if last else -1.0) and terminated == last and info["is_success"] == last
        assert info["elapsed_steps"] == k + 1
    assert np.array_equal(env._state.bits[0], goal)


@pytest.mark.parametrize("kwargs", OBS_KWARGS, ids=str)
def test_step_answers_are_the_compute_functions_answers(kwargs):
    # step derives reward and truncation from the success flag and the step counter; they must stay
    # what compute_reward / compute_truncated say, for every observation type, through resets.
    env = _make(n_bits=3, max_steps=4, **kwargs)
    env.reset(seed=5)
    env.action_space.seed(5)
    seen = set()
    for _ in range(300):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        args = (obs["achieved_goal"], obs["desired_goal"], info)
        assert type(reward) is float and reward == env.compute_reward(*args)
        assert terminated == env.compute_terminated(*args) == info["is_success"]
        assert truncated == env.compute_truncated(*args)
        seen.add((terminated, truncated))
        if terminated or truncated:
            env.reset()
    assert {(True, False), (False, True), (False, False)} <= seen


@pytest.mark.parametrize("kwargs", OBS_KWARGS, ids=str)
@pytest.mark.parametrize("batch_shape", [(), (1,), (7,), (3, 4)], ids=str)
def test_compute_functions_are_vectorized(kwargs, batch_shape):
    task = BitFlipTask(n_bits=5, **kwargs)
    rng = np.random.default_rng(0)
    n = int(np.prod(batch_shape, dtype=int))
    achieved = rng.integers(0, 2, (n, 5)).astype(np.uint8)
    desired = achieved.copy()
    desired[::2, rng.integers(0, 5)] ^= 1  # every other pair differs in one bit
    ag = task.encode(achieved).reshape((*batch_shape, *task.goal_shape))
    dg = task.encode(desired).reshape((*batch_shape, *task.goal_shape))
    expected = np.where((achieved == desired).all(axis=1), 0.0, -1.0).reshape(batch_shape)
    rewards = task.compute_reward(ag, dg, None)
    assert rewards.shape == batch_shape and rewards.dtype == np.float32
    np.testing.assert_array_equal(rewards, expected)
    np.testing.assert_array_equal(task.compute_terminated(ag, dg, None), expected == 0)
    steps = np.arange(n).reshape(batch_shape)
    infos = np.array([{"elapsed_steps": s} for s in steps.reshape(-1)], dtype=object).reshape(batch_shape)
    np.testing.assert_array_equal(task.compute_truncated(ag, dg, infos), steps >= task.max_steps)
    np.testing.assert_array_equal(
        task.compute_truncated(ag, dg, {"elapsed_steps": steps}), steps >= task.max_steps
    )


def test_integer_goals_in_sb3_storage_shape():
    task = BitFlipTask(n_bits=4, obs_type="integer")
    ag = np.array([[3], [5], [9]])
    dg = np.array([[3], [4], [9]])
    np.testing.assert_array_equal(task.compute_reward(ag, dg, None), [0.0, -1.0, 0.0])


def test_goal_encodings_round_trip():
    rng = np.random.default_rng(2)
    bits = rng.integers(0, 2, (20, 9)).astype(np.uint8)
    for kwargs in OBS_KWARGS:
        task = BitFlipTask(n_bits=9, **kwargs)
        np.testing.assert_array_equal(task.decode(task.encode(bits)), bits.astype(bool))
    assert BitFlipTask(n_bits=3, obs_type="integer").encode(np.array([1, 0, 1], np.uint8)) == 5


def test_compute_reward_rejects_mismatched_shapes():
    task = BitFlipTask(n_bits=4)
    with pytest.raises(ValueError, match="same shape"):
        task.compute_reward(np.zeros((2, 4)), np.zeros((3, 4)), None)
    with pytest.raises(ValueError, match=r"achieved_goal must have shape \(\.\.\., 4\)"):
        task.compute_reward(np.zeros((2, 5)), np.zeros((2, 5)), None)


def test_compute_truncated_without_elapsed_steps_is_false_and_warns_once(monkeypatch):
    # stable-baselines3's HerReplayBuffer passes empty infos: no step count, so no truncation known.
    monkeypatch.setattr(goalenvs.core, "_WARNED", set())
    task = BitFlipTask(n_bits=4, max_steps=4)
    with pytest.warns(UserWarning, match="BitFlip's compute_truncated got an info without 'elapsed_steps'"):
        assert not task.compute_truncated(np.zeros(4), np.zeros(4), {"is_success": False})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        flags = task.compute_truncated(np.zeros((3, 4)), np.zeros((3, 4)), [{}, {"elapsed_steps": 4}, {}])
        np.testing.assert_array_equal(flags, [False, True, False])
        assert not task.compute_truncated(np.zeros((2, 4)), np.zeros((2, 4)), None).any()


def test_goal_is_random_per_episode_and_start_differs_from_goal():
    env = _make(n_bits=3)
    goals = set()
    env.reset(seed=0)
    for _ in range(200):
        obs, _ = env.reset()
        assert not np.array_equal(obs["achieved_goal"], obs["desired_goal"])
        goals.add(obs["desired_goal"].tobytes())
    assert len(goals) == 8  # every 3-bit goal shows up
    fixed = _make(n_bits=3, random_goal=False)
    for seed in range(20):
        obs, _ = fixed.reset(seed=seed)
        np.testing.assert_array_equal(obs["desired_goal"], np.ones(3))


def test_single_bit_env_always_starts_one_flip_away():
    env = _make(n_bits=1)
    for seed in range(10):
        obs, _ = env.reset(seed=seed)
        assert obs["observation"][0] != obs["desired_goal"][0]
        _, reward, terminated, truncated, _ = env.step(0)
        assert reward == 0.0 and terminated and truncated


def test_random_bits_are_uniform_and_independent_of_batching():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**63, 400).astype(np.uint64)
    counters = rng.integers(0, 50, 400).astype(np.uint64)
    for n_bits in (1, 10, 64, 130):
        batch = random_bits(keys, counters, n_bits)
        one_by_one = np.concatenate(
            [random_bits(keys[i : i + 1], counters[i : i + 1], n_bits) for i in range(400)]
        )
        np.testing.assert_array_equal(batch, one_by_one)
    assert abs(batch.mean() - 0.5) < 0.01
    # different counters of one key give different draws
    assert not np.array_equal(
        random_bits(keys[:1], counters[:1], 64), random_bits(keys[:1], counters[:1] + 1, 64)
    )


def test_unseeded_resets_differ_and_follow_np_random():
    env = _make(n_bits=30)
    a = env.reset()[0]["observation"]
    b = env.reset()[0]["observation"]
    assert not np.array_equal(a, b)


def test_reset_options_place_state_and_goal():
    env = _make(n_bits=4)
    obs, info = env.reset(seed=0, options={"state": [1, 0, 1, 0], "goal": [1, 0, 1, 1]})
    np.testing.assert_array_equal(obs["observation"], [1, 0, 1, 0])
    np.testing.assert_array_equal(obs["desired_goal"], [1, 0, 1, 1])
    assert not info["is_success"]
    _, reward, terminated, _, _ = env.step(3)
    assert reward == 0.0 and terminated
    with pytest.raises(ValueError, match="unknown"):
        env.reset(options={"start": [0, 0, 0, 0]})
    with pytest.raises(ValueError, match=r"options\['goal'\] must be 4 bits"):
        env.reset(options={"goal": [2, 0, 0, 0]})


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_bits": 0}, ValueError, "n_bits must be >= 1"),
        ({"n_bits": 2.5}, TypeError, "n_bits must be an int"),
        ({"max_steps": 0}, ValueError, "max_steps must be >= 1"),
        ({"obs_type": "onehot"}, ValueError, r"obs_type must be one of \['bits', 'integer', 'image'\]"),
        ({"obs_type": "integer", "n_bits": 63}, ValueError, "too large for obs_type='integer'"),
        ({"obs_type": "image", "n_bits": 1297}, ValueError, "does not fit the 36x36 image"),
        ({"continuous": "yes"}, TypeError, "continuous must be True or False"),
        ({"random_goal": 1}, TypeError, "random_goal must be True or False"),
        ({"channel_first": None}, TypeError, "channel_first must be True or False"),
        ({"render_mode": "human"}, ValueError, r"render_mode must be None or one of \['rgb_array', 'ansi'\]"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        BitFlipEnv(**kwargs)
    with pytest.raises(error, match=match):
        BitFlipVectorEnv(num_envs=2, **kwargs)


def test_bad_vector_arguments():
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        BitFlipVectorEnv(num_envs=0)
    with pytest.raises(ValueError, match="autoreset_mode must be one of"):
        BitFlipVectorEnv(num_envs=2, autoreset_mode="Sometimes")
    env = BitFlipVectorEnv(num_envs=2)
    with pytest.raises(ValueError, match="must hold 2 ints"):
        env.reset(seed=[1, 2, 3])


def test_bad_actions():
    env = _make(n_bits=4)
    env.reset(seed=0)
    for action in (4, -1):
        with pytest.raises(ValueError, match=r"must be in \[0, 4\)"):
            env.step(action)
    with pytest.raises(ValueError, match="one integer"):
        env.step(1.5)
    with pytest.raises(gym.error.ResetNeeded):
        _make().step(0)
    vec = BitFlipVectorEnv(num_envs=3, n_bits=4)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=r"must be in \[0, 4\)"):
        vec.step(np.array([0, 4, 1]))
    with pytest.raises(ValueError, match=r"actions must have shape \(num_envs,\) = \(3,\)"):
        vec.step(np.array([0, 1]))
    cont = _make(n_bits=4, continuous=True)
    cont.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        cont.step(np.zeros(3, np.float32))


def test_render_modes():
    env = _make(n_bits=5, render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    # the state row is drawn: flipping a bit changes the picture
    env.step(0)
    assert not np.array_equal(frame, env.render())
    text = _make(n_bits=5, render_mode="ansi")
    text.reset(seed=0, options={"state": [1, 1, 0, 0, 1], "goal": [1, 0, 0, 0, 1]})
    assert text.render() == "state 11001 | goal 10001 | 1 bit(s) differ | step 0/5"
    frames = BitFlipVectorEnv(num_envs=3, render_mode="rgb_array")
    frames.reset(seed=0)
    assert len(frames.render()) == 3


def test_vector_same_step_autoreset_reports_final_observation():
    vec = BitFlipVectorEnv(num_envs=4, n_bits=3, autoreset_mode=AutoresetMode.SAME_STEP)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    reference = gym.vector.SyncVectorEnv(
        [lambda: BitFlipEnv(n_bits=3)] * 4, autoreset_mode=AutoresetMode.SAME_STEP
    )
    obs_v, _ = vec.reset(seed=5)
    obs_r, _ = reference.reset(seed=5)
    rng = np.random.default_rng(0)
    saw_end = False
    for _ in range(30):
        actions = rng.integers(0, 3, 4)
        obs_v, rew_v, term_v, trunc_v, info_v = vec.step(actions)
        obs_r, rew_r, term_r, trunc_r, info_r = reference.step(actions)
        for key in obs_v:
            np.testing.assert_array_equal(obs_v[key], obs_r[key])
        np.testing.assert_array_equal(rew_v, rew_r)
        np.testing.assert_array_equal(term_v | trunc_v, term_r | trunc_r)
        for i in np.flatnonzero(term_v | trunc_v):
            saw_end = True
            assert info_v["_final_obs"][i]
            for key in obs_v:
                np.testing.assert_array_equal(info_v["final_obs"][i][key], info_r["final_obs"][i][key])
    assert saw_end


def test_vector_reset_with_seed_list():
    vec = BitFlipVectorEnv(num_envs=2, n_bits=8)
    obs, _ = vec.reset(seed=[4, 9])
    for i, seed in enumerate((4, 9)):
        single, _ = BitFlipEnv(n_bits=8).reset(seed=seed)
        np.testing.assert_array_equal(obs["observation"][i], single["observation"])
