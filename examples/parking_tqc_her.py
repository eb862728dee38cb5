"""Train TQC + HER (our buffer) to park a car: goalenvs/Parking-v0, the RL Zoo's hyperparameters.

    python examples/parking_tqc_her.py [--timesteps 100000] [--seed 0] [--threads 1]

The car must reach a goal spot with the right heading; the reward is minus a weighted distance to
the goal pose, and HER relabels each transition with poses the car actually reached later. The model
goes to runs/ (ignored by git).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import gymnasium as gym
import torch
from runfolder import ArgumentParser, at_least  # examples/runfolder.py
from sb3_contrib import TQC
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

import goalenvs  # noqa: F401  (registers goalenvs/Parking-v0)
from her import HerReplayBuffer


def success_rate(model: TQC, n_episodes: int, seed: int) -> float:
    """Fraction of ``n_episodes`` deterministic episodes whose last step has ``info["is_success"]``."""
    env = Monitor(gym.make("goalenvs/Parking-v0"))
    env.reset(seed=seed)
    successes: list[bool] = []

    def on_step(local_vars: dict, _globals: dict) -> None:
        if local_vars["done"]:
            successes.append(bool(local_vars["info"].get("is_success", False)))

    evaluate_policy(model, env, n_eval_episodes=n_episodes, deterministic=True, callback=on_step)
    return sum(successes) / len(successes)


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for name, default, minimum in (("timesteps", 100_000, 1), ("seed", 0, 0), ("eval-episodes", 100, 1)):
        parser.add_argument(f"--{name}", type=at_least(minimum), default=default, help=f"default {default}")
    parser.add_argument("--threads", type=at_least(1), default=1, help="torch threads (default 1: fastest for small networks)")  # fmt: skip
    args = parser.parse_args()
    torch.set_num_threads(args.threads)  # one thread: as fast for networks this small, and jobs don't fight

    model = TQC(
        "MultiInputPolicy", gym.make("goalenvs/Parking-v0"), replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "episode"},
        buffer_size=1_000_000, batch_size=512, gamma=0.98, learning_rate=1.5e-3, learning_starts=500,
        tau=0.005, policy_kwargs={"net_arch": [512, 512, 512], "n_critics": 2}, seed=args.seed,
    )  # fmt: skip
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps, progress_bar=True)
    minutes = (time.perf_counter() - start) / 60
    model.save(path := Path("runs") / f"parking_tqc_her_s{args.seed}.zip")
    success = success_rate(model, args.eval_episodes, seed=args.seed + 10_000)
    print(f"Parking-v0 TQC+HER, {args.timesteps} steps, seed {args.seed}: success rate {success:.1%} "
          f"over {args.eval_episodes} episodes ({minutes:.1f} min of training); model in {path}")  # fmt: skip


if __name__ == "__main__":
    main()
