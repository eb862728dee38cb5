"""The Fetch task and its single env, step-for-step faithful to Gymnasium-Robotics v4.

:class:`FetchTask` is the family's :class:`~goalenvs.envs.mujoco_task.MujocoTask`: N envs as N
``MjData`` of one model, stepped in a pool of threads (the MuJoCo families' shared machinery, see
:mod:`goalenvs.envs.mujoco_task`). :class:`FetchEnv` is its batch of one and
:class:`~goalenvs.envs.fetch.vector.FetchVectorEnv` its batch of N, so env ``i`` of a vector env
seeded ``s`` is the single env seeded ``s + i``, bit for bit, whatever the number of threads. One
class runs all four tasks: ``task=`` picks one, and every knob of Gymnasium-Robotics' Fetch family
(reward type, thresholds, ranges, gripper height, ...) is a keyword argument, validated by
``FetchSettings``.

Why our own implementation: Gymnasium-Robotics 1.4.2 crashes on MuJoCo >= 3.12 (its
``set_joint_qpos`` compares a MuJoCo enum with a numpy integer), and on older MuJoCo it spends a
third of every step on name lookups and Python glue. Here every name is resolved to an index once
(:class:`goalenvs.envs.fetch.sim.FetchSim`) and the step touches only cached numpy views of ``MjData``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from goalenvs.envs.fetch.settings import DEFAULT_SIZE, POS_ACTION_SCALE, FetchSettings
from goalenvs.envs.fetch.sim import FetchSim, FetchViews
from goalenvs.envs.goal_functions import fetch_reward
from goalenvs.envs.mujoco_assets import make_renderer
from goalenvs.envs.mujoco_task import (
    MujocoAttributes,
    MujocoEnv,
    MujocoState,
    MujocoTask,
    setting_property,
)

__all__ = ["ENV_DOC", "FetchAttributes", "FetchEnv", "FetchTask"]

#: The description of the Fetch envs shared by FetchEnv's and FetchVectorEnv's docstrings.
ENV_DOC = """

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
    ``pick_and_place`` has finger actuators). Actions outside the box are clipped. An action with a
    NaN or infinite entry raises ``ValueError`` before anything moves (clipping passes NaN on, and
    MuJoCo would reset the arm mid-episode), so the env can go on with the next good action.

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
    ``compute_reward`` is pure and vectorized over any leading batch shape. A NaN distance (a NaN
    goal; inf - inf) is never a success: sparse reward ``-1.0``, ``is_success`` ``0.0``; the dense
    reward is then NaN.

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
    Validated by ``FetchSettings``; ``None`` means the task's Gymnasium-Robotics v4 value.

    * ``task``: ``"reach"`` (default), ``"push"``, ``"slide"`` or ``"pick_and_place"``.
    * ``reward_type``: ``"sparse"`` (default) or ``"dense"``.
    * ``distance_threshold`` (m, > 0; 0.05): the success radius.
    * ``target_in_the_air`` (bool; True for reach and pick-and-place): goals may lie above the table.
    * ``target_offset`` (m, a number or x, y, z; slide: (0.4, 0, 0)): added to the goal's centre.
    * ``obj_range`` (m, >= 0.1 with an object; 0.15, slide 0.1): the object's start range.
    * ``target_range`` (m, >= 0; 0.15, slide 0.3): the goal's range.
    * ``gripper_extra_height`` (m; 0.2 reach and pick-and-place, 0 push, -0.02 slide).
    * ``block_gripper`` (bool; False only for pick-and-place): fingers held shut.
    * ``n_substeps`` (int >= 1; 20): physics steps of 0.002 s per env step.
    * ``initial_qpos`` (joint name -> value(s)): replaces the task's start joint positions.
    * ``max_steps`` (int >= 1, default 50; ``None``: never truncated): episode length.
    * ``width``, ``height`` (int >= 1, default 480): of rendered frames.
    * ``render_mode``: ``None`` or ``"rgb_array"``.

    Each setting is also an attribute (``env.distance_threshold``); setting one re-validates it and
    takes effect where the task reads it at step time.

    ## Version History
    * v0: first goalenvs version; matches Gymnasium-Robotics 1.4.2 ``Fetch*-v4`` step for step
      (same seed, same actions -> same observations), on MuJoCo 3.x and 4.x. Unlike there, rendering
      does not call ``mj_forward``, so rendering an episode does not change its trajectory.
