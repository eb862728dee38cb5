"""The HandReach task over N envs and its single env, step-for-step faithful to Gymnasium-Robotics.

:class:`HandReachTask` is the task (:class:`~goalenvs.task.Task`): N envs as N ``MjData`` of one
model (:class:`HandState`), stepped one after the other. :class:`HandReachEnv` is its batch of one
and :class:`~goalenvs.envs.hand.vector.HandReachVectorEnv` its batch of N, so env ``i`` of a vector
env seeded ``s`` is the single env seeded ``s + i``, bit for bit.

Why our own implementation: Gymnasium-Robotics 1.4.2 cannot build its hand envs on MuJoCo >= 3.12
(its ``set_joint_qpos`` compares a MuJoCo enum with a numpy integer), and it looks every joint and
site up by name at every step. Here every name is resolved to an index once
(:class:`goalenvs.envs.hand.sim.HandSim`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs.core import NO_ELAPSED_STEPS, info_values_or_default
from goalenvs.envs.fetch.goals import distance_reward, distance_success, goal_distance
from goalenvs.envs.hand.assets import make_hand_renderer, mujoco
from goalenvs.envs.hand.goals import reach_reward
from goalenvs.envs.hand.settings import DEFAULT_SIZE, HandReachSettings
from goalenvs.envs.hand.sim import HandSim, HandViews
from goalenvs.task import Task, TaskEnv, seed_generators
from goalenvs.vector import ConcurrentUseError

__all__ = [
    "ENV_DOC",
    "HandReachAttributes",
    "HandReachEnv",
    "HandReachTask",
    "HandState",
    "hand_reach_spaces",
]

#: The description of the HandReach envs shared by HandReachEnv's and HandReachVectorEnv's docstrings.
ENV_DOC = """

    ## Description
    The Shadow Dexterous Hand (24 joints, 20 actuated: each finger's distal joint is coupled to its
    middle joint by a tendon), from "Multi-Goal Reinforcement Learning: Challenging Robotics
    Environments and Request for Research" (Plappert et al., 2018). The task: bring the five
    fingertips to target positions, in which the thumb and one other finger meet above the palm.
    Same physics, observations, goals and rewards as Gymnasium-Robotics' ``HandReach-v3``.

    ## Action Space
    ``Box(-1, 1, (20,), float32)``: one target joint angle per actuator (wrist 2, first, middle and
    ring finger 3 each, little finger 4, thumb 5, in the model's actuator order), -1 and 1 being the
    ends of that actuator's control range (with ``relative_control``: the current joint angle plus
    that half-range times the action). Actions outside the box are clipped, and so are the
    resulting controls. An action with a NaN or infinite entry raises ``ValueError`` before
    anything moves.

    ## Observation Space
    ``Dict`` with float64 ``Box(-inf, inf)`` entries:

    * ``observation`` (63,): the 24 robot joint angles (rad), their 24 velocities (rad/s), in the
      model's joint order, and the achieved goal (15).
    * ``achieved_goal`` (15,): the x, y, z positions (m) of the fingertips: first finger, middle,
      ring, little, thumb.
    * ``desired_goal`` (15,): their target positions, in the same order.

    ## Rewards
    ``reward_type="sparse"`` (default): ``-1.0`` while the Euclidean distance over the 15 numbers
    from achieved to desired goal exceeds ``distance_threshold``, else ``0.0`` (float32).
    ``"dense"``: minus that distance. ``info["is_success"]`` is ``1.0`` (float32) when the distance
    is below the threshold. ``compute_reward`` is pure and vectorized over any leading batch shape.
    A NaN distance is never a success: sparse reward ``-1.0``, ``is_success`` ``0.0``.

    ## Starting State
    Every episode starts from the joint angles ``initial_qpos`` at rest. The goal keeps three
    fingertips at their start positions and moves the thumb's and one other finger's (drawn
    uniformly from four) to 5 mm short of a meeting point 9 cm in front of and 5 cm above the palm,
    jittered by a normal of 5 mm per axis; with probability 0.1 the goal is the start positions of
    all five tips instead.

    ## Episode End
    Never terminated (a continuing task). Truncated after ``max_steps`` steps (default 50, as the
    ``TimeLimit`` of Gymnasium-Robotics' ids; ``None``: never). The env counts the steps itself and
    reports them in ``info["elapsed_steps"]``, so that ``compute_truncated`` agrees with ``step``.

    ## Arguments
    Validated by ``HandReachSettings``.

    * ``reward_type``: ``"sparse"`` (default) or ``"dense"``.
    * ``distance_threshold`` (m, > 0; 0.01): the success radius over the 15 numbers.
    * ``n_substeps`` (int >= 1; 20): physics steps of 0.002 s per env step.
    * ``relative_control`` (bool; False): actions move the joints relative to their current angles.
      Gymnasium-Robotics' own relative control does not run on the ``mujoco`` bindings (it calls
      methods they lack), so this mode has no reference to be compared with.
    * ``initial_qpos`` (joint name -> angle): replaces the start joint angles.
    * ``max_steps`` (int >= 1, default 50; ``None``: never truncated): episode length.
    * ``width``, ``height`` (int >= 1, default 480): of rendered frames.
    * ``render_mode``: ``None`` or ``"rgb_array"``.

    Each setting is also an attribute (``env.distance_threshold``); setting one re-validates it and
    takes effect where the task reads it at step time.

    ## Version History
    * v0: first goalenvs version; matches Gymnasium-Robotics 1.4.2 ``HandReach-v3`` step for step
      (same seed, same actions -> same observations), on MuJoCo 3.x and 4.x. Unlike there, rendering
      does not call ``mj_forward``, so rendering an episode does not change its trajectory.
