"""Fetch Reach / Push / Slide / PickAndPlace on MuJoCo, step-for-step faithful to Gymnasium-Robotics v4.

One class, :class:`FetchEnv`, runs all four tasks; the task and every knob of Gymnasium-Robotics'
Fetch family (reward type, thresholds, ranges, gripper height, ...) are validated constructor
arguments. The MJCF assets are Gymnasium-Robotics' own, read from its installed package folder
without importing the package (importing it would build its whole env registry).

Why our own implementation: Gymnasium-Robotics 1.4.2 crashes on MuJoCo >= 3.12 (its
``set_joint_qpos`` compares a MuJoCo enum with a numpy integer), and on older MuJoCo it spends a
third of every step on name lookups and Python glue. Here every name is resolved to an index once in
``__init__`` and the step touches only cached numpy views of ``MjData``.

Fidelity rules followed below (each one is there because the physics, or the random stream, would
otherwise drift from Gymnasium-Robotics):

* the mocap target is reset to the gripper body's pose *as MuJoCo last computed it* before the action
  offset is added (after ``mj_step`` that pose is the one at the start of the last substep);
* the mocap quaternion is the body quaternion plus ``(1, 0, 1, 0)``, unnormalised, as there;
* random numbers are drawn from ``self.np_random`` in their order: object position (rejection loop),
  then goal offset, then (target in the air only) the coin flip and the height;
* the action is clipped with float32 bounds and scaled in its own dtype, so a float32 action is
  rounded exactly as there.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import error, spaces

# How to get the fetch extra's packages (mujoco and gymnasium-robotics), for the errors below.
_INSTALL_FETCH = (
    'install the fetch extra: `pip install "goalenvs[fetch]"` (goalenvs is not on PyPI yet: from the '
    'clone, `pip install -e ".[fetch]"`), or `pip install mujoco gymnasium-robotics`'
)

# The offscreen renderer picks its OpenGL backend when mujoco is first imported. On a headless
# machine the default (GLFW) cannot open a context, so prefer EGL there; a user's choice wins. If
# something imported mujoco before us, its choice is made already: remember that, for render's errors.
_MUJOCO_IMPORTED_FIRST = "mujoco" in sys.modules
if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ["MUJOCO_GL"] = "egl"

try:
    import mujoco  # noqa: E402  (must follow the MUJOCO_GL default above)
except ModuleNotFoundError as _missing:
    if _missing.name != "mujoco":
        raise
    # Still a ModuleNotFoundError (pytest.importorskip and `except ImportError` keep working), saying
    # what to install.
    raise ModuleNotFoundError(
        "the Fetch tasks need MuJoCo, which is not installed; " + _INSTALL_FETCH, name="mujoco"
    ) from None

from goalenvs.core import NO_ELAPSED_STEPS, GoalEnv, info_values_or_default  # noqa: E402

__all__ = ["TASKS", "FetchEnv", "FetchTask", "fetch_assets_dir", "goal_distance", "mat2euler", "fetch_reward"]

FloatArray = np.ndarray

_EPS4 = float(np.finfo(np.float64).eps * 4.0)
_MOCAP_ROT_DELTA = np.array([1.0, 0.0, 1.0, 0.0])  # added to the gripper quaternion every step
_GRIPPER_SETUP_OFFSET = (-0.498, 0.005, -0.431)  # where the gripper is driven to before the first episode
_MIN_OBJECT_GRIPPER_DIST = 0.1  # the object never starts closer than this (x-y) to the gripper
_AIR_TARGET_MAX_HEIGHT = 0.45
_POS_ACTION_SCALE = 0.05  # metres of mocap displacement per unit of action
_DEFAULT_SIZE = 480
_DEFAULT_CAMERA = {"distance": 2.5, "azimuth": 132.0, "elevation": -14.0, "lookat": (1.3, 0.75, 0.55)}


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


# Since MuJoCo 3.3.6 mj_forward no longer writes qacc_warmstart (only mj_step does), so after the
# fingers are pinned, recomputing kinematics and the com-based quantities the Jacobians need is all
# the next step and the observation read: same trajectory, bit for bit, for ~1/20 of a step less.
# Before 3.3.6 the full mj_forward also advanced the warm start, and must stay.
_FORWARD_IS_STATELESS = _version_tuple(mujoco.__version__) >= (3, 3, 6)

# Attributes that alias MjData memory (rebuilt by _bind_views after unpickling, never pickled).
_VIEW_ATTRS = frozenset(
    {
        "_qpos", "_qvel", "_ctrl", "_site_xpos", "_anchor_pos", "_anchor_quat", "_mocap_pos_row",
        "_mocap_quat_row", "_grip_xpos", "_obj_xpos", "_obj_xmat", "_finger_q", "_finger_v",
        "_jac", "_jac_grip", "_jac_obj_p", "_jac_obj_r",
    }
)  # fmt: skip

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


# ---------------------------------------------------------------------------------------------
# Pure, vectorized task functions (usable by a replay buffer on any batch, in any process).
# ---------------------------------------------------------------------------------------------


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
    """Fetch reward: ``-distance`` (dense) or ``-1.0``/``0.0`` float32 by ``distance_threshold`` (sparse)."""
    d = goal_distance(achieved_goal, desired_goal)
    if dense:
        return -d
    if isinstance(d, np.generic):  # one goal: a numpy scalar, as Gymnasium-Robotics returns
        return -np.float32(d > distance_threshold)
    return -(d > distance_threshold).astype(np.float32)


def fetch_success(achieved_goal: Any, desired_goal: Any, distance_threshold: float) -> FloatArray:
    """1.0 (float32) where the achieved goal is strictly within ``distance_threshold`` of the desired one."""
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


def _mujoco_gl_choice() -> tuple[str, str | None]:
    """The OpenGL backend mujoco chose when first imported, and the MUJOCO_GL it read then (None: unknown)."""
    module = sys.modules.get("mujoco.rendering.classic.gl_context") or sys.modules.get("mujoco.gl_context")
    read = getattr(module, "_MUJOCO_GL", None)
    context = getattr(module, "GLContext", None)
    if context is None:
        return "unknown", read
    if context.__name__ == "_MissingGLContext":  # its backend's libraries failed to import
        return f"none (the {read or 'default'!r} backend failed to load)", read
    return context.__module__.rsplit(".", 1)[-1], read


def _no_gl_context_message(exc: Exception) -> str:
    """Why the offscreen renderer failed: the backend mujoco chose, why it chose it, how to change it."""
    backend, read = _mujoco_gl_choice()
    now = os.environ.get("MUJOCO_GL")
    head = f"MuJoCo could not create an offscreen OpenGL context with its {backend} backend: {exc}. "
    fix = (
        "Fix: set MUJOCO_GL=egl (or MUJOCO_GL=osmesa) before anything imports mujoco, in the shell "
        "(MUJOCO_GL=egl python ...) or at the very top of the script, with EGL (libegl1) or OSMesa "
        "(libosmesa6) installed."
    )
    value = read if read is not None else now  # what mujoco read (or, if unknown, what is set now)
    was = "unset" if not value else repr(value)
    if _MUJOCO_IMPORTED_FIRST and read is not None and read != (now or "").lower().strip():
        return head + (
            f"mujoco chose {backend} when it was first imported, before goalenvs, with MUJOCO_GL {was}; "
            f"MUJOCO_GL={now!r}, which goalenvs sets on machines without a display, came after that "
            "choice and has no effect in this process. " + fix
        )
    return head + f"mujoco chose it when first imported, with MUJOCO_GL {was}. " + fix


def fetch_assets_dir() -> Path:
    """Folder of Gymnasium-Robotics' Fetch MJCF files, found without importing gymnasium_robotics."""
    spec = importlib.util.find_spec("gymnasium_robotics")
    if spec is None or not spec.submodule_search_locations:
        raise error.DependencyNotInstalled(
            "the Fetch tasks use the MJCF assets shipped with gymnasium-robotics, which is not installed; "
            + _INSTALL_FETCH
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "envs" / "assets" / "fetch"
    if not folder.is_dir():
        raise error.DependencyNotInstalled(
            f"gymnasium-robotics is installed but has no Fetch assets at {folder}; "
            "reinstall gymnasium-robotics"
        )
    return folder


# ---------------------------------------------------------------------------------------------
# Argument validation
# ---------------------------------------------------------------------------------------------


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(
            f"{name} must be a bool (True or False), got {value!r} of type {type(value).__name__}"
        )
    return bool(value)


def _check_float(name: str, value: Any, *, low: float | None = None, strict: bool = False) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r} of type {type(value).__name__}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (x <= low if strict else x < low):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low}, got {value!r}")
    return x


