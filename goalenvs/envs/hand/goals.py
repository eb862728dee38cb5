"""The Shadow Hand tasks' pure goal functions. Nothing here touches MuJoCo.

HandReach's goal is the 15 numbers of the five fingertip positions; its reward and success are the
Fetch family's on the Euclidean distance over those 15 numbers (one distance for all five tips, not
one per tip), so they are built on :mod:`goalenvs.envs.fetch.goals`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from goalenvs.envs.fetch.goals import distance_reward, distance_success, goal_distance

__all__ = ["reach_reward", "reach_success"]

FloatArray = np.ndarray


def reach_reward(achieved_goal: Any, desired_goal: Any, distance_threshold: float, dense: bool) -> FloatArray:
    """``-distance`` (dense) or ``-1.0``/``-0.0`` float32 by ``distance_threshold`` (sparse), over the
    last axis (15: five fingertips' x, y, z); any leading batch shape. A NaN distance scores -1 (sparse)."""
    return distance_reward(goal_distance(achieved_goal, desired_goal), distance_threshold, dense)


def reach_success(achieved_goal: Any, desired_goal: Any, distance_threshold: float) -> FloatArray:
    """1.0 (float32) where the fingertips are strictly within ``distance_threshold`` of the goal
    (Euclidean over all 15 numbers), else 0.0 (also for a NaN distance)."""
    return distance_success(goal_distance(achieved_goal, desired_goal), distance_threshold)
