"""Load a model saved by ``examples/train.py``, report its success rate and record a GIF of it.

    python examples/enjoy.py runs/BitFlip-v0_dqn_s0 [--episodes 20] [--gif FILE] [--force]

The GIF goes to ``<run_dir>/enjoy.gif`` by default, never to the training run's ``policy.gif``; an
existing file is refused unless ``--force``. A run stopped with ``--stop-at`` (or cut short by a crash)
has no ``model.zip`` yet: its last checkpoint is loaded.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

import goalenvs  # noqa: F401  (registers the ids)


def model_dir(run_dir: Path, run: dict) -> Path | None:
    """Where the run's model is: the run folder once training finished, else its last checkpoint."""
    if (run_dir / "model.zip").is_file():
        return run_dir
    if run.get("checkpoint") and (run_dir / run["checkpoint"] / "model.zip").is_file():
        return run_dir / run["checkpoint"]
    return None


def load(run_dir: Path) -> tuple[BaseAlgorithm, dict]:
    """The model and the run description (``run.json``) that ``train.py`` wrote to ``run_dir``."""
    from train import algorithms  # examples/ is on sys.path when this file runs as a script

    run = json.loads((run_dir / "run.json").read_text())
    where = model_dir(run_dir, run)
    if where is None:
        raise FileNotFoundError(f"{run_dir} holds no model.zip and no checkpoint")
    env = make_vec_env(run["env"], n_envs=1, env_kwargs=run["env_kwargs"])  # a HER model loads with its env
    if (where / "vecnormalize.pkl").exists():  # the observation statistics the policy was trained with
        env = VecNormalize.load(str(where / "vecnormalize.pkl"), env)
        env.training, env.norm_reward = False, False
    model = algorithms()[run["algo"]].load(where / "model.zip", env=env, device="cpu")
    return model, run


def record(
    model: BaseAlgorithm, env_id: str, env_kwargs: dict, path: Path, n_episodes: int, seed: int
) -> float:
    """Write ``n_episodes`` deterministic episodes as an animated GIF; returns their success rate."""
    import imageio.v2 as imageio
    from evaluation import act  # examples/ is on sys.path when this file runs as a script

    env = gym.make(env_id, render_mode="rgb_array", **env_kwargs)
    frames, successes = [], 0
    obs, _ = env.reset(seed=seed)
    for _ in range(n_episodes):
        frames.append(env.render())
        done, info = False, {}
        while not done:
            obs, _, terminated, truncated, info = env.step(act(model, obs))
            frames.append(env.render())
            done = terminated or truncated
        successes += bool(info.get("is_success", False))
        obs, _ = env.reset()
    fps = env.metadata.get("render_fps", 10)
    imageio.mimsave(path, [np.asarray(f) for f in frames], duration=1000 / fps, loop=0)
    env.close()
    return successes / n_episodes


def main(argv: list[str] | None = None) -> float:
    from train import ArgumentParser, integer

    parser = ArgumentParser(
        prog="enjoy.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dir", type=Path, help="an output folder of examples/train.py")
    parser.add_argument("--episodes", type=integer(1), default=20, help="episodes to record (default 20)")
    parser.add_argument("--gif", type=Path, help="default <run_dir>/enjoy.gif")
    parser.add_argument("--force", action="store_true", help="overwrite the GIF file if it exists")
    parser.add_argument("--seed", type=integer(0), default=12345)
    parser.add_argument("--threads", type=integer(1), default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args(argv)
    accepted = "accepted: an output folder of examples/train.py"
    if not args.run_dir.is_dir():
        parser.error(f"argument run_dir: {args.run_dir} is not a folder; {accepted}")
    if not (args.run_dir / "run.json").is_file():
        parser.error(f"argument run_dir: {args.run_dir} has no run.json; {accepted}")
    if model_dir(args.run_dir, json.loads((args.run_dir / "run.json").read_text())) is None:
        parser.error(f"argument run_dir: {args.run_dir} has no model.zip and no checkpoint yet; {accepted}")
    gif = args.gif or args.run_dir / "enjoy.gif"
    if gif.suffix.lower() != ".gif":
        parser.error(f"argument --gif: {gif} does not end in .gif; accepted: a .gif file name")
    if not gif.parent.is_dir():
        parser.error(
            f"argument --gif: folder {gif.parent} does not exist; accepted: a file in an existing folder"
        )
    if gif.exists() and not args.force:
        parser.error(f"argument --gif: {gif} exists; pass --force to overwrite it, or another --gif")
    torch.set_num_threads(args.threads)
    model, run = load(args.run_dir)
    success = record(model, run["env"], run["env_kwargs"], gif, args.episodes, args.seed)
    print(
        f"{run['env']} {run['algo']}+HER: success rate {success:.1%} over {args.episodes} episodes; GIF: {gif}"
    )
    return success


if __name__ == "__main__":
    main()
