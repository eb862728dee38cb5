"""The envs under misuse: two threads on one env, use after close(), non-finite actions and goals.

Each misuse must end in a clear error raised before any state changes (so the env goes on exactly as
if the bad call had never been made), or, for goals, in the reward, termination and ``is_success``
agreeing. Races that used to crash the interpreter run in a subprocess, so a segfault fails the test
instead of killing pytest.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import goalenvs
from goalenvs.envs.bitflip import BitFlipEnv, BitFlipVectorEnv
from goalenvs.envs.parking import ParkingEnv, ParkingVectorEnv
from goalenvs.vector import ClosedVectorEnvError, ConcurrentUseError

# Non-finite goals make NaN in the goal functions (inf - inf): numpy warns of what these tests check.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")

HAS_FETCH = (
    importlib.util.find_spec("mujoco") is not None
    and importlib.util.find_spec("gymnasium_robotics") is not None
)
needs_fetch = pytest.mark.skipif(not HAS_FETCH, reason="the Fetch tasks need goalenvs[fetch]")


def _fetch_vector(n: int = 3, **kwargs: Any) -> Any:
    from goalenvs.envs.fetch import FetchVectorEnv

    return FetchVectorEnv(n, "push", num_threads=2, **kwargs)


def _fetch_single(**kwargs: Any) -> Any:
    from goalenvs.envs.fetch import FetchEnv

    return FetchEnv("push", **kwargs)


# Each vector family: a constructor and a good batch of actions for num_envs = 3.
VECTOR_FAMILIES: dict[str, tuple[Callable[[], Any], np.ndarray]] = {
    "bitflip": (lambda: BitFlipVectorEnv(3, n_bits=4, render_mode="ansi"), np.array([0, 1, 2])),
    "parking": (lambda: ParkingVectorEnv(3, render_mode="rgb_array"), np.full((3, 2), 0.3, np.float32)),
    "fetch": (lambda: _fetch_vector(3), np.full((3, 4), 0.3, np.float32)),
}
VECTOR_PARAMS = [
    pytest.param(name, marks=[needs_fetch] if name == "fetch" else [], id=name) for name in VECTOR_FAMILIES
]


def _assert_same(a: Any, b: Any, where: str = "") -> None:
    """Exact equality of step/reset outputs (dicts of arrays, arrays, scalars), NaN equal to NaN."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=np.asarray(a).dtype.kind == "f"), where


class _HeldAction:
    """An action whose conversion to an array waits until released: it keeps a ``step`` open in its thread."""

    def __init__(self, value: np.ndarray) -> None:
        self.value = value
        self.inside = threading.Event()
        self.go_on = threading.Event()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        self.inside.set()
        assert self.go_on.wait(30), "the test never released the held step"
        return np.asarray(self.value, dtype=dtype)


def _hold_step(env: Any, action: np.ndarray) -> tuple[threading.Thread, _HeldAction, list]:
    """Start ``env.step(action)`` in a thread and return once that step is inside the env, held open."""
    held, results = _HeldAction(action), []
    thread = threading.Thread(target=lambda: results.append(env.step(held)))
    thread.start()
    assert held.inside.wait(30)
    return thread, held, results


# ---- 1. one env, one thread -------------------------------------------------------------------------


@pytest.mark.parametrize("family", VECTOR_PARAMS)
def test_a_second_thread_entering_a_vector_env_is_refused_at_once_and_changes_nothing(family: str) -> None:
    make, actions = VECTOR_FAMILIES[family]
    env, twin = make(), make()
    env.reset(seed=3)
    twin.reset(seed=3)
    name = type(env).__name__
    thread, held, results = _hold_step(env, actions)
    try:
        for method, call in [
            ("step", lambda: env.step(actions)),
            ("reset", lambda: env.reset(seed=9)),
            ("render", env.render),
            ("close", env.close),
        ]:
            with pytest.raises(ConcurrentUseError) as caught:
                call()
            assert str(caught.value) == (
                f"{name}.{method} called from two threads at once (another thread is in {name}.step); "
                "one vector env is not thread-safe: give each thread its own"
            )
            assert isinstance(caught.value, RuntimeError)
    finally:
        held.go_on.set()
        thread.join(30)
    # The held step went through; the refused calls left no trace: the env goes on as its twin does.
    assert not env.closed and len(results) == 1
    _assert_same(results[0], twin.step(actions), "held step")
    _assert_same(env.step(actions), twin.step(actions), "next step")
    env.close()
    twin.close()


