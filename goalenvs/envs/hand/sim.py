"""The Shadow Hand's MuJoCo models, and what an episode does to one ``MjData`` of one.

:class:`HandModel` is what every hand task shares: the model loaded from Gymnasium-Robotics' MJCF,
the hand's joints and actuators resolved to indices once, the start state, applying an action and
integrating. :class:`HandSim` is HandReach's (the in-hand manipulation tasks' is
:class:`goalenvs.envs.hand.manipulate_sim.ManipulateSim`): it loads the model, resolves every name to an index once, computes the start state of
every episode, and offers the per-env operations: start an episode, draw a goal, apply an action,
integrate, observe, draw a frame. The fidelity rules, each there because the physics or the random
stream would otherwise drift from Gymnasium-Robotics' ``HandReach-v3``:

* the start state is ``initial_qpos`` written into a fresh ``MjData`` and one ``mj_forward``; every
  episode restarts from it with ``mj_resetData`` (which also clears the solver's warm start);
* a goal draws, in this order: the finger that meets the thumb (``choice`` of 4), the meeting point's
  jitter (3 normals), and the coin (1 uniform) that sends every tip back to its start instead;
* the action is clipped with float32 bounds (by the caller) and widened to float64 exactly, then
  mapped onto each actuator's control range and clipped to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from goalenvs.envs.hand.assets import hand_assets_dir, mujoco
from goalenvs.envs.hand.settings import (
    FINGERTIP_SITES,
    MEETING_OFFSET,
    MEETING_SCALE,
    MEETING_SPACING,
    RETURN_PROBABILITY,
    HandReachSettings,
)

__all__ = ["HandModel", "HandSim", "HandViews"]

FloatArray = np.ndarray

_THUMB = len(FINGERTIP_SITES) - 1  # the thumb's row in the (5, 3) goal
# The proximal actuators of the four fingers drive a tendon over two joints (J1 and the coupled J0):
# relative control centres them on the sum of both angles.
_COUPLED = ("FF", "MF", "RF", "LF")


class HandModel:
    """A Shadow Hand MJCF model, its hand's indices and start state, and the operations every hand task
    shares: apply an action, integrate.

    ``data`` is the ``MjData`` the start state was computed in (a single env goes on stepping it): the
    joint values of ``initial_qpos`` written into a fresh ``MjData``, then one ``mj_forward``.
    ``dt`` is the env step in seconds (``n_substeps`` physics steps).
    """

    def __init__(
        self, xml_file: str, *, n_substeps: int, initial_qpos: Mapping[str, Any], width: int, height: int
    ) -> None:
        self.n_substeps = n_substeps
        self.model = mujoco.MjModel.from_xml_path(str(hand_assets_dir() / xml_file))
        self.data = mujoco.MjData(self.model)
        self.model.vis.global_.offwidth = width
        self.model.vis.global_.offheight = height
        self._resolve_hand_ids()
        self._write_initial_qpos(initial_qpos)
        mujoco.mj_forward(self.model, self.data)
        self.initial_time = float(self.data.time)
        self.initial_qpos = self.data.qpos.copy()
        self.initial_qvel = self.data.qvel.copy()
        self.dt = self.n_substeps * float(self.model.opt.timestep)

    # ---- set-up (names -> indices, once) -----------------------------------------------------------

    def name2id(self, kind: Any, name: str) -> int:
        """The id of the ``kind`` (a ``mujoco.mjtObj``) named ``name``; ValueError when there is none."""
        idx = mujoco.mj_name2id(self.model, kind, name)
        if idx < 0:
            raise ValueError(f"the hand model has no {kind.name[6:].lower()} named {name!r}")
        return int(idx)

    def _joint_width(self, jid: int) -> int:
        # int() because MuJoCo >= 3.12 returns enum-typed values that do not compare with numpy ints.
        jtype = int(self.model.jnt_type[jid])
        return {int(mujoco.mjtJoint.mjJNT_FREE): 7, int(mujoco.mjtJoint.mjJNT_BALL): 4}.get(jtype, 1)

    def _resolve_hand_ids(self) -> None:
        m = self.model
        obj = mujoco.mjtObj
        # The robot's joints (named "robot..."), in joint-id order: the order Gymnasium-Robotics
        # observes their positions and velocities in. All are hinges (one qpos, one qvel each).
        robot = [j for j in range(m.njnt) if m.joint(j).name.startswith("robot")]
        if any(self._joint_width(j) != 1 for j in robot):
            raise ValueError("every robot joint of the hand model must be a hinge or a slide")
        self.robot_qadr = np.array([m.jnt_qposadr[j] for j in robot], dtype=np.intp)
        self.robot_dadr = np.array([m.jnt_dofadr[j] for j in robot], dtype=np.intp)
        # Absolute control: the action's [-1, 1] spans each actuator's control range.
        low, high = m.actuator_ctrlrange[:, 0].copy(), m.actuator_ctrlrange[:, 1].copy()
        self.ctrl_low, self.ctrl_high = low, high
        self.ctrl_half_range = (high - low) / 2.0
        self.ctrl_center = (high + low) / 2.0
        # Relative control: centred on the actuated joint's angle (the actuator "robot0:A_X" drives the
        # joint "robot0:X"), plus the coupled distal joint's for the fingers' J1 actuators.
        names = [m.actuator(i).name for i in range(m.nu)]
        self.act_qadr = np.array(
            [m.jnt_qposadr[self.name2id(obj.mjOBJ_JOINT, n.replace(":A_", ":"))] for n in names],
            dtype=np.intp,
        )
        coupled = [names.index(f"robot0:A_{f}J1") for f in _COUPLED]
        self.coupled_acts = np.array(coupled, dtype=np.intp)
        self.coupled_qadr = np.array(
            [m.jnt_qposadr[self.name2id(obj.mjOBJ_JOINT, f"robot0:{f}J0")] for f in _COUPLED], dtype=np.intp
        )

    def _write_initial_qpos(self, initial_qpos: Mapping[str, Any]) -> None:
        m, d = self.model, self.data
        for name, value in initial_qpos.items():
            jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
            if jid < 0:
                raise ValueError(f"initial_qpos names an unknown joint {name!r} of the hand model")
            width = self._joint_width(jid)
            arr = np.asarray(value, dtype=np.float64)
            if arr.size != width or (width > 1 and arr.shape != (width,)):
                raise ValueError(
                    f"initial_qpos[{name!r}] must have {width} value(s) for that joint, got {value!r}"
                )
            start = int(m.jnt_qposadr[jid])
            d.qpos[start : start + width] = arr.reshape(-1)

    # ---- what every hand task does to one env ------------------------------------------------------

    def act(self, v: HandViews, action: FloatArray, relative: bool) -> None:
        """Set the 20 actuators' controls from ``action`` (float64 in [-1, 1]), clipped to their ranges."""
        if relative:
            center = v.qpos[self.act_qadr]
            center[self.coupled_acts] += v.qpos[self.coupled_qadr]
        else:
            center = self.ctrl_center
        np.clip(center + action * self.ctrl_half_range, self.ctrl_low, self.ctrl_high, out=v.ctrl)

    def advance(self, v: HandViews) -> None:
        """Integrate ``n_substeps`` physics steps."""
        mujoco.mj_step(self.model, v.data, nstep=self.n_substeps)


