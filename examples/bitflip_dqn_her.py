"""Train DQN + HER (our buffer) on BitFlip with 15 bits and report the success rate.

    python examples/bitflip_dqn_her.py [--n-bits 15] [--timesteps 10000] [--seed 0]

Without hindsight relabelling DQN essentially never sees a success with 15 bits (2**-15 per random
goal); with HER it solves the task in a few thousand steps.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
from stable_baselines3 import DQN

import goalenvs  # noqa: F401  (registers goalenvs/BitFlip-v0)
from her import HerReplayBuffer  # our drop-in for stable_baselines3.HerReplayBuffer


def evaluate(model: DQN, env: gym.Env, n_episodes: int, seed: int) -> float:
    """Fraction of ``n_episodes`` greedy episodes that end with ``info["is_success"]``."""
    successes = 0
    obs, _ = env.reset(seed=seed)
    for _ in range(n_episodes):
        done, info = False, {}
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        successes += bool(info["is_success"])
        obs, _ = env.reset()
    return successes / n_episodes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n-bits", type=int, default=15)
    parser.add_argument("--timesteps", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=200)
    args = parser.parse_args()

    env = gym.make("goalenvs/BitFlip-v0", n_bits=args.n_bits)
    model = DQN(
        "MultiInputPolicy",
        env,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        learning_rate=1e-3,
        buffer_size=100_000,
        learning_starts=1_000,
        batch_size=256,
        gamma=0.95,
        target_update_interval=500,
        exploration_fraction=0.1,
        exploration_final_eps=0.02,
        policy_kwargs={"net_arch": [256, 256]},
        seed=args.seed,
        device="cpu",
    )
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps)
    minutes = (time.perf_counter() - start) / 60
    model.save("bitflip_dqn_her")
    success = evaluate(
        model, gym.make("goalenvs/BitFlip-v0", n_bits=args.n_bits), args.eval_episodes, args.seed + 1
    )
    print(
        f"BitFlip n_bits={args.n_bits}, DQN+HER, {args.timesteps} steps, seed {args.seed}: "
        f"success rate {success:.1%} over {args.eval_episodes} episodes ({minutes:.1f} min of training); "
        "model in bitflip_dqn_her.zip"
    )


if __name__ == "__main__":
    main()
