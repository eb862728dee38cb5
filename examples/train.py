"""Train an off-policy agent with our HER replay buffer on a goalenvs task, and report its success rate.

    python examples/train.py                                   # BitFlip n_bits=15, DQN + HER (the main job)
    python examples/train.py --env goalenvs/Parking-v0 --algo tqc
    python examples/train.py --env goalenvs/FetchReach-v0 --algo sac --timesteps 10000 --seed 1
    python examples/train.py --env goalenvs/FetchPush-v0 --save-freq 50000   # checkpoints; after a crash:
    python examples/train.py --resume runs/FetchPush-v0_tqc_s0                # goes on from the last one

Hyperparameters come from ``examples/hyperparams/<algo>.yml`` (the RL Zoo's layout: one file per
algorithm, one entry per env id, the same keys), so the same files run unchanged under
``python -m rl_zoo3.train --algo tqc --env goalenvs/Parking-v0 --gym-packages goalenvs her
--conf-file examples/hyperparams/tqc.yml``. Command-line options override them.

Writes to ``--output`` (default ``runs/<env>_<algo>_s<seed>``; an existing non-empty folder is refused
unless ``--force``): ``model.zip``, ``run.json`` (what was run, by which commands, for
``examples/enjoy.py`` and ``--resume``), ``eval.csv`` (the evaluation curve: the deterministic policy
over ``--eval-episodes`` episodes, run side by side in one vector env), ``success.png`` (its plot),
``vecnormalize.pkl`` where the file asks for ``normalize`` and, for envs that render, ``policy.gif``.

Torch uses ``--threads`` intra-op threads (default 1): for networks this small one thread was faster
than two on the 2-core machine (the main job: 14 s with one, 23-30 s with two, beside two other jobs),
and two jobs started together do not fight over the cores.

Checkpoints and resume (details in ``examples/checkpointing.py``). ``--save-freq N`` checkpoints every
N env steps and at the end: model and optimiser, replay buffer, the training envs mid-episode,
``VecNormalize`` statistics, random states and the curve so far, in ``checkpoints/<steps>/``, renamed
into place when whole and only then named in ``run.json``: a crash keeps the previous one.
``--resume RUN_DIR`` goes on from it to the run's total step count (``--timesteps`` raises it) with
``learn(remaining, reset_num_timesteps=False)``, appending to ``eval.csv`` and to the ``commands`` of
``run.json``. ``--stop-at N`` checkpoints and stops after N steps: a long run in shorter sessions.

A resumed run is bit-for-bit the uninterrupted one (measured: 1k steps + resume to 2k ends with the
same parameters, optimiser state and replay buffer as 2k in one go, for DQN on BitFlip and SAC with
``VecNormalize`` on FetchReach, stopped mid-episode; ``tests/test_train_cli.py``). stable-baselines3's
``save``/``load`` alone is not: ``load`` re-seeds NumPy, torch and the action space from the initial
seed, the env restarts from a fresh ``reset`` (cutting the episode under way) and a callback's
``on_step`` runs before the step's transition is stored. Here the envs are pickled, the random states
put back, and checkpoints taken between rollouts. Not kept, so not bit-for-bit: envs that do not pickle
(the checkpoint fails, saying so), an Ornstein-Uhlenbeck action noise (reset by every ``learn``), and the
clocks (``wall_time_s``, ``cpu_time_s``).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import pickle
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
import torch
import yaml
from checkpointing import (  # examples/checkpointing.py (examples/ is on sys.path)
    Checkpoints,
    StopTraining,
    load_checkpoint,
    model_bytes,
    save_checkpoint,
    write_atomic,
    write_run,
)
from evaluation import EvalSuccess, plot_curve  # examples/evaluation.py
from gymnasium import spaces
from native_vec_env import make_training_envs  # examples/native_vec_env.py
from stable_baselines3 import DDPG, DQN, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ProgressBarCallback
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import VecNormalize

import goalenvs
from her import HerReplayBuffer

HERE = Path(__file__).resolve().parent
DEFAULT_ENV = "goalenvs/BitFlip-v0"
DEFAULT_ALGO = {"goalenvs/BitFlip-v0": "dqn"}
# What a run writes to its folder: --force removes these (and only these) before a new run.
OUTPUTS = ("run.json", "model.zip", "vecnormalize.pkl", "eval.csv", "success.png", "policy.gif",
           "checkpoints")  # fmt: skip
# Options that define a run: --resume takes them from run.json and refuses them on the command line.
RUN_OPTIONS = ("env", "algo", "seed", "n_envs", "strategy", "n_sampled_goal", "env_kwargs", "output",
               "eval_freq", "eval_episodes", "conf_file", "force")  # fmt: skip


def algorithms() -> dict[str, type[BaseAlgorithm]]:
    """Algorithm name -> class; TQC from sb3-contrib when it is installed."""
    algos: dict[str, type[BaseAlgorithm]] = {"dqn": DQN, "sac": SAC, "td3": TD3, "ddpg": DDPG}
    try:
        from sb3_contrib import TQC
    except ImportError:  # tqc is then not offered; argparse says which choices exist
        return algos
    algos["tqc"] = TQC
    return algos


# ---------------------------------------------------------------------------------------- the command line
class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (no usage block): what was wrong, what is accepted."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())}\n")


def integer(minimum: int) -> Any:
    """An argparse type: an integer >= ``minimum`` (``1e4`` style accepted when it is a whole number)."""

    def parse(text: str) -> int:
        try:
            value = float(text)
            ok = value.is_integer() and value >= minimum
        except ValueError:
            ok = False
        if not ok:
            raise argparse.ArgumentTypeError(f"{text!r} is not accepted: expected an integer >= {minimum}")
        return int(value)

    parse.__name__ = f"integer >= {minimum}"
    return parse


def json_object(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object, e.g. ``'{"n_bits": 20}'``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not valid JSON ({exc}); expected a JSON object, e.g. '{{\"n_bits\": 20}}'"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object; expected e.g. '{{\"n_bits\": 20}}'")
    return value


def device_name(text: str) -> str:
    """An argparse type: a torch device that exists here (a missing GPU is an error, not the CPU)."""
    accepted = ["auto", "cpu"] + (["cuda", "cuda:N"] if torch.cuda.is_available() else [])
    if text in ("auto", "cpu"):
        return text
    if re.fullmatch(r"cuda(:\d+)?", text):
        if not torch.cuda.is_available():
            why = "this torch is a CPU-only build" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise argparse.ArgumentTypeError(f"{text!r} is not available ({why}); accepted here: {accepted}")
        index = int(text.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(
                f"{text!r}: there are {torch.cuda.device_count()} CUDA devices; accepted: {accepted}"
            )
        return text
    if text == "mps" and torch.backends.mps.is_available():
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not a torch device available here; accepted: {accepted}")


def build_parser() -> ArgumentParser:
    algos = sorted(algorithms())
    parser = ArgumentParser(
        prog="train.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", help=f"a goal env id (default {DEFAULT_ENV})")
    parser.add_argument("--algo", choices=algos, help="default: dqn for BitFlip, tqc otherwise")
    parser.add_argument(
        "--timesteps", type=integer(1), help="default: n_timesteps of the hyperparameter file"
    )
    parser.add_argument("--seed", type=integer(0), help="default 0")
    parser.add_argument(
        "--n-envs",
        type=integer(1),
        help="parallel envs (DummyVecEnv; Fetch: its native vector env, physics "
        "in threads); default from the file, else 1",
    )
    parser.add_argument("--strategy", choices=["future", "final", "episode"], help="HER goal selection")
    parser.add_argument("--n-sampled-goal", type=integer(0), help="HER relabelled goals per real one (k)")
    parser.add_argument("--env-kwargs", type=json_object, help="JSON object, e.g. '{\"n_bits\": 20}'")
    parser.add_argument("--output", type=Path, help="output folder (default runs/<env>_<algo>_s<seed>)")
    parser.add_argument(
        "--force", action="store_true", help="replace the outputs of a run already in --output"
    )
    parser.add_argument(
        "--device", type=device_name, help="torch device: auto, cpu, cuda, cuda:N (default auto)"
    )
    parser.add_argument("--threads", type=integer(1), help="torch intra-op threads (default 1)")
    parser.add_argument(
        "--eval-freq", type=integer(1), help="env steps between evaluations (default: timesteps/10)"
    )
    parser.add_argument("--eval-episodes", type=integer(1), help="episodes per evaluation (default 100)")
    parser.add_argument("--conf-file", type=Path, help="default examples/hyperparams/<algo>.yml")
    parser.add_argument("--save-freq", type=integer(1), help="checkpoint every N env steps (and at the end)")
    parser.add_argument(
        "--stop-at", type=integer(1), help="checkpoint and stop after N env steps (resume later)"
    )
    parser.add_argument(
        "--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR from its checkpoint"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-gif", action="store_true", help="skip recording a GIF of the trained policy")
    return parser  # fmt: skip


# ---------------------------------------------------------------------------------------- validation
def load_conf(parser: ArgumentParser, conf_file: Path) -> dict[str, Any]:
    if not conf_file.is_file():
        parser.error(f"argument --conf-file: {conf_file} is not a file; accepted: an RL-Zoo-style .yml file")
    try:
        entries = yaml.safe_load(conf_file.read_text()) or {}
    except yaml.YAMLError as exc:
        parser.error(f"argument --conf-file: {conf_file} is not valid YAML: {exc}")
    if not isinstance(entries, dict):
        parser.error(f"argument --conf-file: {conf_file} is not a mapping of env ids to hyperparameters")
    return entries


# The names a hyperparameter file may use in its python-valued strings (the RL Zoo evals them too).
_EVAL_NAMES = {"dict": dict, "HerReplayBuffer": HerReplayBuffer, "__builtins__": {"__import__": __import__}}


def evaluate_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A hyperparameter entry with its python-valued strings evaluated (trusted, repo-local files)."""
    params = dict(entry)
    for key in ("policy_kwargs", "replay_buffer_kwargs", "replay_buffer_class", "normalize"):
        if isinstance(params.get(key), str):
            params[key] = eval(params[key], _EVAL_NAMES)  # as in the RL Zoo
    for key in ("learning_rate",):  # the RL Zoo's "lin_<value>": from <value> down to 0 at the last step
        if isinstance(params.get(key), str) and params[key].startswith("lin_"):
            params[key] = LinearSchedule(float(params[key][4:]), 0.0, 1.0)
    return params


