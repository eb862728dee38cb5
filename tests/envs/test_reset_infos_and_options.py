"""Reset and step infos carry the same keys, and every family refuses unknown reset options (issue 45).

Minari's ``DataCollector(env, record_infos=True)`` keeps one info layout per episode, the reset's; an
info key that only steps report breaks it (Fetch did, with ``pytree structure error``). And a reset
option no family knows is a typo to report, not a setting to ignore.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tests.conftest import make_params

ALL = make_params()
FAMILIES = [
    pytest.param("goalenvs/BitFlip-v0", id="bitflip"),
    pytest.param("goalenvs/Parking-v0", id="parking"),
    *[
        pytest.param(p.values[0], id=p.values[0].split("/")[1], marks=p.marks)
        for p in ALL
        if "Fetch" in p.values[0]
    ][:1],
]


def _layout(info: dict) -> dict[str, tuple[type, np.dtype, tuple[int, ...]]]:
    return {key: (type(value), np.asarray(value).dtype, np.shape(value)) for key, value in info.items()}


@pytest.mark.parametrize("env_id", ALL)
def test_reset_info_has_the_step_info_keys_dtypes_and_shapes(env_id: str) -> None:
    env = gym.make(env_id)
    _, reset_info = env.reset(seed=1)
    step_info = env.step(env.action_space.sample())[4]
    assert set(reset_info) == set(step_info)
    assert _layout(reset_info) == _layout(step_info)
    assert reset_info["elapsed_steps"] == 0 if "elapsed_steps" in reset_info else True
    env.close()


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize("env_id", ALL)
def test_vector_reset_info_has_the_step_info_keys_and_every_env_reports_them(env_id: str, mode: str) -> None:
    vec = gym.make_vec(env_id, num_envs=2, autoreset_mode=mode)
    _, reset_info = vec.reset(seed=1)
    step_info = vec.step(vec.action_space.sample())[4]
    assert set(reset_info) == set(step_info) - {"final_obs", "final_info", "_final_obs", "_final_info"}
    for key, value in reset_info.items():
        assert (value.dtype, value.shape) == (step_info[key].dtype, step_info[key].shape), key
        if key.startswith("_"):
            assert value.all(), key
    vec.close()


@pytest.mark.parametrize("env_id", FAMILIES)
def test_an_unknown_reset_option_is_refused_in_one_line_by_every_family(env_id: str) -> None:
    env, vec = gym.make(env_id), gym.make_vec(env_id, num_envs=2)
    for target in (env, vec):
        with pytest.raises(ValueError, match=r"unknown reset option\(s\) \['bogus'\]; accepted: \[") as err:
            target.reset(seed=0, options={"bogus": 1})
        assert "\n" not in str(err.value)
        # an empty or None options is fine, and the env still resets afterwards
        target.reset(seed=0, options={})
        target.reset(seed=0, options=None)
    env.close()
    vec.close()
