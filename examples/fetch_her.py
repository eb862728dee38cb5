"""Train SAC or TQC + HER (our buffer) on a Fetch arm task, with the RL Zoo's hyperparameters.

    python examples/fetch_her.py                                    # FetchReach, SAC, 10k steps
    python examples/fetch_her.py --task Push --algo tqc --timesteps 1000000

Reach needs a small network, normalised observations and a few thousand steps; Push (and Slide,
PickAndPlace) needs the RL Zoo's TQC setup and about a million steps. The model goes to runs/.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import torch
from runfolder import ArgumentParser, integer  # examples/runfolder.py
from sb3_contrib import TQC
from stable_baselines3 import SAC
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecNormalize

import goalenvs  # noqa: F401  (registers goalenvs/Fetch*-v0)
from her import HerReplayBuffer

SMALL = {"batch_size": 256, "learning_starts": 1000, "policy_kwargs": {"net_arch": [64, 64]}}  # Reach
LARGE = {"batch_size": 2048, "tau": 0.05, "policy_kwargs": {"net_arch": [512, 512, 512]}}  # objects


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--task", choices=["Reach", "Push", "Slide", "PickAndPlace"], default="Reach")
    parser.add_argument("--algo", choices=["sac", "tqc"], default="sac")
    for name, default, minimum in (("timesteps", 10_000, 1), ("seed", 0, 0), ("eval-episodes", 100, 1)):
        parser.add_argument(f"--{name}", type=integer(minimum), default=default, help=f"default {default}")
    parser.add_argument("--threads", type=integer(1), default=1, help="torch threads (default 1: fastest for small networks)")  # fmt: skip
    args = parser.parse_args()
    torch.set_num_threads(args.threads)  # one thread: as fast for networks this small, and jobs don't fight

    env_id, reach = f"goalenvs/Fetch{args.task}-v0", args.task == "Reach"
    env = make_vec_env(env_id, seed=args.seed)
    normalizer = None
    if reach:  # the RL Zoo normalises Reach's observations (running mean and std of each entry)
        env = normalizer = VecNormalize(env, gamma=0.95)
    params: dict[str, Any] = dict(SMALL if reach else LARGE)
    if args.algo == "tqc":
        params["policy_kwargs"] = {**params["policy_kwargs"], "n_critics": 1 if reach else 2}
    model = (TQC if args.algo == "tqc" else SAC)(
        "MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        buffer_size=1_000_000, gamma=0.95, learning_rate=1e-3, seed=args.seed, **params,
    )  # fmt: skip
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps, progress_bar=True)
    minutes = (time.perf_counter() - start) / 60
    model.save(path := Path("runs") / f"fetch{args.task.lower()}_{args.algo}_her_s{args.seed}.zip")

    eval_env = make_vec_env(env_id, seed=args.seed + 10_000)  # wrapped in a Monitor, as evaluate_policy wants
    if normalizer is not None:  # the same, frozen statistics
        frozen = VecNormalize(eval_env, training=False, norm_reward=False)
        frozen.obs_rms = normalizer.obs_rms
        eval_env = frozen
    successes: list[bool] = []  # Fetch never terminates: success is info["is_success"] at the 50th step

    def record(local: dict[str, Any], _: dict[str, Any]) -> None:  # evaluate_policy's callback, every step
        successes.extend([bool(local["info"]["is_success"])] if local["done"] else [])

    evaluate_policy(model, eval_env, n_eval_episodes=args.eval_episodes, deterministic=True, callback=record)
    print(f"{env_id} {args.algo.upper()}+HER, {args.timesteps} steps, seed {args.seed}: success rate "
          f"{sum(successes) / len(successes):.1%} over {len(successes)} episodes ({minutes:.1f} min of training); model in {path}")  # fmt: skip


if __name__ == "__main__":
    main()