def _accepted_kwargs(env_id: str, message: str) -> list[str] | None:
    """The keyword arguments the env's constructor takes (the class named in ``message`` if it forwards **kwargs)."""
    from gymnasium.envs.registration import load_env_creator

    from goalenvs.registration import _BY_ID

    entry_point = _BY_ID[env_id].entry_point if env_id in _BY_ID else gym.spec(env_id).entry_point
    if not isinstance(entry_point, str):
        return None
    creator = load_env_creator(entry_point)
    params = inspect.signature(creator).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        named = re.match(r"(\w+)\.__init__\(\)", message)
        target = named and getattr(sys.modules[creator.__module__], named.group(1), None)
        if target is None:
            return None
        params = inspect.signature(target).parameters
    return [
        n for n, p in params.items() if n != "render_mode" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]


def check_goal_env(parser: ArgumentParser, env_id: str, env_kwargs: dict[str, Any]) -> gym.Env:
    """Make the env once: its own errors become one-line ``--env-kwargs`` errors; a non-goal env is refused."""
    try:
        env = gym.make(env_id, **env_kwargs)
    except TypeError as exc:
        unknown = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
        if unknown is None:
            parser.error(f"argument --env-kwargs: {env_id} with {env_kwargs}: {exc}")
        accepted = _accepted_kwargs(env_id, str(exc))
        takes = f"; it takes {accepted}" if accepted is not None else ""
        parser.error(f"argument --env-kwargs: {env_id} takes no argument {unknown.group(1)!r}{takes}")
    except (ValueError, gym.error.Error) as exc:
        parser.error(f"argument --env-kwargs: {env_id} with {env_kwargs}: {exc}")
    obs_space = env.observation_space
    keys = {"observation", "achieved_goal", "desired_goal"}
    if not (isinstance(obs_space, spaces.Dict) and keys <= set(obs_space.spaces)) or not hasattr(
        env.unwrapped, "compute_reward"
    ):
        env.close()
        parser.error(
            f"argument --env: {env_id!r} is not a goal env (HER needs a Dict observation with observation, "
            f"achieved_goal and desired_goal, and compute_reward; it has {type(obs_space).__name__}); "
            f"accepted: a goal env such as {[e.id for e in goalenvs.ENVS]}"
        )
    return env


