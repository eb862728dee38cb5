"""What the MuJoCo families (Fetch, the Shadow hand) share: the task over N ``MjData`` stepped in
threads, its single env and its vector env.

:class:`MujocoTask` is a :class:`~goalenvs.task.Task` over :class:`MujocoState`: N envs as N
``MjData`` of one model, whose physics steps in a pool of threads, each a contiguous chunk of envs
through all their substeps (``mj_step`` releases the GIL). A family's task subclasses it and writes
only what is its own: the goal reward, how an episode starts (:meth:`MujocoTask.restart`), how an
action becomes controls and moves one env (:meth:`MujocoTask.controls`,
:meth:`MujocoTask.advance_env`), one env's observation vector (:meth:`MujocoTask.observe_env`) and its
frame (:meth:`MujocoTask.draw`). Every family's goal is a slice of the observation vector
(``sim.achieved``), scored by the distance functions of :mod:`goalenvs.envs.goal_functions`.

:class:`MujocoEnv` is the batch of one (with a lock: two threads stepping one ``MjData`` crash
MuJoCo) and :class:`MujocoVectorEnv` the batch of N, so env ``i`` of a vector env seeded ``s`` is the
single env seeded ``s + i``, bit for bit, whatever the number of threads.
"""

from __future__ import annotations

# First, and for that alone: it sets the OpenGL backend default before anything imports mujoco.
from goalenvs.envs.mujoco_assets import mujoco  # noqa: F401  # isort: skip

import copy
import dataclasses
import os
import threading
from abc import abstractmethod
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from goalenvs._util import check_int
from goalenvs.core import NO_ELAPSED_STEPS, info_values_or_default
from goalenvs.envs.goal_functions import distance_reward, distance_success, goal_distance
from goalenvs.task import Task, TaskEnv, seed_generators
from goalenvs.vector import ConcurrentUseError, NativeVectorEnv

__all__ = [
    "MujocoAttributes",
    "MujocoEnv",
    "MujocoState",
    "MujocoTask",
    "MujocoVectorEnv",
    "goal_spaces",
    "setting_property",
]


def goal_spaces(obs_dim: int, goal_dim: int, action_dim: int) -> tuple[spaces.Dict, spaces.Box]:
    """One env's observation space (float64 ``observation`` (obs_dim,), ``achieved_goal`` and
    ``desired_goal`` (goal_dim,), unbounded) and action space (float32 in [-1, 1], (action_dim,))."""
    goal = spaces.Box(-np.inf, np.inf, shape=(goal_dim,), dtype=np.float64)
    observation_space = spaces.Dict(
        {
            "observation": spaces.Box(-np.inf, np.inf, shape=(obs_dim,), dtype=np.float64),
            "achieved_goal": goal,
            "desired_goal": goal,
        }
    )
    return observation_space, spaces.Box(-1.0, 1.0, shape=(action_dim,), dtype=np.float32)


class MujocoState:
    """N envs of one MuJoCo model: one ``MjData`` each (env 0's is ``sim.data``, the one the start state
    was computed in, as a single env's; the others copies of it), their numpy views (``views(sim, data)``), random generators,
    goals (``goal_dim`` numbers), observation vectors and step counts, and the thread pool that steps
    their physics in chunks (none with one thread)."""

    def __init__(self, sim: Any, n: int, *, views: Callable[[Any, Any], Any], goal_dim: int) -> None:
        self.sim, self.n = sim, n
        # The other envs start as copies of it: every MjData an env gets holds what the start state's
        # set-up left there (on MuJoCo < 3.3.6 mj_forward also writes the solver's warm start, which a
        # family that keeps it across resets, as the hand's manipulate tasks do, would otherwise lose).
        self.data = (sim.data, *(copy.copy(sim.data) for _ in range(n - 1)))
        self.views = [views(sim, d) for d in self.data]
        self.rngs: list[np.random.Generator] = [np.random.default_rng(0)] * n  # replaced by seeding
        self.goal = np.zeros((n, goal_dim))
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
            self.pool = ThreadPoolExecutor(self.num_threads - 1, thread_name_prefix="mujoco-physics")

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