"""


class FetchTask(MujocoTask):
    """One Fetch task (``settings.task``: reach, push, ...) with its settings: the functions both
    Fetch envs are built from (the state, the threads, the scoring and the time limit are
    :class:`~goalenvs.envs.mujoco_task.MujocoTask`'s).

    The goal functions read ``settings`` at call time, so an env's settings attribute set anew
    (``env.distance_threshold = 0.02``) takes effect at the next step and ``compute_reward``.
    """

    action_help = "4 numbers: dx, dy, dz, gripper, clipped to [-1, 1]"
    family = "Fetch"

    def __init__(self, settings: FetchSettings) -> None:
        super().__init__(settings=settings, sim=FetchSim(settings), views=FetchViews, action_dim=4)

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Sparse (-1/0, float32) or dense (-distance) reward; pure, any leading batch shape."""
        s = self.settings
        return fetch_reward(achieved_goal, desired_goal, s.distance_threshold, s.reward_type == "dense")

    def restart(self, v: FetchViews, rng: np.random.Generator) -> np.ndarray:
        s = self.settings
        self.sim.restart(v, rng, s.obj_range)
        return self.sim.sample_goal(rng, s.target_range, s.target_offset, s.target_in_the_air)

    def controls(self, actions: np.ndarray) -> tuple[np.ndarray, list[float]]:
        """The gripper displacements ``(n, 3)`` and finger commands (0 with ``block_gripper``).

        Clipped against the float32 bounds, then scaled in the clipped array's own dtype, so a float32
        action rounds exactly as in Gymnasium-Robotics."""
        a = self.clip(actions)
        grips = [0.0] * len(a) if self.settings.block_gripper else a[:, 3].tolist()
        return a[:, :3] * POS_ACTION_SCALE, grips

    def advance_env(self, v: FetchViews, i: int, controls: tuple[np.ndarray, list[float]]) -> None:
        delta, grips = controls
        self.sim.act(v, delta[i], grips[i])
        self.sim.advance(v, self.settings.block_gripper)

    def observe_env(self, v: FetchViews, out: np.ndarray) -> None:
        out[:] = self.sim.observation(v)

    def new_renderer(self) -> tuple[Any, Any]:
        return make_renderer(self.sim.model, self.settings.height, self.settings.width)

    def draw(self, state: MujocoState, env: int) -> np.ndarray:
        """Env ``env``'s frame from the default camera, with the goal shown as a red sphere."""
        return self.sim.draw(state.renderer, state.camera, state.views[env], state.goal[env])


class FetchAttributes(MujocoAttributes):
    """A Fetch env's public attributes, single or vector: every setting (setting one re-validates it
    and takes effect where the task reads it at step time) and the model's facts."""

    task = setting_property("task")
    reward_type = setting_property("reward_type")
    distance_threshold = setting_property("distance_threshold")
    target_in_the_air = setting_property("target_in_the_air")
    target_offset = setting_property("target_offset")
    obj_range = setting_property("obj_range")
    target_range = setting_property("target_range")
    gripper_extra_height = setting_property("gripper_extra_height")
    block_gripper = setting_property("block_gripper")
    n_substeps = setting_property("n_substeps")
    initial_qpos = setting_property("initial_qpos")
    max_steps = setting_property("max_steps")
    width = setting_property("width")
    height = setting_property("height")

    @property
    def has_object(self) -> bool:
        return self._task.settings.has_object

    @property
    def initial_gripper_xpos(self) -> np.ndarray:
        """The gripper's position (m) at the start of every episode."""
        return self._task.sim.initial_gripper_xpos

    @property
    def height_offset(self) -> float:
        """The object's resting height on the table (m; 0.0 for reach)."""
        return self._task.sim.height_offset


class FetchEnv(FetchAttributes, MujocoEnv):
    __doc__ = (
        "The Fetch robot arm on a table: reach a point, or push, slide or pick-and-place a block.\n" + ENV_DOC
    )

    def __init__(
        self,
        task: str = "reach",
        reward_type: str = "sparse",
        *,
        distance_threshold: float | None = None,
        target_in_the_air: bool | None = None,
        target_offset: float | Sequence[float] | None = None,
        obj_range: float | None = None,
        target_range: float | None = None,
        gripper_extra_height: float | None = None,
        block_gripper: bool | None = None,
        n_substeps: int | None = None,
        initial_qpos: Mapping[str, Any] | None = None,
        max_steps: int | None = 50,
        width: int = DEFAULT_SIZE,
        height: int = DEFAULT_SIZE,
        render_mode: str | None = None,
    ) -> None:
        settings = FetchSettings(
            task,
            reward_type,
            distance_threshold=distance_threshold,  # type: ignore[arg-type]  # None: the task's
            target_in_the_air=target_in_the_air,  # type: ignore[arg-type]
            target_offset=target_offset,  # type: ignore[arg-type]
            obj_range=obj_range,  # type: ignore[arg-type]
            target_range=target_range,  # type: ignore[arg-type]
            gripper_extra_height=gripper_extra_height,  # type: ignore[arg-type]
            block_gripper=block_gripper,  # type: ignore[arg-type]
            n_substeps=n_substeps,  # type: ignore[arg-type]
            initial_qpos=initial_qpos,  # type: ignore[arg-type]
            max_steps=max_steps,
            width=width,
            height=height,
        )
        self._init_task(FetchTask(settings), render_mode)

    @property
    def _views(self) -> FetchViews:
        """The views of the env's ``MjData`` (benchmarks/bench_fetch.py pins the fingers through them)."""
        return self._state.views[0]

    @property
    def _welded_body(self) -> int:
        """Index of the body the mocap is welded to (the golden-trajectory tests set its pose)."""
        return self._task.sim.welded_body
