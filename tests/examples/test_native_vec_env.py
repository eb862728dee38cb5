"""examples/native_vec_env.py: several Fetch envs train through the native vector env, exactly as through
a DummyVecEnv of the single envs (same observations, rewards, dones and infos), and pickle for checkpoints."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("goalenvs.envs.fetch", reason="the Fetch tasks need mujoco (pip install goalenvs[fetch])")
if __import__("importlib").util.find_spec("gymnasium_robotics") is None:
    pytest.skip("the Fetch tasks use gymnasium-robotics' assets", allow_module_level=True)
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))  # as the scripts import it

import native_vec_env

RUN = {"env": "goalenvs/FetchPickAndPlaceDense-v0", "n_envs": 3, "env_kwargs": {"max_steps": 4}, "seed": 7}


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return np.array_equal(np.asarray(a), np.asarray(b)) and np.asarray(a).dtype == np.asarray(b).dtype


def test_native_envs_step_as_a_dummy_vec_env_of_monitored_single_envs() -> None:
    native = native_vec_env.make_training_envs(RUN)
    assert isinstance(native, native_vec_env.NativeVecEnv)
    assert native.env_is_wrapped(Monitor) == [True] * 3
    one_env = dict(RUN, n_envs=1)  # one env: always the DummyVecEnv
    assert isinstance(native_vec_env.make_training_envs(one_env), DummyVecEnv)
    saved, native_vec_env.NATIVE_TRAINING = native_vec_env.NATIVE_TRAINING, ()
    try:
        dummy = native_vec_env.make_training_envs(RUN)
    finally:
        native_vec_env.NATIVE_TRAINING = saved
    assert isinstance(dummy, DummyVecEnv)
    assert _same(native.reset(), dummy.reset())
    assert native.reset_infos == dummy.reset_infos
    actions = np.random.default_rng(0).uniform(-1, 1, (10, 3, 4)).astype(np.float32)
    ends = 0
    for t, a in enumerate(actions):
        if t == 5:  # checkpoints pickle the training envs mid-episode
            native = pickle.loads(pickle.dumps(native))
        obs_n, rew_n, done_n, infos_n = native.step(a)
        obs_d, rew_d, done_d, infos_d = dummy.step(a)
        assert _same(obs_n, obs_d) and _same(rew_n, rew_d) and _same(done_n, done_d)
        for info_n, info_d in zip(infos_n, infos_d, strict=True):
            episode_n, episode_d = info_n.pop("episode", None), info_d.pop("episode", None)
            assert (episode_n is None) == (episode_d is None)
            if episode_n is not None:  # return and length as Monitor's (the time is a clock)
                ends += 1
                assert (episode_n["r"], episode_n["l"]) == (episode_d["r"], episode_d["l"])
            assert info_n.keys() == info_d.keys()
            assert all(_same(info_n[k], info_d[k]) for k in info_n)
    assert ends == 6  # two episodes of 4 steps in each env
    assert native.get_attr("spec")[0].kwargs == {
        "task": "pick_and_place",
        "reward_type": "dense",
        "max_steps": 4,
    }
    native.close()
    dummy.close()
