"""Where the wall time of a stable-baselines3 + HER Fetch run goes (the "before" of the profile in docs/training.md).

    python examples/profile_sb3_fetch.py --env goalenvs/FetchPush-v0 --steps 3000

The model of ``examples/hyperparams/tqc_cpu.yml`` (TQC, our HER buffer, VecNormalize) fills
``learning_starts`` steps, then trains ``--steps`` more with timers around the env step, the action
choice, the buffer's ``add`` and ``sample`` and the updates; evaluation (10 greedy episodes) is charged
at ``--eval-episodes`` every ``--eval-freq`` steps.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
import yaml
from sb3_contrib import TQC
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

import goalenvs  # noqa: F401  (registers the goalenvs/ ids)
from her import HerReplayBuffer

HERE = Path(__file__).resolve().parent


def timed(obj: Any, name: str, totals: dict[str, float], key: str) -> None:
    """Replace ``obj.name`` by a wrapper adding its wall time to ``totals[key]``."""
    inner = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[key] += time.perf_counter() - t0

    setattr(obj, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="goalenvs/FetchPush-v0")
    parser.add_argument("--steps", type=int, default=3000, help="timed env steps after learning_starts")
    parser.add_argument("--eval-freq", type=int, default=20_000)
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()
    if min(args.steps, args.eval_freq, args.eval_episodes, args.threads) < 1:
        parser.error("--steps, --eval-freq, --eval-episodes and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    params = yaml.safe_load((HERE / "hyperparams" / "tqc_cpu.yml").read_text())[args.env]
    env = VecNormalize(make_vec_env(args.env, n_envs=params["n_envs"], seed=0), norm_reward=False)
    model = TQC(
        "MultiInputPolicy", env, buffer_size=params["buffer_size"], batch_size=params["batch_size"],
        gamma=params["gamma"], learning_rate=params["learning_rate"], tau=params["tau"],
        learning_starts=params["learning_starts"], train_freq=params["train_freq"],
        gradient_steps=params["gradient_steps"], replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"goal_selection_strategy": "future", "n_sampled_goal": 4},
        policy_kwargs={"net_arch": [256, 256, 256], "n_critics": 2}, seed=0, device="cpu",
    )  # fmt: skip
    model.learn(params["learning_starts"])

    totals = dict.fromkeys(("env", "act", "store", "sample", "update"), 0.0)
    timed(model.env, "step", totals, "env")
    timed(model, "_sample_action", totals, "act")
    timed(model.replay_buffer, "add", totals, "store")
    timed(model.replay_buffer, "sample", totals, "sample")
    timed(model, "train", totals, "update")
    start = time.perf_counter()
    model.learn(args.steps, reset_num_timesteps=False)
    wall = time.perf_counter() - start
    totals["update"] -= totals["sample"]  # train() includes the buffer's sample

    eval_env = gym.make(args.env)
    t0 = time.perf_counter()
    for episode in range(10):
        obs, _ = eval_env.reset(seed=episode)
        done = False
        while not done:
            action = model.predict(env.normalize_obs(obs), deterministic=True)[0]
            obs, _, terminated, truncated, _ = eval_env.step(action)
            done = terminated or truncated
    eval_per_episode = (time.perf_counter() - t0) / 10
    totals["eval"] = eval_per_episode * args.eval_episodes * args.steps / args.eval_freq
    totals["other"] = wall - sum(v for k, v in totals.items() if k != "eval")
    total = wall + totals["eval"]
    print(f"{args.env} TQC+HER (tqc_cpu.yml), {args.steps} steps: {args.steps / total:.1f} env steps/s")
    for key, value in totals.items():
        print(f"  {key:7s} {value:7.2f} s  {value / total:6.1%}  {value / args.steps * 1e3:7.2f} ms/step")


if __name__ == "__main__":
    main()
