"""How long ``check_goal_env`` takes with the default ``n_steps``, next to stable-baselines3's ``check_env``.

The peer checks far less (three goal-env properties on a few steps), so it is expected to be faster;
the row shows what our extra checks cost. The target is a Fetch-sized env (observation 25, goal 3)
checked in under 10 s. Gymnasium-Robotics' Fetch envs do not load on MuJoCo 4 (a joint-type
assertion in ``set_joint_qpos``), so the Fetch-sized case is a 7-joint MuJoCo arm with Fetch's
shapes and its 20 physics substeps per step; PointMaze is a real Gymnasium-Robotics env.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from benchmarks.common import Row, median_seconds
from goalenvs import check_goal_env

_ARM_XML = """
<mujoco>
  <option timestep="0.002"/>
  <default><joint damping="0.5" armature="0.01"/></default>
  <worldbody>
    <body name="l0" pos="0 0 0.1">
      <joint name="j0" type="hinge" axis="0 0 1"/><geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.02"/>
      <body name="l1" pos="0.1 0 0"><joint name="j1" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.02"/>
        <body name="l2" pos="0.1 0 0"><joint name="j2" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.02"/>
          <body name="l3" pos="0.1 0 0"><joint name="j3" type="hinge" axis="1 0 0"/>
            <geom type="capsule" fromto="0 0 0 0.08 0 0" size="0.015"/>
            <body name="l4" pos="0.08 0 0"><joint name="j4" type="hinge" axis="0 1 0"/>
              <geom type="capsule" fromto="0 0 0 0.06 0 0" size="0.015"/>
              <body name="l5" pos="0.06 0 0"><joint name="j5" type="hinge" axis="1 0 0"/>
                <geom type="capsule" fromto="0 0 0 0.04 0 0" size="0.01"/>
                <body name="l6" pos="0.04 0 0"><joint name="j6" type="hinge" axis="0 1 0"/>
                  <geom type="box" size="0.02 0.02 0.02"/><site name="grip" pos="0.02 0 0"/>
                </body></body></body></body></body></body></body>
  </worldbody>
  <actuator>
    <position joint="j0" kp="20"/><position joint="j1" kp="20"/><position joint="j2" kp="20"/>
    <position joint="j3" kp="10"/><position joint="j4" kp="10"/><position joint="j5" kp="5"/>
    <position joint="j6" kp="5"/>
  </actuator>
</mujoco>
"""


class _ArmReachEnv(gym.Env):
    """A Fetch-shaped reach task on a 7-joint MuJoCo arm: observation 25, goals 3, 4 actions, 20 substeps."""

    def __init__(self) -> None:
        self.model = mujoco.MjModel.from_xml_string(_ARM_XML)
        self.data = mujoco.MjData(self.model)
        self._site = self.model.site("grip").id  # resolved once: no name lookups in step
        goal = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float64)
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-np.inf, np.inf, shape=(25,), dtype=np.float64),
                "achieved_goal": goal,
                "desired_goal": goal,
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self.goal = np.zeros(3)

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        d = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return -(d > 0.05).astype(np.float64)

    def _obs(self) -> dict[str, np.ndarray]:
        grip = self.data.site_xpos[self._site].copy()
        obs = np.concatenate([self.data.qpos, self.data.qvel, grip, self.data.ctrl[:4], [self.data.time]])
        return {
            "observation": np.concatenate([obs, grip]),
            "achieved_goal": grip,
            "desired_goal": self.goal.copy(),
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:] = self.np_random.uniform(-0.3, 0.3, size=7)
        mujoco.mj_forward(self.model, self.data)
        self.goal = self.data.site_xpos[self._site] + self.np_random.uniform(-0.1, 0.1, size=3)
        return self._obs(), {}

    def step(self, action: np.ndarray):
        self.data.ctrl[:4] = np.clip(self.data.ctrl[:4] + 0.05 * np.asarray(action), -1.5, 1.5)
        mujoco.mj_step(self.model, self.data, nstep=20)
        obs = self._obs()
        success = bool(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"]) <= 0.05)
        info = {"is_success": success}
        return (
            obs,
            float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info)),
            False,
            False,
            info,
        )


def _cases() -> list[tuple[str, Any]]:
    cases: list[tuple[str, Any]] = [
        ("Fetch-sized MuJoCo arm (obs 25, goal 3)", lambda: gym.wrappers.TimeLimit(_ArmReachEnv(), 50))
    ]
    try:
        import gymnasium_robotics

        gym.register_envs(gymnasium_robotics)
        cases.append(("PointMaze_UMaze-v3", lambda: gym.make("PointMaze_UMaze-v3")))
    except ImportError:
        pass
    return cases


def run(quick: bool) -> list[Row]:
    from stable_baselines3.common.env_checker import check_env

    repeats = 1 if quick else 3
    rows = []
    for name, make in _cases():
        env = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert check_goal_env(env).passed or name.startswith("PointMaze")
            ours = median_seconds(lambda env=env: check_goal_env(env), repeats)
            # SB3's check_env calls env.compute_reward directly, which a Gymnasium 1.x wrapper no longer
            # forwards, so it gets the bare env.
            bare = env.unwrapped
            peer = median_seconds(
                lambda bare=bare: check_env(bare, warn=False, skip_render_check=True), repeats
            )
        env.close()
        rows.append(Row("check", f"{name}, n_steps=200", "s per check", ours, peer, "SB3 check_env", False))
    return rows
