"""Train TQC + HER (our buffer) to park a car: goalenvs/Parking-v0, the RL Zoo's hyperparameters.

    python examples/parking_tqc_her.py [--timesteps 100000] [--seed 0]

The car must reach a goal spot with the right heading; the reward is minus a weighted distance to
the goal pose, and HER relabels each transition with poses the car actually reached later.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timesteps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=100)
    args = parser.parse_args()

    model = TQC(
        "MultiInputPolicy",
        gym.make("goalenvs/Parking-v0"),
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "episode"},
        buffer_size=1_000_000,
        batch_size=512,
        gamma=0.98,
        learning_rate=1.5e-3,
        learning_starts=500,
        tau=0.005,
        policy_kwargs={"net_arch": [512, 512, 512], "n_critics": 2},
        seed=args.seed,
    )
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps, progress_bar=True)
    minutes = (time.perf_counter() - start) / 60
    model.save("parking_tqc_her")
    success = success_rate(model, args.eval_episodes, seed=args.seed + 10_000)
    print(f"Parking-v0 TQC+HER, {args.timesteps} steps, seed {args.seed}: success rate {success:.1%} "
          f"over {args.eval_episodes} episodes ({minutes:.1f} min of training); model in parking_tqc_her.zip")  # fmt: skip


if __name__ == "__main__":
    main()
