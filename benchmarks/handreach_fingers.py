"""Which HandReach goals a her_ddpg checkpoint's greedy policy reaches, by the finger the goal asks for.

``python -m benchmarks.handreach_fingers RUN_DIR [EPISODES]`` (default 200; the run's latest checkpoint)

A HandReach goal asks the thumb and one finger (first, middle, ring or little) to meet near the palm,
or, one time in ten, every tip to stay where it starts. The goal names the finger: the one whose tip
goal lies nearest the thumb's (a rest goal keeps them all over 3 cm apart). Printed per kind of goal:
episodes, success rate, which finger ended nearest the thumb (a policy that answers a ring-finger
goal with the first finger has collapsed two modes into one), how far the misses ended from their
goal, and how many of the 20 controls the last action holds at a limit (|a| > 0.98: the hand can reach
no further that way). Episodes start from seeds 2e9 + i, the
seeds ``--evaluate`` uses. Then what exploration found: the share of the states in the checkpoint's
replay storage (worker 0's) where each finger's tip is within 1 and 2 cm of the thumb's, the states
whose achieved goals HER relabels with. Not a speed benchmark: ``python -m benchmarks`` does not run it.
"""

from __future__ import annotations

import collections
import json
import pickle
import sys
from dataclasses import fields
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from her_ddpg import Agent, Config
from nets import EVAL_SEED

import goalenvs  # noqa: F401  (registers the ids)

FINGERS = ("first", "middle", "ring", "little")


def goal_kind(goal: np.ndarray) -> str:
    """The finger a HandReach goal (15,) asks to meet the thumb, or "rest"."""
    tips = goal.reshape(5, 3)
    gaps = np.linalg.norm(tips[:4] - tips[4], axis=1)
    return "rest" if gaps.min() > 0.03 else FINGERS[int(np.argmin(gaps))]


def main(run: Path, episodes: int) -> None:
    saved = json.loads((run / "config.json").read_text())
    cfg = Config(**{f.name: saved[f.name] for f in fields(Config) if f.name in saved})
    env = gym.make(cfg.env_id).unwrapped
    obs, _ = env.reset(seed=0)
    agent = Agent(cfg, obs["observation"].size, obs["desired_goal"].size, env.action_space.shape[0])
    checkpoint = sorted((run / "checkpoints").iterdir())[-1]
    agent.load_state_dict(torch.load(checkpoint / "agent.pt", weights_only=False)["agent"])
    wins: dict[str, list[bool]] = collections.defaultdict(list)
    answered: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    missed: dict[str, list[float]] = collections.defaultdict(list)  # final distances (cm) of the misses
    at_limit: dict[str, list[int]] = collections.defaultdict(list)  # controls at +-1 at the last step
    for i in range(episodes):
        obs, _ = env.reset(seed=EVAL_SEED + i)
        kind = goal_kind(obs["desired_goal"])
        for _ in range(env.max_steps):
            action = agent.pi(obs["observation"][None], obs["desired_goal"][None])[0]
            obs, _, _, _, info = env.step(action)
        wins[kind].append(bool(info["is_success"]))
        at_limit[kind].append(int((np.abs(action) > 0.98).sum()))
        if not info["is_success"]:
            missed[kind].append(100 * float(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"])))
        tips = obs["achieved_goal"].reshape(5, 3)
        answered[kind][FINGERS[int(np.argmin(np.linalg.norm(tips[:4] - tips[4], axis=1)))]] += 1
    print(
        f"{run} ({checkpoint.name}): success {np.mean(sum(wins.values(), [])):.3f} over {episodes} episodes"
    )
    for kind in (*FINGERS, "rest"):
        if wins[kind]:
            nearest = ", ".join(f"{f} {n}" for f, n in answered[kind].most_common())
            print(
                f"  {kind:>6} goals: {len(wins[kind]):3d}, success {np.mean(wins[kind]):.2f}; nearest the thumb at the end: {nearest}"
            )
            misses = f"{min(missed[kind]):.2f}-{max(missed[kind]):.2f} cm" if missed[kind] else "none"
            print(
                f"         misses' final distance: {misses}; controls at their limit at the last step: "
                f"{np.mean(at_limit[kind]):.1f} of {env.action_space.shape[0]} on average"
            )
    explored(checkpoint)


def explored(checkpoint: Path) -> None:
    """The share of stored states with each finger's tip within 1 and 2 cm of the thumb's."""
    storage = pickle.loads((checkpoint / "storage.pkl").read_bytes())
    achieved = storage.rows("observations")["achieved_goal"]
    tips = (achieved if storage.full else achieved[: storage.pos]).reshape(-1, 5, 3)
    gaps = np.linalg.norm(tips[:, :4] - tips[:, 4:], axis=2)
    for cm in (1, 2):
        shares = ", ".join(f"{f} {np.mean(gaps[:, i] < cm / 100):.2%}" for i, f in enumerate(FINGERS))
        print(f"  stored states ({len(tips):,}) with a tip within {cm} cm of the thumb's: {shares}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 200)
