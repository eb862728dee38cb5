"""Load a model saved by ``examples/train.py``, report its success rate and record a GIF of it.

    python examples/enjoy.py runs/BitFlip-v0_dqn_s0 [--episodes 20] [--gif FILE] [--force]

The GIF goes to ``<run_dir>/enjoy.gif`` by default (an existing file needs ``--force``). The model is
the run's latest whole checkpoint (checked as ``--resume`` checks it), else its ``model.zip``. The run
folder is only read, not locked. A damaged or foreign file ends with one line and exit status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from runfolder import MANIFEST, ArgumentParser, RunError, RunFolder, describe_error, integer, run_main
from sb3_run import ACCEPTED_RUN, OUTPUTS, SCRIPT, algorithms, read_run, record
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

import goalenvs  # noqa: F401  (registers the ids)

OPTION = "argument run_dir"


def model_dir(run_dir: Path) -> Path | None:
    """Where the run's model is: its latest whole checkpoint (checked), else a finished run's folder."""
    if (run_dir / MANIFEST).is_file():
        checkpoint = RunFolder.read_only(run_dir, SCRIPT, OUTPUTS, option=OPTION).latest_checkpoint()
        if checkpoint is not None:
            return checkpoint.path
    return run_dir if (run_dir / "model.zip").is_file() else None


def load(run_dir: Path) -> tuple[BaseAlgorithm, dict]:
    """The model and ``run.json`` of a ``train.py`` run (a :class:`RunError` for no model, or a damaged file)."""
    run = read_run(run_dir, OPTION)
    where = model_dir(run_dir)
    if where is None:
        raise RunError(f"{OPTION}: {run_dir} has no model.zip and no checkpoint yet; {ACCEPTED_RUN}")

    def fitting(name: str, load: Callable[[Path], Any]) -> Any:
        try:
            return load(where / name)
        except Exception as exc:  # unpickling and torch can raise almost anything on foreign content
            raise RunError(
                f"{where / name} does not fit the run in {run_dir} ({describe_error(exc)}); "
                "was it copied from another run?"
            ) from None

    env = make_vec_env(run["env"], n_envs=1, env_kwargs=run["env_kwargs"])  # a HER model loads with its env
    if (where / "vecnormalize.pkl").exists():  # the observation statistics the policy was trained with
        env = fitting("vecnormalize.pkl", lambda p: VecNormalize.load(str(p), env))
        env.training, env.norm_reward = False, False
    model = fitting("model.zip", lambda p: algorithms()[run["algo"]].load(p, env=env, device="cpu"))
    return model, run


def main(argv: list[str] | None = None) -> float:
    """Report the success of a run's model and record a GIF; a mistake or a damaged file exits 2 in one line."""
    return run_main("enjoy.py", lambda: _enjoy(argv), lambda: "(nothing to resume: run it again)")


def _enjoy(argv: list[str] | None) -> float:
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
    if not args.run_dir.is_dir():
        parser.error(f"argument run_dir: {args.run_dir} is not a folder; {ACCEPTED_RUN}")
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
    model, run = load(args.run_dir)  # the run's files are checked before the GIF's name
    success = record(model, run["env"], run["env_kwargs"], gif, args.episodes, args.seed)
    print(
        f"{run['env']} {run['algo']}+HER: success rate {success:.1%} over {args.episodes} episodes; GIF: {gif}"
    )
    return success


if __name__ == "__main__":
    main()