def default_output(env_id: str, algo: str, seed: int) -> Path:
    return Path("runs") / f"{env_id.split('/')[-1]}_{algo}_s{seed}"


def prepare_output(parser: ArgumentParser, out: Path, force: bool) -> None:
    """Refuse a non-empty output folder unless ``force`` (then remove this script's outputs there)."""
    if out.exists() and not out.is_dir():
        parser.error(
            f"argument --output: {out} is a file; accepted: a folder that is empty or does not exist"
        )
    held = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if held and not force:
        parser.error(
            f"argument --output: {out} is not empty (it holds {', '.join(held[:4])}{', ...' if len(held) > 4 else ''}); "
            f"pass --resume {out} to continue that run, --force to replace it, or another --output"
        )
    for name in OUTPUTS:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def resolve_new_run(parser: ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """Everything a new run needs, validated before anything is written; errors exit with status 2."""
    env_id = args.env or DEFAULT_ENV
    if env_id not in gym.registry:
        parser.error(f"argument --env: unknown env {env_id!r}; goalenvs ids: {[e.id for e in goalenvs.ENVS]}")
    algo = args.algo or DEFAULT_ALGO.get(env_id, "tqc")
    if algo not in algorithms():
        parser.error(f"argument --algo: {algo!r} is not available here (choices {sorted(algorithms())}; tqc needs sb3-contrib)")  # fmt: skip
    conf_file = args.conf_file or HERE / "hyperparams" / f"{algo}.yml"
    entries = load_conf(parser, conf_file)
    entry = entries.get(env_id)
    file_kwargs = (entry or {}).get("env_kwargs", {}) or {}
    env_kwargs = {**file_kwargs, **(args.env_kwargs or {})}
    check_goal_env(parser, env_id, env_kwargs).close()
    if entry is None:
        parser.error(f"argument --algo: {conf_file} has no entry for {env_id!r} (entries: {sorted(entries)}); "
                     "pass another --algo or --conf-file")  # fmt: skip
    if args.timesteps is None and "n_timesteps" not in entry:
        parser.error(f"argument --timesteps: required, as {conf_file} gives no n_timesteps for {env_id}")
    timesteps = args.timesteps or int(float(entry["n_timesteps"]))
    if args.stop_at is not None and args.stop_at >= timesteps:
        parser.error(f"argument --stop-at: {args.stop_at} is not below the run's {timesteps} steps; accepted: 1 to {timesteps - 1}")  # fmt: skip
    seed = args.seed if args.seed is not None else 0
    out = args.output or default_output(env_id, algo, seed)
    prepare_output(parser, out, args.force)
    try:
        conf_name = str(conf_file.resolve().relative_to(Path.cwd()))
    except ValueError:
        conf_name = str(conf_file)
    return {
        "env": env_id,
        "algo": algo,
        "env_kwargs": env_kwargs,
        "seed": seed,
        "total_timesteps": timesteps,
        "n_envs": args.n_envs or int(entry.get("n_envs", 1)),
        "eval_freq": args.eval_freq or max(timesteps // 10, 1),
        "eval_episodes": args.eval_episodes or 100,
        "save_freq": args.save_freq,
        "conf_file": conf_name,
        "hyperparams": entry,
        "her_overrides": {
            k: v
            for k, v in (("goal_selection_strategy", args.strategy), ("n_sampled_goal", args.n_sampled_goal))
            if v is not None
        },
        "output": str(out),
    }


def resolve_resume(parser: ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """The run.json of ``--resume RUN_DIR``, checked: it has a checkpoint and steps left to train."""
    given = [
        f"--{name.replace('_', '-')}" for name in RUN_OPTIONS if getattr(args, name) not in (None, False)
    ]
    if given:
        parser.error(
            f"argument --resume: {', '.join(given)} cannot be given with --resume (a resumed run keeps the env, "
            "algo, seed and hyperparameters in its run.json); accepted with it: --timesteps, --stop-at, "
            "--save-freq, --device, --threads, --no-progress, --no-gif"
        )
    run_dir: Path = args.resume
    if not (run_dir / "run.json").is_file():
        what = "does not exist" if not run_dir.exists() else "has no run.json"
        parser.error(f"argument --resume: {run_dir} {what}; accepted: an output folder of examples/train.py")
    run = json.loads((run_dir / "run.json").read_text())
    if not run.get("checkpoint") or not (run_dir / run["checkpoint"] / "state.pkl").is_file():
        parser.error(f"argument --resume: {run_dir} has no checkpoint (checkpoints are written with --save-freq N "
                     f"or --stop-at N); start it again with --output {run_dir} --force")  # fmt: skip
    done = int(run["checkpoint_timesteps"])
    total = args.timesteps or int(run["total_timesteps"])
    if total <= done:
        if args.timesteps is None:
            parser.error(f"argument --resume: {run_dir} is complete ({done} of {total} steps); "
                         f"pass --timesteps above {done} to train it further")  # fmt: skip
        parser.error(f"argument --timesteps: {total} is not above the {done} steps of the checkpoint; accepted: > {done}")  # fmt: skip
    if args.stop_at is not None and not done < args.stop_at < total:
        parser.error(f"argument --stop-at: {args.stop_at} is not between the checkpoint's {done} steps and "
                     f"the run's {total}; accepted: {done + 1} to {total - 1}")  # fmt: skip
    run["total_timesteps"] = total
    if args.save_freq is not None:
        run["save_freq"] = args.save_freq
    run["output"] = str(run_dir)
    return run


# ---------------------------------------------------------------------------------------- the run
def build_model(run: dict[str, Any], device: str) -> BaseAlgorithm:
    params = evaluate_entry(run["hyperparams"])
    normalize = params.pop("normalize", False)
    for key in ("n_timesteps", "n_envs", "env_kwargs"):
        params.pop(key, None)
    her_kwargs = {**params.pop("replay_buffer_kwargs", {}), **run["her_overrides"]}
    params.pop("replay_buffer_class", None)  # always ours here
    env = make_training_envs(run)
    if normalize:  # as the RL Zoo: True, or the keyword arguments of VecNormalize
        norm_kwargs = normalize if isinstance(normalize, dict) else {}
        env = VecNormalize(env, **{"gamma": params.get("gamma", 0.99), **norm_kwargs})
    noise_std = params.pop("noise_std", None)
    if noise_std is not None:  # TD3/DDPG exploration, as the RL Zoo's noise_type: normal
        n = env.action_space.shape[0]
        params["action_noise"] = NormalActionNoise(np.zeros(n), noise_std * np.ones(n))
        params.pop("noise_type", None)
    policy = params.pop("policy", "MultiInputPolicy")
    return algorithms()[run["algo"]](
        policy,
        env,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs=her_kwargs,
        seed=run["seed"],
        device=device,
        verbose=0,
        **params,
    )


def command_line(argv: list[str]) -> str:
    return shlex.join(["python", os.path.relpath(__file__), *argv])


def start(
    parser: ArgumentParser, args: argparse.Namespace, argv: list[str]
) -> tuple[BaseAlgorithm, dict[str, Any]]:
    """The model to train and the run description (new, or resumed from its checkpoint); writes run.json."""
    run = resolve_resume(parser, args) if args.resume else resolve_new_run(parser, args)
    device = args.device or run.get("device_arg", "auto")
    if args.device is None and args.resume:  # the run's own device must exist here too
        try:
            device_name(device)
        except argparse.ArgumentTypeError as exc:
            parser.error(f"argument --device: the run used {exc}; pass --device")
    threads = args.threads or 1
    torch.set_num_threads(threads)
    if args.resume:
        model, state = load_checkpoint(run, algorithms()[run["algo"]], device)
        run["eval_state"] = state["eval"]
    else:
        model = build_model(run, device)
        run["checkpoint"], run["checkpoint_timesteps"] = None, 0
        if run["save_freq"] or args.stop_at:  # fail now, not at the first checkpoint
            try:
                cloudpickle.dumps(model.get_env())
            except Exception as exc:  # whatever pickling raises
                parser.error(f"argument --save-freq: checkpoints pickle the training envs, and {run['env']} "
                             f"does not pickle ({type(exc).__name__}: {exc}); train without checkpoints")  # fmt: skip
    run.update(device_arg=device, device=str(model.device), threads=threads, status="running")
    run["commands"] = [*run.get("commands", []), command_line(argv)]
    Path(run["output"]).mkdir(parents=True, exist_ok=True)
    return model, run


def main(argv: list[str] | None = None) -> float:
    """Train (or resume) a run; returns its final success rate (``nan`` when stopped by ``--stop-at``)."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    model, run = start(parser, args, argv)
    out = Path(run["output"])
    eval_cb = EvalSuccess(run)
    if "eval_state" in run:
        eval_cb.restore(run.pop("eval_state"))
    write_run(out, run)
    extra = lambda: {"eval": eval_cb.state()}  # noqa: E731  (what each checkpoint keeps besides the model)
    callbacks: list[BaseCallback] = [eval_cb, Checkpoints(run, extra, args.stop_at)]
    if not args.no_progress:
        callbacks.append(ProgressBarCallback())
    title = f"{run['env']} {run['algo'].upper()}+HER (seed {run['seed']})"
    try:
        model.learn(run["total_timesteps"] - model.num_timesteps, CallbackList(callbacks),
                    reset_num_timesteps=not args.resume)  # fmt: skip
    except StopTraining:
        if not args.no_progress:
            callbacks[-1].on_training_end()  # closes the bar
        run.update(status="stopped", timesteps=model.num_timesteps)
        write_run(out, run)
        plot_curve(eval_cb.rows, title, out / "success.png")
        print(f"stopped at {model.num_timesteps} of {run['total_timesteps']} steps (checkpoint in "
              f"{out / run['checkpoint']}); go on with: {command_line(['--resume', str(out)])}")  # fmt: skip
        return float("nan")
    except KeyboardInterrupt:
        last = run["checkpoint_timesteps"]
        hint = (
            f"go on from step {last} with --resume {out}"
            if run["checkpoint"]
            else "no checkpoint was written"
        )
        raise SystemExit(f"interrupted at {model.num_timesteps} steps; {hint}") from None
    if not eval_cb.rows or eval_cb.rows[-1]["timesteps"] != model.num_timesteps:
        eval_cb.evaluate()  # the final point of the curve is the trained agent
    write_atomic(out / "model.zip", model_bytes(model))
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        write_atomic(out / "vecnormalize.pkl", pickle.dumps(normalizer))
    if run["save_freq"] or run["checkpoint"]:  # the end state (to train further with --resume --timesteps),
        save_checkpoint(model, run, extra())  # never an older one that --resume would go on from again
    final = eval_cb.rows[-1]
    run.update(status="finished", timesteps=model.num_timesteps, success_rate=final["success_rate"],
               wall_time_s=round(eval_cb.wall(), 1), cpu_time_s=round(eval_cb.cpu(), 1))  # fmt: skip
    write_run(out, run)
    plot_curve(eval_cb.rows, title, out / "success.png")
    renders = "rgb_array" in gym.make(run["env"], **run["env_kwargs"]).metadata.get("render_modes", [])
    if renders and not args.no_gif:
        from enjoy import record  # examples/ is on sys.path when this file runs as a script

        record(model, run["env"], run["env_kwargs"], out / "policy.gif", n_episodes=3, seed=run["seed"])
    print(
        f"{run['env']} {run['algo']}+HER: success rate {final['success_rate']:.1%} over {run['eval_episodes']} "
        f"episodes after {model.num_timesteps} steps ({run['wall_time_s'] / 60:.1f} min); outputs in {out}"
    )
    return float(final["success_rate"])


if __name__ == "__main__":
    main()
