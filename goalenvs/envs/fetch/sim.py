"""One Fetch task's MuJoCo model, and what an episode does to one ``MjData`` of it.

:class:`FetchSim` loads the model, resolves every name to an index once, computes the start state of
every episode, and offers the per-env operations: start an episode, apply an action, integrate,
observe, draw. ``FetchEnv`` applies them to its one ``MjData``; ``FetchVectorEnv`` to N ``MjData`` of
one shared model, from several threads (the operations only read the model and write their own
``MjData``). Both therefore follow the same fidelity rules, each there because the physics, or the
random stream, would otherwise drift from Gymnasium-Robotics v4:

* the mocap target is reset to the gripper body's pose *as MuJoCo last computed it* before the action
  offset is added (after ``mj_step`` that pose is the one at the start of the last substep);
* the mocap quaternion is the body quaternion plus ``(1, 0, 1, 0)``, unnormalised, as there;
* random numbers are drawn in their order: object position (rejection loop), then goal offset, then
  (target in the air only) the coin flip and the height;
* the action is clipped with float32 bounds and scaled in its own dtype (by the caller), so a float32
  action is rounded exactly as there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np

from goalenvs.envs.fetch.assets import fetch_assets_dir
from goalenvs.envs.fetch.settings import (
    AIR_TARGET_MAX_HEIGHT,
    MIN_OBJECT_GRIPPER_DIST,
    TASKS,
    FetchSettings,
)
from goalenvs.envs.goal_functions import euler_from_xmat

__all__ = ["FetchSim", "FetchViews"]

FloatArray = np.ndarray

_MOCAP_ROT_DELTA = np.array([1.0, 0.0, 1.0, 0.0])  # added to the gripper quaternion every step
_GRIPPER_SETUP_OFFSET = (-0.498, 0.005, -0.431)  # where the gripper is driven to before the first episode


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


# Since MuJoCo 3.3.6 mj_forward no longer writes qacc_warmstart (only mj_step does), so after the
# fingers are pinned, recomputing kinematics and the com-based quantities the Jacobians need is all
# the next step and the observation read: the same trajectory, bit for bit, for less work. Before
# 3.3.6 the full mj_forward also advanced the warm start, and must stay.
_FORWARD_IS_STATELESS = _version_tuple(mujoco.__version__) >= (3, 3, 6)


class FetchSim:
    """The ``MjModel`` of one Fetch task, its indices, its start state, and the per-env operations.

    ``data`` is the ``MjData`` the start state was computed in (a single env goes on stepping it).
    ``initial_gripper_xpos`` (3,) and ``height_offset`` (the table-top object height, 0.0 for reach)
    are in metres; ``dt`` is the env step in seconds (``n_substeps`` physics steps).
    """

    def __init__(self, settings: FetchSettings) -> None:
        spec = TASKS[settings.task]
        self.task = settings.task
        self.has_object = spec.has_object
        self.n_substeps = settings.n_substeps
        self.model = mujoco.MjModel.from_xml_path(str(fetch_assets_dir() / spec.xml))
        self.data = mujoco.MjData(self.model)
        self.model.vis.global_.offwidth = settings.width
        self.model.vis.global_.offheight = settings.height
        self._resolve_ids()
        self._setup_start_state(settings.initial_qpos, settings.gripper_extra_height)
        self.dt = self.n_substeps * float(self.model.opt.timestep)
        #: Length of the observation vector, and where the achieved goal sits in it.
        self.obs_dim = 25 if self.has_object else 10
        self.achieved = slice(3, 6) if self.has_object else slice(0, 3)

    # ---- set-up (names -> indices, once) -----------------------------------------------------------

    def _name2id(self, kind: Any, name: str) -> int:
        idx = mujoco.mj_name2id(self.model, kind, name)
        if idx < 0:
            raise ValueError(f"the {self.task!r} model has no {kind.name[6:].lower()} named {name!r}")
        return int(idx)

    def _joint_qpos_slice(self, name: str) -> tuple[int, int]:
        jid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if jid < 0:
            names = [self.model.joint(i).name for i in range(self.model.njnt)]
            raise ValueError(
                f"initial_qpos names an unknown joint {name!r}; the {self.task!r} model has {names}"
            )
        # int() because MuJoCo >= 3.12 returns enum-typed values that do not compare with numpy ints.
        jtype = int(self.model.jnt_type[jid])
        width = {int(mujoco.mjtJoint.mjJNT_FREE): 7, int(mujoco.mjtJoint.mjJNT_BALL): 4}.get(jtype, 1)
        start = int(self.model.jnt_qposadr[jid])
        return start, start + width

    def _resolve_ids(self) -> None:
        m = self.model
        obj = mujoco.mjtObj
        self.grip_site = self._name2id(obj.mjOBJ_SITE, "robot0:grip")
        self.target_site = self._name2id(obj.mjOBJ_SITE, "target0")
        self.object_site = self._name2id(obj.mjOBJ_SITE, "object0") if self.has_object else -1
        self.object_qadr = self._joint_qpos_slice("object0:joint")[0] if self.has_object else -1
        # Finger order (right, left) is joint-id order, the order Gymnasium-Robotics observes them in.
        fingers = [
            self._name2id(obj.mjOBJ_JOINT, n)
            for n in ("robot0:r_gripper_finger_joint", "robot0:l_gripper_finger_joint")
        ]
        self.finger_qadr = np.array([m.jnt_qposadr[j] for j in fingers], dtype=np.intp)
        self.finger_dadr = np.array([m.jnt_dofadr[j] for j in fingers], dtype=np.intp)
        if np.any(np.diff(self.finger_qadr) != 1) or np.any(np.diff(self.finger_dadr) != 1):
            raise ValueError("the finger joints (right, left) must be adjacent in qpos and qvel")
        self.mocap = int(m.body_mocapid[self._name2id(obj.mjOBJ_BODY, "robot0:mocap")])
        # Every weld between a mocap body and a robot body: the mocap is re-anchored on the body each step.
        weld = int(mujoco.mjtEq.mjEQ_WELD)
        self.weld_rows = np.array([i for i in range(m.neq) if int(m.eq_type[i]) == weld], dtype=np.intp)
        pairs = []
        for i in self.weld_rows:
            b1, b2 = int(m.eq_obj1id[i]), int(m.eq_obj2id[i])
            if m.body_mocapid[b1] != -1:
                pairs.append((int(m.body_mocapid[b1]), b2))
            elif m.body_mocapid[b2] != -1:
                pairs.append((int(m.body_mocapid[b2]), b1))
        if len(pairs) != 1:
            raise ValueError(
                f"the {self.task!r} model must weld exactly one mocap body to the gripper, found {pairs}"
            )
        ((self.mocap_of_weld, self.welded_body),) = pairs
        # Finger actuators get the gripper command: position servos relative to the joint's position.
        n_act = min(int(m.nu), 2)
        self.act_ids = np.arange(n_act, dtype=np.intp)
        self.act_relative = np.array([m.actuator_biastype[i] != 0 for i in range(n_act)], dtype=bool)
        self.act_qadr = np.array([m.jnt_qposadr[m.actuator_trnid[i, 0]] for i in range(n_act)], dtype=np.intp)
        self.act_all_relative = bool(np.all(self.act_relative))

    def _setup_start_state(self, initial_qpos: Mapping[str, Any], gripper_extra_height: float) -> None:
        m, d = self.model, self.data
        for name, value in initial_qpos.items():
            start, stop = self._joint_qpos_slice(name)
            arr = np.asarray(value, dtype=np.float64)
            if arr.size != stop - start or (stop - start > 1 and arr.shape != (stop - start,)):
                raise ValueError(
                    f"initial_qpos[{name!r}] must have {stop - start} value(s) for that joint, got {value!r}"
                )
            d.qpos[start:stop] = arr.reshape(-1)
        # Welds anchored at the body origins with identity relative pose, so the gripper takes the
        # mocap's pose exactly (the first 7 entries of eq_data: anchor, relative position, quat w).
        for i in self.weld_rows:
            m.eq_data[i, :7] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
        mujoco.mj_forward(m, d)
        mujoco.mj_forward(m, d)
        ox, oy, oz = _GRIPPER_SETUP_OFFSET
        d.mocap_pos[self.mocap] = np.array([ox, oy, oz + gripper_extra_height]) + d.site_xpos[self.grip_site]
        d.mocap_quat[self.mocap] = (1.0, 0.0, 1.0, 0.0)
        for _ in range(10):
            mujoco.mj_step(m, d, nstep=self.n_substeps)
        self.initial_gripper_xpos = d.site_xpos[self.grip_site].copy()
        self.height_offset = float(d.site_xpos[self.object_site][2]) if self.has_object else 0.0
        self.initial_time = float(d.time)
        self.initial_qpos = d.qpos.copy()
        self.initial_qvel = d.qvel.copy()

    # ---- the per-env operations ----------------------------------------------------------------------

    def restart(self, v: FetchViews, rng: np.random.Generator, obj_range: float) -> None:
        """Put ``v``'s data in the start state, the object (if any) at a random spot drawn from ``rng``."""
        m, d = self.model, v.data
        mujoco.mj_resetData(m, d)  # also clears warm-start and mocap, as Gymnasium-Robotics does
        d.time = self.initial_time
        v.qpos[:] = self.initial_qpos
        v.qvel[:] = self.initial_qvel
        if self.has_object:
            center = self.initial_gripper_xpos[:2]
            xy = center
            while np.linalg.norm(xy - center) < MIN_OBJECT_GRIPPER_DIST:
                xy = center + rng.uniform(-obj_range, obj_range, size=2)
            v.qpos[self.object_qadr : self.object_qadr + 2] = xy
        mujoco.mj_forward(m, d)

    def sample_goal(
        self,
        rng: np.random.Generator,
        target_range: float,
        target_offset: float | FloatArray,
        target_in_the_air: bool,
    ) -> FloatArray:
        """A goal (3,) drawn from ``rng`` around the gripper's start (on the table, or above it)."""
        goal = self.initial_gripper_xpos + rng.uniform(-target_range, target_range, size=3)
        if self.has_object:
            goal += target_offset
            goal[2] = self.height_offset
            if target_in_the_air and rng.uniform() < 0.5:
                goal[2] += rng.uniform(0, AIR_TARGET_MAX_HEIGHT)
        return goal

    def act(self, v: FetchViews, delta: np.ndarray, grip: float) -> None:
        """Set the mocap target ``delta`` (3,) metres from the gripper and the finger command ``grip``."""
        # Re-anchor the mocap on the gripper, then offset it: the weld pulls the gripper after it.
        np.add(v.anchor_pos, delta, out=v.mocap_pos_row)
        np.add(v.anchor_quat, _MOCAP_ROT_DELTA, out=v.mocap_quat_row)
        if self.act_ids.size:
            if self.act_all_relative:  # position servos: the command is relative to the joint position
                v.ctrl[self.act_ids] = v.qpos[self.act_qadr] + grip
            else:
                v.ctrl[self.act_ids] = np.where(self.act_relative, v.qpos[self.act_qadr] + grip, grip)

    def advance(self, v: FetchViews, block_gripper: bool) -> None:
        """Integrate ``n_substeps`` physics steps; with ``block_gripper`` pin the fingers shut after."""
        m, d = self.model, v.data
        mujoco.mj_step(m, d, nstep=self.n_substeps)
        if block_gripper:
            v.finger_q[:] = 0.0
            if _FORWARD_IS_STATELESS:
                mujoco.mj_kinematics(m, d)
                mujoco.mj_comPos(m, d)
            else:
                mujoco.mj_forward(m, d)

    def observation(self, v: FetchViews) -> list[float]:
        """The ``obs_dim`` numbers of the observation vector (see ``FetchEnv``), as Python floats."""
        # Assembled as Python floats (the caller makes one array of them): a numpy call on a 3-vector
        # costs many times the float operations it does, and this runs every env step of every env.
        # IEEE arithmetic is the same either way, so the values are bit-for-bit those of
        # Gymnasium-Robotics' array expressions.
        m, d = self.model, v.data
        dt = self.dt
        mujoco.mj_jacSite(m, d, v.jac_grip, None, self.grip_site)
        gx, gy, gz = v.grip_xpos.tolist()
        f_r, f_l = v.finger_q.tolist()
        w_r, w_l = v.finger_v.tolist()
        if not self.has_object:
            gvx, gvy, gvz = [x * dt for x in np.dot(v.jac, v.qvel).tolist()]
            return [gx, gy, gz, f_r, f_l, gvx, gvy, gvz, w_r * dt, w_l * dt]
        mujoco.mj_jacSite(m, d, v.jac_obj_p, v.jac_obj_r, self.object_site)
        # Site velocities as Jacobian @ qvel (one product for the three rows: gripper linear, object
        # linear, object angular), scaled to displacement per env step like Gymnasium-Robotics.
        gvx, gvy, gvz, ovx, ovy, ovz, orx, ory, orz = [x * dt for x in np.dot(v.jac, v.qvel).tolist()]
        ox, oy, oz = v.obj_xpos.tolist()
        ex, ey, ez = euler_from_xmat(v.obj_xmat.tolist())
        return [
            gx, gy, gz,
            ox, oy, oz,
            ox - gx, oy - gy, oz - gz,
            f_r, f_l,
            ex, ey, ez,
            ovx - gvx, ovy - gvy, ovz - gvz,
            orx, ory, orz,
            gvx, gvy, gvz,
            w_r * dt, w_l * dt,
        ]  # fmt: skip

    def draw(
        self, renderer: mujoco.Renderer, camera: mujoco.MjvCamera, v: FetchViews, goal: FloatArray
    ) -> Any:
        """An RGB frame (height, width, 3) uint8 of ``v``'s scene with ``goal`` shown as the red target."""
        # Move the target marker without mj_forward (which would alter the next step's mocap anchor):
        # its body is static, so its world position is body position + site offset.
        body = self.model.site_bodyid[self.target_site]
        self.model.site_pos[self.target_site] = goal - v.data.xpos[body]
        v.site_xpos[self.target_site] = goal
        renderer.update_scene(v.data, camera=camera)
        return renderer.render()