"""


def hand_reach_spaces(sim: HandSim) -> tuple[spaces.Dict, spaces.Box]:
    """The observation and action spaces of one HandReach env."""
    goal = spaces.Box(-np.inf, np.inf, shape=(sim.achieved.stop - sim.achieved.start,), dtype=np.float64)
    observation_space = spaces.Dict(
        {
            "observation": spaces.Box(-np.inf, np.inf, shape=(sim.obs_dim,), dtype=np.float64),
            "achieved_goal": goal,
            "desired_goal": goal,
        }
    )
    return observation_space, spaces.Box(-1.0, 1.0, shape=(int(sim.model.nu),), dtype=np.float32)


class HandState:
    """N HandReach envs: one ``MjData`` each (env 0's is the one the start state was computed in, as
    a single env's), their numpy views, random generators, goals, observation vectors and step counts."""

    def __init__(self, sim: HandSim, n: int) -> None:
        self.sim, self.n = sim, n
        self.data = (sim.data, *(mujoco.MjData(sim.model) for _ in range(n - 1)))
        self.views = [HandViews(sim, d) for d in self.data]
        self.rngs: list[np.random.Generator] = [np.random.default_rng(0)] * n  # replaced by seeding
        self.goal = np.zeros((n, sim.achieved.stop - sim.achieved.start))
        self.obs = np.zeros((n, sim.obs_dim))
        self.steps = np.zeros(n, dtype=np.int64)
        self.renderer: Any = None
        self.camera: Any = None

    def close(self) -> None:
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None

    # MjModel/MjData pickle themselves and the views rebuild themselves; the renderer is made anew.
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "renderer": None, "camera": None}


class HandReachTask(Task):
    """HandReach with its settings: the functions both HandReach envs are built from.

    The goal functions read ``settings`` at call time, so an env's setting set anew
    (``env.distance_threshold = 0.02``) takes effect at the next step and ``compute_reward``.
    """

    action_help = "20 numbers, one target angle per actuator, clipped to [-1, 1]"

    def __init__(self, settings: HandReachSettings) -> None:
        self.settings = settings
        self.sim = HandSim(settings)
        self._spaces = hand_reach_spaces(self.sim)
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
        return reach_reward(achieved_goal, desired_goal, s.distance_threshold, s.reward_type == "dense")

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
            info, "elapsed_steps", batch_shape, 0, NO_ELAPSED_STEPS.format(env="HandReach")
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
        """The arrays' estimate plus one ``MjData`` (counted as half a MiB, as Fetch's)."""
        return super().min_bytes_per_env() + 2**19

    def new_state(self, n: int) -> HandState:
        return HandState(self.sim, n)

    def seed(self, state: HandState, seeds: np.ndarray, envs: np.ndarray) -> None:
        seed_generators(state.rngs, seeds, envs)

    def reset(self, state: HandState, envs: np.ndarray, options: dict[str, Any] | None) -> None:
        # HandReach takes no options (reset_option_keys is empty: the envs refuse any key before this).
        sim = self.sim
        for i in envs.tolist():
            v = state.views[i]
            sim.restart(v)
            state.goal[i] = sim.sample_goal(state.rngs[i])
            sim.observation(v, state.obs[i])
        state.steps[envs] = 0

    def step(self, state: HandState, actions: np.ndarray, skip: np.ndarray) -> None:
        # np.clip against the float32 bounds (as two ufuncs), then widened to float64: exactly the
        # values Gymnasium-Robotics multiplies with the float64 control ranges.
        a = np.minimum(np.maximum(actions, self._act_low), self._act_high).astype(np.float64)
        sim, relative = self.sim, self.settings.relative_control
        skipped = set(skip.tolist())
        state.steps += 1
        for i in range(state.n):
            if i in skipped:
                continue
            v = state.views[i]
            sim.act(v, a[i], relative)
            sim.advance(v)
            sim.observation(v, state.obs[i])

    def observe(self, state: HandState) -> dict[str, np.ndarray]:
        obs = state.obs.copy()
        return {
            "observation": obs,
            "achieved_goal": obs[:, self.sim.achieved].copy(),
            "desired_goal": state.goal.copy(),
        }

    def score(self, state: HandState, obs: dict[str, np.ndarray]) -> Any:
        s = self.settings
        # The distance once, for the reward and the success (through the functions compute_reward uses).
        d = goal_distance(obs["achieved_goal"], obs["desired_goal"])
        steps = state.steps.copy()
        info = {"is_success": distance_success(d, s.distance_threshold), "elapsed_steps": steps}
        reward = distance_reward(d, s.distance_threshold, s.reward_type == "dense")
        terminated = self.compute_terminated(obs["achieved_goal"], obs["desired_goal"], info)
        return info, reward, terminated, self.truncated_at(steps)

    def render(self, state: HandState, env: int, render_mode: str | None) -> np.ndarray | None:
        """An RGB frame (height, width, 3), the goal tips and the achieved tips shown as spheres."""
        if render_mode is None:
            gym.logger.warn(
                'render() was called without a render_mode; make the env with render_mode="rgb_array"'
            )
            return None
        if state.renderer is None:
            state.renderer, state.camera = make_hand_renderer(
                self.sim.model, self.settings.height, self.settings.width
            )
        achieved = state.obs[env, self.sim.achieved]
        return self.sim.draw(state.renderer, state.camera, state.views[env], state.goal[env], achieved)

    def close(self, state: HandState) -> None:
        state.close()


