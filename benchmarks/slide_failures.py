"""Which FetchSlide goals a her_ddpg checkpoint's greedy policy misses: by distance, by direction, and how.

``python -m benchmarks.slide_failures RUN_DIR [EPISODES]`` (default 500; the greedy policy of the run's latest
whole checkpoint, as ``examples/nets.py``'s ``load_policy`` reads it)

Episodes start from seeds 2e9 + i, the seeds ``--evaluate`` uses. Per episode: the goal's distance from
the puck's start and its direction (the angle of puck-to-goal on the table, 0 degrees pointing away from
the robot along +x), whether it succeeded, and for a miss, the final error split along the puck-to-goal
line (short of the goal or past it) and across it, and whether the puck was still moving at the last
step (a slide unfinished when success is read). Printed: success per band of distance and of direction,
then the misses by kind. Not a speed benchmark: ``python -m benchmarks`` does not run it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from nets import EVAL_SEED, Policy, load_policy
from runfolder import RunError

import goalenvs  # noqa: F401  (registers the ids)

THRESHOLD = 0.05  # FetchSlide's success distance (m)
DISTANCES = ((0.0, 0.2), (0.2, 0.4), (0.4, 0.6), (0.6, 0.9))  # m, puck start to goal
DIRECTIONS = ((-90, -30), (-30, -10), (-10, 10), (10, 30), (30, 90))  # degrees from +x


def episode(env: Any, policy: Policy, seed: int) -> dict[str, float]:
    """One greedy episode: the goal's distance and direction, success, the final error along and across
    the puck-to-goal line (m; along > 0: past the goal), whether the puck moved in the last step."""
    obs, _ = env.reset(seed=seed)
    puck0, goal = obs["observation"][3:5].copy(), obs["desired_goal"][:2].copy()
    line = goal - puck0
    distance = float(np.linalg.norm(line))
    unit = line / max(distance, 1e-9)
    for _ in range(env.max_steps):
        before = obs["observation"][3:5].copy()
        obs, _, _, _, info = env.step(policy({key: value[None] for key, value in obs.items()})[0])
    moving = float(np.linalg.norm(obs["observation"][3:5] - before)) > 1e-3  # in the last step
    error = obs["achieved_goal"][:2] - goal
    return {
        "distance": distance,
        "direction": float(np.degrees(np.arctan2(unit[1], unit[0]))),
        "success": float(info["is_success"]),
        "along": float(error @ unit),
        "across": float(abs(error[0] * unit[1] - error[1] * unit[0])),
        "moving": float(moving),
        "untouched": float(np.linalg.norm(obs["achieved_goal"][:2] - puck0) < 0.01),
    }


def bands(rows: dict[str, np.ndarray], key: str, edges: tuple[tuple[float, float], ...], unit: str) -> None:
    for low, high in edges:
        chosen = (rows[key] >= low) & (rows[key] < high)
        if chosen.any():
            print(
                f"  {key} {low:g} to {high:g} {unit}: {chosen.sum():3d} episodes, success {rows['success'][chosen].mean():.2f}"
            )


def main(run: Path, episodes: int) -> None:
    policy, cfg = load_policy(run, option="RUN_DIR")
    env: Any = gym.make(cfg["env_id"]).unwrapped  # its max_steps: the episode's length
    results = [episode(env, policy, EVAL_SEED + i) for i in range(episodes)]
    rows = {key: np.array([r[key] for r in results]) for key in results[0]}
    print(f"{run}: success {rows['success'].mean():.3f} over {episodes} episodes")
    bands(rows, "distance", DISTANCES, "m")
    bands(rows, "direction", DIRECTIONS, "deg")
    miss = rows["success"] == 0
    if not miss.any():
        return
    m = {key: value[miss] for key, value in rows.items()}
    struck = m["untouched"] == 0
    wide = struck & (m["across"] >= THRESHOLD)
    short, long = struck & ~wide & (m["along"] < 0), struck & ~wide & (m["along"] > 0)
    print(
        f"  misses {miss.sum()}: puck never struck {int((~struck).sum())}; struck: wide (>= 5 cm across the "
        f"line) {int(wide.sum())}, short {int(short.sum())}, long {int(long.sum())}; still moving at the last "
        f"step {int(m['moving'][struck].sum())}"
    )
    if struck.any():
        print(
            f"  struck misses' median error: along the line {np.median(m['along'][struck]) * 100:+.1f} cm, "
            f"across {np.median(m['across'][struck]) * 100:.1f} cm"
        )


if __name__ == "__main__":
    try:
        main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 500)
    except RunError as exc:  # no checkpoint, or not a her_ddpg.py run: one line
        sys.exit(f"slide_failures: {exc}")
