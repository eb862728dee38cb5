"""Train an off-policy agent with our HER replay buffer on a goalenvs task, and report its success rate.

    python examples/train.py                                   # BitFlip n_bits=15, DQN + HER (the main job)
    python examples/train.py --env goalenvs/Parking-v0 --algo tqc
    python examples/train.py --env goalenvs/FetchReach-v0 --algo sac --timesteps 10000 --seed 1

Hyperparameters come from ``examples/hyperparams/<algo>.yml`` (the RL Zoo's layout: one file per
algorithm, one entry per env id, the same keys), so the same files run unchanged under
``python -m rl_zoo3.train --algo tqc --env goalenvs/Parking-v0 --gym-packages goalenvs her
--conf-file examples/hyperparams/tqc.yml``. Command-line options override them.

Writes to ``--output`` (default ``runs/<env>_<algo>_s<seed>``): ``model.zip``, ``run.json`` (what was
run, for ``examples/enjoy.py``), ``eval.csv`` (the evaluation curve), ``success.png`` (its plot) and,
for envs that render, ``policy.gif``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import yaml
from stable_baselines3 import DDPG, DQN, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ProgressBarCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.vec_env import VecNormalize

import goalenvs
from her import HerReplayBuffer

HERE = Path(__file__).resolve().parent
DEFAULT_ENV = "goalenvs/BitFlip-v0"
DEFAULT_ALGO = {"goalenvs/BitFlip-v0": "dqn"}


def algorithms() -> dict[str, type[BaseAlgorithm]]:
    """Algorithm name -> class; TQC from sb3-contrib when it is installed."""
    algos: dict[str, type[BaseAlgorithm]] = {"dqn": DQN, "sac": SAC, "td3": TD3, "ddpg": DDPG}
    try:
        from sb3_contrib import TQC
    except ImportError:  # tqc is then not offered; argparse says which choices exist
        return algos
    algos["tqc"] = TQC
    return algos


# The names a hyperparameter file may use in its python-valued strings (the RL Zoo evals them too).
_EVAL_NAMES = {"dict": dict, "HerReplayBuffer": HerReplayBuffer, "__builtins__": {"__import__": __import__}}


def load_hyperparams(conf_file: Path, env_id: str) -> dict[str, Any]:
    """The entry for ``env_id`` in an RL-Zoo-style hyperparameter file, with python strings evaluated."""
    if not conf_file.is_file():
        raise SystemExit(f"error: no hyperparameter file {conf_file}")
    entries = yaml.safe_load(conf_file.read_text()) or {}
    if env_id not in entries:
        raise SystemExit(f"error: {conf_file} has no entry for {env_id!r}; it has {sorted(entries)}")
    params = dict(entries[env_id])
    for key in ("policy_kwargs", "replay_buffer_kwargs", "replay_buffer_class", "normalize"):
        if isinstance(params.get(key), str):
            params[key] = eval(params[key], _EVAL_NAMES)  # trusted, repo-local files, as in the RL Zoo
    return params


class EvalSuccess(BaseCallback):
    """Every ``eval_freq`` env steps, run ``n_episodes`` greedy episodes and log their success rate."""

    def __init__(
        self, env_id: str, env_kwargs: dict, eval_freq: int, n_episodes: int, csv_path: Path, seed: int
    ):
        super().__init__()
        self.eval_env = gym.make(env_id, **env_kwargs)
        self.eval_freq, self.n_episodes, self.seed = eval_freq, n_episodes, seed
        self.rows: list[dict[str, float]] = []
        self.csv_path = csv_path
        self.start = time.perf_counter()
        self._next = eval_freq

    def evaluate(self) -> None:
        success, returns = evaluate(self.model, self.eval_env, self.n_episodes, self.seed)
        row = {
            "timesteps": self.num_timesteps,
            "success_rate": success,
            "mean_return": returns,
            "wall_time_s": round(time.perf_counter() - self.start, 2),
        }
        self.rows.append(row)
        with self.csv_path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            writer.writeheader()
            writer.writerows(self.rows)
        self.logger.record("eval/success_rate", success)

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self._next += self.eval_freq
            self.evaluate()
        return True


def act(model: BaseAlgorithm, obs: dict[str, np.ndarray]) -> np.ndarray:
    """The deterministic action for one raw observation, normalised first if the model trains on a VecNormalize."""
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        obs = normalizer.normalize_obs(obs)
    return model.predict(obs, deterministic=True)[0]


def evaluate(model: BaseAlgorithm, env: gym.Env, n_episodes: int, seed: int) -> tuple[float, float]:
    """(success rate, mean return) of ``n_episodes`` deterministic episodes; success is ``info["is_success"]``."""
    successes, total = 0, 0.0
    obs, _ = env.reset(seed=seed)
    for _ in range(n_episodes):
        done, info = False, {}
        while not done:
            action = act(model, obs)
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            done = terminated or truncated
        successes += bool(info.get("is_success", False))
        obs, _ = env.reset()
    return successes / n_episodes, total / n_episodes


def plot_curve(rows: list[dict[str, float]], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["timesteps"] for r in rows], [r["success_rate"] for r in rows], marker="o")
    ax.set(xlabel="environment steps", ylabel="success rate", ylim=(-0.02, 1.02), title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    algos = sorted(algorithms())
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default=DEFAULT_ENV, help="a goalenvs id (default %(default)s)")
    parser.add_argument("--algo", choices=algos, help="default: dqn for BitFlip, tqc otherwise")
    parser.add_argument("--timesteps", type=int, help="default: n_timesteps of the hyperparameter file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--n-envs", type=int, help="parallel envs (DummyVecEnv); default from the file, else 1"
    )
    parser.add_argument("--strategy", choices=["future", "final", "episode"], help="HER goal selection")
    parser.add_argument("--n-sampled-goal", type=int, help="HER relabelled goals per real one (k)")
    parser.add_argument("--env-kwargs", type=json.loads, default={}, help="JSON, e.g. '{\"n_bits\": 20}'")
    parser.add_argument("--output", type=Path, help="output folder (default runs/<env>_<algo>_s<seed>)")
    parser.add_argument(
        "--device", default="auto", help="torch device: auto, cpu, cuda (default %(default)s)"
    )
    parser.add_argument("--eval-freq", type=int, help="env steps between evaluations (default: timesteps/10)")
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--conf-file", type=Path, help="default examples/hyperparams/<algo>.yml")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-gif", action="store_true", help="skip recording a GIF of the trained policy")
    args = parser.parse_args(argv)
    if args.env not in gym.registry:
        parser.error(f"unknown env {args.env!r}; goalenvs ids: {[e.id for e in goalenvs.ENVS]}")
    args.algo = args.algo or DEFAULT_ALGO.get(args.env, "tqc")
    if args.algo not in algos:
        parser.error(f"algo {args.algo!r} is not available here (choices {algos}; tqc needs sb3-contrib)")
    return args


def build_model(args: argparse.Namespace, params: dict[str, Any], env_kwargs: dict) -> BaseAlgorithm:
    params = dict(params)
    normalize = params.pop("normalize", False)
    for key in ("n_timesteps", "n_envs", "env_kwargs"):
        params.pop(key, None)
    her_kwargs = dict(params.pop("replay_buffer_kwargs", {}))
    params.pop("replay_buffer_class", None)  # always ours here
    if args.strategy:
        her_kwargs["goal_selection_strategy"] = args.strategy
    if args.n_sampled_goal is not None:
        her_kwargs["n_sampled_goal"] = args.n_sampled_goal
    env = make_vec_env(args.env, n_envs=args.n_envs, seed=args.seed, env_kwargs=env_kwargs)
    if normalize:  # as the RL Zoo: True, or the keyword arguments of VecNormalize
        norm_kwargs = normalize if isinstance(normalize, dict) else {}
        env = VecNormalize(env, **{"gamma": params.get("gamma", 0.99), **norm_kwargs})
    noise_std = params.pop("noise_std", None)
    if noise_std is not None:  # TD3/DDPG exploration, as the RL Zoo's noise_type: normal
        n = env.action_space.shape[0]
        params["action_noise"] = NormalActionNoise(np.zeros(n), noise_std * np.ones(n))
        params.pop("noise_type", None)
    policy = params.pop("policy", "MultiInputPolicy")
    return algorithms()[args.algo](
        policy,
        env,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs=her_kwargs,
        seed=args.seed,
        device=args.device,
        verbose=0,
        **params,
    )


def main(argv: list[str] | None = None) -> float:
    args = parse_args(argv)
    conf_file = args.conf_file or HERE / "hyperparams" / f"{args.algo}.yml"
    params = load_hyperparams(conf_file, args.env)
    env_kwargs = {**params.get("env_kwargs", {}), **args.env_kwargs}
    timesteps = args.timesteps or int(float(params["n_timesteps"]))
    args.n_envs = args.n_envs or int(params.get("n_envs", 1))
    out = args.output or Path("runs") / f"{args.env.split('/')[-1]}_{args.algo}_s{args.seed}"
    out.mkdir(parents=True, exist_ok=True)

    model = build_model(args, params, env_kwargs)
    eval_cb = EvalSuccess(
        args.env,
        env_kwargs,
        args.eval_freq or max(timesteps // 10, 1),
        args.eval_episodes,
        out / "eval.csv",
        args.seed + 10_000,
    )
    callbacks: list[BaseCallback] = [eval_cb]
    if not args.no_progress:
        callbacks.append(ProgressBarCallback())
    start = time.perf_counter()
    model.learn(total_timesteps=timesteps, callback=CallbackList(callbacks))
    if not eval_cb.rows or eval_cb.rows[-1]["timesteps"] != model.num_timesteps:
        eval_cb.evaluate()  # the final point of the curve is the trained agent
    wall = time.perf_counter() - start

    model.save(out / "model.zip")
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        normalizer.save(str(out / "vecnormalize.pkl"))
    final = eval_cb.rows[-1]
    run = {
        "env": args.env,
        "algo": args.algo,
        "env_kwargs": env_kwargs,
        "seed": args.seed,
        "timesteps": model.num_timesteps,
        "success_rate": final["success_rate"],
        "eval_episodes": args.eval_episodes,
        "wall_time_s": round(wall, 1),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    (out / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    plot_curve(eval_cb.rows, f"{args.env} {args.algo.upper()}+HER (seed {args.seed})", out / "success.png")
    if not args.no_gif and "rgb_array" in gym.make(args.env, **env_kwargs).metadata.get("render_modes", []):
        from enjoy import record  # examples/ is on sys.path when this file runs as a script

        record(model, args.env, env_kwargs, out / "policy.gif", n_episodes=3, seed=args.seed)
    print(
        f"{args.env} {args.algo}+HER: success rate {final['success_rate']:.1%} over {args.eval_episodes} episodes "
        f"after {model.num_timesteps} steps ({wall / 60:.1f} min); outputs in {out}"
    )
    return float(final["success_rate"])


if __name__ == "__main__":
    main()
