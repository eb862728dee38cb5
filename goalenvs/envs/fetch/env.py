"""The Fetch task over N envs and its single env, step-for-step faithful to Gymnasium-Robotics v4.

:class:`FetchTask` is the family's :class:`~goalenvs.task.Task`: N envs as N ``MjData`` of one model
(:class:`FetchState`), whose physics steps in a pool of threads, each a contiguous chunk of envs
through all their substeps (``mj_step`` releases the GIL). :class:`FetchEnv` is its batch of one and
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

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from goalenvs.core import NO_ELAPSED_STEPS, info_values_or_default
from goalenvs.envs.fetch.assets import make_renderer
from goalenvs.envs.fetch.goals import distance_reward, distance_success, fetch_reward, goal_distance
from goalenvs.envs.fetch.settings import DEFAULT_SIZE, POS_ACTION_SCALE, FetchSettings
from goalenvs.envs.fetch.sim import FetchSim, FetchViews
from goalenvs.task import Task, TaskEnv, seed_generators
from goalenvs.vector import ConcurrentUseError

__all__ = ["ENV_DOC", "FetchAttributes", "FetchEnv", "FetchState", "FetchTask", "fetch_spaces"]

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


class FetchState:
    """N Fetch envs: one ``MjData`` each (env 0's is the one the start state was computed in, as a
    single env's), their numpy views, random generators, goals, observation vectors and step counts,
    and the thread pool that steps their physics in chunks (none with one thread)."""

    def __init__(self, sim: FetchSim, n: int) -> None:
        self.sim, self.n = sim, n
        self.data = (sim.data, *(mujoco.MjData(sim.model) for _ in range(n - 1)))
        self.views = [FetchViews(sim, d) for d in self.data]
        self.rngs: list[np.random.Generator] = [np.random.default_rng(0)] * n  # replaced by seeding
        self.goal = np.zeros((n, 3))
        self.obs = np.zeros((n, sim.obs_dim))
        self.steps = np.zeros(n, dtype=np.int64)
        self.renderer: Any = None
        self.camera: Any = None
        self.set_threads(1)

    def set_threads(self, num_threads: int) -> None:
        """Step the physics in ``num_threads`` contiguous chunks of envs (the caller's thread steps the
        first; the results do not depend on the number)."""
        self.num_threads = min(num_threads, self.n)
        bounds = np.linspace(0, self.n, self.num_threads + 1).round().astype(int).tolist()
        self.chunks = list(zip(bounds[:-1], bounds[1:], strict=True))
        self.pool: ThreadPoolExecutor | None = None
        if self.num_threads > 1:
            self.pool = ThreadPoolExecutor(self.num_threads - 1, thread_name_prefix="fetch-physics")

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None

    # MjModel/MjData pickle themselves and the views rebuild themselves; the pool and the renderer are
    # made anew.
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "pool": None, "renderer": None, "camera": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.set_threads(self.num_threads)


class FetchTask(Task):
    """One Fetch task (``settings.task``: reach, push, ...) with its settings: the functions both
    Fetch envs are built from.

    The goal functions read ``settings`` at call time, so an env's settings attribute set anew
    (``env.distance_threshold = 0.02``) takes effect at the next step and ``compute_reward``.
    """

    action_help = "4 numbers: dx, dy, dz, gripper, clipped to [-1, 1]"

    def __init__(self, settings: FetchSettings) -> None:
        self.settings = settings
        self.sim = FetchSim(settings)
        self._spaces = fetch_spaces(self.sim)
        self._act_low, self._act_high = self._spaces[1].low.copy(), self._spaces[1].high.copy()

    @property
    def observation_space(self) -> spaces.Dict:
        return self._spaces[0]

    @property
    def action_space(self) -> spaces.Box:
        return self._spaces[1]

    # ---- the goal functions ----------------------------------------------------------------------

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Sparse (-1/0, float32) or dense (-distance) reward; pure, any leading batch shape."""
        s = self.settings
        return fetch_reward(achieved_goal, desired_goal, s.distance_threshold, s.reward_type == "dense")

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Always False: reaching the goal does not end the episode (the goal must be held)."""
        return np.zeros(np.shape(achieved_goal)[:-1], dtype=bool)

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """True where ``info["elapsed_steps"] >= max_steps`` (never with ``max_steps=None``); batch shape.

        Where an info has no ``"elapsed_steps"`` (or is None) the answer is False, with a warning once.
        """
        batch_shape = np.shape(achieved_goal)[:-1]
        if self.settings.max_steps is None:
            return np.zeros(batch_shape, dtype=bool)
        steps = info_values_or_default(
            info, "elapsed_steps", batch_shape, 0, NO_ELAPSED_STEPS.format(env="Fetch")
        )
        return np.asarray(self.truncated_at(steps))

    def truncated_at(self, elapsed_steps: Any) -> Any:
        """Whether an episode ``elapsed_steps`` long (an int, or an int array) is over by time."""
        max_steps = self.settings.max_steps
        if max_steps is None:
            return np.zeros(np.shape(elapsed_steps), dtype=bool) if np.ndim(elapsed_steps) else False
        return elapsed_steps >= max_steps

    # ---- the task's part of the two envs ---------------------------------------------------------

    def min_bytes_per_env(self) -> int:
        """The arrays' estimate plus one ``MjData``: of its buffer and arena MuJoCo commits about
        0.75 MB per env stepped (measured on FetchPush, MuJoCo 3.x); counted here as half a MiB."""
        return super().min_bytes_per_env() + 2**19

    def new_state(self, n: int) -> FetchState:
        return FetchState(self.sim, n)

    def seed(self, state: FetchState, seeds: np.ndarray, envs: np.ndarray) -> None:
        seed_generators(state.rngs, seeds, envs)

    def reset(self, state: FetchState, envs: np.ndarray, options: dict[str, Any] | None) -> None:
        # Fetch takes no options (reset_option_keys is empty: the envs refuse any key before this).
        sim, s = self.sim, self.settings
        for i in envs.tolist():
            v, rng = state.views[i], state.rngs[i]
            sim.restart(v, rng, s.obj_range)
            state.goal[i] = sim.sample_goal(rng, s.target_range, s.target_offset, s.target_in_the_air)
            state.obs[i] = sim.observation(v)
        state.steps[envs] = 0

    def step(self, state: FetchState, actions: np.ndarray, skip: np.ndarray) -> None:
        # np.clip against the float32 bounds (as two ufuncs), then scale in the clipped array's own
        # dtype, so a float32 action rounds exactly as in Gymnasium-Robotics.
        a = np.minimum(np.maximum(actions, self._act_low), self._act_high)
        delta = a[:, :3] * POS_ACTION_SCALE
        grips = [0.0] * state.n if self.settings.block_gripper else a[:, 3].tolist()
        active = None
        if skip.size:
            active = np.ones(state.n, dtype=bool)
            active[skip] = False
        state.steps += 1
        chunks = state.chunks
        futures: list[Future[None]] = []
        if state.pool is not None:
            futures = [
                state.pool.submit(self._step_chunk, state, lo, hi, delta, grips, active)
                for lo, hi in chunks[1:]
            ]
        try:
            self._step_chunk(state, *chunks[0], delta, grips, active)
        finally:
            for future in futures:
                future.result()

    def _step_chunk(
        self,
        state: FetchState,
        lo: int,
        hi: int,
        delta: np.ndarray,
        grips: list[float],
        active: np.ndarray | None,
    ) -> None:
        """Envs ``lo`` to ``hi - 1``: act, integrate, observe (in a pool thread, or the caller's)."""
        sim, views, obs, block = self.sim, state.views, state.obs, self.settings.block_gripper
        for i in range(lo, hi):
            if active is not None and not active[i]:
                continue
            v = views[i]
            sim.act(v, delta[i], grips[i])
            sim.advance(v, block)
            obs[i] = sim.observation(v)

    def observe(self, state: FetchState) -> dict[str, np.ndarray]:
        obs = state.obs.copy()
        return {
            "observation": obs,
            "achieved_goal": obs[:, self.sim.achieved].copy(),
            "desired_goal": state.goal.copy(),
        }

    def score(self, state: FetchState, obs: dict[str, np.ndarray]) -> Any:
        s = self.settings
        # The distance once, for the reward and the success (through the functions compute_reward uses).
        d = goal_distance(obs["achieved_goal"], obs["desired_goal"])
        steps = state.steps.copy()
        info = {"is_success": distance_success(d, s.distance_threshold), "elapsed_steps": steps}
        reward = distance_reward(d, s.distance_threshold, s.reward_type == "dense")
        terminated = self.compute_terminated(obs["achieved_goal"], obs["desired_goal"], info)
        return info, reward, terminated, self.truncated_at(steps)

    def render(self, state: FetchState, env: int, render_mode: str | None) -> np.ndarray | None:
        """An RGB frame (height, width, 3) from the default camera, with the goal shown as a red sphere."""
        if render_mode is None:
            gym.logger.warn(
                'render() was called without a render_mode; make the env with render_mode="rgb_array"'
            )
            return None
        if state.renderer is None:
            state.renderer, state.camera = make_renderer(
                self.sim.model, self.settings.height, self.settings.width
            )
        return self.sim.draw(state.renderer, state.camera, state.views[env], state.goal[env])

    def close(self, state: FetchState) -> None:
        state.close()


def _setting(name: str) -> property:
    """The attribute of setting ``name``: reads it, and sets it anew through ``FetchSettings``'s checks."""

    def get(self: FetchAttributes) -> Any:
        return getattr(self._task.settings, name)

    def set_(self: FetchAttributes, value: Any) -> None:
        self._task.settings = dataclasses.replace(self._task.settings, **{name: value})

    return property(get, set_, doc=f"The ``{name}`` setting (see the class docstring).")


class FetchAttributes:
    """A Fetch env's public attributes, single or vector: every setting (setting one re-validates it
    and takes effect where the task reads it at step time) and the model's facts."""

    _task: Any  # the env's FetchTask (Any: TaskGoalFunctions declares it a Task)

    task = _setting("task")
    reward_type = _setting("reward_type")
    distance_threshold = _setting("distance_threshold")
    target_in_the_air = _setting("target_in_the_air")
    target_offset = _setting("target_offset")
    obj_range = _setting("obj_range")
    target_range = _setting("target_range")
    gripper_extra_height = _setting("gripper_extra_height")
    block_gripper = _setting("block_gripper")
    n_substeps = _setting("n_substeps")
    initial_qpos = _setting("initial_qpos")
    max_steps = _setting("max_steps")
    width = _setting("width")
    height = _setting("height")

    @property
    def settings(self) -> FetchSettings:
        """All the settings at once, typed (a frozen dataclass; set them one by one as attributes)."""
        return self._task.settings

    @property
    def has_object(self) -> bool:
        return self._task.settings.has_object

    @property
    def model(self) -> Any:
        return self._task.sim.model

    @property
    def initial_gripper_xpos(self) -> np.ndarray:
        """The gripper's position (m) at the start of every episode."""
        return self._task.sim.initial_gripper_xpos

    @property
    def height_offset(self) -> float:
        """The object's resting height on the table (m; 0.0 for reach)."""
        return self._task.sim.height_offset

    @property
    def dt(self) -> float:
        """One env step, in seconds (``n_substeps`` physics steps)."""
        return self._task.sim.dt


class FetchEnv(FetchAttributes, TaskEnv):
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
        self.metadata = {**self.metadata, "render_fps": int(np.round(1.0 / self.dt))}
        # Two threads stepping one MjData crash MuJoCo (a segfault): a second thread is told at once.
        self._busy = threading.Lock()

    @property
    def data(self) -> Any:
        """The env's ``MjData``."""
        return self._state.data[0]

    @property
    def goal(self) -> np.ndarray:
        """The goal (3,), a view: writing it (or setting it anew) steers the task from the next step."""
        return self._state.goal[0]

    @goal.setter
    def goal(self, value: Any) -> None:
        self._state.goal[0] = value

    @property
    def _views(self) -> FetchViews:
        """The views of the env's ``MjData`` (benchmarks/bench_fetch.py pins the fingers through them)."""
        return self._state.views[0]

    @property
    def _welded_body(self) -> int:
        """Index of the body the mocap is welded to (the golden-trajectory tests set its pose)."""
        return self._task.sim.welded_body

    def _claim(self, method: str) -> None:
        """Take the env for ``method`` (release with ``self._busy.release()``) or raise if a thread has it."""
        if not self._busy.acquire(False):
            raise ConcurrentUseError(
                f"FetchEnv.{method} called from two threads at once; one env is not thread-safe "
                f"(MuJoCo would crash): give each thread its own"
            )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        self._claim("reset")
        try:
            return super().reset(seed=seed, options=options)
        finally:
            self._busy.release()

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], Any, bool, bool, dict[str, Any]]:
        self._claim("step")
        try:
            return super().step(action)
        finally:
            self._busy.release()

    def render(self) -> np.ndarray | None:
        """An RGB frame (height, width, 3) from the default camera, with the goal shown as a red sphere."""
        if self.render_mode is None:
            return super().render()
        self._claim("render")
        try:
            return super().render()
        finally:
            self._busy.release()

    def close(self) -> None:
        self._claim("close")
        try:
            super().close()
        finally:
            self._busy.release()

    # The lock does not pickle (the copy gets its own, free).
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_busy"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._busy = threading.Lock()
