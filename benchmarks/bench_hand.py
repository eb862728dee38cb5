"""Shadow Hand step speed: ours against Gymnasium-Robotics and against the raw physics bound.

The issue's four tasks (HandReach and the three objects' Rotate tasks: the block about z, the egg and
the pen), sparse, over full episodes (50 steps for HandReach, 100 for the objects) of 20-d random
actions; per task the rows of :mod:`benchmarks.mujoco_speed`: ``gym.make`` against Gymnasium-Robotics'
``HandReach-v3`` / ``HandManipulate*-v1`` (MuJoCo <= 3.11 only), the bare env against raw ``mj_step``,
and the cost of a step beyond ``mj_step``.
"""

from __future__ import annotations

import numpy as np

from benchmarks.common import Row
from benchmarks.mujoco_speed import task_rows

# (ours, Gymnasium-Robotics', episode length)
TASKS = (
    ("HandReach", "HandReach-v3", 50),
    ("HandManipulateBlockRotateZ", "HandManipulateBlockRotateZ-v1", 100),
    ("HandManipulateEggRotate", "HandManipulateEggRotate-v1", 100),
    ("HandManipulatePenRotate", "HandManipulatePenRotate-v1", 100),
)


def run(quick: bool) -> list[Row]:
    import goalenvs  # noqa: F401  (registers the ids)
    import goalenvs.envs.hand.sim as sim  # where the env calls mj_step

    n_episodes = 1 if quick else 4
    repeats = 3 if quick else 7
    rows: list[Row] = []
    for i, (title, theirs, steps) in enumerate(TASKS):
        actions = np.random.default_rng(i).uniform(-1.0, 1.0, (n_episodes, steps, 20)).astype(np.float32)
        rows += task_rows("hand", title, (f"goalenvs/{title}-v0", theirs), actions, sim, repeats)
    return rows
