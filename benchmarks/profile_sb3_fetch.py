"""Where the wall time of a stable-baselines3 + HER FetchPush run goes (the "before" of the profile in docs/training.md).

    python -m benchmarks.profile_sb3_fetch [--steps 3000] [--eval-freq 20000] [--eval-episodes 50] [--threads 1]

The model of ``goalenvs.zoo.tqc_cpu`` (TQC, our HER buffer, VecNormalize of the
observations; ``TQC_SETTINGS``, read from that module) fills
``learning_starts`` steps, then trains ``--steps`` more with timers around the env step, the action
choice, the buffer's ``add`` and ``sample`` and the updates; evaluation (10 greedy episodes) is charged
at ``--eval-episodes`` every ``--eval-freq`` steps. Not in ``python -m benchmarks``: it has no peer.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import gymnasium as gym
import torch
from sb3_contrib import TQC
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

import goalenvs  # noqa: F401  (registers the goalenvs/ ids)
from benchmarks.common import ArgumentParser, at_least
from goalenvs.zoo import tqc_cpu
from her import HerReplayBuffer

ENV_ID = "goalenvs/FetchPush-v0"
# goalenvs.zoo.tqc_cpu's goalenvs/FetchPush-v0 entry: its TQC keyword arguments (the keys the RL Zoo
# itself reads, and the buffer, which this script passes as a class, left out).
_ENTRY = copy.deepcopy(tqc_cpu.hyperparams[ENV_ID])
N_ENVS: int = _ENTRY["n_envs"]
NORMALIZE: dict[str, bool] = _ENTRY["normalize"]
_ZOO_ONLY = ("n_timesteps", "policy", "n_envs", "normalize", "replay_buffer_class")
TQC_SETTINGS: dict[str, Any] = {key: value for key, value in _ENTRY.items() if key not in _ZOO_ONLY}


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


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(
        prog="python -m benchmarks.profile_sb3_fetch", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--steps", type=at_least(1), default=3000, help="timed env steps after learning_starts"
    )
    parser.add_argument("--eval-freq", type=at_least(1), default=20_000)
    parser.add_argument("--eval-episodes", type=at_least(1), default=50)
    parser.add_argument("--threads", type=at_least(1), default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    env = VecNormalize(make_vec_env(ENV_ID, n_envs=N_ENVS, seed=0), **NORMALIZE)
    model = TQC(
        "MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer, seed=0, device="cpu", **TQC_SETTINGS
    )
    model.learn(TQC_SETTINGS["learning_starts"])

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

    eval_env = gym.make(ENV_ID)
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
    print(
        f"{ENV_ID} TQC+HER (goalenvs.zoo.tqc_cpu), {args.steps} steps: {args.steps / total:.1f} env steps/s"
    )
    for key, value in totals.items():
        print(f"  {key:7s} {value:7.2f} s  {value / total:6.1%}  {value / args.steps * 1e3:7.2f} ms/step")


if __name__ == "__main__":
    main()
