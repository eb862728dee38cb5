"""The per-step rules of the GoalEnv contract, shared by ``check_goal_env`` and ``GoalContractChecker``.

Both judge a step the same way, with the same tolerances: its reward must equal
``compute_reward(next achieved goal, desired goal, info)``, its flags must equal
``compute_terminated`` / ``compute_truncated`` (a ``TimeLimit`` may add truncations), and a batch of
goals must give one result per row, equal to one-at-a-time calls. Light: numpy only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import numpy as np

__all__ = [
    "ATOL",
    "RTOL",
    "batch_verdict",
    "call",
    "close",
    "flag_agrees",
    "goal",
    "reward_agrees",
    "reward_lags",
    "rewards_close",
]

# Rewards recomputed from the same inputs are usually bit-identical, but a batched reduction may
# sum in a different order than the one-at-a-time one; these tolerances absorb that and nothing more.
RTOL = 1e-5
ATOL = 1e-6


def close(a: Any, b: Any) -> bool:
    """Equal within :data:`RTOL` / :data:`ATOL` (NaN equals NaN; booleans must be equal)."""
    xa, xb = np.asarray(a), np.asarray(b)
    if xa.dtype == bool or xb.dtype == bool:
        return bool(np.array_equal(xa.astype(bool), xb.astype(bool)))
    return bool(
        np.allclose(xa.astype(np.float64), xb.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True)
    )


def goal(obs: Any, key: str) -> np.ndarray | None:
    """A copy of ``obs[key]`` (``"achieved_goal"`` or ``"desired_goal"``), or None if there is none."""
    if not isinstance(obs, Mapping) or key not in obs:
        return None
    return np.array(obs[key])


def call(fn: Callable[..., Any], achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
    """``fn(achieved_goal, desired_goal, info)`` on copies of the goals, as an array.

    The copies keep a function that writes into its arguments from corrupting what the caller keeps
    (check_compute_reward_pure looks for such writes on purpose).
    """
    return np.asarray(fn(np.array(achieved_goal, copy=True), np.array(desired_goal, copy=True), info))


def rewards_close(value: Any, reward: Any) -> bool:
    """Rewards equal as the numbers a buffer stores: a boolean ``compute_reward`` result counts as 0.0 or
    1.0 (buffers cast rewards to float), so ``True`` does not equal a step reward of ``-1.0``."""
    xa, xb = np.asarray(value), np.asarray(reward)
    if xa.dtype == object or xb.dtype == object:
        return close(xa, xb)
    return close(xa.astype(np.float64), xb.astype(np.float64))


def reward_agrees(value: Any, reward: Any) -> bool:
    """``compute_reward``'s ``value`` for one transition is one number equal to the step's ``reward``."""
    value, reward = np.asarray(value), np.asarray(reward, dtype=np.float64)
    return value.size == 1 and reward.size == 1 and rewards_close(value.reshape(()), reward.reshape(()))


def reward_lags(
    compute_reward: Callable[..., Any], prev_achieved_goal: Any, desired_goal: Any, info: Any, reward: Any
) -> bool:
    """The step's ``reward`` is ``compute_reward`` of the achieved goal *before* the step.

    The likely cause when a reward disagrees: step computed it before applying the action, but
    r_t depends on s_{t+1}. False when the call raises (the cause is then unknown).
    """
    try:
        before = call(compute_reward, prev_achieved_goal, desired_goal, info)
    except Exception:  # the better cause is optional
        return False
    return reward_agrees(before, reward)


def flag_agrees(
    value: Any, stepped: Any, flag: Literal["terminated", "truncated"], t: int, limit: int | None
) -> bool:
    """``compute_terminated`` / ``compute_truncated``'s one-element ``value`` agrees with step's flag.

    ``t`` is the step's 1-based index within its episode and ``limit`` the episode limit of a
    ``TimeLimit`` around the env (None without one): a truncation at the limit is the wrapper's, which
    ``compute_truncated`` cannot know about.
    """
    computed = bool(np.asarray(value).reshape(-1)[0])
    if computed == bool(stepped):
        return True
    return flag == "truncated" and bool(stepped) and limit is not None and t >= limit


def batch_verdict(value: Any, expected: np.ndarray) -> Literal["ok", "values", "broadcasts", "shape"]:
    """How a goal function's result on a batch compares with ``expected``, its one-at-a-time results.

    ``"ok"``: shape ``(B,)`` and equal values; ``"values"``: shape ``(B,)``, other values;
    ``"broadcasts"``: another shape whose values broadcast to the expected ones; ``"shape"``: neither.
    """
    value = np.asarray(value)
    b = len(expected)
    if value.shape == (b,):
        return "ok" if close(value, expected) else "values"
    try:
        return "broadcasts" if close(np.broadcast_to(value, (b,)), expected) else "shape"
    except ValueError:
        return "shape"
