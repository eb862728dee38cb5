"""The walkthrough of docs/adding-an-env.md holds: its family, run from the page's own code block, gives
a single env and a vector env that agree step for step and pass the contract checker.

The block is read from the page (so the test follows the walkthrough as written) and run once in this
process; tests/test_docs_blocks.py also runs it on its own, in a fresh interpreter.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import goalenvs

PAGE = Path(__file__).resolve().parents[2] / "docs" / "adding-an-env.md"
N_ENVS = 3


@pytest.fixture(scope="module")
def family() -> dict[str, Any]:
    blocks = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    (block,) = [b for b in blocks if "class DotTask(Task)" in b]
    namespace: dict[str, Any] = {"__name__": "docs_dot"}
    exec(compile(block, f"{PAGE}:DotTask", "exec"), namespace)
    return namespace


def test_the_walkthrough_registers_an_id_for_make_and_make_vec(family: dict[str, Any]) -> None:
    assert isinstance(gym.make("docs/Dot-v0").unwrapped, family["DotEnv"])
    envs = gym.make_vec("docs/Dot-v0", num_envs=2, vectorization_mode="vector_entry_point")
    assert isinstance(envs, family["DotVectorEnv"]) and envs.num_envs == 2


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=str)
def test_the_vector_env_is_the_single_envs_seeded_s_plus_i(
    family: dict[str, Any], mode: AutoresetMode
) -> None:
    """Env ``i`` of the vector env is the single env seeded ``s + i``, through episode ends (compared
    against Gymnasium's SyncVectorEnv of the single envs, which autoresets them the same way)."""
    make_single = lambda: family["DotEnv"](max_steps=5)  # noqa: E731
    sync = gym.vector.SyncVectorEnv([make_single] * N_ENVS, autoreset_mode=mode)
    native = family["DotVectorEnv"](N_ENVS, max_steps=5, autoreset_mode=mode)
    obs_n, info_n = native.reset(seed=7)
    obs_s, info_s = sync.reset(seed=7)
    _assert_equal(obs_n, obs_s)
    _assert_equal(info_n, info_s)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(30):
        actions = rng.uniform(-1, 1, (N_ENVS, 2)).astype(np.float32)
        out_n, out_s = native.step(actions), sync.step(actions)
        # Rewards by value: a SyncVectorEnv collects its envs' Python floats as float64.
        assert np.array_equal(out_n[1], out_s[1])
        for got, want in zip(out_n[:1] + out_n[2:], out_s[:1] + out_s[2:], strict=True):
            _assert_equal(got, want)
        ended += int(np.sum(out_n[2] | out_n[3]))
    assert ended >= N_ENVS * 4  # episodes of 5 steps: many ends, so autoreset was exercised


def test_the_single_env_and_the_task_agree_with_compute_functions(family: dict[str, Any]) -> None:
    env = family["DotEnv"](max_steps=4)
    obs, info = env.reset(seed=3)
    assert set(info) == {"is_success", "elapsed_steps"} and info["elapsed_steps"] == 0
    for t in range(4):
        obs, reward, terminated, truncated, info = env.step(np.array([1.0, -1.0], np.float32))
        ag, dg = obs["achieved_goal"], obs["desired_goal"]
        assert type(reward) is float and reward == env.compute_reward(ag, dg, info)
        assert terminated == bool(env.compute_terminated(ag, dg, info)) == info["is_success"]
        assert truncated == bool(env.compute_truncated(ag, dg, info)) == (t == 3)
    with pytest.raises(ValueError, match="action must be finite"):
        env.step(np.array([np.nan, 0.0]))


@pytest.mark.parametrize("vector", [False, True], ids=["single", "vector"])
def test_both_envs_pass_the_checker(family: dict[str, Any], vector: bool) -> None:
    env = family["DotVectorEnv"](N_ENVS) if vector else family["DotEnv"]()
    report = goalenvs.check_goal_env(env, n_steps=60)
    assert report.passed, report


def _assert_equal(got: Any, want: Any) -> None:
    """Same types, keys, dtypes and values (object arrays of final observations element by element)."""
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, dict):
        assert sorted(got) == sorted(want)
        for key in want:
            _assert_equal(got[key], want[key])
    elif isinstance(want, np.ndarray) and want.dtype == object:
        assert got.shape == want.shape
        for g, w in zip(got, want, strict=True):
            _assert_equal(g, w)
    elif isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and np.array_equal(got, want), (got, want)
    else:
        assert got == want