class MujocoTask(Task):
    """A MuJoCo family's task: the functions both of its envs are built from.

    ``settings`` is a frozen dataclass with ``reward_type``, ``distance_threshold`` and ``max_steps``
    (and ``width``, ``height`` for the renderer); ``sim`` has ``model``, ``data``, ``obs_dim`` and
    ``achieved``, the goal's slice of the observation vector; ``views(sim, data)`` makes one env's
    views of an ``MjData``; an action is ``action_dim`` numbers in [-1, 1].

    The goal functions read ``settings`` at call time, so an env's setting set anew
    (``env.distance_threshold = 0.02``) takes effect at the next step and ``compute_reward``.
    """

    #: The family's name in the warning about an info without ``elapsed_steps``.
    family = ""

    def __init__(self, *, settings: Any, sim: Any, views: Callable[[Any, Any], Any], action_dim: int) -> None:
        self.settings = settings
        self.sim = sim
        self.views = views
        self.goal_dim = len(range(sim.obs_dim)[sim.achieved])
        self._spaces = goal_spaces(sim.obs_dim, self.goal_dim, action_dim)
        self._act_low, self._act_high = self._spaces[1].low.copy(), self._spaces[1].high.copy()

    @property
    def observation_space(self) -> spaces.Dict:
        return self._spaces[0]

    @property
    def action_space(self) -> spaces.Box:
        return self._spaces[1]

    def clip(self, actions: np.ndarray) -> np.ndarray:
        """``np.clip`` against the float32 bounds, as two ufuncs (the result keeps the actions' dtype)."""
        return np.minimum(np.maximum(actions, self._act_low), self._act_high)

    # ---- the family's own part -------------------------------------------------------------------

    @abstractmethod
    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Sparse (-1/0, float32) or dense (-distance) reward; pure, any leading batch shape."""

    @abstractmethod
    def restart(self, v: Any, rng: np.random.Generator) -> Any:
        """Start a new episode in the env of views ``v``, drawing from ``rng``; return its goal."""

    @abstractmethod
    def controls(self, actions: np.ndarray) -> Any:
        """The ``(n, ...)`` actions (checked, not yet clipped) as what :meth:`advance_env` reads."""

    @abstractmethod
    def advance_env(self, v: Any, i: int, controls: Any) -> None:
        """Apply env ``i``'s part of ``controls`` to the env of views ``v`` and step its physics."""

    @abstractmethod
    def observe_env(self, v: Any, out: np.ndarray) -> None:
        """Write the observation vector of the env of views ``v`` into ``out``."""

    @abstractmethod
    def new_renderer(self) -> tuple[Any, Any]:
        """An offscreen renderer of ``settings.height`` x ``settings.width`` and its camera."""

    @abstractmethod
    def draw(self, state: MujocoState, env: int) -> np.ndarray:
        """Env ``env``'s RGB frame, with ``state.renderer`` and ``state.camera``."""

    # ---- the goal functions ----------------------------------------------------------------------

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
            info, "elapsed_steps", batch_shape, 0, NO_ELAPSED_STEPS.format(env=self.family)
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

    def new_state(self, n: int) -> MujocoState:
        return MujocoState(self.sim, n, views=self.views, goal_dim=self.goal_dim)

    def seed(self, state: MujocoState, seeds: np.ndarray, envs: np.ndarray) -> None:
        seed_generators(state.rngs, seeds, envs)

    def reset(self, state: MujocoState, envs: np.ndarray, options: dict[str, Any] | None) -> None:
        # No MuJoCo family takes options (reset_option_keys is empty: the envs refuse any key before this).
        for i in envs.tolist():
            v = state.views[i]
            state.goal[i] = self.restart(v, state.rngs[i])
            self.observe_env(v, state.obs[i])
        state.steps[envs] = 0

    def step(self, state: MujocoState, actions: np.ndarray, skip: np.ndarray) -> None:
        controls = self.controls(actions)
        active = None
        if skip.size:
            active = np.ones(state.n, dtype=bool)
            active[skip] = False
        state.steps += 1
        chunks = state.chunks
        futures: list[Future[None]] = []
        if state.pool is not None:
            futures = [
                state.pool.submit(self.step_chunk, state, lo, hi, controls, active) for lo, hi in chunks[1:]
            ]
        try:
            self.step_chunk(state, *chunks[0], controls, active)
        finally:
            for future in futures:
                future.result()

    def step_chunk(
        self, state: MujocoState, lo: int, hi: int, controls: Any, active: np.ndarray | None
    ) -> None:
        """Envs ``lo`` to ``hi - 1``: act, integrate, observe (in a pool thread, or the caller's)."""
        views, obs = state.views, state.obs
        for i in range(lo, hi):
            if active is not None and not active[i]:
                continue
            v = views[i]
            self.advance_env(v, i, controls)
            self.observe_env(v, obs[i])

    def observe(self, state: MujocoState) -> dict[str, np.ndarray]:
        obs = state.obs.copy()
        return {
            "observation": obs,
            "achieved_goal": obs[:, self.sim.achieved].copy(),
            "desired_goal": state.goal.copy(),
        }

    def score(self, state: MujocoState, obs: dict[str, np.ndarray]) -> Any:
        s = self.settings
        # The distance once, for the reward and the success (through the functions compute_reward uses).
        d = goal_distance(obs["achieved_goal"], obs["desired_goal"])
        steps = state.steps.copy()
        info = {"is_success": distance_success(d, s.distance_threshold), "elapsed_steps": steps}
        reward = distance_reward(d, s.distance_threshold, s.reward_type == "dense")
        terminated = self.compute_terminated(obs["achieved_goal"], obs["desired_goal"], info)
        return info, reward, terminated, self.truncated_at(steps)

    def render(self, state: MujocoState, env: int, render_mode: str | None) -> np.ndarray | None:
        """Env ``env``'s RGB frame (height, width, 3) (:meth:`draw`); None, with a warning, without a
        render mode."""
        if render_mode is None:
            gym.logger.warn(
                'render() was called without a render_mode; make the env with render_mode="rgb_array"'
            )
            return None
        if state.renderer is None:
            state.renderer, state.camera = self.new_renderer()
        return self.draw(state, env)

    def close(self, state: MujocoState) -> None:
        state.close()


