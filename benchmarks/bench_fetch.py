"""Fetch step speed: ours against Gymnasium-Robotics v4 and against the raw physics bound.

Per task (full 50-step episodes, 4-d random actions), the rows of :mod:`benchmarks.mujoco_speed`:
``gym.make`` against ``Fetch<Task>-v4``, the bare env against raw ``mj_step`` (with the gripper held
shut where the task blocks it, as the env does), and the cost of a step beyond ``mj_step``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.common import Row
from benchmarks.mujoco_speed import task_rows

TASKS = (("reach", "Reach"), ("push", "Push"), ("slide", "Slide"), ("pick_and_place", "PickAndPlace"))
STEPS = 50


def fingers(env: Any) -> Any:
    """The finger joints the env holds at 0 after every step (Reach's blocked gripper), else None:
    part of the trajectory the raw bound replays."""
    return env.unwrapped._views.finger_q if env.unwrapped.block_gripper else None


def run(quick: bool) -> list[Row]:
    import goalenvs  # noqa: F401  (registers the ids)
    import goalenvs.envs.fetch.sim as sim  # where the env calls mj_step

    n_episodes = 2 if quick else 8
    repeats = 3 if quick else 9
    rows: list[Row] = []
    for i, (_task, title) in enumerate(TASKS):
        actions = np.random.default_rng(i).uniform(-1.0, 1.0, (n_episodes, STEPS, 4)).astype(np.float32)
        ids = (f"goalenvs/Fetch{title}-v0", f"Fetch{title}-v4")
        rows += task_rows("fetch", f"Fetch{title}", ids, actions, sim, repeats, fingers)
    return rows