class HandSim(HandModel):
    """The ``MjModel`` of HandReach, its indices, its start state, and the per-env operations.

    ``initial_goal`` (15,) holds the fingertip positions of the start state and ``palm_xpos`` (3,)
    the palm's position, in metres.
    """

    def __init__(self, settings: HandReachSettings) -> None:
        super().__init__(
            "reach.xml",
            n_substeps=settings.n_substeps,
            initial_qpos=settings.initial_qpos,
            width=settings.width,
            height=settings.height,
        )
        obj = mujoco.mjtObj
        self.tip_sites = np.array([self.name2id(obj.mjOBJ_SITE, n) for n in FINGERTIP_SITES], dtype=np.intp)
        self.palm = self.name2id(obj.mjOBJ_BODY, "robot0:palm")
        self.target_sites = np.array(
            [self.name2id(obj.mjOBJ_SITE, f"target{i}") for i in range(len(FINGERTIP_SITES))], dtype=np.intp
        )
        self.finger_sites = np.array(
            [self.name2id(obj.mjOBJ_SITE, f"finger{i}") for i in range(len(FINGERTIP_SITES))], dtype=np.intp
        )
        self.initial_goal = self.data.site_xpos[self.tip_sites].reshape(-1).copy()
        self.palm_xpos = self.data.xpos[self.palm].copy()
        n = self.robot_qadr.size
        #: Length of the observation vector, and where the achieved goal sits in it.
        self.obs_dim = 2 * n + 3 * len(FINGERTIP_SITES)
        self.achieved = slice(2 * n, self.obs_dim)

    # ---- the per-env operations ----------------------------------------------------------------------

    def restart(self, v: HandViews) -> None:
        """Put ``v``'s data in the start state (nothing random: only the goal is drawn)."""
        m, d = self.model, v.data
        mujoco.mj_resetData(m, d)  # also clears the warm start and the controls, as Gymnasium-Robotics does
        d.time = self.initial_time
        v.qpos[:] = self.initial_qpos
        v.qvel[:] = self.initial_qvel
        mujoco.mj_forward(m, d)

    def sample_goal(self, rng: np.random.Generator) -> FloatArray:
        """A goal (15,) drawn from ``rng``: the thumb and one other finger meet above the palm, the rest
        stay where they start; or (probability 0.1) every tip at its start."""
        finger = int(rng.choice(_THUMB))  # first, middle, ring or little finger
        meeting = self.palm_xpos + np.array(MEETING_OFFSET)
        meeting += rng.normal(scale=MEETING_SCALE, size=3)
        goal = self.initial_goal.reshape(-1, 3).copy()
        # Each of the two tips stops short of the meeting point along its own approach, so they do
        # not overlap.
        for tip in (_THUMB, finger):
            direction = meeting - goal[tip]
            direction /= np.linalg.norm(direction)
            goal[tip] = meeting - MEETING_SPACING * direction
        if rng.uniform() < RETURN_PROBABILITY:
            return self.initial_goal.copy()
        return goal.reshape(-1)

    def observation(self, v: HandViews, out: FloatArray) -> None:
        """Write the ``obs_dim`` numbers of the observation (see ``HandReachEnv``) into ``out``."""
        n = self.robot_qadr.size
        out[:n] = v.qpos[self.robot_qadr]
        out[n : 2 * n] = v.qvel[self.robot_dadr]
        out[2 * n :] = v.site_xpos[self.tip_sites].reshape(-1)

    def draw(
        self,
        renderer: mujoco.Renderer,
        camera: mujoco.MjvCamera,
        v: HandViews,
        goal: FloatArray,
        achieved: FloatArray,
    ) -> Any:
        """An RGB frame (height, width, 3) uint8 of ``v``'s scene, the goal tips and the achieved tips
        shown as coloured spheres."""
        # Move the marker sites without mj_forward (which, before MuJoCo 3.3.6, also advances the
        # solver's warm start and so would change the episode): their body is static, so a site's
        # world position is its body's position plus its offset.
        m, d = self.model, v.data
        for sites, points in ((self.target_sites, goal), (self.finger_sites, achieved)):
            points = np.asarray(points).reshape(-1, 3)
            body_pos = d.xpos[m.site_bodyid[sites]]
            m.site_pos[sites] = points - body_pos
            d.site_xpos[sites] = points
        renderer.update_scene(d, camera=camera)
        return renderer.render()


class HandViews:
    """Numpy views of the rows of one ``MjData`` that a step touches.

    Every attribute access on ``MjData`` builds a new array object, so the operations work on these
    views (they alias the ``MjData``'s memory for its lifetime). Pickled as ``(sim, data)`` and rebuilt
    when loaded.
    """

    def __init__(self, sim: HandSim, data: mujoco.MjData) -> None:
        self.sim, self.data = sim, data
        self.qpos, self.qvel, self.ctrl = data.qpos, data.qvel, data.ctrl
        self.site_xpos = data.site_xpos
        self.sensordata = data.sensordata

    def __reduce__(self) -> tuple[Any, ...]:
        return (HandViews, (self.sim, self.data))
