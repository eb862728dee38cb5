"""Train SAC or TQC + HER (our buffer) on a Fetch arm task, with the RL Zoo's hyperparameters.

    python examples/fetch_her.py                                    # FetchReach, SAC, 10k steps
    python examples/fetch_her.py --task Push --algo tqc --timesteps 1000000

Reach needs a small network and a few thousand steps; Push (and Slide, PickAndPlace) needs the
RL Zoo's TQC setup and about a million steps.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
from sb3_contrib import TQC
from stable_baselines3 import SAC
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

import goalenvs  # noqa: F401  (registers goalenvs/Fetch*-v0)
from her import HerReplayBuffer

SMALL = {"batch_size": 256, "learning_starts": 1000, "policy_kwargs": {"net_arch": [64, 64]}}  # Reach
LARGE = {"batch_size": 2048, "tau": 0.05, "policy_kwargs": {"net_arch": [512, 512, 512]}}  # objects


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", choices=["Reach", "Push", "Slide", "PickAndPlace"], default="Reach")
    parser.add_argument("--algo", choices=["sac", "tqc"], default="sac")
    parser.add_argument("--timesteps", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=100)
    args = parser.parse_args()

    env_id = f"goalenvs/Fetch{args.task}-v0"
    params = dict(SMALL if args.task == "Reach" else LARGE)
    if args.algo == "tqc":
        params["policy_kwargs"] = {**params["policy_kwargs"], "n_critics": 1 if args.task == "Reach" else 2}
    model = (TQC if args.algo == "tqc" else SAC)(
        "MultiInputPolicy",
        gym.make(env_id),
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        buffer_size=1_000_000, gamma=0.95, learning_rate=1e-3, seed=args.seed, **params,
    )  # fmt: skip
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps, progress_bar=True)
    minutes = (time.perf_counter() - start) / 60
    model.save(f"fetch{args.task.lower()}_{args.algo}_her")

    successes: list[bool] = []  # Fetch never terminates: success is info["is_success"] at the 50th step
    eval_env = Monitor(gym.make(env_id))
    eval_env.reset(seed=args.seed + 10_000)
    evaluate_policy(model, eval_env, n_eval_episodes=args.eval_episodes, deterministic=True,
                    callback=lambda loc, _: loc["done"] and successes.append(bool(loc["info"]["is_success"])))  # fmt: skip
    print(f"{env_id} {args.algo.upper()}+HER, {args.timesteps} steps, seed {args.seed}: success rate "
          f"{sum(successes) / len(successes):.1%} over {len(successes)} episodes ({minutes:.1f} min of training)")  # fmt: skip


if __name__ == "__main__":
    main()
