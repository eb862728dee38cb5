"""The HandReach task and its single env, step-for-step faithful to Gymnasium-Robotics.

:class:`HandReachTask` is the family's :class:`~goalenvs.envs.mujoco_task.MujocoTask`: N envs as N
``MjData`` of one model, stepped in a pool of threads (the MuJoCo families' shared machinery, see
:mod:`goalenvs.envs.mujoco_task`). :class:`HandReachEnv` is its batch of one and
:class:`~goalenvs.envs.hand.vector.HandReachVectorEnv` its batch of N, so env ``i`` of a vector env
seeded ``s`` is the single env seeded ``s + i``, bit for bit, whatever the number of threads.

Why our own implementation: Gymnasium-Robotics 1.4.2 cannot build its hand envs on MuJoCo >= 3.12
(its ``set_joint_qpos`` compares a MuJoCo enum with a numpy integer), and it looks every joint and
site up by name at every step. Here every name is resolved to an index once
(:class:`goalenvs.envs.hand.sim.HandSim`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from goalenvs.envs.hand.assets import make_hand_renderer
from goalenvs.envs.hand.goals import reach_reward
from goalenvs.envs.hand.settings import DEFAULT_SIZE, HandReachSettings
from goalenvs.envs.hand.sim import HandSim, HandViews
from goalenvs.envs.mujoco_task import (
    MujocoAttributes,
    MujocoEnv,
    MujocoState,
    MujocoTask,
    setting_property,
)

__all__ = ["ENV_DOC", "HandReachAttributes", "HandReachEnv", "HandReachTask", "HandTask"]

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


class HandTask(MujocoTask):
    """What every Shadow Hand task does to one env: set the 20 actuators from the clipped actions, step
    the physics, observe, render; a hand task adds its goals, rewards and starts."""

    action_help = "20 numbers, one target angle per actuator, clipped to [-1, 1]"

    def controls(self, actions: np.ndarray) -> np.ndarray:
        """The actions clipped against the float32 bounds, then widened to float64: exactly the values
        Gymnasium-Robotics multiplies with the float64 control ranges."""
        return self.clip(actions).astype(np.float64)

    def advance_env(self, v: HandViews, i: int, controls: np.ndarray) -> None:
        self.sim.act(v, controls[i], self.settings.relative_control)
        self.sim.advance(v)

    def observe_env(self, v: HandViews, out: np.ndarray) -> None:
        self.sim.observation(v, out)

    def new_renderer(self) -> tuple[Any, Any]:
        return make_hand_renderer(self.sim.model, self.settings.height, self.settings.width)


class HandReachTask(HandTask):
    """HandReach with its settings: the functions both HandReach envs are built from (the state, the
    threads, the scoring and the time limit are :class:`~goalenvs.envs.mujoco_task.MujocoTask`'s).

    The goal functions read ``settings`` at call time, so an env's setting set anew
    (``env.distance_threshold = 0.02``) takes effect at the next step and ``compute_reward``.
    """

    family = "HandReach"

    def __init__(self, settings: HandReachSettings) -> None:
        sim = HandSim(settings)
        super().__init__(settings=settings, sim=sim, views=HandViews, action_dim=int(sim.model.nu))

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Sparse (-1/0, float32) or dense (-distance) reward; pure, any leading batch shape."""
        s = self.settings
        return reach_reward(achieved_goal, desired_goal, s.distance_threshold, s.reward_type == "dense")

    def restart(self, v: HandViews, rng: np.random.Generator) -> np.ndarray:
        self.sim.restart(v)
        return self.sim.sample_goal(rng)

    def draw(self, state: MujocoState, env: int) -> np.ndarray:
        """Env ``env``'s frame, the goal tips and the achieved tips shown as spheres."""
        achieved = state.obs[env, self.sim.achieved]
        return self.sim.draw(state.renderer, state.camera, state.views[env], state.goal[env], achieved)


class HandReachAttributes(MujocoAttributes):
    """A HandReach env's public attributes, single or vector: every setting (setting one re-validates
    it and takes effect where the task reads it at step time) and the model's facts."""

    reward_type = setting_property("reward_type")
    distance_threshold = setting_property("distance_threshold")
    n_substeps = setting_property("n_substeps")
    relative_control = setting_property("relative_control")
    initial_qpos = setting_property("initial_qpos")
    max_steps = setting_property("max_steps")
    width = setting_property("width")
    height = setting_property("height")

    @property
    def initial_goal(self) -> np.ndarray:
        """The fingertip positions (15,) at the start of every episode (m)."""
        return self._task.sim.initial_goal

    @property
    def palm_xpos(self) -> np.ndarray:
        """The palm's position (m) at the start of every episode."""
        return self._task.sim.palm_xpos


class HandReachEnv(HandReachAttributes, MujocoEnv):
    __doc__ = "The Shadow Dexterous Hand: bring the five fingertips to target positions.\n" + ENV_DOC

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