@needs_fetch
def test_a_second_thread_entering_a_fetch_env_is_refused_at_once_and_changes_nothing() -> None:
    env, twin = _fetch_single(), _fetch_single()
    env.reset(seed=3)
    twin.reset(seed=3)
    action = np.full(4, 0.3, np.float32)
    thread, held, results = _hold_step(env, action)
    try:
        for method, call in [("step", lambda: env.step(action)), ("reset", lambda: env.reset(seed=9))]:
            with pytest.raises(ConcurrentUseError) as caught:
                call()
            assert str(caught.value) == (
                f"FetchEnv.{method} called from two threads at once; one env is not thread-safe "
                "(MuJoCo would crash): give each thread its own"
            )
    finally:
        held.go_on.set()
        thread.join(30)
    _assert_same(results[0], twin.step(action), "held step")
    _assert_same(env.step(action), twin.step(action), "next step")


# The race itself: two threads step one Fetch env as fast as they can. Before the guard it died of
# SIGSEGV (or MuJoCo's "nefc under-allocation") in most runs; now one thread is told, the other
# finishes, and the env is still usable. Rounds repeat until the threads have overlapped once.
_RACE = textwrap.dedent(
    """
    import json, sys, threading
    import numpy as np
    from goalenvs.envs.fetch import FetchEnv, FetchVectorEnv

    vector = sys.argv[1] == "vector"
    env = FetchVectorEnv(8, "push", num_threads=4) if vector else FetchEnv("push")
    env.reset(seed=0)
    shape = (8, 4) if vector else (4,)
    for round_ in range(20):
        errors, barrier = [], threading.Barrier(2)

        def work(k):
            barrier.wait()
            rng = np.random.default_rng(k)
            try:
                for _ in range(150):
                    env.step(rng.uniform(-1, 1, shape))
            except Exception as exc:
                errors.append([type(exc).__name__, str(exc)])

        threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            break
    env.step(np.zeros(shape))  # still usable
    print(json.dumps(errors))
    """
)