def _setting(name: str) -> property:
    """The attribute of setting ``name``: reads it, and sets it anew through ``HandReachSettings``'s checks."""

    def get(self: HandReachAttributes) -> Any:
        return getattr(self._task.settings, name)

    def set_(self: HandReachAttributes, value: Any) -> None:
        self._task.settings = dataclasses.replace(self._task.settings, **{name: value})

    return property(get, set_, doc=f"The ``{name}`` setting (see the class docstring).")


class HandReachAttributes:
    """A HandReach env's public attributes, single or vector: every setting (setting one re-validates
    it and takes effect where the task reads it at step time) and the model's facts."""

    _task: Any  # the env's HandReachTask

    reward_type = _setting("reward_type")
    distance_threshold = _setting("distance_threshold")
    n_substeps = _setting("n_substeps")
    relative_control = _setting("relative_control")
    initial_qpos = _setting("initial_qpos")
    max_steps = _setting("max_steps")
    width = _setting("width")
    height = _setting("height")

    @property
    def settings(self) -> HandReachSettings:
        """All the settings at once, typed (a frozen dataclass; set them one by one as attributes)."""
        return self._task.settings

    @property
    def model(self) -> Any:
        return self._task.sim.model

    @property
    def initial_goal(self) -> np.ndarray:
        """The fingertip positions (15,) at the start of every episode (m)."""
        return self._task.sim.initial_goal

    @property
    def palm_xpos(self) -> np.ndarray:
        """The palm's position (m) at the start of every episode."""
        return self._task.sim.palm_xpos

    @property
    def dt(self) -> float:
        """One env step, in seconds (``n_substeps`` physics steps)."""
        return self._task.sim.dt


class HandReachEnv(HandReachAttributes, TaskEnv):
    __doc__ = "The Shadow Dexterous Hand: bring the five fingertips to target positions.\n" + ENV_DOC

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(
        self,
        reward_type: str = "sparse",
        *,
        distance_threshold: float = 0.01,
        n_substeps: int = 20,
        relative_control: bool = False,
        initial_qpos: Mapping[str, float] | None = None,
        max_steps: int | None = 50,
        width: int = DEFAULT_SIZE,
        height: int = DEFAULT_SIZE,
        render_mode: str | None = None,
    ) -> None:
        settings = HandReachSettings(
            reward_type,
            distance_threshold=distance_threshold,
            n_substeps=n_substeps,
            relative_control=relative_control,
            initial_qpos=initial_qpos,  # type: ignore[arg-type]  # None: REACH_INITIAL_QPOS
            max_steps=max_steps,
            width=width,
            height=height,
        )
        self._init_task(HandReachTask(settings), render_mode)
        self.metadata = {**self.metadata, "render_fps": int(np.round(1.0 / self.dt))}
        # Two threads stepping one MjData crash MuJoCo (a segfault): a second thread is told at once.
        self._busy = threading.Lock()

    @property
    def data(self) -> Any:
        """The env's ``MjData``."""
        return self._state.data[0]

    @property
    def goal(self) -> np.ndarray:
        """The goal (15,), a view: writing it (or setting it anew) steers the task from the next step."""
        return self._state.goal[0]

    @goal.setter
    def goal(self, value: Any) -> None:
        self._state.goal[0] = value

    def _claim(self, method: str) -> None:
        """Take the env for ``method`` (release with ``self._busy.release()``) or raise if a thread has it."""
        if not self._busy.acquire(False):
            raise ConcurrentUseError(
                f"HandReachEnv.{method} called from two threads at once; one env is not thread-safe "
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
        """An RGB frame (height, width, 3), the goal tips and the achieved tips shown as spheres."""
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
