"""The robotics families' pure numpy goal functions: goal distance, the distance reward and success (Fetch's
reward and success of goal pairs), Euler angles.

Nothing here touches MuJoCo: a replay buffer can call them on any batch, in any process.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "distance_reward",
    "distance_success",
    "euler_from_xmat",
    "fetch_reward",
    "fetch_success",
    "goal_distance",
    "mat2euler",
]

FloatArray = np.ndarray

_EPS4 = float(np.finfo(np.float64).eps * 4.0)


def goal_distance(goal_a: Any, goal_b: Any) -> FloatArray:
    """Euclidean distance between goals over the last axis; any leading batch shape."""
    a = np.asarray(goal_a)
    b = np.asarray(goal_b)
    if a.shape != b.shape:
        raise ValueError(f"goal shapes differ: {a.shape} vs {b.shape}")
    diff = a - b
    # The same reduction as np.linalg.norm(axis=-1), without its dispatch overhead.
    return np.sqrt(np.add.reduce(diff * diff, axis=-1))


def fetch_reward(achieved_goal: Any, desired_goal: Any, distance_threshold: float, dense: bool) -> FloatArray:
    """Fetch reward: ``-distance`` (dense) or ``-1.0``/``-0.0`` float32 by ``distance_threshold`` (sparse)."""
    return distance_reward(goal_distance(achieved_goal, desired_goal), distance_threshold, dense)


def fetch_success(achieved_goal: Any, desired_goal: Any, distance_threshold: float) -> FloatArray:
    """1.0 (float32) where the achieved goal is strictly within ``distance_threshold`` of the desired one
    (0.0 where the distance is NaN)."""
    return distance_success(goal_distance(achieved_goal, desired_goal), distance_threshold)


def distance_reward(d: Any, distance_threshold: float, dense: bool) -> FloatArray:
    """The reward of goal distances ``d``: ``-d`` (dense) or ``-1.0``/``-0.0`` float32 by ``distance_threshold`` (sparse) (a step computes them once for reward and success).

    Sparse is Gymnasium-Robotics' ``-float32(d > threshold)`` on every finite distance, but written
    ``not d <= threshold`` so that a NaN distance (a NaN goal) scores -1 and agrees with
    :func:`distance_success`, which calls it no success (``d > threshold`` is False for NaN: it scored
    the success reward). Dense gives NaN there.
    """
    if dense:
        return -d
    if isinstance(d, np.generic):  # one goal: a numpy scalar, as Gymnasium-Robotics returns
        return -np.float32(not float(d) <= distance_threshold)
    return -np.logical_not(d <= distance_threshold).astype(np.float32)


def distance_success(d: Any, distance_threshold: float) -> FloatArray:
    """The success of goal distances ``d``: 1.0 (float32) where ``d < distance_threshold``."""
    if isinstance(d, np.generic):
        return np.float32(float(d) < distance_threshold)
    return (d < distance_threshold).astype(np.float32)


def mat2euler(mat: Any) -> FloatArray:
    """Rotation matrices ``(..., 3, 3)`` to Euler angles ``(..., 3)``, Gymnasium-Robotics' convention.

    The angles are those of the static x-y-z (roll, pitch, yaw) decomposition; near gimbal lock
    (``cos(pitch) ~ 0``) roll is set to 0 and yaw absorbs the whole rotation about z.
    """
    m = np.asarray(mat, dtype=np.float64)
    if m.shape[-2:] != (3, 3):
        raise ValueError(f"mat2euler needs matrices of shape (..., 3, 3), got {m.shape}")
    cos_pitch = np.sqrt(m[..., 2, 2] ** 2 + m[..., 1, 2] ** 2)
    regular = cos_pitch > _EPS4
    out = np.empty(m.shape[:-1])
    out[..., 0] = np.where(regular, -np.arctan2(m[..., 1, 2], m[..., 2, 2]), 0.0)
    out[..., 1] = -np.arctan2(-m[..., 0, 2], cos_pitch)
    out[..., 2] = np.where(
        regular, -np.arctan2(m[..., 0, 1], m[..., 0, 0]), -np.arctan2(-m[..., 1, 0], m[..., 1, 1])
    )
    return out


def euler_from_xmat(
    xmat: Sequence[float], atan2: Callable[[float, float], float] = math.atan2
) -> tuple[float, float, float]:
    """Scalar :func:`mat2euler` of one row-major 3x3 matrix given as 9 floats (the per-step path).
    ``atan2``: ``math.atan2``, or a wrapper of ``np.arctan2`` where the result must be the array path's
    to the last bit (numpy's SIMD ``arctan2`` and ``math``'s can differ in it)."""
    m00, m01, m02, m10, m11, m12, _, _, m22 = xmat
    cos_pitch = math.sqrt(m22 * m22 + m12 * m12)
    pitch = -atan2(-m02, cos_pitch)
    if cos_pitch > _EPS4:
        return -atan2(m12, m22), pitch, -atan2(m01, m00)
    return 0.0, pitch, -atan2(-m10, m11)
