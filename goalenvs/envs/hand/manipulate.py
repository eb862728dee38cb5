"""The in-hand manipulation tasks (block, egg, pen) and their single env, step-for-step faithful to
Gymnasium-Robotics' ``HandManipulate*-v1``.

:class:`HandManipulateTask` is the family's :class:`~goalenvs.envs.mujoco_task.MujocoTask` (N envs as N
``MjData`` of one model, stepped in a pool of threads); :class:`HandManipulateEnv` is its batch of one
and :class:`~goalenvs.envs.hand.vector.HandManipulateVectorEnv` its batch of N, so env ``i`` of a
vector env seeded ``s`` is the single env seeded ``s + i``, bit for bit, whatever the number of threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from goalenvs.envs.hand.env import HandTask
from goalenvs.envs.hand.goals import manipulate_distances, manipulate_reward, manipulate_success
from goalenvs.envs.hand.manipulate_sim import ManipulateSim
from goalenvs.envs.hand.settings import DEFAULT_SIZE, HandManipulateSettings
from goalenvs.envs.hand.sim import HandViews
from goalenvs.envs.mujoco_task import (
    MujocoAttributes,
    MujocoEnv,
    MujocoState,
    setting_property,
)

__all__ = ["MANIPULATE_DOC", "HandManipulateAttributes", "HandManipulateEnv", "HandManipulateTask"]

#: The description of the manipulate envs shared by HandManipulateEnv's and HandManipulateVectorEnv's
#: docstrings.
MANIPULATE_DOC = """

    ## Description
    The Shadow Dexterous Hand (24 joints, 20 actuated) holding an object on its palm, from
    "Multi-Goal Reinforcement Learning: Challenging Robotics Environments and Request for Research"
    (Plappert et al., 2018). The task: bring the object (``object``: a 5 cm ``"block"``, an
    ``"egg"`` or a 20 cm ``"pen"``) to a target pose, its position and orientation, without dropping it.
    Same physics, observations, goals and rewards as Gymnasium-Robotics' ``HandManipulate*-v1``.

    ## Action Space
    ``Box(-1, 1, (20,), float32)``: one target joint angle per actuator, -1 and 1 being the ends of
    that actuator's control range (with ``relative_control``: the current joint angle plus that
    half-range times the action), as in HandReach. Actions outside the box are clipped, and so are
    the resulting controls. An action with a NaN or infinite entry raises ``ValueError``.

    ## Observation Space
    ``Dict`` with float64 ``Box(-inf, inf)`` entries:

    * ``observation`` (61,; 153 with touch sensors): the 24 robot joint angles (rad) and their 24
      velocities (rad/s), in the model's joint order; the object's linear (m/s) and angular (rad/s)
      velocity (6); its pose (7, the achieved goal); then, with ``touch_get_obs``, the 92 touch
      sensors of the palm and fingers (``"sensordata"``: the contact normal forces, N;
      ``"boolean"``: 1.0 where a force is nonzero; ``"log"``: ``log(1 + force)``).
    * ``achieved_goal`` (7,): the object's position (x, y, z, m) and orientation (unit quaternion
      w, x, y, z).
    * ``desired_goal`` (7,): its target pose, in the same order.

    ## Rewards
    From the position distance ``d_pos`` (m; 0 with ``target_position="ignore"``) and the rotation
    angle ``d_rot = 2 arccos(<q_a, q_b>)`` (rad, in [0, 2 pi]; 0 with ``target_rotation="ignore"``;
    with ``ignore_z_target_rotation`` the achieved z Euler angle is set to the goal's first).
    ``reward_type="sparse"`` (default): ``0.0`` when ``d_pos < distance_threshold`` and ``d_rot <
    rotation_threshold``, else ``-1.0`` (float32). ``"dense"``: ``-(10 d_pos + d_rot)``.
    ``info["is_success"]`` is ``1.0`` (float32) on the sparse condition. ``compute_reward`` is pure and
    vectorized over any leading batch shape; NaN distances are never a success.

    ## Starting State
    The hand at rest (its model's joint angles, or ``initial_qpos``), the object on the palm. With
    ``randomize_initial_rotation``, the object is first rotated as the target rotation is drawn
    (``"xyz"`` for ``"ignore"``, none for ``"fixed"``); with ``randomize_initial_position``, moved by a
    normal of 5 mm per axis (not with ``target_position="fixed"``); then 10 zero-action steps let it
    settle, and the start is drawn again until its centre is above 4 cm (after 100 draws in a row
    that drop it, ``reset`` raises ``RuntimeError``; Gymnasium-Robotics loops forever). The goal: the settled
    position plus a uniform offset in [-4, 4] x [-6, 2] x [0, 6] cm (``target_position="random"``;
    else the settled position), and a rotation about z (``"z"``), about z then one of the 24
    axis-aligned rotations (``"parallel"``), or about a uniform random axis (``"xyz"``); ``"ignore"``
    and ``"fixed"`` keep the settled orientation. The controls and the solver's warm start carry
    over from one episode to the next, as in Gymnasium-Robotics.

    ## Episode End
    Never terminated (a dropped object is not an end). Truncated after ``max_steps`` steps (default
    100, as the ``TimeLimit`` of Gymnasium-Robotics' ids; ``None``: never), counted by the env and
    reported in ``info["elapsed_steps"]``, so that ``compute_truncated`` agrees with ``step``.

    ## Arguments
    Validated by ``HandManipulateSettings``.

    * ``object``: ``"block"`` (default), ``"egg"`` or ``"pen"``.
    * ``reward_type``: ``"sparse"`` (default) or ``"dense"``.
    * ``target_position``: ``"random"`` (default), ``"fixed"`` or ``"ignore"``.
    * ``target_rotation``: ``"xyz"`` (default), ``"z"``, ``"parallel"``, ``"fixed"`` or ``"ignore"``.
    * ``randomize_initial_position`` (bool; True), ``randomize_initial_rotation`` (bool; None: True,
      the pen's False).
    * ``distance_threshold`` (m, > 0; None: 0.01, the pen's 0.05), ``rotation_threshold`` (rad,
      > 0; 0.1): the success thresholds.
    * ``ignore_z_target_rotation`` (bool; None: False, the pen's True).
    * ``touch_get_obs``: ``None`` (default: the model without touch sensors), ``"sensordata"``,
      ``"boolean"`` or ``"log"`` (the model with 92 touch sensors; Gymnasium-Robotics'
      ``_ContinuousTouchSensors`` ids are ``"sensordata"``, its ``_BooleanTouchSensors`` ids
      ``"boolean"``).
    * ``n_substeps`` (int >= 1; 20): physics steps of 0.002 s per env step.
    * ``relative_control`` (bool; False): actions move the joints relative to their current angles
      (no reference to compare with: Gymnasium-Robotics' own does not run on the ``mujoco``
      bindings).
    * ``initial_qpos`` (joint name -> value(s); None: the model's): start joint values.
    * ``max_steps`` (int >= 1, default 100; ``None``: never truncated): episode length.
    * ``width``, ``height`` (int >= 1, default 480): of rendered frames.
    * ``render_mode``: ``None`` or ``"rgb_array"``.

    The goal-scoring settings (``reward_type``, the target modes and thresholds,
    ``ignore_z_target_rotation``, the start randomisation, ``relative_control``, ``max_steps``) are
    attributes that can be set anew (re-validated; they take effect at the next step, reset or
    ``compute_reward``); the others are fixed at construction and read-only.

    ## Version History
    * v0: first goalenvs version; matches Gymnasium-Robotics 1.4.2 ``HandManipulate*-v1`` step for
      step (same seed, same actions -> same observations), on MuJoCo 3.x and 4.x. Unlike there:
      rendering does not change the episode; the ``"ignore"`` and ``"fixed"`` target rotations run
      (Gymnasium-Robotics raises ``AttributeError`` drawing their goal); and with
      ``ignore_z_target_rotation`` (the pen) a batched ``compute_reward`` sets each goal's z angle
      (Gymnasium-Robotics' ``euler_a[2] = euler_b[2]`` overwrites the third goal of the batch, and
      a batch of one raises ``IndexError``); single transitions agree.
"""


class HandManipulateTask(HandTask):
    """An in-hand manipulation task with its settings: the functions both manipulate envs are built
    from (the state, the threads and the time limit are
    :class:`~goalenvs.envs.mujoco_task.MujocoTask`'s).

    The goal functions read ``settings`` at call time, so an env's setting set anew
    (``env.rotation_threshold = 0.2``) takes effect at the next step and ``compute_reward``.
    """

    family = "HandManipulate"

    def __init__(self, settings: HandManipulateSettings) -> None:
        sim = ManipulateSim(settings)
        super().__init__(settings=settings, sim=sim, views=HandViews, action_dim=int(sim.model.nu))

    def distances(self, achieved_goal: Any, desired_goal: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(d_pos, d_rot)`` of the goals under the current settings (any leading batch shape)."""
        s = self.settings
        return manipulate_distances(
            achieved_goal,
            desired_goal,
            use_position=s.target_position != "ignore",
            use_rotation=s.target_rotation != "ignore",
            ignore_z=s.ignore_z_target_rotation,
        )

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Sparse (-1/0, float32) or dense (``-(10 d_pos + d_rot)``) reward; pure, any leading batch shape."""
        s = self.settings
        d_pos, d_rot = self.distances(achieved_goal, desired_goal)
        return manipulate_reward(
            d_pos, d_rot, s.distance_threshold, s.rotation_threshold, s.reward_type == "dense"
        )

    def score(self, state: MujocoState, obs: dict[str, np.ndarray]) -> Any:
        s = self.settings
        # The distances once, for the reward and the success (through the functions compute_reward uses).
        d_pos, d_rot = self.distances(obs["achieved_goal"], obs["desired_goal"])
        steps = state.steps.copy()
        info = {
            "is_success": manipulate_success(d_pos, d_rot, s.distance_threshold, s.rotation_threshold),
            "elapsed_steps": steps,
        }
        reward = manipulate_reward(
            d_pos, d_rot, s.distance_threshold, s.rotation_threshold, s.reward_type == "dense"
        )
        terminated = self.compute_terminated(obs["achieved_goal"], obs["desired_goal"], info)
        return info, reward, terminated, self.truncated_at(steps)

    def restart(self, v: HandViews, rng: np.random.Generator) -> np.ndarray:
        return self.sim.restart(v, rng, self.settings)

    def draw(self, state: MujocoState, env: int) -> np.ndarray:
        """Env ``env``'s frame, with the goal pose shown by a translucent copy of the object."""
        position_ignored = self.settings.target_position == "ignore"
        return self.sim.draw(
            state.renderer, state.camera, state.views[env], state.goal[env], position_ignored
        )


def fixed_setting(name: str) -> property:
    """The read-only attribute of setting ``name``, one fixed when the model is built."""

    def get(self: MujocoAttributes) -> Any:
        return getattr(self._task.settings, name)

    return property(get, doc=f"The ``{name}`` setting (fixed at construction; see the class docstring).")


class HandManipulateAttributes(MujocoAttributes):
    """A manipulate env's public attributes, single or vector: every setting (the goal-scoring ones
    settable: re-validated, taking effect where the task reads them) and the model's facts."""

    object = fixed_setting("object")
    reward_type = setting_property("reward_type")
    target_position = setting_property("target_position")
    target_rotation = setting_property("target_rotation")
    randomize_initial_position = setting_property("randomize_initial_position")
    randomize_initial_rotation = setting_property("randomize_initial_rotation")
    distance_threshold = setting_property("distance_threshold")
    rotation_threshold = setting_property("rotation_threshold")
    ignore_z_target_rotation = setting_property("ignore_z_target_rotation")
    touch_get_obs = fixed_setting("touch_get_obs")
    n_substeps = fixed_setting("n_substeps")
    relative_control = setting_property("relative_control")
    initial_qpos = fixed_setting("initial_qpos")
    max_steps = setting_property("max_steps")
    width = fixed_setting("width")
    height = fixed_setting("height")

    @property
    def redrawn_starts(self) -> int:
        """Episode starts drawn again so far because the object fell off the palm (all envs)."""
        return int(self._task.sim.redrawn_starts)


class HandManipulateEnv(HandManipulateAttributes, MujocoEnv):
    __doc__ = "The Shadow Dexterous Hand: bring a block, an egg or a pen to a target pose.\n" + MANIPULATE_DOC

    def __init__(
        self,
        object: str = "block",
        reward_type: str = "sparse",
        *,
        target_position: str = "random",
        target_rotation: str = "xyz",
        randomize_initial_position: bool = True,
        randomize_initial_rotation: bool | None = None,
        distance_threshold: float | None = None,
        rotation_threshold: float = 0.1,
        ignore_z_target_rotation: bool | None = None,
        touch_get_obs: str | None = None,
        n_substeps: int = 20,
        relative_control: bool = False,
        initial_qpos: Mapping[str, Any] | None = None,
        max_steps: int | None = 100,
        width: int = DEFAULT_SIZE,
        height: int = DEFAULT_SIZE,
        render_mode: str | None = None,
    ) -> None:
        settings = HandManipulateSettings(
            object,
            reward_type,
            target_position=target_position,
            target_rotation=target_rotation,
            randomize_initial_position=randomize_initial_position,
            randomize_initial_rotation=randomize_initial_rotation,
            distance_threshold=distance_threshold,
            rotation_threshold=rotation_threshold,
            ignore_z_target_rotation=ignore_z_target_rotation,
            touch_get_obs=touch_get_obs,
            n_substeps=n_substeps,
            relative_control=relative_control,
            initial_qpos=initial_qpos,  # type: ignore[arg-type]  # None: the model's own
            max_steps=max_steps,
            width=width,
            height=height,
        )
        self._init_task(HandManipulateTask(settings), render_mode)
