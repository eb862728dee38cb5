"""Fetch Reach / Push / Slide / PickAndPlace on MuJoCo, step-for-step faithful to Gymnasium-Robotics v4.

* :mod:`~goalenvs.envs.fetch.assets`: the MJCF files (MuJoCo and its OpenGL backend: :mod:`goalenvs.envs.mujoco_assets`);
* :mod:`~goalenvs.envs.fetch.settings`: the four tasks' defaults (``TASKS``) and the validated settings;
* :mod:`~goalenvs.envs.fetch.sim`: the model, its indices and the per-env operations on an ``MjData``;
* :mod:`~goalenvs.envs.fetch.env`: :class:`FetchTask`, the task over N ``MjData`` stepped in threads
  (on :mod:`goalenvs.envs.mujoco_task`, shared with the hand), and :class:`FetchEnv`, its batch of one;
* :mod:`~goalenvs.envs.fetch.vector`: :class:`FetchVectorEnv`, its batch of N.
"""

# First: it chooses MuJoCo's OpenGL backend (EGL without a display) before anything imports mujoco.
from goalenvs.envs.fetch.assets import fetch_assets_dir  # isort: skip

from goalenvs.envs.fetch.env import FetchEnv, FetchTask
from goalenvs.envs.fetch.settings import REWARD_TYPES, TASKS, FetchDefaults, FetchSettings
from goalenvs.envs.fetch.vector import FetchVectorEnv
from goalenvs.envs.goal_functions import fetch_reward, fetch_success, goal_distance, mat2euler

__all__ = [
    "REWARD_TYPES",
    "TASKS",
    "FetchDefaults",
    "FetchEnv",
    "FetchSettings",
    "FetchTask",
    "FetchVectorEnv",
    "fetch_assets_dir",
    "fetch_reward",
    "fetch_success",
    "goal_distance",
    "mat2euler",
]
