"""Fetch's goal functions: reward and success of the achieved and desired goals (pure numpy, any batch)."""

from __future__ import annotations

from typing import Any

import numpy as np

from goalenvs.envs.goal_functions import distance_reward, distance_success, goal_distance

__all__ = ["fetch_reward", "fetch_success"]

FloatArray = np.ndarray


def fetch_reward(achieved_goal: Any, desired_goal: Any, distance_threshold: float, dense: bool) -> FloatArray:
    """Fetch reward: ``-distance`` (dense) or ``-1.0``/``-0.0`` float32 by ``distance_threshold`` (sparse)."""
    return distance_reward(goal_distance(achieved_goal, desired_goal), distance_threshold, dense)


def fetch_success(achieved_goal: Any, desired_goal: Any, distance_threshold: float) -> FloatArray:
    """1.0 (float32) where the achieved goal is strictly within ``distance_threshold`` of the desired one
    (0.0 where the distance is NaN)."""
    return distance_success(goal_distance(achieved_goal, desired_goal), distance_threshold)
