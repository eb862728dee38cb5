"""The Fetch task over N envs: N ``MjData`` of one model, their physics stepped in a pool of threads.

:class:`FetchTask` is the family's :class:`~goalenvs.task.Task`: :class:`~goalenvs.envs.fetch.env.FetchEnv`
is its batch of one and :class:`~goalenvs.envs.fetch.vector.FetchVectorEnv` its batch of N, so env
``i`` of a vector env seeded ``s`` is the single env seeded ``s + i``, bit for bit, whatever the
number of threads. Each thread steps a contiguous chunk of envs through all their substeps
(``mj_step`` releases the GIL).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from goalenvs.core import NO_ELAPSED_STEPS, info_values_or_default
from goalenvs.envs.fetch.assets import make_renderer
from goalenvs.envs.fetch.goals import distance_reward, distance_success, fetch_reward, goal_distance
from goalenvs.envs.fetch.settings import POS_ACTION_SCALE, FetchSettings
from goalenvs.envs.fetch.sim import FetchSim, FetchViews
from goalenvs.task import Task, seed_generators

__all__ = ["FetchState", "FetchTask", "fetch_spaces"]


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

    step_only_info_keys = ("is_success", "elapsed_steps")  # FetchEnv.reset's info is empty
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

    def new_state(self, n: int) -> FetchState:
        return FetchState(self.sim, n)

    def seed(self, state: FetchState, seeds: np.ndarray, envs: np.ndarray) -> None:
        seed_generators(state.rngs, seeds, envs)

    def reset(self, state: FetchState, envs: np.ndarray, options: dict[str, Any] | None) -> None:
        # options are accepted and ignored, as by Gymnasium-Robotics' Fetch.
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

    def reset_info(self, state: FetchState, obs: dict[str, np.ndarray]) -> dict[str, Any]:
        return {}  # every key of the step info is step-only: no need to score the episode's start

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
