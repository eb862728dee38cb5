"""The four Fetch tasks as data, their validated arguments, and their pure goal functions.

Nothing here touches MuJoCo: the task table and the goal functions (distance, reward, success, the
Euler angles of the observation) are plain numpy, usable by a replay buffer on any batch, in any
process.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, fields
from typing import Any

import numpy as np

from goalenvs._util import check_bool, check_int, check_real

__all__ = [
    "REWARD_TYPES",
    "TASKS",
    "SETTINGS",
    "FetchSettings",
    "FetchTask",
    "fetch_reward",
    "fetch_success",
    "goal_distance",
    "mat2euler",
]

FloatArray = np.ndarray

_EPS4 = float(np.finfo(np.float64).eps * 4.0)
MIN_OBJECT_GRIPPER_DIST = 0.1  # the object never starts closer than this (x-y) to the gripper
AIR_TARGET_MAX_HEIGHT = 0.45  # metres above the table a target in the air may be
POS_ACTION_SCALE = 0.05  # metres of mocap displacement per unit of action
DEFAULT_SIZE = 480  # rendered frame width and height

_ROBOT_BASE = {"robot0:slide1": 0.48, "robot0:slide2": 0.0}
_OBJECT_NEAR = [1.25, 0.53, 0.4, 1.0, 0.0, 0.0, 0.0]


@dataclass(frozen=True)
class FetchTask:
    """Defaults of one Fetch task, as Gymnasium-Robotics' v4 class for it sets them."""

    xml: str
    has_object: bool
    block_gripper: bool
    gripper_extra_height: float
    target_in_the_air: bool
    target_offset: float | tuple[float, float, float]
    obj_range: float
    target_range: float
    initial_qpos: Mapping[str, Any]
    distance_threshold: float = 0.05
    n_substeps: int = 20


#: The four tasks, by the name the ``task`` argument takes.
TASKS: dict[str, FetchTask] = {
    "reach": FetchTask(
        xml="reach.xml",
        has_object=False,
        block_gripper=True,
        gripper_extra_height=0.2,
        target_in_the_air=True,
        target_offset=0.0,
        obj_range=0.15,
        target_range=0.15,
        initial_qpos={"robot0:slide0": 0.4049, **_ROBOT_BASE},
    ),
    "push": FetchTask(
        xml="push.xml",
        has_object=True,
        block_gripper=True,
        gripper_extra_height=0.0,
        target_in_the_air=False,
        target_offset=0.0,
        obj_range=0.15,
        target_range=0.15,
        initial_qpos={"robot0:slide0": 0.405, **_ROBOT_BASE, "object0:joint": _OBJECT_NEAR},
    ),
    "slide": FetchTask(
        xml="slide.xml",
        has_object=True,
        block_gripper=True,
        gripper_extra_height=-0.02,
        target_in_the_air=False,
        target_offset=(0.4, 0.0, 0.0),
        obj_range=0.1,
        target_range=0.3,
        initial_qpos={
            "robot0:slide0": 0.05,
            **_ROBOT_BASE,
            "object0:joint": [1.7, 1.1, 0.41, 1.0, 0.0, 0.0, 0.0],
        },
    ),
    "pick_and_place": FetchTask(
        xml="pick_and_place.xml",
        has_object=True,
        block_gripper=False,
        gripper_extra_height=0.2,
        target_in_the_air=True,
        target_offset=0.0,
        obj_range=0.15,
        target_range=0.15,
        initial_qpos={"robot0:slide0": 0.405, **_ROBOT_BASE, "object0:joint": _OBJECT_NEAR},
    ),
}

REWARD_TYPES = ("sparse", "dense")


# ---- the validated arguments of an env ----------------------------------------------------------