def setting_property(name: str) -> property:
    """The attribute of setting ``name``: reads it, and sets it anew through the settings' checks
    (``dataclasses.replace`` makes a new settings object, validated as at construction)."""

    def get(self: MujocoAttributes) -> Any:
        return getattr(self._task.settings, name)

    def set_(self: MujocoAttributes, value: Any) -> None:
        self._task.settings = dataclasses.replace(self._task.settings, **{name: value})

    return property(get, set_, doc=f"The ``{name}`` setting (see the class docstring).")


class MujocoAttributes:
    """A MuJoCo env's attributes, single or vector, that every family has; a family's own attributes
    class adds its settings (:func:`setting_property`) and its model's facts."""

    _task: Any  # the env's MujocoTask (Any: TaskGoalFunctions declares it a Task)

    @property
    def settings(self) -> Any:
        """All the settings at once, typed (a frozen dataclass; set them one by one as attributes)."""
        return self._task.settings

    @property
    def model(self) -> Any:
        return self._task.sim.model

    @property
    def dt(self) -> float:
        """One env step, in seconds (``n_substeps`` physics steps)."""
        return self._task.sim.dt


class MujocoEnv(MujocoAttributes, TaskEnv):
    """One env of a :class:`MujocoTask`: the batch of one, taken by one thread at a time.

    A family's env class sets its docstring, and its ``__init__`` validates its arguments into its
    task and calls :meth:`_init_task` (which sets ``metadata["render_fps"]`` from the step duration).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}
    _state: MujocoState

    def _init_task(self, task: Task, render_mode: str | None) -> None:
        super()._init_task(task, render_mode)
        self.metadata = {**self.metadata, "render_fps": int(np.round(1.0 / self.dt))}
        # Two threads stepping one MjData crash MuJoCo (a segfault): a second thread is told at once.
        self._busy = threading.Lock()

    @property
    def data(self) -> Any:
        """The env's ``MjData``."""
        return self._state.data[0]

    @property
    def goal(self) -> np.ndarray:
        """The goal, a view: writing it (or setting it anew) steers the task from the next step."""
        return self._state.goal[0]

    @goal.setter
    def goal(self, value: Any) -> None:
        self._state.goal[0] = value

    def _claim(self, method: str) -> None:
        """Take the env for ``method`` (release with ``self._busy.release()``) or raise if a thread has it."""
        if not self._busy.acquire(False):
            raise ConcurrentUseError(
                f"{type(self).__name__}.{method} called from two threads at once; one env is not "
                f"thread-safe (MuJoCo would crash): give each thread its own"
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
        """An RGB frame (height, width, 3) (see the task's ``draw``); None without a render mode."""
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


class MujocoVectorEnv(MujocoAttributes, NativeVectorEnv):
    """N envs of a :class:`MujocoTask`, their physics stepped in ``num_threads`` threads.

    A family's vector env class sets its docstring, and its ``__init__`` validates its arguments into
    its task and calls :meth:`_init_mujoco` (which sets ``metadata["render_fps"]`` from the step
    duration).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25, "autoreset_mode": AutoresetMode.NEXT_STEP}
    _state: MujocoState

    def _init_mujoco(
        self,
        task: Task,
        num_envs: Any,
        render_mode: str | None,
        num_threads: Any,
        autoreset_mode: Any,
        batched_final_obs: Any,
    ) -> None:
        """Validate ``num_threads`` (None: ``os.cpu_count()``; capped at ``num_envs``), then build the
        vector env (:meth:`~goalenvs.vector.NativeVectorEnv._init_vector`) with its threads."""
        threads = (os.cpu_count() or 1) if num_threads is None else check_int("num_threads", num_threads, 1)
        self._init_vector(task, num_envs, render_mode, autoreset_mode, batched_final_obs)
        self.metadata["render_fps"] = int(np.round(1.0 / self.dt))
        self._state.set_threads(threads)

    @property
    def num_threads(self) -> int:
        """The threads that step the physics (``num_threads`` capped at ``num_envs``)."""
        return self._state.num_threads

    @property
    def data(self) -> tuple[Any, ...]:
        """Env ``i``'s ``MjData`` is ``data[i]`` (one ``model`` for all)."""
        return self._state.data

    @property
    def goal(self) -> np.ndarray:
        """The goals ``(num_envs, goal_dim)``: writing row ``i`` steers env ``i`` from its next step."""
        return self._state.goal

    @property
    def _rngs(self) -> list[Any]:
        """Each env's random generator (examples/her_ddpg.py checkpoints and restores them)."""
        return self._state.rngs

    @_rngs.setter
    def _rngs(self, rngs: list[Any]) -> None:
        self._state.rngs = list(rngs)