@needs_fetch
@pytest.mark.parametrize("kind", ["vector", "single"])
def test_two_threads_stepping_one_fetch_env_get_an_error_not_a_segfault(kind: str) -> None:
    root = Path(goalenvs.__file__).resolve().parents[1]  # the goalenvs under test, in the child too
    proc = subprocess.run(
        [sys.executable, "-c", _RACE, kind],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.returncode == 0, f"exit {proc.returncode} (-11: segfault)\n{proc.stderr[-2000:]}"
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    name = "FetchVectorEnv" if kind == "vector" else "FetchEnv"
    assert len(errors) == 1, errors  # exactly one thread was refused; the other stepped on
    (kind_of_error, message) = errors[0]
    assert kind_of_error == "ConcurrentUseError"
    assert message.startswith(f"{name}.step called from two threads at once")


# ---- 2. after close() -------------------------------------------------------------------------------


@pytest.mark.parametrize("family", VECTOR_PARAMS)
def test_using_a_closed_vector_env_raises_and_closing_twice_is_harmless(family: str) -> None:
    make, actions = VECTOR_FAMILIES[family]
    before = threading.active_count()
    env = make()
    env.reset(seed=0)
    env.step(actions)
    env.close()
    assert env.closed and threading.active_count() == before  # Fetch's pool threads are gone
    name = type(env).__name__
    for method, call in [
        ("step", lambda: env.step(actions)),
        ("reset", lambda: env.reset(seed=0)),
        ("render", env.render),
    ]:
        # Gymnasium's AsyncVectorEnv raises ClosedEnvironmentError here: ours is one, and a RuntimeError.
        with pytest.raises(gym.error.ClosedEnvironmentError) as caught:
            call()
        assert isinstance(caught.value, (ClosedVectorEnvError, RuntimeError))
        assert str(caught.value) == f"{name}.{method} called after close(); make a new one"
    assert env.close() is None and env.closed  # twice: a no-op, as Gymnasium's VectorEnv.close


@needs_fetch
def test_a_pickled_closed_fetch_vector_env_stays_closed_and_an_open_one_steps() -> None:
    import pickle

    env = _fetch_vector(3)
    env.reset(seed=0)
    twin = pickle.loads(pickle.dumps(env))  # its own lock and pool
    _assert_same(twin.step(np.zeros((3, 4))), env.step(np.zeros((3, 4))))
    env.close()
    twin.close()
    closed = pickle.loads(pickle.dumps(env))
    with pytest.raises(ClosedVectorEnvError, match="FetchVectorEnv.step called after close"):
        closed.step(np.zeros((3, 4)))


# ---- 3. actions that are refused leave the env as it was ------------------------------------------


def _refused_then_same(make: Callable[[], Any], good: np.ndarray, bad: Any, exc: type, match: str) -> None:
    """``bad`` raises ``exc`` (message matching ``match``) and the env then steps exactly as a twin that
    never saw it: same observation, reward, flags and info (its step count included)."""
    env, twin = make(), make()
    _assert_same(env.reset(seed=5), twin.reset(seed=5), "reset")
    _assert_same(env.step(good), twin.step(good), "first step")
    with pytest.raises(exc, match=match):
        env.step(bad)
    _assert_same(env.step(good), twin.step(good), "step after the refused action")
    env.close()
    twin.close()


FLOAT_FAMILIES = {
    "parking": (lambda: ParkingEnv(), np.full(2, 0.3, np.float32), "action must hold finite numbers "
                r"\(acceleration and steering, clipped to \[-1, 1\]\)"),
    "parking-vector": (lambda: ParkingVectorEnv(3), np.full((3, 2), 0.3, np.float32), "actions must hold finite numbers "),
    # 40 entries: past the check's Python sum, its numpy path.
    "parking-vector-20": (lambda: ParkingVectorEnv(20), np.full((20, 2), 0.3, np.float32), "actions must hold finite numbers "),
    "bitflip-continuous": (lambda: BitFlipEnv(4, continuous=True), np.array([0.5, -0.5, -1, -1], np.float32),
                           r"action must hold finite numbers \(a bit flips where its number is > 0\)"),
    "bitflip-continuous-vector": (lambda: BitFlipVectorEnv(3, 4, continuous=True),
                                  np.tile(np.float32([0.5, -0.5, -1, -1]), (3, 1)), "actions must hold finite numbers "),
    "fetch": (_fetch_single, np.full(4, 0.3, np.float32), "action must hold finite numbers "
              r"\(4 numbers: dx, dy, dz, gripper, clipped to \[-1, 1\]\)"),
    "fetch-vector": (lambda: _fetch_vector(3), np.full((3, 4), 0.3, np.float32), "actions must hold finite numbers "),
}  # fmt: skip
FLOAT_PARAMS = [
    pytest.param(name, marks=[needs_fetch] if name.startswith("fetch") else [], id=name)
    for name in FLOAT_FAMILIES
]


# numpy warns of the NaN that 0 * inf makes in the check's dot product: only next to the ValueError.
@pytest.mark.filterwarnings("ignore:invalid value encountered in dot:RuntimeWarning")
@pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("family", FLOAT_PARAMS)
def test_a_non_finite_action_is_refused_before_anything_moves(family: str, bad_value: float) -> None:
    make, good, match = FLOAT_FAMILIES[family]
    bad = good.copy()
    index = (1,) if good.ndim == 1 else (2, 1)  # a vector env names the env and the entry
    bad[index] = bad_value
    name = "action" if good.ndim == 1 else "actions"
    entry = f"{name}[{', '.join(map(str, index))}] = {float(bad_value)}; nothing was stepped"
    _refused_then_same(
        make, good, bad, ValueError, match + ".*" + entry.replace("[", r"\[").replace("]", r"\]")
    )


def test_the_error_quotes_at_most_four_bad_entries_on_one_line() -> None:
    env = ParkingVectorEnv(5)
    env.reset(seed=0)
    with pytest.raises(ValueError) as caught:
        env.step(np.full((5, 2), np.nan))
    message = str(caught.value)
    assert (
        "\n" not in message and message.count("= nan") == 4 and "and 6 more; nothing was stepped" in message
    )


@pytest.mark.parametrize("family", FLOAT_PARAMS)
def test_huge_finite_actions_are_still_clipped_not_refused(family: str) -> None:
    # Finite, however large: clipped to the bound as before, not refused.
    make, good, _ = FLOAT_FAMILIES[family]
    env, twin = make(), make()
    env.reset(seed=1)
    twin.reset(seed=1)
    huge = np.where(good > 0, 1e308, -1e308)  # their sum overflows
    _assert_same(env.step(huge), twin.step(np.where(good > 0, 1.0, -1.0)))


@pytest.mark.parametrize(
    ("make", "good", "bad", "match"),
    [
        (lambda: BitFlipEnv(4), 1, 4, r"a discrete action must be in \[0, 4\), got 4"),
        (lambda: BitFlipEnv(4), 1, -1, r"a discrete action must be in \[0, 4\), got -1"),
        (lambda: BitFlipEnv(4), 1, 1.5, "a discrete action must be one integer, got 1.5"),
        (lambda: BitFlipVectorEnv(3, 4), np.array([0, 1, 2]), np.array([0, 4, 2]), r"must be in \[0, 4\)"),
        (lambda: BitFlipVectorEnv(3, 4), np.array([0, 1, 2]), np.array([0, -1, 2]), r"must be in \[0, 4\)"),
    ],
    ids=["single-too-big", "single-negative", "single-float", "vector-too-big", "vector-negative"],
)
def test_a_bitflip_action_out_of_range_is_refused_before_anything_moves(make, good, bad, match) -> None:
    _refused_then_same(make, good, bad, ValueError, match)


# ---- 4. non-finite goals: reward, termination and is_success agree --------------------------------

BAD_GOALS = [np.nan, np.inf, -np.inf]


@needs_fetch
@pytest.mark.parametrize("reward_type", ["sparse", "dense"])
def test_fetch_nan_and_inf_goals_are_never_a_success(reward_type: str) -> None:
    from goalenvs.envs.fetch import fetch_success

    env = _fetch_single(reward_type=reward_type)
    zero = np.zeros(3)
    for bad in BAD_GOALS:
        ag = np.array([bad, 0.0, 0.0])
        for a, d in [(ag, zero), (zero, ag), (ag, ag)]:  # ag, ag: inf - inf is NaN too
            for batch in (False, True):
                x, y = (a[None], d[None]) if batch else (a, d)
                reward = np.asarray(env.compute_reward(x, y, None))
                assert not np.any(fetch_success(x, y, env.distance_threshold))
                assert not np.any(env.compute_terminated(x, y, None))
                if reward_type == "sparse":
                    assert np.all(reward == -1.0), (x, y, reward)
                else:
                    assert np.all(np.isnan(reward) | (reward == -np.inf)), (x, y, reward)
    # Finite goals keep Gymnasium-Robotics' numbers: -0.0 (sign bit set) on success, -1.0 off it.
    if reward_type == "sparse":
        for x, y in [(zero, zero), (zero[None], zero[None])]:
            r = np.asarray(env.compute_reward(x, y, None))
            assert np.all(r == 0.0) and np.all(np.signbit(r)) and r.dtype == np.float32


@needs_fetch
@pytest.mark.parametrize("vector", [False, True], ids=["single", "vector"])
def test_fetch_step_with_a_nan_goal_scores_no_success_in_reward_and_info(vector: bool) -> None:
    env = _fetch_vector(3) if vector else _fetch_single()
    env.reset(seed=0)
    if vector:
        env.goal[1] = np.nan
    else:
        env.goal[:] = np.nan
    obs, reward, terminated, _, info = env.step(np.zeros((3, 4)) if vector else np.zeros(4))
    row = 1 if vector else ()
    assert np.asarray(info["is_success"])[row] == 0.0 and np.asarray(reward)[row] == -1.0
    assert not np.asarray(terminated)[row]
    _assert_same(reward, env.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
    env.close()


@pytest.mark.parametrize("bad", BAD_GOALS, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("vector", [False, True], ids=["single", "vector"])
def test_parking_step_with_a_non_finite_goal_scores_no_success_in_reward_flags_and_info(
    vector: bool, bad: float
) -> None:
    env = ParkingVectorEnv(2) if vector else ParkingEnv()
    env.reset(seed=0)
    env._state._goal_obs[0, 0] = bad  # lot 0's desired goal
    obs, reward, terminated, _, info = env.step(np.zeros((2, 2)) if vector else np.zeros(2))
    row = 0 if vector else ()
    ag, dg = obs["achieved_goal"], obs["desired_goal"]
    assert not np.asarray(info["is_success"])[row] and not np.asarray(terminated)[row]
    assert np.isnan(np.asarray(reward)[row]) or np.asarray(reward)[row] == -np.inf
    _assert_same(reward, env.compute_reward(ag, dg, info))
    _assert_same(terminated, env.compute_terminated(ag, dg, info))
    # Relabelled with the bad goal in the achieved slot too (inf - inf is NaN): still no success.
    assert not np.any(env.compute_terminated(dg[row], dg[row], None))


@pytest.mark.parametrize("obs_type", ["bits", "integer", "image"])
@pytest.mark.parametrize("vector", [False, True], ids=["single", "vector"])
def test_bitflip_float_goals_with_nan_or_inf_are_never_a_success(obs_type: str, vector: bool) -> None:
    env = BitFlipVectorEnv(2, 3, obs_type=obs_type) if vector else BitFlipEnv(3, obs_type=obs_type)
    obs, _ = env.reset(seed=0)
    goal = np.asarray(obs["desired_goal"], dtype=np.float64)
    goal = np.array(goal[0]) if vector else goal  # an array even for integer goals (0-d)
    for bad in BAD_GOALS:
        spoilt = goal.copy()
        spoilt.reshape(-1)[0] = bad
        # The same goal on both sides (bytes equal for NaN), a batch of 2, and the bad one on either side.
        ag = np.stack([spoilt, spoilt, goal])
        dg = np.stack([spoilt, goal, spoilt])
        assert np.array_equal(env.compute_reward(ag, dg, None), np.float32([-1, -1, -1]))
        assert not env.compute_terminated(ag, dg, None).any()
        assert env.compute_reward(spoilt, spoilt, None) == -1.0
        assert not env.compute_terminated(spoilt, spoilt, None)
    # Floats are compared by value: -0.0 is 0.0, and the env's own goal as floats is a success.
    signed = goal.copy()
    signed[signed == 0] = -0.0
    assert (
        env.compute_reward(signed, goal, None) == 0.0
        and env.compute_terminated(signed[None], goal[None], None).all()
    )