def _check_offset(value: Any) -> float | FloatArray:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return _check_float("target_offset", value)
    arr = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else None
    if arr is None or arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ValueError(
            f"target_offset must be a finite number or 3 finite numbers (x, y, z), got {value!r}"
        )
    return arr


# ---------------------------------------------------------------------------------------------
# The environment
# ---------------------------------------------------------------------------------------------


class FetchEnv(GoalEnv[dict[str, np.ndarray], np.ndarray]):
    """The Fetch robot arm on a table: reach a point, or push, slide or pick-and-place a block.

    ## Description
    The 7-DoF Fetch arm with a two-finger gripper, from "Multi-Goal Reinforcement Learning:
    Challenging Robotics Environments and Request for Research" (Plappert et al., 2018). The gripper
    is moved by a mocap body welded to it; MuJoCo's constraint solver does the inverse kinematics.
    Tasks (``task=``): ``"reach"`` (bring the gripper to a point), ``"push"`` (push a block to a point
    on the table), ``"slide"`` (hit a puck so it slides to a point out of reach on a long, slippery
    table), ``"pick_and_place"`` (carry a block to a point on the table or in the air). Same
    physics, observations, goals and rewards as Gymnasium-Robotics' ``Fetch*-v4``.

    ## Action Space
    ``Box(-1, 1, (4,), float32)``: displacement of the gripper target in x, y, z (scaled by 0.05 m
    per step), and the gripper opening command (ignored when ``block_gripper``; only
    ``pick_and_place`` has finger actuators). Actions outside the box are clipped.

    ## Observation Space
    ``Dict`` with float64 ``Box(-inf, inf)`` entries:

    * ``observation`` (25,) with an object, (10,) for reach: gripper position (3), object position
      (3), object position relative to the gripper (3), finger joint positions (right, left) (2),
      object Euler angles (3), object linear velocity relative to the gripper (3), object angular
      velocity (3), gripper linear velocity (3), finger joint velocities (2). Reach keeps only the
      gripper position, finger positions, gripper velocity and finger velocities. Velocities are
      multiplied by the step duration ``n_substeps * 0.002`` s (so they are displacements per step).
    * ``achieved_goal`` (3,): gripper position (reach) or object position.
    * ``desired_goal`` (3,): the target position.

    ## Rewards
    ``reward_type="sparse"`` (default): ``-1.0`` while the distance from achieved to desired goal
    exceeds ``distance_threshold``, else ``0.0`` (float32). ``"dense"``: minus that distance.
    ``info["is_success"]`` is ``1.0`` (float32) when the distance is below the threshold.
    ``compute_reward`` is pure and vectorized over any leading batch shape.

    ## Starting State
    At construction the joints take ``initial_qpos`` and the gripper is driven 10 steps towards a
    fixed point ``gripper_extra_height`` above the table; that state is the start of every episode.
    ``reset`` places the object uniformly within ``obj_range`` of the gripper in x-y (but at least
    0.1 m away) and draws the goal uniformly within ``target_range`` of the gripper start (plus
    ``target_offset``); with an object the goal lies on the table, or, when ``target_in_the_air``,
    with probability 1/2 up to 0.45 m above it.

    ## Episode End
    Never terminated (a continuing task). Truncated after ``max_steps`` steps (default 50, as the
    ``TimeLimit`` of Gymnasium-Robotics' ids; ``None``: never). The env counts the steps itself and
    reports them in ``info["elapsed_steps"]``, so that ``compute_truncated`` agrees with ``step``.

    ## Arguments
    ``task`` (``"reach"``, ``"push"``, ``"slide"``, ``"pick_and_place"``); ``reward_type``
    (``"sparse"`` / ``"dense"``); each of ``distance_threshold``, ``target_in_the_air``,
    ``target_offset``, ``obj_range``, ``target_range``, ``gripper_extra_height``, ``block_gripper``,
    ``n_substeps``, ``initial_qpos`` (joint name -> value(s), replaces the task's dict) defaults to
    the task's Gymnasium-Robotics value when ``None``; ``max_steps`` (episode length, default 50);
    ``render_mode`` (``None`` or ``"rgb_array"``),
    ``width``, ``height`` (of rendered frames, default 480).

    ## Version History
    * v0: first goalenvs version; matches Gymnasium-Robotics 1.4.2 ``Fetch*-v4`` step for step
      (same seed, same actions -> same observations), on MuJoCo 3.x and 4.x. Unlike there, rendering
      does not call ``mj_forward``, so rendering an episode does not change its trajectory.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(
        self,
        task: str = "reach",
        reward_type: str = "sparse",
        *,
        distance_threshold: float | None = None,
        target_in_the_air: bool | None = None,
        target_offset: float | Any | None = None,
        obj_range: float | None = None,
        target_range: float | None = None,
        gripper_extra_height: float | None = None,
        block_gripper: bool | None = None,
        n_substeps: int | None = None,
        initial_qpos: Mapping[str, Any] | None = None,
        max_steps: int | None = 50,
        render_mode: str | None = None,
        width: int = _DEFAULT_SIZE,
        height: int = _DEFAULT_SIZE,
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
        if reward_type not in REWARD_TYPES:
            raise ValueError(f"reward_type must be one of {list(REWARD_TYPES)}, got {reward_type!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        for name, size in (("width", width), ("height", height)):
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
                raise ValueError(f"{name} must be a positive int, got {size!r}")
        spec = TASKS[task]

        def pick(value: Any, default: Any) -> Any:
            return default if value is None else value

        self.task = task
        self.reward_type = reward_type
        self.has_object = spec.has_object
        self.distance_threshold = _check_float(
            "distance_threshold", pick(distance_threshold, spec.distance_threshold), low=0.0, strict=True
        )
        self.target_in_the_air = _check_bool(
            "target_in_the_air", pick(target_in_the_air, spec.target_in_the_air)
        )
        self.target_offset = _check_offset(pick(target_offset, spec.target_offset))
        self.obj_range = _check_float("obj_range", pick(obj_range, spec.obj_range), low=0.0)
        if self.has_object and self.obj_range < _MIN_OBJECT_GRIPPER_DIST:
            # The start position is redrawn until it is >= 0.1 m from the gripper: below 0.1 that
            # loop needs ever more draws, and below 0.1/sqrt(2) it never ends.
            raise ValueError(
                f"obj_range must be >= {_MIN_OBJECT_GRIPPER_DIST} for task {task!r} (the object starts at "
                f"least {_MIN_OBJECT_GRIPPER_DIST} m from the gripper), got {obj_range!r}"
            )
        self.target_range = _check_float("target_range", pick(target_range, spec.target_range), low=0.0)
        self.gripper_extra_height = _check_float(
            "gripper_extra_height", pick(gripper_extra_height, spec.gripper_extra_height)
        )
        self.block_gripper = _check_bool("block_gripper", pick(block_gripper, spec.block_gripper))
        n_sub = pick(n_substeps, spec.n_substeps)
        if isinstance(n_sub, bool) or not isinstance(n_sub, (int, np.integer)) or n_sub < 1:
            raise ValueError(f"n_substeps must be a positive int, got {n_substeps!r}")
        self.n_substeps = int(n_sub)
        qpos_init = pick(initial_qpos, spec.initial_qpos)
        if not isinstance(qpos_init, Mapping):
            raise TypeError(
                f"initial_qpos must be a dict of joint name -> value(s), got {type(qpos_init).__name__}"
            )
        if max_steps is not None and (
            isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1
        ):
            raise ValueError(f"max_steps must be a positive int or None (no time limit), got {max_steps!r}")
        self.max_steps = None if max_steps is None else int(max_steps)
        self._elapsed_steps = 0
        self.render_mode = render_mode
        self.width = int(width)
        self.height = int(height)

        self.model = mujoco.MjModel.from_xml_path(str(fetch_assets_dir() / spec.xml))
        self.data = mujoco.MjData(self.model)
        self.model.vis.global_.offwidth = self.width
        self.model.vis.global_.offheight = self.height
        self._resolve_ids()
        self._setup_start_state(qpos_init)

        self.dt = self.n_substeps * float(self.model.opt.timestep)
        self.metadata = {**self.metadata, "render_fps": int(np.round(1.0 / self.dt))}
        self.goal = np.zeros(3)
        self._renderer: Any = None
        self._camera: Any = None

        self.action_space = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self._act_low, self._act_high = self.action_space.low.copy(), self.action_space.high.copy()
        obs_dim = 25 if self.has_object else 10
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-np.inf, np.inf, shape=(obs_dim,), dtype=np.float64),
                "achieved_goal": spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float64),
                "desired_goal": spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float64),
            }
        )

    # --- set-up (names -> indices, once) -------------------------------------------------------

    def _name2id(self, kind: Any, name: str) -> int:
        idx = mujoco.mj_name2id(self.model, kind, name)
        if idx < 0:
            raise ValueError(f"the {self.task!r} model has no {kind.name[6:].lower()} named {name!r}")
        return int(idx)

    def _joint_qpos_slice(self, name: str) -> tuple[int, int]:
        jid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if jid < 0:
            names = [self.model.joint(i).name for i in range(self.model.njnt)]
            raise ValueError(
                f"initial_qpos names an unknown joint {name!r}; the {self.task!r} model has {names}"
            )
        # int() because MuJoCo >= 3.12 returns enum-typed values that do not compare with numpy ints.
        jtype = int(self.model.jnt_type[jid])
        width = {int(mujoco.mjtJoint.mjJNT_FREE): 7, int(mujoco.mjtJoint.mjJNT_BALL): 4}.get(jtype, 1)
        start = int(self.model.jnt_qposadr[jid])
        return start, start + width

    def _resolve_ids(self) -> None:
        m = self.model
        obj = mujoco.mjtObj
        self._grip_site = self._name2id(obj.mjOBJ_SITE, "robot0:grip")
        self._target_site = self._name2id(obj.mjOBJ_SITE, "target0")
        self._object_site = self._name2id(obj.mjOBJ_SITE, "object0") if self.has_object else -1
        self._object_qadr = self._joint_qpos_slice("object0:joint")[0] if self.has_object else -1
        # Finger order (right, left) is joint-id order, the order Gymnasium-Robotics observes them in.
        fingers = [
            self._name2id(obj.mjOBJ_JOINT, n)
            for n in ("robot0:r_gripper_finger_joint", "robot0:l_gripper_finger_joint")
        ]
        self._finger_qadr = np.array([m.jnt_qposadr[j] for j in fingers], dtype=np.intp)
        self._finger_dadr = np.array([m.jnt_dofadr[j] for j in fingers], dtype=np.intp)
        if np.any(np.diff(self._finger_qadr) != 1) or np.any(np.diff(self._finger_dadr) != 1):
            raise ValueError("the finger joints (right, left) must be adjacent in qpos and qvel")
        self._mocap = int(m.body_mocapid[self._name2id(obj.mjOBJ_BODY, "robot0:mocap")])
        # Every weld between a mocap body and a robot body: the mocap is re-anchored on the body each step.
        weld = int(mujoco.mjtEq.mjEQ_WELD)
        self._weld_rows = np.array([i for i in range(m.neq) if int(m.eq_type[i]) == weld], dtype=np.intp)
        pairs = []
        for i in self._weld_rows:
            b1, b2 = int(m.eq_obj1id[i]), int(m.eq_obj2id[i])
            if m.body_mocapid[b1] != -1:
                pairs.append((int(m.body_mocapid[b1]), b2))
            elif m.body_mocapid[b2] != -1:
                pairs.append((int(m.body_mocapid[b2]), b1))
        if len(pairs) != 1:
            raise ValueError(
                f"the {self.task!r} model must weld exactly one mocap body to the gripper, found {pairs}"
            )
        ((self._mocap_of_weld, self._welded_body),) = pairs
        # Finger actuators get the gripper command: position servos relative to the joint's position.
        n_act = min(int(m.nu), 2)
        self._act_ids = np.arange(n_act, dtype=np.intp)
        self._act_relative = np.array([m.actuator_biastype[i] != 0 for i in range(n_act)], dtype=bool)
        self._act_qadr = np.array(
            [m.jnt_qposadr[m.actuator_trnid[i, 0]] for i in range(n_act)], dtype=np.intp
        )
        self._act_all_relative = bool(np.all(self._act_relative))
        self._bind_views()

    def _bind_views(self) -> None:
        """Cache numpy views of the MjData rows a step touches.

        Every attribute access on MjData builds a new array object, and every numpy call costs about
        a microsecond, so the step works on these views (they alias MjData's memory for its lifetime).
        """
        d = self.data
        self._qpos, self._qvel, self._ctrl = d.qpos, d.qvel, d.ctrl
        self._site_xpos = d.site_xpos
        self._anchor_pos = d.xpos[self._welded_body]
        self._anchor_quat = d.xquat[self._welded_body]
        self._mocap_pos_row = d.mocap_pos[self._mocap_of_weld]
        self._mocap_quat_row = d.mocap_quat[self._mocap_of_weld]
        self._grip_xpos = d.site_xpos[self._grip_site]
        self._obj_xpos = d.site_xpos[self._object_site] if self.has_object else None
        self._obj_xmat = d.site_xmat[self._object_site] if self.has_object else None
        q0, v0 = int(self._finger_qadr[0]), int(self._finger_dadr[0])
        self._finger_q = d.qpos[q0 : q0 + 2]
        self._finger_v = d.qvel[v0 : v0 + 2]
        nv = self.model.nv
        self._jac = np.zeros((9 if self.has_object else 3, nv))
        self._jac_grip = self._jac[0:3]
        self._jac_obj_p = self._jac[3:6] if self.has_object else None
        self._jac_obj_r = self._jac[6:9] if self.has_object else None

    def _setup_start_state(self, initial_qpos: Mapping[str, Any]) -> None:
        m, d = self.model, self.data
        for name, value in initial_qpos.items():
            start, stop = self._joint_qpos_slice(name)
            arr = np.asarray(value, dtype=np.float64)
            if arr.size != stop - start or (stop - start > 1 and arr.shape != (stop - start,)):
                raise ValueError(
                    f"initial_qpos[{name!r}] must have {stop - start} value(s) for that joint, got {value!r}"
                )
            d.qpos[start:stop] = arr.reshape(-1)
        # Welds anchored at the body origins with identity relative pose, so the gripper takes the
        # mocap's pose exactly (the first 7 entries of eq_data: anchor, relative position, quat w).
        for i in self._weld_rows:
            m.eq_data[i, :7] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
        mujoco.mj_forward(m, d)
        mujoco.mj_forward(m, d)
        ox, oy, oz = _GRIPPER_SETUP_OFFSET
        d.mocap_pos[self._mocap] = (
            np.array([ox, oy, oz + self.gripper_extra_height]) + d.site_xpos[self._grip_site]
        )
        d.mocap_quat[self._mocap] = (1.0, 0.0, 1.0, 0.0)
        for _ in range(10):
            mujoco.mj_step(m, d, nstep=self.n_substeps)
        self.initial_gripper_xpos = d.site_xpos[self._grip_site].copy()
        self.height_offset = float(d.site_xpos[self._object_site][2]) if self.has_object else 0.0
        self._initial_time = float(d.time)
        self._initial_qpos = d.qpos.copy()
        self._initial_qvel = d.qvel.copy()

    # --- GoalEnv API ------------------------------------------------------------------------------

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Sparse (-1/0, float32) or dense (-distance) reward; pure, any leading batch shape."""
        # Read at call time (not cached) so that setting env.reward_type / distance_threshold takes effect.
        return fetch_reward(achieved_goal, desired_goal, self.distance_threshold, self.reward_type == "dense")

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Always False: reaching the goal does not end the episode (the goal must be held)."""
        return np.zeros(np.shape(achieved_goal)[:-1], dtype=bool)

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """True where ``info["elapsed_steps"] >= max_steps`` (never with ``max_steps=None``); batch shape.

        Where an info has no ``"elapsed_steps"`` (or is None) the answer is False, with a warning once.
        """
        batch_shape = np.shape(achieved_goal)[:-1]
        if self.max_steps is None:
            return np.zeros(batch_shape, dtype=bool)
        steps = info_values_or_default(
            info, "elapsed_steps", batch_shape, 0, NO_ELAPSED_STEPS.format(env="Fetch")
        )
        return steps >= self.max_steps

    def reset(  # type: ignore[override]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed, options=options)
        self._elapsed_steps = 0
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)  # also clears warm-start and mocap, as Gymnasium-Robotics does
        d.time = self._initial_time
        self._qpos[:] = self._initial_qpos
        self._qvel[:] = self._initial_qvel
        rng = self.np_random
        if self.has_object:
            center = self.initial_gripper_xpos[:2]
            xy = center
            while np.linalg.norm(xy - center) < _MIN_OBJECT_GRIPPER_DIST:
                xy = center + rng.uniform(-self.obj_range, self.obj_range, size=2)
            self._qpos[self._object_qadr : self._object_qadr + 2] = xy
        mujoco.mj_forward(m, d)
        self.goal = self._sample_goal(rng)
        return self._observe(), {}

    def _sample_goal(self, rng: np.random.Generator) -> FloatArray:
        goal = self.initial_gripper_xpos + rng.uniform(-self.target_range, self.target_range, size=3)
        if self.has_object:
            goal += self.target_offset
            goal[2] = self.height_offset
            if self.target_in_the_air and rng.uniform() < 0.5:
                goal[2] += rng.uniform(0, _AIR_TARGET_MAX_HEIGHT)
        return goal

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], Any, bool, bool, dict[str, Any]]:
        a = np.asarray(action)
        if a.shape != (4,):
            raise ValueError(f"action must have shape (4,) (dx, dy, dz, gripper), got shape {a.shape}")
        # np.clip against the float32 bounds (as two ufuncs: np.clip's Python wrapper costs more), then
        # scale in the clipped array's own dtype, so a float32 action rounds exactly as in
        # Gymnasium-Robotics.
        a = np.minimum(np.maximum(a, self._act_low), self._act_high)
        m, d = self.model, self.data
        # Re-anchor the mocap on the gripper, then offset it: the weld pulls the gripper after it.
        np.add(self._anchor_pos, a[:3] * _POS_ACTION_SCALE, out=self._mocap_pos_row)
        np.add(self._anchor_quat, _MOCAP_ROT_DELTA, out=self._mocap_quat_row)
        if self._act_ids.size:
            grip = 0.0 if self.block_gripper else float(a[3])
            if self._act_all_relative:  # position servos: the command is relative to the joint position
                self._ctrl[self._act_ids] = self._qpos[self._act_qadr] + grip
            else:
                self._ctrl[self._act_ids] = np.where(
                    self._act_relative, self._qpos[self._act_qadr] + grip, grip
                )
        mujoco.mj_step(m, d, nstep=self.n_substeps)
        if self.block_gripper:
            self._finger_q[:] = 0.0
            if _FORWARD_IS_STATELESS:
                mujoco.mj_kinematics(m, d)
                mujoco.mj_comPos(m, d)
            else:
                mujoco.mj_forward(m, d)
        obs = self._observe()
        achieved = obs["achieved_goal"]
        self._elapsed_steps += 1
        info = {
            "is_success": fetch_success(achieved, self.goal, self.distance_threshold),
            "elapsed_steps": self._elapsed_steps,
        }
        # A Python float (the value of compute_reward's float32/float64 scalar): Gymnasium-Robotics returns
        # np.float32, which stable-baselines3's check_env rejects as "not a float".
        reward = float(self.compute_reward(achieved, self.goal, info))
        truncated = self.max_steps is not None and self._elapsed_steps >= self.max_steps
        return obs, reward, False, truncated, info

    def _observe(self) -> dict[str, np.ndarray]:
        # The 25 numbers are assembled as Python floats and turned into one array at the end: each
        # numpy call on a 3-vector costs ~1 us, a float operation ~30 ns. IEEE arithmetic is the same
        # either way, so the values are bit-for-bit those of Gymnasium-Robotics' array expressions.
        m, d = self.model, self.data
        dt = self.dt
        mujoco.mj_jacSite(m, d, self._jac_grip, None, self._grip_site)
        gx, gy, gz = self._grip_xpos.tolist()
        f_r, f_l = self._finger_q.tolist()
        w_r, w_l = self._finger_v.tolist()
        if not self.has_object:
            gvx, gvy, gvz = [v * dt for v in np.dot(self._jac, self._qvel).tolist()]
            obs = np.array([gx, gy, gz, f_r, f_l, gvx, gvy, gvz, w_r * dt, w_l * dt])
            return {"observation": obs, "achieved_goal": obs[0:3].copy(), "desired_goal": self.goal.copy()}
        mujoco.mj_jacSite(m, d, self._jac_obj_p, self._jac_obj_r, self._object_site)
        # Site velocities as Jacobian @ qvel (one product for the three rows: gripper linear, object
        # linear, object angular), scaled to displacement per env step like Gymnasium-Robotics.
        gvx, gvy, gvz, ovx, ovy, ovz, orx, ory, orz = [v * dt for v in np.dot(self._jac, self._qvel).tolist()]
        ox, oy, oz = self._obj_xpos.tolist()
        ex, ey, ez = _euler_from_xmat(self._obj_xmat.tolist())
        obs = np.array(
            [
                gx, gy, gz,
                ox, oy, oz,
                ox - gx, oy - gy, oz - gz,
                f_r, f_l,
                ex, ey, ez,
                ovx - gvx, ovy - gvy, ovz - gvz,
                orx, ory, orz,
                gvx, gvy, gvz,
                w_r * dt, w_l * dt,
            ]
        )  # fmt: skip
        return {"observation": obs, "achieved_goal": obs[3:6].copy(), "desired_goal": self.goal.copy()}

    # --- rendering ---------------------------------------------------------------------------------

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        """An RGB frame (height, width, 3) from the default camera, with the goal shown as a red sphere."""
        if self.render_mode is None:
            gym.logger.warn(
                'render() was called without a render_mode; make the env with render_mode="rgb_array"'
            )
            return None
        if self._renderer is None:
            try:
                self._renderer = mujoco.Renderer(self.model, self.height, self.width)
            except Exception as exc:  # the OpenGL backend is chosen by MUJOCO_GL (egl, osmesa, glfw)
                raise error.DependencyNotInstalled(_no_gl_context_message(exc)) from exc
            cam = mujoco.MjvCamera()
            cam.type = mujoco.mjtCamera.mjCAMERA_FREE
            cam.distance = _DEFAULT_CAMERA["distance"]
            cam.azimuth = _DEFAULT_CAMERA["azimuth"]
            cam.elevation = _DEFAULT_CAMERA["elevation"]
            cam.lookat[:] = _DEFAULT_CAMERA["lookat"]
            self._camera = cam
        # Move the target marker without mj_forward (which would alter the next step's mocap anchor):
        # its body is static, so its world position is body position + site offset.
        body = self.model.site_bodyid[self._target_site]
        self.model.site_pos[self._target_site] = self.goal - self.data.xpos[body]
        self._site_xpos[self._target_site] = self.goal
        self._renderer.update_scene(self.data, camera=self._camera)
        return self._renderer.render()

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        super().close()

    # --- pickling: MjModel/MjData pickle themselves; the cached views and the renderer do not ------

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in _VIEW_ATTRS}
        state["_renderer"] = None
        state["_camera"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bind_views()
