"""Reward-type switches for any goal env: sparse and dense distance rewards, and an ``is_success`` filler.

Each replaces the reward *function*, not just the step's number: ``compute_reward`` answers with the
new reward for any goals, and ``step`` returns ``compute_reward`` of its observation, so relabelled
transitions get the same kind of reward as real ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs._util import check_real
from goalenvs.wrappers._base import GoalWrapper, single_env_space

__all__ = ["DenseReward", "EuclideanDistance", "SparseReward", "SuccessInfo", "euclidean_distance"]

Distance = Callable[[Any, Any], np.ndarray]

_NUMERIC_GOALS = (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)


class EuclideanDistance:
    """The Euclidean distance over the last ``goal_ndim`` axes, for any batch shape (float64; picklable)."""

    def __init__(self, goal_ndim: int) -> None:
        self.axes = tuple(range(-goal_ndim, 0))

    def __call__(self, achieved_goal: Any, desired_goal: Any) -> np.ndarray:
        # float64: integer goals (bit strings, grid cells) neither overflow nor wrap around.
        diff = np.asarray(achieved_goal, dtype=np.float64) - np.asarray(desired_goal, dtype=np.float64)
        if diff.ndim < len(self.axes):
            raise ValueError(f"goals must have at least {len(self.axes)} axes, got shape {diff.shape}")
        return np.sqrt(np.square(diff).sum(axis=self.axes))

    def __repr__(self) -> str:
        return f"EuclideanDistance(goal_ndim={len(self.axes)})"


def euclidean_distance(goal_space: gym.Space) -> Distance:
    """The Euclidean distance between goals of ``goal_space``, over all goal axes, for any batch shape.

    Only numeric-array goal spaces (Box, MultiBinary, MultiDiscrete) have a default distance; for
    others (e.g. ``Discrete``, where goal 3 is not "between" goals 2 and 4) pass your own ``distance``.
    """
    if not isinstance(goal_space, _NUMERIC_GOALS):
        raise ValueError(
            f"no default distance for a {type(goal_space).__name__} goal space; the default (Euclidean) needs "
            f"one of {[s.__name__ for s in _NUMERIC_GOALS]}. Pass distance=fn(achieved_goal, desired_goal) "
            "returning one distance per goal"
        )
    return EuclideanDistance(len(goal_space.shape))


def _distance(goal_space: gym.Space, distance: Distance | None) -> Distance:
    if distance is None:
        return euclidean_distance(goal_space)
    if not callable(distance):
        raise TypeError(
            f"distance must be None or a callable (achieved_goal, desired_goal) -> array, got {distance!r}"
        )
    return distance


def _threshold(value: Any, name: str = "threshold") -> float:
    return check_real(name, value, 0.0)


class SparseLogic:
    """``-1`` where the goals are farther apart than ``threshold``, else ``0`` (float32)."""

    recompute_reward = True
    threshold: float
    distance: Distance

    def _init_sparse(self, space: spaces.Dict, threshold: Any, distance: Distance | None) -> None:
        self.threshold = _threshold(threshold)
        self.distance = _distance(space["desired_goal"], distance)

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        """0 where ``distance(achieved_goal, desired_goal) <= threshold``, else -1; float32 of the batch shape."""
        far = np.asarray(self.distance(achieved_goal, desired_goal)) > self.threshold
        return np.float32(0) - far.astype(np.float32)  # 0 - x, not -x: no -0.0 rewards


class DenseLogic:
    """``-distance(achieved_goal, desired_goal)`` (float32)."""

    recompute_reward = True
    distance: Distance

    def _init_dense(self, space: spaces.Dict, distance: Distance | None) -> None:
        self.distance = _distance(space["desired_goal"], distance)

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        """Minus the distance between the goals; float32 of the batch shape."""
        return -np.asarray(self.distance(achieved_goal, desired_goal), dtype=np.float32)


class SuccessLogic:
    """Sets ``info["is_success"]`` where the env leaves it out."""

    threshold: float | None
    distance: Distance | None

    def _init_success(self, space: spaces.Dict, threshold: Any, distance: Distance | None) -> None:
        if threshold is None:
            if distance is not None:
                raise ValueError("distance is used only with a threshold; pass threshold=... too")
            self.threshold, self.distance = None, None
        else:
            self.threshold = _threshold(threshold)
            self.distance = _distance(space["desired_goal"], distance)

    def is_success(self, achieved_goal: Any, desired_goal: Any) -> np.ndarray:
        """Whether the goals are within ``threshold`` (bool of the batch shape); needs a threshold."""
        if self.distance is None:
            raise ValueError("is_success needs a threshold; this SuccessInfo reads success from `terminated`")
        return np.asarray(self.distance(achieved_goal, desired_goal)) <= self.threshold


class SparseReward(SparseLogic, GoalWrapper):
    """Sparse goal reward: 0 when the achieved goal is within ``threshold`` of the desired goal, else -1.

    ``compute_reward`` and ``step`` both give it (float32), so relabelling stays right. Goals,
    ``terminated`` and ``info`` are the wrapped env's; add :class:`SuccessInfo` with the same
    threshold for a matching ``info["is_success"]``.

    Args:
        env: a goal env.
        threshold: finite float >= 0; the distance at or below which a goal counts as reached.
        distance: ``fn(achieved_goal, desired_goal) -> distances`` over any batch shape; default
            :func:`euclidean_distance` of the goal space.
    """

    def __init__(self, env: gym.Env, threshold: float, distance: Distance | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, threshold=threshold, distance=distance)
        self._init_sparse(single_env_space(env), threshold, distance)
        super().__init__(env)


class DenseReward(DenseLogic, GoalWrapper):
    """Dense goal reward: minus the distance between the achieved and the desired goal (float32).

    Args:
        env: a goal env.
        distance: ``fn(achieved_goal, desired_goal) -> distances`` over any batch shape; default
            :func:`euclidean_distance` of the goal space.
    """

    def __init__(self, env: gym.Env, distance: Distance | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, distance=distance)
        self._init_dense(single_env_space(env), distance)
        super().__init__(env)


class SuccessInfo(SuccessLogic, GoalWrapper):
    """Fill ``info["is_success"]`` (bool) after every step where the env leaves it out.

    SB3 and most HER tooling report their success rate from ``info["is_success"]``. An existing
    entry is kept as it is.

    Args:
        env: a goal env.
        threshold: ``None`` (default): success is the step's ``terminated`` flag, right for envs whose
            episodes end only when the goal is reached. A float >= 0: success is
            ``distance(achieved_goal, desired_goal) <= threshold`` (as :class:`SparseReward` rewards).
        distance: with a threshold, the goal distance (default :func:`euclidean_distance`).
    """

    def __init__(
        self, env: gym.Env, threshold: float | None = None, distance: Distance | None = None
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, threshold=threshold, distance=distance)
        self._init_success(single_env_space(env), threshold, distance)
        super().__init__(env)

    def step(self, action: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "is_success" not in info:
            if self.threshold is None:
                success = bool(terminated)
            else:
                success = bool(self.is_success(obs["achieved_goal"], obs["desired_goal"]))
            info["is_success"] = success
        return obs, reward, terminated, truncated, info
