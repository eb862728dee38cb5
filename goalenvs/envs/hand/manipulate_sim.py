"""The in-hand manipulation tasks' MuJoCo model, and what an episode does to one ``MjData`` of it.

:class:`ManipulateSim` is the hand (:class:`~goalenvs.envs.hand.sim.HandModel`) holding an object (a
block, an egg or a pen on a free joint) and the object's goal marker (a second free body, which
collides with nothing). The fidelity rules, each there because the physics or the random stream
would otherwise drift from Gymnasium-Robotics' ``HandManipulate*-v1``:

* the start state is ``initial_qpos`` written into a fresh ``MjData`` and one ``mj_forward``;
  every episode restores its time, ``qpos`` and ``qvel`` and calls ``mj_forward``, but *not*
  ``mj_resetData``: the controls and the solver's warm start carry over from the previous episode, as
  in Gymnasium-Robotics (whose manipulate reset skips it);
* a start draws, in this order: the object's rotation offset by ``target_rotation`` (``z``: an angle;
  ``parallel``: an angle, then one of 24 axis-aligned rotations by index; ``xyz`` and ``ignore``: an
  angle and an axis of 3 uniforms; ``fixed``: nothing) when ``randomize_initial_rotation``, then 3
  normals of 5 mm for its position when ``randomize_initial_position`` (not with ``target_position``
  ``"fixed"``); then 10 zero-action env steps let it settle; the whole start is drawn again until
  the object's centre is more than 4 cm high (up to :data:`MAX_START_DRAWS` times, then RuntimeError);
* the goal then draws its position offset (3 uniforms, ``target_position="random"``) from the settled
  object, then its rotation as the start did (``z``, ``parallel``, ``xyz``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from goalenvs.envs.hand.assets import mujoco
from goalenvs.envs.hand.goals import parallel_quats, quat_from_angle_and_axis, quat_mul
from goalenvs.envs.hand.settings import (
    INITIAL_POSITION_SCALE,
    ON_PALM_HEIGHT,
    SETTLE_STEPS,
    TARGET_POSITION_RANGE,
    HandManipulateSettings,
)
from goalenvs.envs.hand.sim import HandModel, HandViews

__all__ = ["MAX_START_DRAWS", "ManipulateSim"]

FloatArray = np.ndarray

#: A reset gives up after this many starts in a row that dropped the object.
MAX_START_DRAWS = 100
_Z_AXIS = np.array([0.0, 0.0, 1.0])
_IGNORED_POSITION_SHIFT = 0.15  # the goal marker is drawn this far along x when the position is ignored


class ManipulateSim(HandModel):
    """The ``MjModel`` of one manipulate task (its object, with or without touch sensors), its indices,
    its start state, and the per-env operations: start an episode and draw its goal, observe, draw a
    frame (applying an action and integrating are :class:`~goalenvs.envs.hand.sim.HandModel`'s)."""

    def __init__(self, settings: HandManipulateSettings) -> None:
        super().__init__(
            settings.model_file,
            n_substeps=settings.n_substeps,
            initial_qpos=settings.initial_qpos,
            width=settings.width,
            height=settings.height,
        )
        m, obj = self.model, mujoco.mjtObj
        joint = self.name2id(obj.mjOBJ_JOINT, "object:joint")
        self.object_qadr, self.object_dadr = int(m.jnt_qposadr[joint]), int(m.jnt_dofadr[joint])
        target = self.name2id(obj.mjOBJ_JOINT, "target:joint")
        self.target_qadr, self.target_dadr = int(m.jnt_qposadr[target]), int(m.jnt_dofadr[target])
        self.center_site = self.name2id(obj.mjOBJ_SITE, "object:center")
        self.hidden_geom = mujoco.mj_name2id(m, obj.mjOBJ_GEOM, "object_hidden")  # the block's only
        # The touch sensors ("robot0:TS_..."), in sensor-id order; each reads one number.
        touch = [i for i in range(m.nsensor) if m.sensor(i).name.startswith("robot0:TS_")]
        self.touch_adr = np.array([m.sensor_adr[i] for i in touch], dtype=np.intp)
        self.touch_get_obs = settings.touch_get_obs
        n_touch = 0 if settings.touch_get_obs is None else len(touch)
        self.parallel_quats = parallel_quats()
        self.position_low = np.array([r[0] for r in TARGET_POSITION_RANGE])
        self.position_high = np.array([r[1] for r in TARGET_POSITION_RANGE])
        n = self.robot_qadr.size
        #: The observation: robot joint angles (n), velocities (n), the object's velocity (6), its pose
        #: (7: the achieved goal), the touch values.
        self.achieved = slice(2 * n + 6, 2 * n + 13)
        self.obs_dim = 2 * n + 13 + n_touch
        self.zero_action = np.zeros(m.nu)
        #: Starts drawn again because the object did not stay on the palm (all envs, all resets).
        self.redrawn_starts = 0

    # ---- the per-env operations ----------------------------------------------------------------------

    def draw_rotation(self, rng: np.random.Generator, mode: str) -> FloatArray:
        """A random rotation (a unit quaternion) of ``mode``: ``"z"`` about the z axis, ``"parallel"`` about
        z then axis-aligned, ``"xyz"`` about a random axis."""
        angle = rng.uniform(-np.pi, np.pi)
        if mode == "z":
            return quat_from_angle_and_axis(angle, _Z_AXIS)
        if mode == "parallel":
            z_quat = quat_from_angle_and_axis(angle, _Z_AXIS)
            return quat_mul(z_quat, self.parallel_quats[rng.integers(len(self.parallel_quats))])
        return quat_from_angle_and_axis(angle, rng.uniform(-1.0, 1.0, size=3))

    def restart(self, v: HandViews, rng: np.random.Generator, s: HandManipulateSettings) -> FloatArray:
        """Start an episode in ``v``'s data (drawing until the object rests on the palm); return its goal.

        Raises RuntimeError after :data:`MAX_START_DRAWS` starts that all dropped the object
        (Gymnasium-Robotics draws forever: a start state off the palm hangs its reset)."""
        for _ in range(MAX_START_DRAWS):
            if self._try_start(v, rng, s):
                return self.sample_goal(v, rng, s)
            self.redrawn_starts += 1
        raise RuntimeError(
            f"the object fell off the palm in {MAX_START_DRAWS} start draws in a row; check initial_qpos"
        )

    def _try_start(self, v: HandViews, rng: np.random.Generator, s: HandManipulateSettings) -> bool:
        m, d, q = self.model, v.data, self.object_qadr
        d.time = self.initial_time
        v.qpos[:] = self.initial_qpos
        v.qvel[:] = self.initial_qvel
        mujoco.mj_forward(m, d)
        pos, quat = v.qpos[q : q + 3].copy(), v.qpos[q + 3 : q + 7].copy()
        if s.randomize_initial_rotation and s.target_rotation != "fixed":
            mode = "xyz" if s.target_rotation == "ignore" else s.target_rotation
            quat = quat_mul(quat, self.draw_rotation(rng, mode))
        if s.randomize_initial_position and s.target_position != "fixed":
            pos += rng.normal(size=3, scale=INITIAL_POSITION_SCALE)
        v.qpos[q : q + 3] = pos
        v.qpos[q + 3 : q + 7] = quat / np.linalg.norm(quat)
        for _ in range(SETTLE_STEPS):
            self.act(v, self.zero_action, s.relative_control)
            self.advance(v)
        mujoco.mj_forward(m, d)
        return bool(d.site_xpos[self.center_site, 2] > ON_PALM_HEIGHT)

    def sample_goal(self, v: HandViews, rng: np.random.Generator, s: HandManipulateSettings) -> FloatArray:
        """A goal pose (7,) drawn from ``rng`` around the object's current pose in ``v``'s data.

        With ``target_rotation`` ``"ignore"`` or ``"fixed"`` the goal keeps the object's current
        orientation (Gymnasium-Robotics raises there: it calls an ``MjData`` method the ``mujoco``
        bindings lack)."""
        q = self.object_qadr
        pos = v.qpos[q : q + 3].copy()
        if s.target_position == "random":
            pos += rng.uniform(self.position_low, self.position_high)
        if s.target_rotation in ("ignore", "fixed"):
            quat = v.qpos[q + 3 : q + 7].copy()
        else:
            quat = self.draw_rotation(rng, s.target_rotation)
        return np.concatenate([pos, quat / np.linalg.norm(quat)])

    def observation(self, v: HandViews, out: FloatArray) -> None:
        """Write the ``obs_dim`` numbers of the observation (see ``HandManipulateEnv``) into ``out``."""
        n, q, dq = self.robot_qadr.size, self.object_qadr, self.object_dadr
        out[:n] = v.qpos[self.robot_qadr]
        out[n : 2 * n] = v.qvel[self.robot_dadr]
        out[2 * n : 2 * n + 6] = v.qvel[dq : dq + 6]
        out[2 * n + 6 : 2 * n + 13] = v.qpos[q : q + 7]
        if self.touch_get_obs is None:
            return
        touch = v.sensordata[self.touch_adr]
        if self.touch_get_obs == "boolean":
            out[2 * n + 13 :] = touch > 0.0
        elif self.touch_get_obs == "log":
            out[2 * n + 13 :] = np.log(touch + 1.0)
        else:
            out[2 * n + 13 :] = touch

    def draw(
        self,
        renderer: mujoco.Renderer,
        camera: mujoco.MjvCamera,
        v: HandViews,
        goal: FloatArray,
        position_ignored: bool,
    ) -> Any:
        """An RGB frame (height, width, 3) uint8 of ``v``'s scene with the goal marker at ``goal``
        (shifted 15 cm along x when the position is ignored, so as not to hide the object).

        The marker is placed in a copy of the ``MjData``: rendering does not change the episode
        (Gymnasium-Robotics moves the marker in the env's own data and calls ``mj_forward``)."""
        m = self.model
        scene = mujoco.MjData(m)
        mujoco.mj_copyData(scene, m, v.data)
        marker = np.array(goal, dtype=np.float64)
        if position_ignored:
            marker[0] += _IGNORED_POSITION_SHIFT
        scene.qpos[self.target_qadr : self.target_qadr + 7] = marker
        scene.qvel[self.target_dadr : self.target_dadr + 6] = 0.0
        if self.hidden_geom >= 0:
            m.geom_rgba[self.hidden_geom, 3] = 1.0
        mujoco.mj_forward(m, scene)
        renderer.update_scene(scene, camera=camera)
        return renderer.render()
