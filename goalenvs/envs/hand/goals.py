"""The Shadow Hand tasks' pure goal functions, and the quaternion arithmetic they need. Nothing here
touches MuJoCo: a replay buffer can call them on any batch, in any process.

HandReach's goal is the 15 numbers of the five fingertip positions; its reward and success are the
Fetch family's on the Euclidean distance over those 15 numbers (one distance for all five tips, not
one per tip), so they are built on :mod:`goalenvs.envs.goal_functions`.

A HandManipulate goal is the object's pose: position (3, m) and orientation (4, a unit quaternion
``w, x, y, z``). :func:`manipulate_distances` gives the position distance and the rotation angle, as
Gymnasium-Robotics' ``_goal_distance`` does, on any leading batch shape (Gymnasium-Robotics' own takes
one or two dimensions, and gets the pen's wrong on a batch: see :func:`manipulate_distances`).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from goalenvs.envs.goal_functions import (
    distance_reward,
    distance_success,
    euler_from_xmat,
    goal_distance,
    mat2euler,
)

__all__ = [
    "euler2mat",
    "euler2quat",
    "manipulate_distances",
    "manipulate_reward",
    "manipulate_success",
    "parallel_quats",
    "quat2euler",
    "quat2mat",
    "quat_conjugate",
    "quat_from_angle_and_axis",
    "quat_mul",
    "reach_reward",
    "reach_success",
]

FloatArray = np.ndarray


def reach_reward(achieved_goal: Any, desired_goal: Any, distance_threshold: float, dense: bool) -> FloatArray:
    """``-distance`` (dense) or ``-1.0``/``-0.0`` float32 by ``distance_threshold`` (sparse), over the
    last axis (15: five fingertips' x, y, z); any leading batch shape. A NaN distance scores -1 (sparse)."""
    return distance_reward(goal_distance(achieved_goal, desired_goal), distance_threshold, dense)


def reach_success(achieved_goal: Any, desired_goal: Any, distance_threshold: float) -> FloatArray:
    """1.0 (float32) where the fingertips are strictly within ``distance_threshold`` of the goal
    (Euclidean over all 15 numbers), else 0.0 (also for a NaN distance)."""
    return distance_success(goal_distance(achieved_goal, desired_goal), distance_threshold)


# ---- quaternions (w, x, y, z), Gymnasium-Robotics' conventions, on any leading batch shape ---------------

_FLOAT_EPS = float(np.finfo(np.float64).eps)


def quat_mul(q0: Any, q1: Any) -> FloatArray:
    """The Hamilton product ``q0 q1``, over the last axis (4)."""
    w0, x0, y0, z0 = np.moveaxis(np.asarray(q0, dtype=np.float64), -1, 0)
    w1, x1, y1, z1 = np.moveaxis(np.asarray(q1, dtype=np.float64), -1, 0)
    return np.stack(
        [
            w0 * w1 - x0 * x1 - y0 * y1 - z0 * z1,
            w0 * x1 + x0 * w1 + y0 * z1 - z0 * y1,
            w0 * y1 + y0 * w1 + z0 * x1 - x0 * z1,
            w0 * z1 + z0 * w1 + x0 * y1 - y0 * x1,
        ],
        axis=-1,
    )


def quat_conjugate(q: Any) -> FloatArray:
    """``w, -x, -y, -z``."""
    out = -np.asarray(q, dtype=np.float64)
    out[..., 0] *= -1
    return out


def quat_from_angle_and_axis(angle: float, axis: FloatArray) -> FloatArray:
    """The unit quaternion of a rotation by ``angle`` (rad) about ``axis`` (3,), normalised as
    Gymnasium-Robotics does (the axis, then the quaternion)."""
    axis = axis / np.linalg.norm(axis)
    quat = np.concatenate([[np.cos(angle / 2.0)], np.sin(angle / 2.0) * axis])
    return quat / np.linalg.norm(quat)


def quat2mat(quat: Any) -> FloatArray:
    """Rotation matrices ``(..., 3, 3)`` of quaternions ``(..., 4)`` (any norm; identity for a zero one)."""
    q = np.asarray(quat, dtype=np.float64)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    nq = np.sum(q * q, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero quaternion: replaced by the identity
        s = 2.0 / nq
        xs, ys, zs = x * s, y * s, z * s
        wx, wy, wz = w * xs, w * ys, w * zs
        xx, xy, xz = x * xs, x * ys, x * zs
        yy, yz, zz = y * ys, y * zs, z * zs
    mat = np.empty(q.shape[:-1] + (3, 3))
    mat[..., 0, 0] = 1.0 - (yy + zz)
    mat[..., 0, 1] = xy - wz
    mat[..., 0, 2] = xz + wy
    mat[..., 1, 0] = xy + wz
    mat[..., 1, 1] = 1.0 - (xx + zz)
    mat[..., 1, 2] = yz - wx
    mat[..., 2, 0] = xz - wy
    mat[..., 2, 1] = yz + wx
    mat[..., 2, 2] = 1.0 - (xx + yy)
    degenerate = ~(nq > _FLOAT_EPS)
    if degenerate.any():
        mat[degenerate] = np.eye(3)
    return mat


def quat2euler(quat: Any) -> FloatArray:
    """Euler angles ``(..., 3)`` (Gymnasium-Robotics' static x-y-z convention) of quaternions ``(..., 4)``."""
    return mat2euler(quat2mat(quat))


def euler2mat(euler: Any) -> FloatArray:
    """Rotation matrices ``(..., 3, 3)`` of Euler angles ``(..., 3)`` (the inverse of ``mat2euler``)."""
    e = np.asarray(euler, dtype=np.float64)
    ai, aj, ak = -e[..., 2], -e[..., 1], -e[..., 0]
    si, sj, sk = np.sin(ai), np.sin(aj), np.sin(ak)
    ci, cj, ck = np.cos(ai), np.cos(aj), np.cos(ak)
    cc, cs = ci * ck, ci * sk
    sc, ss = si * ck, si * sk
    mat = np.empty(e.shape[:-1] + (3, 3))
    mat[..., 2, 2] = cj * ck
    mat[..., 2, 1] = sj * sc - cs
    mat[..., 2, 0] = sj * cc + ss
    mat[..., 1, 2] = cj * sk
    mat[..., 1, 1] = sj * ss + cc
    mat[..., 1, 0] = sj * cs - sc
    mat[..., 0, 2] = -sj
    mat[..., 0, 1] = cj * si
    mat[..., 0, 0] = cj * ci
    return mat


def parallel_quats() -> FloatArray:
    """The 24 rotations (24, 4) that map the coordinate axes onto themselves, in Gymnasium-Robotics'
    order (the ``parallel`` target rotation draws one of them by index, so the order is part of the
    random stream): each product of three multiples of 90 degrees, canonicalised through a rotation
    matrix, kept when new."""
    quarter = np.pi / 2
    found: list[FloatArray] = []
    for euler in itertools.product([0, quarter, -quarter, np.pi], repeat=3):
        canonical = np.round(mat2euler(euler2mat(euler)) / quarter)
        canonical[[0, 2]] = np.where(canonical[[0, 2]] == -2, 2, canonical[[0, 2]])
        canonical *= quarter
        if all((canonical != rot).any() for rot in found):
            found.append(canonical)
    return euler2quat(np.array(found))


def euler2quat(euler: Any) -> FloatArray:
    """Unit quaternions ``(..., 4)`` of Euler angles ``(..., 3)`` (the inverse of :func:`quat2euler`)."""
    e = np.asarray(euler, dtype=np.float64)
    ai, aj, ak = e[..., 2] / 2, -e[..., 1] / 2, e[..., 0] / 2
    si, sj, sk = np.sin(ai), np.sin(aj), np.sin(ak)
    ci, cj, ck = np.cos(ai), np.cos(aj), np.cos(ak)
    cc, cs = ci * ck, ci * sk
    sc, ss = si * ck, si * sk
    quat = np.empty(e.shape[:-1] + (4,))
    quat[..., 0] = cj * cc + sj * ss
    quat[..., 1] = cj * cs - sj * sc
    quat[..., 2] = -(cj * ss + sj * cc)
    quat[..., 3] = cj * sc - sj * cs
    return quat


# ---- the manipulate goals (7: position, quaternion) ---------------------------------------------------


#: Up to this many goals (a step's) the pen's rotation distance is computed goal by goal: on so few,
#: numpy's calls on tiny arrays are most of a PenRotate step's cost beyond its physics; the numbers
#: are the same, bit for bit.
FEW_GOALS = 4


def manipulate_distances(
    achieved_goal: Any, desired_goal: Any, *, use_position: bool, use_rotation: bool, ignore_z: bool
) -> tuple[FloatArray, FloatArray]:
    """``(d_pos, d_rot)`` over the last axis (7) of two pose goals; any leading batch shape.

    ``d_pos`` is the Euclidean distance of the positions (m; 0 unless ``use_position``); ``d_rot`` the
    angle (rad, in [0, 2 pi]; 0 unless ``use_rotation``) ``2 arccos(w)`` of ``q_a conj(q_b)``, whose
    ``w`` is the dot product ``<q_a, q_b>``: Gymnasium-Robotics' formula, which takes no absolute
    value, so ``q`` and ``-q`` (the same orientation) are ``2 pi`` minus each other's angle apart.
    With ``ignore_z`` the z Euler angle of ``q_a`` is replaced by ``q_b``'s first. Here that is done per
    goal, on any batch; Gymnasium-Robotics writes ``euler_a[2] = euler_b[2]``, which on a batch
    replaces the third *goal* instead (a batch of one raises ``IndexError``): its single transitions
    are what this function gives, its batches are not.
    """
    a = np.asarray(achieved_goal, dtype=np.float64)
    b = np.asarray(desired_goal, dtype=np.float64)
    if a.shape != b.shape or a.shape[-1:] != (7,):
        raise ValueError(f"pose goals must both be of shape (..., 7), got {a.shape} and {b.shape}")
    d_pos = goal_distance(a[..., :3], b[..., :3]) if use_position else np.zeros(a.shape[:-1])
    if not use_rotation:
        return d_pos, np.zeros(a.shape[:-1])
    quat_a, quat_b = a[..., 3:], b[..., 3:]
    if ignore_z and a.size <= 7 * FEW_GOALS:  # a step's goals: the same numbers, in a tenth of the time
        angles = [
            _angle_ignoring_z(x, y)
            for x, y in zip(quat_a.reshape(-1, 4).tolist(), quat_b.reshape(-1, 4).tolist(), strict=True)
        ]
        return d_pos, np.array(angles, dtype=np.float64).reshape(a.shape[:-1])
    if ignore_z:
        euler_a, euler_b = quat2euler(np.stack([quat_a, quat_b]))  # one call for both: half the overhead
        euler_a[..., 2] = euler_b[..., 2]
        quat_a = euler2quat(euler_a)
    # The w of q_a conj(q_b), summed in the order quat_mul sums it: w0 w1 - x0 (-x1) - ... is bit for bit
    # w0 w1 + x0 x1 + ..., as negating a factor or a subtrahend rounds nothing.
    w = quat_a[..., 0] * quat_b[..., 0] + quat_a[..., 1] * quat_b[..., 1]
    w = w + quat_a[..., 2] * quat_b[..., 2]
    w = w + quat_a[..., 3] * quat_b[..., 3]
    return d_pos, 2 * np.arccos(np.clip(w, -1.0, 1.0))


def _atan2(y: float, x: float) -> float:
    return float(np.arctan2(y, x))  # numpy's own: it rounds as the array path's does, math's may not


def _euler_angles(w: float, x: float, y: float, z: float) -> tuple[float, float, float]:
    """:func:`quat2euler` of one quaternion, the same operations in the same order on floats."""
    nq = w * w + x * x + y * y + z * z
    if not nq > _FLOAT_EPS:  # a zero (or non-finite) quaternion: the identity
        return euler_from_xmat((1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0), _atan2)
    s = 2.0 / nq
    X, Y, Z = x * s, y * s, z * s
    m00, m01, m02 = 1.0 - (y * Y + z * Z), x * Y - w * Z, x * Z + w * Y
    m10, m11, m12 = x * Y + w * Z, 1.0 - (x * X + z * Z), y * Z - w * X
    return euler_from_xmat((m00, m01, m02, m10, m11, m12, 0.0, 0.0, 1.0 - (x * X + y * Y)), _atan2)


def _angle_ignoring_z(quat_a: list[float], quat_b: list[float]) -> float:
    """The rotation distance of :func:`manipulate_distances` with ``ignore_z`` for one pair of
    quaternions, bit for bit: ``q_a`` with ``q_b``'s z Euler angle (:func:`euler2quat`), dotted with ``q_b``."""
    roll, pitch, _ = _euler_angles(*quat_a)
    half = np.array([_euler_angles(*quat_b)[2] / 2, -pitch / 2, roll / 2])  # euler2quat's ai, aj, ak
    si, sj, sk = np.sin(half).tolist()
    ci, cj, ck = np.cos(half).tolist()
    cc, cs, sc, ss = ci * ck, ci * sk, si * ck, si * sk
    w = (cj * cc + sj * ss) * quat_b[0] + (cj * cs - sj * sc) * quat_b[1]
    w = w + -(cj * ss + sj * cc) * quat_b[2]
    w = w + (cj * sc - sj * cs) * quat_b[3]
    return 2 * float(np.arccos(min(max(w, -1.0), 1.0)))


def manipulate_success(d_pos: Any, d_rot: Any, distance_threshold: float, rotation_threshold: float) -> Any:
    """1.0 (float32) where ``d_pos < distance_threshold`` and ``d_rot < rotation_threshold``, else 0.0
    (also for a NaN distance)."""
    return ((d_pos < distance_threshold) & (d_rot < rotation_threshold)).astype(np.float32)


def manipulate_reward(
    d_pos: Any, d_rot: Any, distance_threshold: float, rotation_threshold: float, dense: bool
) -> Any:
    """Dense ``-(10 d_pos + d_rot)`` (the position weighted so that metres are not drowned by radians), or
    sparse ``success - 1`` (float32: -1.0 or 0.0), from :func:`manipulate_distances`."""
    if dense:
        return -(10.0 * d_pos + d_rot)
    return manipulate_success(d_pos, d_rot, distance_threshold, rotation_threshold) - np.float32(1.0)
