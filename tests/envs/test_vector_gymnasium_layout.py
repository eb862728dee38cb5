"""Every native vector env returns what Gymnasium's ``SyncVectorEnv`` of its single envs returns (issue 25).

A loop written for Gymnasium reads ``info["final_obs"][i]`` as env ``i``'s observation dict and
``info["final_info"]`` as a dict of arrays with its own ``"_" + key`` masks; a native vector env gives
the same layout, key for key, in both autoreset modes. Each test steps the native env
(``vectorization_mode="vector_entry_point"``) and a ``SyncVectorEnv`` (``vectorization_mode="sync"``)
of the same id with the same seeded actions through many episode ends and compares everything they
return: the same keys, the same types (object arrays of dicts against dicts of arrays), dtypes and
shapes, and equal values.

Equality is exact (``np.array_equal`` and ``==``, never a tolerance): env ``i`` of a native vector
env replays the single env seeded ``s + i`` bit for bit (``test_bitflip``, ``test_parking``,
``test_fetch_vector``), so nothing may differ.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from goalenvs.registration import ENVS
from tests.conftest import make_params

N_ENVS = 4
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]

# Short episodes, so that a rollout of STEPS steps ends many: BitFlip and Parking end at different
# steps in different envs (successes, crashes), Fetch's and the hand's all at once (they only truncate).
EPISODE_KWARGS = {
    "BitFlip": {"n_bits": 3},  # 3-step episodes, many successes
    "Parking": {"duration": 3, "success_goal_reward": 0.5},  # 15-step episodes, some successes
    "Fetch": {"max_steps": 5},
    "Hand": {"max_steps": 5},
}
STEPS = 40


def _kwargs(env_id: str) -> dict[str, Any]:
    name = env_id.split("/")[1]
    return next(value for family, value in EPISODE_KWARGS.items() if name.startswith(family))


def assert_same(native: Any, sync: Any, where: str) -> None:
    """``native`` is ``sync``: same types, keys, dtypes and shapes, equal values, recursively.

    An object array (``final_obs``) is compared element by element, so a dict of batched arrays
    where Gymnasium gives an object array fails on its type, not on a value.
    """
    assert type(native) is type(sync), (
        f"{where}: {type(native).__name__} where Gymnasium gives {type(sync).__name__}"
    )
    if isinstance(sync, dict):
        assert sorted(native) == sorted(sync), (
            f"{where}: keys {sorted(native)} where Gymnasium gives {sorted(sync)}"
        )
        for key in sync:
            assert_same(native[key], sync[key], f"{where}[{key!r}]")
    elif isinstance(sync, tuple):
        assert len(native) == len(sync), f"{where}: {len(native)} items where Gymnasium gives {len(sync)}"
        for i, (a, b) in enumerate(zip(native, sync, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(sync, np.ndarray):
        assert (native.dtype, native.shape) == (sync.dtype, sync.shape), (
            f"{where}: {native.dtype} {native.shape} where Gymnasium gives {sync.dtype} {sync.shape}"
        )
        if sync.dtype == object:
            for i, (a, b) in enumerate(zip(native, sync, strict=True)):
                assert_same(a, b, f"{where}[{i}]")
        else:
            assert np.array_equal(native, sync), f"{where}: {native!r} where Gymnasium gives {sync!r}"
    else:
        assert native == sync, f"{where}: {native!r} where Gymnasium gives {sync!r}"


def _pair(env_id: str, mode: AutoresetMode) -> tuple[gym.vector.VectorEnv, gym.vector.VectorEnv]:
    kwargs = _kwargs(env_id)
    native = gym.make_vec(
        env_id, num_envs=N_ENVS, vectorization_mode="vector_entry_point", autoreset_mode=mode, **kwargs
    )
    sync = gym.make_vec(
        env_id, num_envs=N_ENVS, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}, **kwargs
    )
    assert not isinstance(native, gym.vector.SyncVectorEnv) and isinstance(sync, gym.vector.SyncVectorEnv)
    return native, sync


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
@pytest.mark.parametrize("env_id", make_params([e for e in ENVS if e.vector_entry_point]))
def test_native_vector_env_returns_what_sync_vector_env_returns(env_id: str, mode: AutoresetMode) -> None:
    native, sync = _pair(env_id, mode)
    assert_same(native.reset(seed=3), sync.reset(seed=3), "reset")
    space = sync.action_space
    space.seed(0)
    ends = steps_with_some_ended = 0
    for t in range(STEPS):
        actions = space.sample()
        out_native = native.step(actions.copy())
        out_sync = sync.step(actions.copy())
        obs, reward, terminated, truncated, info = out_native
        assert_same(obs, out_sync[0], f"step {t} obs")
        assert np.array_equal(reward, out_sync[1]), f"step {t} reward"
        assert_same((terminated, truncated), out_sync[2:4], f"step {t} terminated, truncated")
        assert_same(info, out_sync[4], f"step {t} info")
        done = terminated | truncated
        ends += int(done.sum())
        steps_with_some_ended += bool(done.any() and not done.all())
        if mode == AutoresetMode.NEXT_STEP:
            assert "final_obs" not in info and "final_info" not in info
        else:  # what a Gymnasium loop reads
            assert ("final_obs" in info) == done.any()
            for i in np.flatnonzero(done):
                assert set(info["final_obs"][i]) == set(native.single_observation_space.spaces)
                assert info["final_obs"][i] in native.single_observation_space
            assert all(item is None for item in info.get("final_obs", np.full(N_ENVS, None))[~done])
    assert ends >= 3 * N_ENVS, f"only {ends} episode ends in {STEPS} steps"
    if not env_id.split("/")[1].startswith(("Fetch", "Hand")):  # their episodes all end together
        assert steps_with_some_ended >= 3, "the rollout should end some envs' episodes and not others'"
    native.close()
    sync.close()


@pytest.mark.parametrize("obs_type", ["integer", "image"])
def test_bitflip_observation_types_match_sync_vector_env(obs_type: str) -> None:
    """final_obs holds each env's observation as the single env returns it: an int64 scalar for a
    Discrete observation, an image for an image one."""
    kwargs = {"n_bits": 3, "obs_type": obs_type}
    mode = AutoresetMode.SAME_STEP
    native = gym.make_vec("goalenvs/BitFlip-v0", N_ENVS, vectorization_mode="vector_entry_point",
                          autoreset_mode=mode, **kwargs)  # fmt: skip
    sync = gym.make_vec("goalenvs/BitFlip-v0", N_ENVS, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": mode}, **kwargs)  # fmt: skip
    assert_same(native.reset(seed=0), sync.reset(seed=0), "reset")
    rng = np.random.default_rng(0)
    for t in range(12):
        actions = rng.integers(0, 3, N_ENVS)
        (obs, reward, *flags, info), out_sync = native.step(actions), sync.step(actions)
        assert_same((obs, *flags, info), (out_sync[0], *out_sync[2:]), f"step {t}")
        assert np.array_equal(reward, out_sync[1]), f"step {t} reward"


def test_final_observations_are_the_callers_to_keep() -> None:
    """Each env's final observation is its own: later steps do not change it, and it keeps only the
    ended rows alive, not the whole batch."""
    env = gym.make_vec("goalenvs/BitFlip-v0", N_ENVS, vectorization_mode="vector_entry_point",
                       autoreset_mode="SameStep", n_bits=3)  # fmt: skip
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    kept: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = []
    for _ in range(20):
        *_, info = env.step(rng.integers(0, 3, N_ENVS))
        for i in np.flatnonzero(info.get("_final_obs", np.zeros(N_ENVS, bool))):
            final = info["final_obs"][i]
            kept.append((final, {key: value.copy() for key, value in final.items()}))
            assert (
                final["observation"].base is not None
                and len(final["observation"].base) == info["_final_obs"].sum()
            )
    assert kept
    for final, copy in kept:
        for key in copy:
            np.testing.assert_array_equal(final[key], copy[key])


ONE_PER_FAMILY = ("BitFlip-v0", "Parking-v0", "FetchReach-v0")


@pytest.mark.parametrize("env_id", make_params([e for e in ENVS if e.name in ONE_PER_FAMILY]))
def test_batched_final_obs_is_an_opt_in_that_changes_only_final_obs(env_id: str) -> None:
    """``batched_final_obs=True``: ``info["final_obs"]`` is one dict of ``(num_envs, ...)`` arrays whose
    ended rows are Gymnasium's per-env observations; every other key is still Gymnasium's."""
    mode = AutoresetMode.SAME_STEP
    native = gym.make_vec(env_id, num_envs=N_ENVS, vectorization_mode="vector_entry_point",
                          autoreset_mode=mode, batched_final_obs=True, **_kwargs(env_id))  # fmt: skip
    _, sync = _pair(env_id, mode)
    assert_same(native.reset(seed=3), sync.reset(seed=3), "reset")
    space = sync.action_space
    space.seed(0)
    ends = 0
    for t in range(STEPS):
        actions = space.sample()
        obs, _, terminated, truncated, info = native.step(actions.copy())
        out_sync = sync.step(actions.copy())
        assert_same(obs, out_sync[0], f"step {t} obs")
        info_sync = dict(out_sync[4])
        final, final_sync = info.pop("final_obs", None), info_sync.pop("final_obs", None)
        assert_same(info, info_sync, f"step {t} info")
        assert (final is None) == (final_sync is None), f"step {t}"
        if final is None:
            continue
        assert isinstance(final, dict) and set(final) == set(obs)
        for key, value in final.items():
            assert value.shape == obs[key].shape and value.dtype == obs[key].dtype, f"step {t} {key}"
        for i in np.flatnonzero(terminated | truncated):
            ends += 1
            assert_same(
                {key: value[i] for key, value in final.items()}, final_sync[i], f"step {t} final_obs[{i}]"
            )
    assert ends >= 3 * N_ENVS


def test_batched_final_obs_argument_errors() -> None:
    from goalenvs.envs.bitflip import BitFlipVectorEnv
    from goalenvs.envs.parking import ParkingVectorEnv

    for cls in (BitFlipVectorEnv, ParkingVectorEnv):
        with pytest.raises(
            ValueError, match=r"batched_final_obs=True needs autoreset_mode='SameStep'.*'NextStep'"
        ):
            cls(num_envs=2, batched_final_obs=True)
        with pytest.raises(TypeError, match="batched_final_obs must be True or False, got str"):
            cls(num_envs=2, autoreset_mode="SameStep", batched_final_obs="yes")
    assert not BitFlipVectorEnv(num_envs=2, autoreset_mode="SameStep").batched_final_obs
