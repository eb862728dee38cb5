"""The Shadow Dexterous Hand tasks on MuJoCo, step-for-step faithful to Gymnasium-Robotics.

So far HandReach (Gymnasium-Robotics' ``HandReach-v3``):

* :mod:`~goalenvs.envs.hand.assets`: MuJoCo (through the Fetch family's backend choice) and the MJCF files;
* :mod:`~goalenvs.envs.hand.settings`: HandReach's defaults and its validated settings;
* :mod:`~goalenvs.envs.hand.goals`: the pure goal functions (reward, success);
* :mod:`~goalenvs.envs.hand.sim`: the model, its indices and the per-env operations on an ``MjData``;
* :mod:`~goalenvs.envs.hand.env`: :class:`HandReachTask`, the task over N ``MjData`` (on
  :mod:`goalenvs.envs.mujoco_task`, as Fetch's), and :class:`HandReachEnv`, its batch of one;
* :mod:`~goalenvs.envs.hand.vector`: :class:`HandReachVectorEnv`, its batch of N.
"""

# First: it chooses MuJoCo's OpenGL backend (EGL without a display) before anything imports mujoco.
from goalenvs.envs.hand.assets import hand_assets_dir  # isort: skip

from goalenvs.envs.hand.env import HandReachEnv, HandReachTask
from goalenvs.envs.hand.goals import reach_reward, reach_success
from goalenvs.envs.hand.settings import REACH_INITIAL_QPOS, REWARD_TYPES, HandReachSettings
from goalenvs.envs.hand.vector import HandReachVectorEnv

__all__ = [
    "REACH_INITIAL_QPOS",
    "REWARD_TYPES",
    "HandReachEnv",
    "HandReachSettings",
    "HandReachTask",
    "HandReachVectorEnv",
    "hand_assets_dir",
    "reach_reward",
    "reach_success",
]
