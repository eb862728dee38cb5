"""How close the Shadow hand can come to HandReach goals of one kind: a search over one held action.

``python -m benchmarks.handreach_reach KIND [ITERATIONS] [GOALS] [RUN_DIR]`` (KIND: first, middle, ring,
little; default 25 iterations, 3 goals)

HandReach's actions are absolute joint targets, so one action held for 15 steps (0.6 s) settles the
hand in a pose. For each of the first GOALS goals of KIND among the episodes of seeds 2e9 + i (the seeds
``--evaluate`` uses), the cross-entropy method searches that action (64 candidates an iteration, the
best 8 kept) and prints the least distance found between the fingertips and the goal (success: under
1 cm), and the gap between the thumb's tip and the finger's against the goal's. A goal the search
cannot bring under 1 cm is one that exploration reaches rarely, if ever. With RUN_DIR (a her_ddpg.py
run), the goals are those of KIND its latest checkpoint's greedy policy misses, and the search starts
around the policy's last action (spread 0.1): can one held action do what the policy's moves did not?
Not a speed benchmark.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import goalenvs  # noqa: F401  (registers the ids)
from benchmarks.handreach_fingers import FINGERS, goal_kind

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from nets import EVAL_SEED, load_policy
from runfolder import RunError

HOLD = 15  # steps an action is held
SEEDS = range(EVAL_SEED, EVAL_SEED + 1000)  # the episodes ``--evaluate`` runs


def settle(env: gym.Env, seed: int, action: np.ndarray) -> np.ndarray:
    """The fingertips ``(15,)`` after holding ``action`` from the start of episode ``seed``."""
    env.reset(seed=seed)
    for _ in range(HOLD):
        obs, *_ = env.step(action)
    return obs["achieved_goal"]


def search(env: gym.Env, seed: int, goal: np.ndarray, iterations: int, rng: np.random.Generator, start: np.ndarray | None = None) -> tuple[float, np.ndarray]:  # fmt: skip
    """The least distance (m) to ``goal`` the cross-entropy method finds (from around ``start``, if
    given), and the fingertips then."""
    mean, std = (np.zeros(20), np.full(20, 0.6)) if start is None else (start, np.full(20, 0.1))
    best, best_tips = np.inf, goal
    for _ in range(iterations):
        candidates = np.clip(mean + std * rng.standard_normal((64, 20)), -1.0, 1.0)
        tips = np.array([settle(env, seed, a) for a in candidates])
        distances = np.linalg.norm(tips - goal, axis=1)
        elite = candidates[np.argsort(distances)[:8]]
        mean, std = elite.mean(axis=0), elite.std(axis=0) + 0.02
        if distances.min() < best:
            best, best_tips = float(distances.min()), tips[np.argmin(distances)]
    return best, best_tips


def missed(env: gym.Env, run: Path, kind: str) -> Iterator[tuple[int, np.ndarray, float]]:
    """The episodes of ``kind`` that the greedy policy of ``run`` misses: seed, last action, distance (m)."""
    policy, _ = load_policy(run, option="RUN_DIR")
    for seed in SEEDS:
        obs, _ = env.reset(seed=seed)
        if goal_kind(obs["desired_goal"]) != kind:
            continue
        for _ in range(env.max_steps):
            action = policy({key: value[None] for key, value in obs.items()})[0]
            obs, _, _, _, info = env.step(action)
        if not info["is_success"]:
            yield seed, action, float(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"]))


def main(kind: str, iterations: int = 25, goals: int = 3, run: Path | None = None) -> None:
    if kind not in FINGERS:
        raise SystemExit(f"KIND: {kind!r} is not accepted; accepted: {list(FINGERS)}")
    env: Any = gym.make("goalenvs/HandReach-v0").unwrapped
    finger, rng = FINGERS.index(kind), np.random.default_rng(0)
    starts: Iterator[tuple[int, np.ndarray | None, float | None]] = (
        ((s, None, None) for s in SEEDS if goal_kind(env.reset(seed=s)[0]["desired_goal"]) == kind)
        if run is None
        else missed(env, run, kind)
    )
    for seed, start, policy_distance in itertools.islice(starts, goals):
        goal = env.reset(seed=seed)[0]["desired_goal"]
        best, tips = search(env, seed, goal, iterations, rng, start)
        gap = lambda t: 100 * np.linalg.norm(t.reshape(5, 3)[finger] - t.reshape(5, 3)[4])  # noqa: E731
        policy = "" if policy_distance is None else f" (the policy's moves: {100 * policy_distance:.2f} cm)"
        print(f"{kind} goal (seed {seed}): least distance {100 * best:.2f} cm after {iterations} iterations{policy}; "
              f"thumb-{kind} gap {gap(tips):.2f} cm, the goal's {gap(goal):.2f} cm", flush=True)  # fmt: skip


if __name__ == "__main__":
    args = sys.argv[1:]
    try:
        main(args[0], *(int(a) for a in args[1:3]), *(Path(a) for a in args[3:4]))
    except RunError as exc:  # no checkpoint, or not a her_ddpg.py run: one line
        sys.exit(f"handreach_reach: {exc}")
