"""The four Fetch tasks' defaults, and the validated settings of a Fetch env.

``task=`` picks one of :data:`TASKS` (reach, push, slide, pick-and-place); :class:`FetchSettings`
checks every argument once and fills in that task's Gymnasium-Robotics v4 defaults. Nothing here
touches MuJoCo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np

from goalenvs._util import check_bool, check_int, check_real

__all__ = [
    "AIR_TARGET_MAX_HEIGHT",
    "DEFAULT_SIZE",
    "MIN_OBJECT_GRIPPER_DIST",
    "POS_ACTION_SCALE",
    "REWARD_TYPES",
    "TASKS",
    "FetchDefaults",
    "FetchSettings",
]

FloatArray = np.ndarray

MIN_OBJECT_GRIPPER_DIST = 0.1  # the object never starts closer than this (x-y) to the gripper
AIR_TARGET_MAX_HEIGHT = 0.45  # metres above the table a target in the air may be
POS_ACTION_SCALE = 0.05  # metres of mocap displacement per unit of action
DEFAULT_SIZE = 480  # rendered frame width and height

_ROBOT_BASE = {"robot0:slide1": 0.48, "robot0:slide2": 0.0}
_OBJECT_NEAR = [1.25, 0.53, 0.4, 1.0, 0.0, 0.0, 0.0]


@dataclass(frozen=True)
class FetchDefaults:
    """The defaults of one Fetch task, as Gymnasium-Robotics' v4 class for it sets them."""

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
TASKS: dict[str, FetchDefaults] = {
    "reach": FetchDefaults(
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
    "push": FetchDefaults(
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
    "slide": FetchDefaults(
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
    "pick_and_place": FetchDefaults(
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

    ``FetchEnv(...)`` and ``FetchVectorEnv(num_envs, ...)`` pass their arguments into one of these
    (and their attributes read it); a bad value fails here with a one-line error naming it. ``None`` in a task-dependent field means that
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


def _check_offset(value: Any) -> float | FloatArray:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return check_real("target_offset", value)
    arr = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else None
    if arr is None or arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ValueError(
            f"target_offset must be a finite number or 3 finite numbers (x, y, z), got {value!r}"
        )
    return arr