@dataclass(frozen=True)
class FetchSettings:
    """Every argument of a Fetch env, validated, with the task's defaults filled in: written once.

    ``FetchEnv(**kwargs)``, ``FetchVectorEnv(num_envs, **kwargs)`` and the registry's ids all build
    one of these (the envs' signatures are made from its fields, and their attributes read it); a bad
    value fails here with a one-line error naming it. ``None`` in a task-dependent field means that
    task's Gymnasium-Robotics v4 value (see :data:`TASKS`). See ``FetchEnv`` for what each one means.
    """

    task: str = "reach"
    reward_type: str = "sparse"
    _: KW_ONLY
    distance_threshold: float = None  # type: ignore[assignment]  # None -> the task's; a float after
    target_in_the_air: bool = None  # type: ignore[assignment]
    target_offset: float | FloatArray = None  # type: ignore[assignment]
    obj_range: float = None  # type: ignore[assignment]
    target_range: float = None  # type: ignore[assignment]
    gripper_extra_height: float = None  # type: ignore[assignment]
    block_gripper: bool = None  # type: ignore[assignment]
    n_substeps: int = None  # type: ignore[assignment]
    initial_qpos: Mapping[str, Any] = None  # type: ignore[assignment]
    max_steps: int | None = 50
    width: int = DEFAULT_SIZE
    height: int = DEFAULT_SIZE

    def __post_init__(self) -> None:
        task = self.task
        if task not in TASKS:
            raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
        if self.reward_type not in REWARD_TYPES:
            raise ValueError(f"reward_type must be one of {list(REWARD_TYPES)}, got {self.reward_type!r}")
        spec = TASKS[task]

        def pick(name: str) -> Any:
            value = getattr(self, name)
            return getattr(spec, name) if value is None else value

        obj = check_real("obj_range", pick("obj_range"), 0.0)
        if spec.has_object and obj < MIN_OBJECT_GRIPPER_DIST:
            # The start position is redrawn until it is >= 0.1 m from the gripper: below 0.1 that loop
            # needs ever more draws, and below 0.1/sqrt(2) it never ends.
            raise ValueError(
                f"obj_range must be >= {MIN_OBJECT_GRIPPER_DIST} for task {task!r} (the object starts at "
                f"least {MIN_OBJECT_GRIPPER_DIST} m from the gripper), got {self.obj_range!r}"
            )
        qpos = pick("initial_qpos")
        if not isinstance(qpos, Mapping):
            raise TypeError(
                f"initial_qpos must be a dict of joint name -> value(s), got {type(qpos).__name__}"
            )
        checked = {
            "width": check_int("width", self.width, 1),
            "height": check_int("height", self.height, 1),
            "distance_threshold": check_real(
                "distance_threshold", pick("distance_threshold"), 0.0, strict=True
            ),
            "target_in_the_air": check_bool("target_in_the_air", pick("target_in_the_air")),
            "target_offset": _check_offset(pick("target_offset")),
            "obj_range": obj,
            "target_range": check_real("target_range", pick("target_range"), 0.0),
            "gripper_extra_height": check_real("gripper_extra_height", pick("gripper_extra_height")),
            "block_gripper": check_bool("block_gripper", pick("block_gripper")),
            "n_substeps": check_int("n_substeps", pick("n_substeps"), 1),
            "initial_qpos": qpos,
            "max_steps": None if self.max_steps is None else check_int("max_steps", self.max_steps, 1),
        }
        for name, value in checked.items():  # a frozen dataclass: set through object.__setattr__
            object.__setattr__(self, name, value)

    @property
    def has_object(self) -> bool:
        return TASKS[self.task].has_object


#: The names of FetchSettings' fields: the Fetch envs' keyword arguments (and attributes).
SETTINGS = tuple(f.name for f in fields(FetchSettings))


def _check_offset(value: Any) -> float | FloatArray:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return check_real("target_offset", value)
    arr = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else None
    if arr is None or arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ValueError(
            f"target_offset must be a finite number or 3 finite numbers (x, y, z), got {value!r}"
        )
    return arr


# ---- the goal functions -------------------------------------------------------------------------


def goal_distance(goal_a: Any, goal_b: Any) -> FloatArray:
    """Euclidean distance between goals over the last axis; any leading batch shape."""
    a = np.asarray(goal_a)
    b = np.asarray(goal_b)
    if a.shape != b.shape:
        raise ValueError(f"goal shapes differ: {a.shape} vs {b.shape}")
    if a.ndim == 1 and a.dtype == np.float64 and b.dtype == np.float64:
        # One goal (the per-step call): Python floats, with the same operations in the same order as
        # the array expression below (so the same bits), at a fraction of numpy's per-call cost.
        return np.float64(
            math.sqrt(sum((x - y) * (x - y) for x, y in zip(a.tolist(), b.tolist(), strict=True)))
        )
    diff = a - b
    # The same reduction as np.linalg.norm(axis=-1), without its dispatch overhead.
    return np.sqrt(np.add.reduce(diff * diff, axis=-1))


def fetch_reward(achieved_goal: Any, desired_goal: Any, distance_threshold: float, dense: bool) -> FloatArray:
    """Fetch reward: ``-distance`` (dense) or ``-1.0``/``-0.0`` float32 by ``distance_threshold`` (sparse).

    Sparse is Gymnasium-Robotics' ``-float32(d > threshold)`` on every finite distance, but written
    ``not d <= threshold`` so that a NaN distance (a NaN goal) scores -1 and agrees with
    :func:`fetch_success`, which calls it no success (``d > threshold`` is False for NaN: it scored
    the success reward). Dense gives NaN there.
    """
    d = goal_distance(achieved_goal, desired_goal)
    if dense:
        return -d
    if isinstance(d, np.generic):  # one goal: a numpy scalar, as Gymnasium-Robotics returns
        return -np.float32(not d <= distance_threshold)
    return -np.logical_not(d <= distance_threshold).astype(np.float32)


def fetch_success(achieved_goal: Any, desired_goal: Any, distance_threshold: float) -> FloatArray:
    """1.0 (float32) where the achieved goal is strictly within ``distance_threshold`` of the desired one
    (0.0 where the distance is NaN)."""
    d = goal_distance(achieved_goal, desired_goal)
    if isinstance(d, np.generic):
        return np.float32(d < distance_threshold)
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


def _euler_from_xmat(xmat: list[float]) -> tuple[float, float, float]:
    """Scalar :func:`mat2euler` of one row-major 3x3 matrix given as 9 floats (the per-step path)."""
    m00, m01, m02, m10, m11, m12, _, _, m22 = xmat
    cos_pitch = math.sqrt(m22 * m22 + m12 * m12)
    pitch = -math.atan2(-m02, cos_pitch)
    if cos_pitch > _EPS4:
        return -math.atan2(m12, m22), pitch, -math.atan2(m01, m00)
    return 0.0, pitch, -math.atan2(-m10, m11)
