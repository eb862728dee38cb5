"""Every goalenvs id trains with stable-baselines3's own HerReplayBuffer, as its HER docs set it up.

That buffer relabels through ``env.env_method("compute_reward", ag, dg, infos)`` with a list of empty
info dicts unless ``copy_info_dict=True``: an env whose ``compute_reward`` reads its info must cope.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3", reason="the sb3 extra (stable-baselines3) is not installed")

from stable_baselines3 import DQN, SAC
from stable_baselines3 import HerReplayBuffer as SB3HerReplayBuffer

import goalenvs.core
from tests.conftest import make_params

# Short episodes, so that complete ones (the only ones HER samples) fill the buffer within 300 steps.
ENV_KWARGS = {"goalenvs/BitFlip-v0": {"n_bits": 6}, "goalenvs/Parking-v0": {"duration": 8}}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_every_goalenvs_id_is_covered() -> None:
    ids = [param.values[0] for param in make_params(every_id=True)]
    assert len(ids) == len(goalenvs.ENVS) and all(i.startswith("goalenvs/") for i in ids)
    assert set(ENV_KWARGS) <= set(ids)
    trained = {
        param.values[0] for param in make_params()
    }  # every family, each manipulate object and target kind
    assert {i for i in ids if i not in trained} <= {
        e.id for e in goalenvs.ENVS if e.name.startswith("HandManipulate")
    }


# One id per family in the default tier; every id in the slow tier (CI runs both).
DEFAULT_TIER = {"goalenvs/BitFlip-v0", "goalenvs/Parking-v0", "goalenvs/FetchPush-v0"}


def _tiered(params: list) -> list:
    return [
        p
        if p.values[0] in DEFAULT_TIER
        else pytest.param(*p.values, id=p.id, marks=[*p.marks, pytest.mark.slow])
        for p in params
    ]


@pytest.mark.parametrize("copy_info_dict", [False, True], ids=["default-kwargs", "copy_info_dict"])
@pytest.mark.parametrize("env_id", _tiered(make_params()))
def test_trains_300_steps_with_stable_baselines3s_buffer(
    env_id: str, copy_info_dict: bool, monkeypatch
) -> None:
    monkeypatch.setattr(goalenvs.core, "_WARNED", set())
    env = gym.make(env_id, **ENV_KWARGS.get(env_id, {}))
    algo = DQN if isinstance(env.action_space, gym.spaces.Discrete) else SAC
    kwargs = {"copy_info_dict": True} if copy_info_dict else {}
    model = algo(
        "MultiInputPolicy",
        env,
        replay_buffer_class=SB3HerReplayBuffer,
        replay_buffer_kwargs=kwargs,
        learning_starts=100,
        batch_size=32,
        train_freq=4,
        policy_kwargs={"net_arch": [16]},
        seed=0,
    )
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model.learn(300)
    assert model.num_timesteps == 300
    assert model.replay_buffer.ep_length.max() > 0, "no complete episode: relabelling was not exercised"
    batch = model.replay_buffer.sample(64)
    assert np.isfinite(batch.rewards.numpy()).all()
    lost = [str(w.message) for w in record if "lost in relabelling" in str(w.message)]
    if env_id.startswith("goalenvs/Parking") and not copy_info_dict:
        # Empty infos: the goal term alone, and one warning that names the fix.
        assert len(lost) == 1 and "copy_info_dict=True" in lost[0]
    else:
        assert lost == []
