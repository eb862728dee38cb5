"""Load a model saved by ``examples/train.py``, report its success rate and record a GIF of it.

python examples/enjoy.py runs/BitFlip-v0_dqn_s0 [--episodes 20] [--gif policy.gif]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

import goalenvs  # noqa: F401  (registers the ids)


def load(run_dir: Path) -> tuple[BaseAlgorithm, dict]:
    """The model and the run description (``run.json``) that ``train.py`` wrote to ``run_dir``."""
    from train import algorithms  # examples/ is on sys.path when this file runs as a script

    run = json.loads((run_dir / "run.json").read_text())
    env = make_vec_env(run["env"], n_envs=1, env_kwargs=run["env_kwargs"])  # a HER model loads with its env
    if (run_dir / "vecnormalize.pkl").exists():  # the observation statistics the policy was trained with
        env = VecNormalize.load(str(run_dir / "vecnormalize.pkl"), env)
        env.training, env.norm_reward = False, False
    model = algorithms()[run["algo"]].load(run_dir / "model.zip", env=env, device="cpu")
    return model, run


def record(
    model: BaseAlgorithm, env_id: str, env_kwargs: dict, path: Path, n_episodes: int, seed: int
) -> float:
    """Write ``n_episodes`` deterministic episodes as an animated GIF; returns their success rate."""
    import imageio.v2 as imageio
    from train import act

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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dir", type=Path, help="an output folder of examples/train.py")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--gif", type=Path, help="default <run_dir>/policy.gif")
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args()
    model, run = load(args.run_dir)
    gif = args.gif or args.run_dir / "policy.gif"
    success = record(model, run["env"], run["env_kwargs"], gif, args.episodes, args.seed)
    print(
        f"{run['env']} {run['algo']}+HER: success rate {success:.1%} over {args.episodes} episodes; GIF: {gif}"
    )


if __name__ == "__main__":
    main()
