"""The Fetch env: one Fetch task on MuJoCo, step-for-step faithful to Gymnasium-Robotics v4.

One class, :class:`FetchEnv`, runs all four tasks; the task and every knob of Gymnasium-Robotics'
Fetch family (reward type, thresholds, ranges, gripper height, ...) are validated constructor
arguments.

Why our own implementation: Gymnasium-Robotics 1.4.2 crashes on MuJoCo >= 3.12 (its
``set_joint_qpos`` compares a MuJoCo enum with a numpy integer), and on older MuJoCo it spends a
third of every step on name lookups and Python glue. Here every name is resolved to an index once
(:class:`goalenvs.envs.fetch.sim.FetchSim`) and the step touches only cached numpy views of ``MjData``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs._util import check_render_mode
from goalenvs.core import NO_ELAPSED_STEPS, GoalEnv, info_values_or_default
from goalenvs.envs._checks import check_finite_action
from goalenvs.envs.fetch.assets import make_renderer
from goalenvs.envs.fetch.sim import FetchSim, FetchViews
from goalenvs.envs.fetch.task import (
    DEFAULT_SIZE,
    POS_ACTION_SCALE,
    FetchSettings,
    fetch_reward,
    fetch_settings,
    fetch_success,
)
from goalenvs.vector import ConcurrentUseError

__all__ = ["ENV_DOC", "FetchEnv", "FetchGoalFunctions", "fetch_spaces"]

_ACTION = "4 numbers: dx, dy, dz, gripper, clipped to [-1, 1]"

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


def fetch_spaces(sim: FetchSim) -> tuple[spaces.Dict, spaces.Box]:
    """The observation and action spaces of one Fetch env of ``sim``'s task."""
    box = spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float64)
    observation_space = spaces.Dict(
        {
            "observation": spaces.Box(-np.inf, np.inf, shape=(sim.obs_dim,), dtype=np.float64),
            "achieved_goal": box,
            "desired_goal": box,
        }
    )
    return observation_space, spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)


class FetchGoalFunctions:
    """``compute_reward`` / ``compute_terminated`` / ``compute_truncated`` of a Fetch env (single or vector).

    They read ``reward_type``, ``distance_threshold`` and ``max_steps`` at call time (not cached), so
    setting those attributes on the env takes effect.
    """

    reward_type: str
    distance_threshold: float
    max_steps: int | None

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Sparse (-1/0, float32) or dense (-distance) reward; pure, any leading batch shape."""
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

    def _apply_settings(self, settings: FetchSettings, sim: FetchSim) -> None:
        """The env's public attributes, from its validated arguments and its model."""
        self.task = settings.task
        self.reward_type = settings.reward_type
        self.has_object = settings.has_object
        self.distance_threshold = settings.distance_threshold
        self.target_in_the_air = settings.target_in_the_air
        self.target_offset = settings.target_offset
        self.obj_range = settings.obj_range
        self.target_range = settings.target_range
        self.gripper_extra_height = settings.gripper_extra_height
        self.block_gripper = settings.block_gripper
        self.n_substeps = settings.n_substeps
        self.max_steps = settings.max_steps
        self.width = settings.width
        self.height = settings.height
        self.model = sim.model
        self.initial_gripper_xpos = sim.initial_gripper_xpos
        self.height_offset = sim.height_offset
        self.dt = sim.dt


