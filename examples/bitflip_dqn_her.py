"""Train DQN + HER (our buffer) on BitFlip with 15 bits and report the success rate.

    python examples/bitflip_dqn_her.py [--n-bits 15] [--timesteps 10000] [--seed 0] [--threads 1]

Without hindsight relabelling DQN essentially never sees a success with 15 bits (2**-15 per random
goal); with HER it solves the task in a few thousand steps. The model goes to runs/ (ignored by git).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from runfolder import ArgumentParser, at_least  # examples/runfolder.py
from stable_baselines3 import DQN

import goalenvs  # noqa: F401  (registers goalenvs/BitFlip-v0)
from her import HerReplayBuffer  # our drop-in for stable_baselines3.HerReplayBuffer


def evaluate(model: DQN, n_bits: int, n_episodes: int, seed: int) -> float:
    """Fraction of ``n_episodes`` greedy episodes that end with ``info["is_success"]``."""
    env, successes = gym.make("goalenvs/BitFlip-v0", n_bits=n_bits), 0
    obs, _ = env.reset(seed=seed)
    for _ in range(n_episodes):
        done = False
        info: dict[str, Any] = {}
        while not done:
            obs, _, terminated, truncated, info = env.step(model.predict(obs, deterministic=True)[0])
            done = terminated or truncated
        successes += bool(info["is_success"])
        obs, _ = env.reset()
    return successes / n_episodes


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for name, default, minimum in (("n-bits", 15, 1), ("timesteps", 10_000, 1), ("seed", 0, 0),
                                   ("eval-episodes", 200, 1)):  # fmt: skip
        parser.add_argument(f"--{name}", type=at_least(minimum), default=default, help=f"default {default}")
    parser.add_argument("--threads", type=at_least(1), default=1, help="torch threads (default 1: fastest for small networks)")  # fmt: skip
    args = parser.parse_args()
    torch.set_num_threads(args.threads)  # one thread: as fast for a network this small, and jobs don't fight

    env = gym.make("goalenvs/BitFlip-v0", n_bits=args.n_bits)
    model = DQN(
        "MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        learning_rate=lambda remaining: 2e-3 * remaining,  # linear decay to 0 (dqn.yml's lin_2e-3)
        buffer_size=100_000, learning_starts=1_000, batch_size=256, gamma=0.95,
        target_update_interval=500, exploration_fraction=0.1, exploration_final_eps=0.02,
        policy_kwargs={"net_arch": [256, 256]}, seed=args.seed, device="cpu",
    )  # fmt: skip
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps)
    minutes = (time.perf_counter() - start) / 60
    path = Path("runs") / f"bitflip_dqn_her_n{args.n_bits}_s{args.seed}.zip"
    model.save(path)
    success = evaluate(model, args.n_bits, args.eval_episodes, args.seed + 1)
    print(f"BitFlip n_bits={args.n_bits}, DQN+HER, {args.timesteps} steps, seed {args.seed}: success rate "
          f"{success:.1%} over {args.eval_episodes} episodes ({minutes:.1f} min of training); model in {path}")  # fmt: skip


if __name__ == "__main__":
    main()