class FetchViews:
    """Numpy views of the rows of one ``MjData`` that a step touches, and its Jacobian scratch.

    Every attribute access on ``MjData`` builds a new array object, so the operations work on these
    views (they alias the ``MjData``'s memory for its lifetime). Pickled as ``(sim, data)`` and rebuilt when loaded.
    """

    def __init__(self, sim: FetchSim, data: mujoco.MjData) -> None:
        self.sim, self.data = sim, data
        d = data
        self.qpos, self.qvel, self.ctrl = d.qpos, d.qvel, d.ctrl
        self.site_xpos = d.site_xpos
        self.anchor_pos = d.xpos[sim.welded_body]
        self.anchor_quat = d.xquat[sim.welded_body]
        self.mocap_pos_row = d.mocap_pos[sim.mocap_of_weld]
        self.mocap_quat_row = d.mocap_quat[sim.mocap_of_weld]
        self.grip_xpos = d.site_xpos[sim.grip_site]
        self.obj_xpos = d.site_xpos[sim.object_site]  # unused without an object
        self.obj_xmat = d.site_xmat[sim.object_site]
        q0, v0 = int(sim.finger_qadr[0]), int(sim.finger_dadr[0])
        self.finger_q = d.qpos[q0 : q0 + 2]
        self.finger_v = d.qvel[v0 : v0 + 2]
        self.jac = np.zeros((9 if sim.has_object else 3, sim.model.nv))
        self.jac_grip = self.jac[0:3]
        self.jac_obj_p = self.jac[3:6]
        self.jac_obj_r = self.jac[6:9]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FetchViews, (self.sim, self.data))