class FetchEnv(FetchGoalFunctions, GoalEnv[dict[str, np.ndarray], np.ndarray]):
    __doc__ = (
        "The Fetch robot arm on a table: reach a point, or push, slide or pick-and-place a block.\n" + ENV_DOC
    )

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
        width: int = DEFAULT_SIZE,
        height: int = DEFAULT_SIZE,
    ) -> None:
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        settings = fetch_settings(
            task,
            reward_type,
            distance_threshold=distance_threshold,
            target_in_the_air=target_in_the_air,
            target_offset=target_offset,
            obj_range=obj_range,
            target_range=target_range,
            gripper_extra_height=gripper_extra_height,
            block_gripper=block_gripper,
            n_substeps=n_substeps,
            initial_qpos=initial_qpos,
            max_steps=max_steps,
            width=width,
            height=height,
        )
        self._sim = sim = FetchSim(settings)
        self._apply_settings(settings, sim)
        self.data = sim.data
        self._views = FetchViews(sim, sim.data)
        self._elapsed_steps = 0
        self.metadata = {**self.metadata, "render_fps": int(np.round(1.0 / self.dt))}
        self.goal = np.zeros(3)
        self._renderer: Any = None
        self._camera: Any = None
        observation_space, self.action_space = fetch_spaces(sim)
        # Gymnasium types a Dict space as a space of dicts of spaces, not of the arrays it holds.
        self.observation_space = observation_space  # type: ignore[assignment]
        self._act_low, self._act_high = self.action_space.low.copy(), self.action_space.high.copy()
        # Two threads stepping one MjData crash MuJoCo (a segfault): a second thread is told at once.
        self._busy = threading.Lock()

    def _claim(self, method: str) -> None:
        """Take the env for ``method`` (release with ``self._busy.release()``) or raise if a thread has it."""
        if not self._busy.acquire(False):
            raise ConcurrentUseError(
                f"FetchEnv.{method} called from two threads at once; one env is not thread-safe "
                f"(MuJoCo would crash): give each thread its own"
            )

    @property
    def _welded_body(self) -> int:
        """Index of the body the mocap is welded to (the golden-trajectory tests set its pose)."""
        return self._sim.welded_body

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        self._claim("reset")
        try:
            super().reset(seed=seed, options=options)
            self._elapsed_steps = 0
            rng = self.np_random
            self._sim.restart(self._views, rng, self.obj_range)
            self.goal = self._sim.sample_goal(
                rng, self.target_range, self.target_offset, self.target_in_the_air
            )
            return self._observe(), {}
        finally:
            self._busy.release()

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], Any, bool, bool, dict[str, Any]]:
        self._claim("step")
        try:
            return self._step(action)
        finally:
            self._busy.release()

    def _step(self, action: Any) -> tuple[dict[str, np.ndarray], Any, bool, bool, dict[str, Any]]:
        a = np.asarray(action)
        if a.shape != (4,):
            raise ValueError(f"action must have shape (4,) (dx, dy, dz, gripper), got shape {a.shape}")
        check_finite_action("action", a, _ACTION)
        # np.clip against the float32 bounds (as two ufuncs: np.clip's Python wrapper costs more), then
        # scale in the clipped array's own dtype, so a float32 action rounds exactly as in
        # Gymnasium-Robotics.
        a = np.minimum(np.maximum(a, self._act_low), self._act_high)
        sim, v = self._sim, self._views
        sim.act(v, a[:3] * POS_ACTION_SCALE, 0.0 if self.block_gripper else float(a[3]))
        sim.advance(v, self.block_gripper)
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
        obs = np.array(self._sim.observation(self._views))
        return {
            "observation": obs,
            "achieved_goal": obs[self._sim.achieved].copy(),
            "desired_goal": self.goal.copy(),
        }

    def render(self) -> np.ndarray | None:
        """An RGB frame (height, width, 3) from the default camera, with the goal shown as a red sphere."""
        if self.render_mode is None:
            gym.logger.warn(
                'render() was called without a render_mode; make the env with render_mode="rgb_array"'
            )
            return None
        self._claim("render")
        try:
            if self._renderer is None:
                self._renderer, self._camera = make_renderer(self.model, self.height, self.width)
            return self._sim.draw(self._renderer, self._camera, self._views, self.goal)
        finally:
            self._busy.release()

    def close(self) -> None:
        self._claim("close")
        try:
            if self._renderer is not None:
                self._renderer.close()
                self._renderer = None
            super().close()
        finally:
            self._busy.release()

    # MjModel/MjData pickle themselves and the views rebuild themselves; the renderer and the lock do
    # not pickle (the copy gets its own lock, free).
    def __getstate__(self) -> dict[str, Any]:
        state = {**self.__dict__, "_renderer": None, "_camera": None}
        del state["_busy"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._busy = threading.Lock()
