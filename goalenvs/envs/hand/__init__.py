"""The Shadow Dexterous Hand tasks on MuJoCo, step-for-step faithful to Gymnasium-Robotics.

HandReach (Gymnasium-Robotics' ``HandReach-v3``) and the in-hand manipulation of a block, an egg and
a pen (``HandManipulate*-v1``):

* :mod:`~goalenvs.envs.hand.assets`: MuJoCo (through goalenvs.envs.mujoco_assets' backend choice) and the MJCF files;
* :mod:`~goalenvs.envs.hand.settings`: the tasks' defaults and validated settings;
* :mod:`~goalenvs.envs.hand.goals`: the pure goal functions (reward, success; quaternions);
* :mod:`~goalenvs.envs.hand.sim`: the hand's model, its indices and the per-env operations on an
  ``MjData`` (HandReach's); :mod:`~goalenvs.envs.hand.manipulate_sim`: the manipulate tasks' model;
* :mod:`~goalenvs.envs.hand.env`: :class:`HandReachTask`, the task over N ``MjData`` (on
  :mod:`goalenvs.envs.mujoco_task`, as Fetch's), and :class:`HandReachEnv`, its batch of one;
  :mod:`~goalenvs.envs.hand.manipulate`: :class:`HandManipulateTask` and :class:`HandManipulateEnv`;
* :mod:`~goalenvs.envs.hand.vector`: :class:`HandReachVectorEnv` and :class:`HandManipulateVectorEnv`,
  their batches of N.
"""

# First: it chooses MuJoCo's OpenGL backend (EGL without a display) before anything imports mujoco.
from goalenvs.envs.hand.assets import hand_assets_dir  # isort: skip

from goalenvs.envs.hand.env import HandReachEnv, HandReachTask
from goalenvs.envs.hand.goals import manipulate_distances, manipulate_reward, reach_reward, reach_success
from goalenvs.envs.hand.manipulate import HandManipulateEnv, HandManipulateTask
from goalenvs.envs.hand.settings import (
    REACH_INITIAL_QPOS,
    REWARD_TYPES,
    HandManipulateSettings,
    HandReachSettings,
)
from goalenvs.envs.hand.vector import HandManipulateVectorEnv, HandReachVectorEnv

__all__ = [
    "REACH_INITIAL_QPOS",
    "REWARD_TYPES",
    "HandManipulateEnv",
    "HandManipulateSettings",
    "HandManipulateTask",
    "HandManipulateVectorEnv",
    "HandReachEnv",
    "HandReachSettings",
    "HandReachTask",
    "HandReachVectorEnv",
    "hand_assets_dir",
    "manipulate_distances",
    "manipulate_reward",
    "reach_reward",
    "reach_success",
]
