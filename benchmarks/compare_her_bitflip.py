"""DQN + HER on BitFlip with her.HerReplayBuffer vs stable-baselines3's HerReplayBuffer, same everything.

    python -m benchmarks.compare_her_bitflip [--n-bits 15] [--timesteps 10000] [--seeds 0 1 2] [--jobs 2]

A learning comparison, not a speed row: it trains for minutes, so ``python -m benchmarks`` does not
run it. Both runs of a seed use the settings of ``goalenvs.zoo.dqn`` (``DQN_SETTINGS``, read from
that module), the same env seed and the same model seed; only
``replay_buffer_class`` differs. The relabelling statistics are the same (tests/her/test_her_sb3.py
checks it), so the success rates should agree up to seed noise. Prints the success rate (greedy, 200
episodes) after training, the success at checkpoints, and the training wall time.
"""

from __future__ import annotations

import copy
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import gymnasium as gym
import torch
from stable_baselines3 import DQN
from stable_baselines3 import HerReplayBuffer as Sb3HerReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import LinearSchedule

import goalenvs  # noqa: F401  (registers goalenvs/BitFlip-v0)
from benchmarks.common import ArgumentParser, at_least
from goalenvs.zoo import dqn as zoo_dqn
from her import HerReplayBuffer

# goalenvs.zoo.dqn's goalenvs/BitFlip-v0 entry as DQN's keyword arguments: its n_bits and n_timesteps
# are this script's defaults; policy and replay_buffer_class are set below; "lin_2e-3" is the RL Zoo's
# learning rate decayed linearly to 0 at the last step.
_ENTRY = copy.deepcopy(zoo_dqn.hyperparams["goalenvs/BitFlip-v0"])
_ZOO_ONLY = ("env_kwargs", "n_timesteps", "policy", "replay_buffer_class")
DQN_SETTINGS: dict[str, Any] = {key: value for key, value in _ENTRY.items() if key not in _ZOO_ONLY}
DQN_SETTINGS["learning_rate"] = LinearSchedule(float(_ENTRY["learning_rate"].removeprefix("lin_")), 0.0, 1.0)


def evaluate(model, n_bits: int, n_episodes: int, seed: int) -> float:
    """Fraction of greedy episodes that reach the goal."""
    env = gym.make("goalenvs/BitFlip-v0", n_bits=n_bits)
    successes = 0
    for episode in range(n_episodes):
        obs, _ = env.reset(seed=seed + episode)
        done = False
        info: dict[str, Any] = {}
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(int(action))
            done = terminated or truncated
        successes += bool(info["is_success"])
    return successes / n_episodes


def run(job: tuple[str, int, int, int, int, int]) -> dict:
    """One training run (in a worker process): its final success, the curve at checkpoints, its time."""
    buffer_name, seed, n_bits, timesteps, checkpoint, threads = job
    torch.set_num_threads(threads)
    curve: list[tuple[int, float]] = []

    class Checkpoints(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % checkpoint == 0:
                curve.append((self.num_timesteps, evaluate(self.model, n_bits, 50, 10_000 + seed * 1000)))
            return True

    buffer_class: type = HerReplayBuffer if buffer_name == "ours" else Sb3HerReplayBuffer
    env = gym.make("goalenvs/BitFlip-v0", n_bits=n_bits)
    model = DQN(
        "MultiInputPolicy", env, replay_buffer_class=buffer_class, seed=seed, device="cpu", **DQN_SETTINGS
    )
    start = time.perf_counter()
    model.learn(total_timesteps=timesteps, callback=Checkpoints())
    seconds = time.perf_counter() - start
    success = evaluate(model, n_bits, 200, 100_000 + seed * 1000)
    return dict(buffer=buffer_name, seed=seed, success=success, seconds=seconds, curve=curve)


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(
        prog="python -m benchmarks.compare_her_bitflip", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--n-bits", type=at_least(1), default=15)
    parser.add_argument("--timesteps", type=at_least(1), default=10_000)
    parser.add_argument("--seeds", type=at_least(0), nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--checkpoint", type=at_least(1), default=2_000, help="steps between 50-episode evaluations"
    )
    parser.add_argument("--jobs", type=at_least(1), default=2, help="runs in parallel (one process each)")
    parser.add_argument("--threads", type=at_least(1), default=1, help="torch threads per run (default 1)")
    args = parser.parse_args(argv)

    jobs = [
        (name, seed, args.n_bits, args.timesteps, args.checkpoint, args.threads)
        for seed in args.seeds
        for name in ("ours", "sb3")
    ]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run, jobs))

    print(f"DQN + HER on BitFlip n_bits={args.n_bits}, {args.timesteps} steps, seeds {args.seeds}")
    print("buffer | seed | success (200 ep.) | train s | success at checkpoints (50 ep.)")
    for r in results:
        curve = " ".join(f"{steps // 1000}k:{rate:.0%}" for steps, rate in r["curve"])
        print(f"{r['buffer']:6} | {r['seed']:4} | {r['success']:17.1%} | {r['seconds']:7.1f} | {curve}")
    for name in ("ours", "sb3"):
        mine = [r for r in results if r["buffer"] == name]
        rates = [r["success"] for r in mine]
        spread = statistics.stdev(rates) if len(rates) > 1 else 0.0
        seconds = statistics.mean(r["seconds"] for r in mine)
        print(
            f"{name:6}: mean success {statistics.mean(rates):.1%} (sd {spread:.1%}), mean train time {seconds:.1f} s"
        )


if __name__ == "__main__":
    main()
