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

Writes to ``--output`` (default ``runs/<env>_<algo>_s<seed>``): ``model.zip``, ``run.json`` (what was
run, by which commands, for ``examples/enjoy.py`` and ``--resume``), ``eval.csv`` (the evaluation
curve: the deterministic policy over ``--eval-episodes`` episodes, run side by side in one vector
env), ``success.png`` (its plot), ``vecnormalize.pkl`` where the file asks for ``normalize`` and, for
envs that render, ``policy.gif``. The folder's rules are ``examples/runfolder.py``'s: every setting
(options, the ``--conf-file`` entry, ``run.json`` on resume) is range-checked before the first
write; the folder is locked while a run uses it (a second process is refused, naming the holder's
pid); an existing non-empty folder is refused unless ``--force``, which removes only what a run
recorded writing there; every file is written aside and renamed into place. A mistake or a damaged
file ends with one line and exit status 2, Ctrl-C or SIGTERM with one line saying where to resume
from and status 130, a failed write (a full disk) with one line and status 1.

Torch uses ``--threads`` intra-op threads (default 1): for networks this small one thread was faster
than two on the 2-core machine (the main job: 14 s with one, 23-30 s with two, beside two other jobs),
and two jobs started together do not fight over the cores.

Checkpoints and resume (details in ``examples/checkpointing.py``). ``--save-freq N`` checkpoints every
N env steps and at the end: model and optimiser, replay buffer, the training envs mid-episode,
``VecNormalize`` statistics, random states and the curve so far, in ``checkpoints/<steps>/`` with a
``MANIFEST.json`` of sizes, hashes and the run's id, renamed into place when whole: a crash keeps the
previous one. ``--resume RUN_DIR`` checks the latest checkpoint whole and goes on from it to the
run's total step count (``--timesteps`` raises it) with
``learn(remaining, reset_num_timesteps=False)``, appending to ``eval.csv`` and to the ``commands`` of
``run.json``. ``--stop-at N`` checkpoints and stops after N steps: a long run in shorter sessions.

A resumed run is bit-for-bit the uninterrupted one (measured: 1k steps + resume to 2k ends with the
same parameters, optimiser state and replay buffer as 2k in one go, for DQN on BitFlip and SAC with
``VecNormalize`` on FetchReach, stopped mid-episode; ``tests/examples/test_train_cli.py``). stable-baselines3's
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
import math
import os
import pickle
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
import torch
from checkpointing import (  # examples/checkpointing.py (examples/ is on sys.path)
    Checkpoints,
    StopTraining,
    checkpoint_files,
    load_checkpoint,
    model_bytes,
)
from evaluation import EvalSuccess, plot_curve  # examples/evaluation.py
from gymnasium import spaces
from native_vec_env import make_training_envs  # examples/native_vec_env.py
from runfolder import (
    ArgumentParser,
    Range,
    RunError,
    RunFolder,
    check_new_folder,
    check_settings,
    folder_path,
    make_numbered_folder,
    resumed_folder,
    run_main,
)  # examples/runfolder.py
from stable_baselines3 import DDPG, DQN, SAC, TD3
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ProgressBarCallback
from stable_baselines3.common.logger import Logger, TensorBoardOutputFormat
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecNormalize
from zoo_conf import (  # examples/zoo_conf.py
    check_her_settings,
    check_hyperparams,
    describe_error,
    evaluate_entry,
    load_conf,
    not_accepted,
)

import goalenvs
from her import HerReplayBuffer

SCRIPT = "train.py"
HERE = Path(__file__).resolve().parent
DEFAULT_ENV = "goalenvs/BitFlip-v0"
DEFAULT_ALGO = {"goalenvs/BitFlip-v0": "dqn"}
# What a run writes at the top of its folder (besides checkpoints/): --force removes these, if a run wrote them.
OUTPUTS = ("run.json", "model.zip", "vecnormalize.pkl", "eval.csv", "success.png", "policy.gif")
# Options that define a run: --resume takes them from run.json and refuses them on the command line.
RUN_OPTIONS = tuple(
    "env algo seed n_envs strategy n_sampled_goal env_kwargs output eval_freq eval_episodes conf_file force".split()
)
# The settings a checkpoint keeps in its manifest: run.json must agree with them to resume.
RUN_SETTINGS = tuple(
    "env algo env_kwargs seed n_envs eval_freq eval_episodes hyperparams her_overrides".split()
)
SEED = Range(int, 0, 2**32 - 1)  # NumPy's seeds


def algorithms() -> dict[str, type[OffPolicyAlgorithm]]:
    """Algorithm name -> class; TQC from sb3-contrib when it is installed."""
    algos: dict[str, type[OffPolicyAlgorithm]] = {"dqn": DQN, "sac": SAC, "td3": TD3, "ddpg": DDPG}
    try:
        from sb3_contrib import TQC
    except ImportError:  # tqc is then not offered; argparse says which choices exist
        return algos
    algos["tqc"] = TQC
    return algos


# ---------------------------------------------------------------------------------------- the command line
def integer(minimum: int, maximum: int | None = None) -> Any:
    """An argparse type: an integer in ``[minimum, maximum]`` (``1e4`` style accepted when it is whole)."""
    spec = Range(int, minimum, maximum)
    expected = f"an integer >= {minimum}" + ("" if maximum is None else f" and <= {maximum}")

    def parse(text: str) -> int:
        try:
            value = float(text)
            whole = int(value) if math.isfinite(value) and value.is_integer() else None
        except ValueError:
            whole = None
        if whole is None or not spec.accepts(whole):
            raise argparse.ArgumentTypeError(f"{text!r} is not accepted: expected {expected}")
        return whole

    parse.__name__ = expected.removeprefix("an ")
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
    parser.add_argument("--seed", type=integer(0, 2**32 - 1), help="default 0")
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
    parser.add_argument(
        "--tensorboard",
        type=folder_path,
        metavar="DIR",
        help="TensorBoard events (stable-baselines3's, and the evaluations') in "
        "DIR/<run name>_<N>: tensorboard --logdir DIR",
    )
    return parser


# ---------------------------------------------------------------------------------------- validation
def _accepted_kwargs(env_id: str, message: str) -> list[str] | None:
    """The keyword arguments the env's constructor takes (the class named in ``message`` if it forwards **kwargs)."""
    from gymnasium.envs.registration import load_env_creator

    # A goalenvs id's registered entry point is a make_* function taking **kwargs: look at its env class.
    ours = [entry.entry_point for entry in goalenvs.ENVS if entry.id == env_id]
    entry_point = ours[0] if ours else gym.spec(env_id).entry_point
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


def check_goal_env(env_id: str, env_kwargs: dict[str, Any]) -> gym.Env:
    """Make the env once: its own errors become one-line ``--env-kwargs`` errors; a non-goal env is refused."""
    try:
        env = gym.make(env_id, **env_kwargs)
    except TypeError as exc:
        unknown = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
        if unknown is None:
            raise RunError(f"argument --env-kwargs: {env_id} with {env_kwargs}: {exc}") from None
        accepted = _accepted_kwargs(env_id, str(exc))
        takes = f"; it takes {accepted}" if accepted is not None else ""
        raise RunError(
            f"argument --env-kwargs: {env_id} takes no argument {unknown.group(1)!r}{takes}"
        ) from None
    except (ValueError, gym.error.Error) as exc:
        raise RunError(f"argument --env-kwargs: {env_id} with {env_kwargs}: {exc}") from None
    obs_space = env.observation_space
    keys = {"observation", "achieved_goal", "desired_goal"}
    if not (isinstance(obs_space, spaces.Dict) and keys <= set(obs_space.spaces)) or not hasattr(
        env.unwrapped, "compute_reward"
    ):
        env.close()
        raise RunError(
            f"argument --env: {env_id!r} is not a goal env (HER needs a Dict observation with observation, "
            f"achieved_goal and desired_goal, and compute_reward; it has {type(obs_space).__name__}); "
            f"accepted: a goal env such as {[e.id for e in goalenvs.ENVS]}"
        )
    return env


def default_output(env_id: str, algo: str, seed: int) -> Path:
    return Path("runs") / f"{env_id.split('/')[-1]}_{algo}_s{seed}"


def resolve_new_run(args: argparse.Namespace) -> dict[str, Any]:
    """Everything a new run needs, validated before anything is written (errors: :class:`RunError`)."""
    env_id = args.env or DEFAULT_ENV
    if env_id not in gym.registry:
        raise RunError(
            f"argument --env: unknown env {env_id!r}; goalenvs ids: {[e.id for e in goalenvs.ENVS]}"
        )
    algo = args.algo or DEFAULT_ALGO.get(env_id, "tqc")
    if algo not in algorithms():
        raise RunError(
            f"argument --algo: {algo!r} is not available here (choices {sorted(algorithms())}; tqc needs sb3-contrib)"
        )
    conf_file = args.conf_file or HERE / "hyperparams" / f"{algo}.yml"
    try:
        conf_name = str(conf_file.resolve().relative_to(Path.cwd()))
    except ValueError:
        conf_name = str(conf_file)
    entries = load_conf(conf_file)
    entry = entries.get(env_id)
    if entry is not None and not isinstance(entry, dict):
        raise RunError(
            f"argument --conf-file: {conf_name}, entry {env_id!r}: {entry!r} is not a mapping of hyperparameters"
        )
    where = f"argument --conf-file: {conf_name}, entry {env_id!r}, key"
    file_kwargs = (entry or {}).get("env_kwargs") or {}
    if not isinstance(file_kwargs, dict):
        raise not_accepted(where, "env_kwargs", file_kwargs, "a mapping of the env's arguments")
    env_kwargs = {**file_kwargs, **(args.env_kwargs or {})}
    check_goal_env(env_id, env_kwargs).close()
    if entry is None:
        raise RunError(
            f"argument --algo: {conf_name} has no entry for {env_id!r} (entries: {sorted(entries)}); "
            "pass another --algo or --conf-file"
        )
    entry = check_hyperparams(entry, algo, algorithms()[algo], where)
    if args.timesteps is None and "n_timesteps" not in entry:
        raise RunError(f"argument --timesteps: required, as {conf_name} gives no n_timesteps for {env_id}")
    timesteps = args.timesteps or entry["n_timesteps"]
    if args.stop_at is not None and args.stop_at >= timesteps:
        raise RunError(
            f"argument --stop-at: {args.stop_at} is not below the run's {timesteps} steps; accepted: 1 to {timesteps - 1}"
        )
    seed = args.seed if args.seed is not None else 0
    out = args.output or default_output(env_id, algo, seed)
    RunFolder.check_free(out)  # a folder in use is refused before the model is built
    RunFolder.check_new(out, args.force, OUTPUTS, SCRIPT)
    if args.tensorboard is not None:
        check_tensorboard_installed()
        check_new_folder(args.tensorboard, "argument --tensorboard")
    return {
        "env": env_id,
        "algo": algo,
        "env_kwargs": env_kwargs,
        "seed": seed,
        "total_timesteps": timesteps,
        "n_envs": args.n_envs or entry.get("n_envs", 1),
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
        "tensorboard": None,  # the run's TensorBoard folder, made in --tensorboard DIR once the run starts
    }


def check_tensorboard_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        raise RunError("argument --tensorboard: needs the tensorboard package; pip install tensorboard")


# What run.json must hold to be resumed, with the type of each value (checked before the folder is locked).
RUN_KEYS: dict[str, tuple[type, ...]] = {
    "env": (str,),
    "algo": (str,),
    "env_kwargs": (dict,),
    "seed": (int,),
    "total_timesteps": (int,),
    "n_envs": (int,),
    "eval_freq": (int,),
    "eval_episodes": (int,),
    "save_freq": (int, type(None)),
    "hyperparams": (dict,),
    "her_overrides": (dict,),
    "commands": (list,),
}
_JSON_TYPES = {str: "a string", int: "an integer", dict: "an object", list: "a list", type(None): "null"}
RUN_RANGES = {
    "seed": SEED,
    **{k: Range(int, 1) for k in ("total_timesteps", "n_envs", "eval_freq", "eval_episodes", "save_freq")},
}


def read_run(run_dir: Path, option: str) -> dict[str, Any]:
    """The ``run.json`` of a run folder, every value checked as a new run's are (an edited file is one line)."""
    path = run_dir / "run.json"
    accepted = "accepted: an output folder of examples/train.py"
    if not run_dir.is_dir():
        what = "does not exist" if not run_dir.exists() else "is not a folder"
        raise RunError(f"{option}: {run_dir} {what}; {accepted}")
    fix = "restore it from a copy (each checkpoint's MANIFEST.json holds the run's settings) or start again with --force"
    try:
        run = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise RunError(f"{option}: {run_dir} has no run.json; {accepted}") from None
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8
        raise RunError(f"{option}: {path} is not valid JSON ({describe_error(exc)}); {fix}") from None
    if not isinstance(run, dict) or any(key not in run for key in RUN_KEYS):
        missing = sorted(set(RUN_KEYS) - set(run)) if isinstance(run, dict) else sorted(RUN_KEYS)
        raise RunError(
            f"{option}: {path} does not describe a run of {SCRIPT} (missing keys {missing}); {fix}"
        )
    where = f"{option}: {path}, key"
    for key, types in RUN_KEYS.items():
        if not isinstance(run[key], types) or isinstance(run[key], bool):
            raise not_accepted(where, key, run[key], " or ".join(_JSON_TYPES[t] for t in types))
    if run["env"] not in gym.registry:
        raise not_accepted(where, "env", run["env"], "a registered env id")
    if run["algo"] not in algorithms():
        raise not_accepted(where, "algo", run["algo"], f"one of {sorted(algorithms())}")
    check_settings({k: run[k] for k in RUN_RANGES if run[k] is not None}, RUN_RANGES, where)
    check_her_settings(run["her_overrides"], f"{option}: {path}, her_overrides key")
    run["hyperparams"] = check_hyperparams(
        run["hyperparams"],
        run["algo"],
        algorithms()[run["algo"]],
        f"{option}: {path}, entry hyperparams, key",
    )
    return run


def resolve_resume(args: argparse.Namespace) -> dict[str, Any]:
    """The run.json of ``--resume RUN_DIR``, checked (the checkpoint is checked once the folder is locked)."""
    given = [
        f"--{name.replace('_', '-')}" for name in RUN_OPTIONS if getattr(args, name) not in (None, False)
    ]
    if given:
        raise RunError(
            f"argument --resume: {', '.join(given)} cannot be given with --resume (a resumed run keeps the env, "
            "algo, seed and hyperparameters in its run.json); accepted with it: --timesteps, --stop-at, "
            "--save-freq, --device, --threads, --no-progress, --no-gif, --tensorboard"
        )
    run = read_run(args.resume, "argument --resume")
    recorded = resumed_folder(
        run.get("tensorboard"),
        args.tensorboard,
        "argument --tensorboard",
        "argument --resume",
        args.resume / "run.json",
    )
    run["tensorboard"] = None if recorded is None else str(recorded)
    if run["tensorboard"] is not None or args.tensorboard is not None:
        check_tensorboard_installed()
    RunFolder.check_free(args.resume)
    if args.save_freq is not None:
        run["save_freq"] = args.save_freq
    run["output"] = str(args.resume)
    return run


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (what run.json and a checkpoint's manifest hold)."""
    return json.loads(json.dumps(value, default=repr))


def settings(run: Mapping[str, Any]) -> dict[str, Any]:
    """The settings that define a run, as kept in each checkpoint's manifest."""
    return _jsonable({key: run[key] for key in RUN_SETTINGS})


# ---------------------------------------------------------------------------------------- the run
def build_model(run: dict[str, Any], device: str, tensorboard_log: Path | None = None) -> OffPolicyAlgorithm:
    """The algorithm of a new run; what its constructor refuses is one line naming the hyperparameter file.

    ``tensorboard_log``: stable-baselines3's own option (kept in the model); the run's logger is set
    to the run's own folder in it by :func:`tensorboard_logger`.
    """
    params = evaluate_entry(run["hyperparams"])
    normalize = params.pop("normalize", False)
    for key in ("n_timesteps", "n_envs", "env_kwargs"):
        params.pop(key, None)
    her_kwargs = {**(params.pop("replay_buffer_kwargs", None) or {}), **run["her_overrides"]}
    params.pop("replay_buffer_class", None)  # always ours here
    try:
        env = make_training_envs(run)
        if normalize:  # as the RL Zoo: True, or the keyword arguments of VecNormalize
            norm_kwargs = normalize if isinstance(normalize, dict) else {}
            env = VecNormalize(env, **{"gamma": params.get("gamma", 0.99), **norm_kwargs})
        noise_std = params.pop("noise_std", None)
        if noise_std is not None:  # TD3/DDPG exploration, as the RL Zoo's noise_type: normal
            n = spaces.flatdim(env.action_space)  # a Box of n actions (TD3, DDPG)
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
            tensorboard_log=None if tensorboard_log is None else str(tensorboard_log),
            **params,
        )
    except (TypeError, ValueError, AssertionError, KeyError) as exc:  # the constructors' own checks
        raise RunError(
            f"argument --conf-file: {run['conf_file']}, entry {run['env']!r}: {run['algo'].upper()}+HER "
            f"cannot be built from it ({describe_error(exc)})"
        ) from None


def command_line(argv: list[str]) -> str:
    return shlex.join(["python", os.path.relpath(__file__), *argv])


def write_run(folder: RunFolder, run: dict[str, Any]) -> None:
    """``run.json``, atomically (values JSON cannot hold are written as their repr)."""
    folder.write("run.json", json.dumps(run, indent=2, default=repr) + "\n")


def create(
    run: dict[str, Any], args: argparse.Namespace, device: str
) -> tuple[RunFolder, OffPolicyAlgorithm]:
    """The model of a new run, then its folder, locked (the model's errors leave nothing behind)."""
    model = build_model(run, device, args.tensorboard)
    if run["save_freq"] or args.stop_at:  # fail now, not at the first checkpoint
        try:
            cloudpickle.dumps(model.get_env())
        except Exception as exc:  # whatever pickling raises
            raise RunError(
                f"argument --save-freq: checkpoints pickle the training envs, and {run['env']} "
                f"does not pickle ({describe_error(exc)}); train without checkpoints"
            ) from None
    folder = RunFolder.create(Path(run["output"]), force=args.force, outputs=OUTPUTS, script=SCRIPT)
    run["checkpoint"], run["checkpoint_timesteps"] = None, 0
    return folder, model


def open_resumed(
    run: dict[str, Any], args: argparse.Namespace, device: str
) -> tuple[RunFolder, OffPolicyAlgorithm, dict[str, Any]]:
    """The run's folder, locked, and the model and state of its latest checkpoint (checked whole)."""
    out = Path(run["output"])
    folder = RunFolder.open(out, outputs=OUTPUTS, script=SCRIPT)
    try:
        checkpoint = folder.latest_checkpoint()
        if checkpoint is None:
            raise RunError(
                f"argument --resume: {out} has no checkpoint (checkpoints are written with --save-freq N "
                f"or --stop-at N); start it again with --output {out} --force"
            )
        saved = checkpoint.meta.get("settings")
        mine = settings(run)
        changed = sorted(k for k in RUN_SETTINGS if not isinstance(saved, dict) or saved.get(k) != mine[k])
        if changed:
            raise RunError(
                f"argument --resume: {out / 'run.json'} differs from its checkpoint's settings in "
                f"{changed}; restore run.json or start again with --force"
            )
        done = checkpoint.tag
        total = args.timesteps or run["total_timesteps"]
        if total <= done:
            if args.timesteps is None:
                raise RunError(
                    f"argument --resume: {out} is complete ({done} of {total} steps); "
                    f"pass --timesteps above {done} to train it further"
                )
            raise RunError(
                f"argument --timesteps: {total} is not above the {done} steps of the checkpoint; accepted: > {done}"
            )
        if args.stop_at is not None and not done < args.stop_at < total:
            raise RunError(
                f"argument --stop-at: {args.stop_at} is not between the checkpoint's {done} steps and "
                f"the run's {total}; accepted: {done + 1} to {total - 1}"
            )
        model, state = load_checkpoint(
            checkpoint, algorithms()[run["algo"]], device, run["env"], run["env_kwargs"], run["n_envs"]
        )
    except BaseException:
        folder.close()
        raise
    run["total_timesteps"] = total
    run["checkpoint"], run["checkpoint_timesteps"] = f"checkpoints/{checkpoint.path.name}", done
    return folder, model, state


def _train(argv: list[str], progress: dict[str, Any]) -> float:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = resolve_resume(args) if args.resume else resolve_new_run(args)
    device = args.device or run.get("device_arg", "auto")
    if args.device is None and args.resume:  # the run's own device must exist here too
        try:
            device_name(device)
        except argparse.ArgumentTypeError as exc:
            raise RunError(f"argument --device: the run used {exc}; pass --device") from None
    threads = args.threads or 1
    torch.set_num_threads(threads)
    if args.resume:
        folder, model, state = open_resumed(run, args, device)
    else:
        (folder, model), state = create(run, args, device), None
    progress.update(folder=folder, model=model, out=folder.path)
    with folder:
        logger = open_tensorboard(run, args, model, state is not None)
        try:
            return _learn(folder, model, run, state, args, argv)
        finally:
            if logger is not None:
                logger.close()  # flushed at every dump too: a killed run loses nothing dumped


def open_tensorboard(
    run: dict[str, Any], args: argparse.Namespace, model: OffPolicyAlgorithm, resumed: bool
) -> Logger | None:
    """With ``--tensorboard`` (or a resumed run that had it): the run's TensorBoard folder (made in DIR
    for a new run, or one that had none; recorded in ``run``) and the model's logger writing there."""
    if run["tensorboard"] is None and args.tensorboard is not None:
        run["tensorboard"] = str(make_numbered_folder(args.tensorboard, Path(run["output"]).resolve().name))
    if run["tensorboard"] is None:
        return None
    folder = Path(run["tensorboard"])
    model.tensorboard_log = str(folder.parent)  # stable-baselines3's own option, kept in the model
    logger = tensorboard_logger(folder, model.num_timesteps + 1 if resumed else None)
    model.set_logger(logger)
    return logger


class _TensorBoard(TensorBoardOutputFormat):
    """stable-baselines3's TensorBoard output, its ``SummaryWriter`` opened with ``purge_step``."""

    def __init__(self, folder: Path, purge_step: int | None) -> None:  # no super(): it opens a writer
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder), purge_step=purge_step)
        self._is_closed = False


def tensorboard_logger(folder: Path, purge_step: int | None) -> Logger:
    """The logger a run with ``--tensorboard`` trains with: stable-baselines3's scalars (and the
    evaluations', ``eval/success_rate``) as TensorBoard events in the run's own ``folder``.

    stable-baselines3 picks ``<tb_log_name>_<N>`` itself and, on a resumed ``learn``, goes on in the
    highest N there, which may be another run's: here the run's folder is chosen once, kept in run.json,
    and a resumed run goes on in it with ``purge_step`` (TensorBoard then hides what a stopped session
    wrote after the checkpoint, so no step is shown twice; no file is removed).
    """
    return Logger(str(folder), [_TensorBoard(folder, purge_step)])


def _learn(
    folder: RunFolder,
    model: OffPolicyAlgorithm,
    run: dict[str, Any],
    state: dict[str, Any] | None,
    args: argparse.Namespace,
    argv: list[str],
) -> float:
    out = folder.path
    run.update(
        device_arg=args.device or run.get("device_arg", "auto"),
        device=str(model.device),
        threads=args.threads or 1,
        status="running",
    )
    run["commands"] = [*run.get("commands", []), command_line(argv)]
    eval_cb = EvalSuccess(run, folder.write)
    if state is not None:
        eval_cb.restore(state["eval"])
    write_run(folder, run)
    extra = lambda: {"eval": eval_cb.state()}  # noqa: E731  (what each checkpoint keeps besides the model)

    def save() -> None:
        checkpoint = folder.save_checkpoint(
            model.num_timesteps,
            checkpoint_files(model, extra()),
            {"timesteps": model.num_timesteps, "settings": settings(run)},
        )
        run["checkpoint"], run["checkpoint_timesteps"] = f"checkpoints/{checkpoint.path.name}", checkpoint.tag
        write_run(folder, run)  # names it, for information: --resume loads the latest whole checkpoint

    callbacks: list[BaseCallback] = [eval_cb, Checkpoints(save, run["save_freq"], args.stop_at)]
    if not args.no_progress:
        callbacks.append(ProgressBarCallback())
    title = f"{run['env']} {run['algo'].upper()}+HER (seed {run['seed']})"
    try:
        model.learn(
            run["total_timesteps"] - model.num_timesteps,
            CallbackList(callbacks),
            reset_num_timesteps=not args.resume,
        )
    except (ValueError, RuntimeError) as exc:
        # A diverged policy (its weights NaN) fails wherever its NaN lands first: torch's distributions,
        # or the env refusing the non-finite action. Whatever the error, non-finite weights say why.
        if not all(torch.isfinite(p).all() for p in model.policy.parameters()):
            raise RunError(
                f"training diverged by {model.num_timesteps} steps: the policy's weights are no longer finite; "
                f"lower the learning rate in {run['conf_file']} and start again with --output {out} --force"
            ) from None
        if not str(exc).startswith("Unable to sample: the longest episode"):
            raise
        # HerStorage: an episode longer than the storage keeps per env.
        # The env's episode length is not known before a run (envs truncate themselves): say so now.
        raise RunError(
            f"buffer_size of {run['conf_file']}, entry {run['env']!r}: {str(exc).removeprefix('Unable to sample: ')}; "
            f"start again with --output {out} --force"
        ) from None
    except StopTraining:
        if not args.no_progress:
            callbacks[-1].on_training_end()  # closes the bar
        run.update(status="stopped", timesteps=model.num_timesteps)
        write_run(folder, run)
        folder.write("success.png", plot_curve(eval_cb.rows, title))
        print(
            f"stopped at {model.num_timesteps} of {run['total_timesteps']} steps (checkpoint in "
            f"{out / run['checkpoint']}); go on with: {command_line(['--resume', str(out)])}"
        )
        return float("nan")
    if not eval_cb.rows or eval_cb.rows[-1]["timesteps"] != model.num_timesteps:
        eval_cb.evaluate()  # the final point of the curve is the trained agent
    folder.write("model.zip", model_bytes(model))
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        folder.write("vecnormalize.pkl", pickle.dumps(normalizer))
    if run["save_freq"] or run["checkpoint"]:  # the end state (to train further with --resume --timesteps),
        save()  # never an older one that --resume would go on from again
    final = eval_cb.rows[-1]
    run.update(
        status="finished",
        timesteps=model.num_timesteps,
        success_rate=final["success_rate"],
        wall_time_s=round(eval_cb.wall(), 1),
        cpu_time_s=round(eval_cb.cpu(), 1),
    )
    write_run(folder, run)
    folder.write("success.png", plot_curve(eval_cb.rows, title))
    renders = "rgb_array" in gym.make(run["env"], **run["env_kwargs"]).metadata.get("render_modes", [])
    if renders and not args.no_gif:
        from enjoy import record  # examples/ is on sys.path when this file runs as a script

        folder.record("policy.gif")
        record(model, run["env"], run["env_kwargs"], out / "policy.gif", n_episodes=3, seed=run["seed"])
    print(
        f"{run['env']} {run['algo']}+HER: success rate {final['success_rate']:.1%} over {run['eval_episodes']} "
        f"episodes after {model.num_timesteps} steps ({run['wall_time_s'] / 60:.1f} min); outputs in {out}"
    )
    return float(final["success_rate"])


def main(argv: list[str] | None = None) -> float:
    """Train (or resume) a run; returns its final success rate (``nan`` when stopped by ``--stop-at``).

    A user's mistake (or a damaged file) ends with one line and exit status 2; Ctrl-C or SIGTERM with one
    line saying where to resume from and status 130; a failed write (a full disk) with one line and 1.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    progress: dict[str, Any] = {}
    return run_main(SCRIPT, lambda: _train(argv, progress), lambda: _where(progress))


def _where(progress: dict[str, Any]) -> str:
    """Where a run stopped and how to go on: the latest checkpoint on disk, not the last one named."""
    model: OffPolicyAlgorithm | None = progress.get("model")
    if model is None:
        return "before training started"
    folder: RunFolder = progress["folder"]
    found = folder.checkpoints()
    if not found:
        return (
            f"at {model.num_timesteps} steps; no checkpoint was written (--save-freq N writes them), "
            f"so start again with --output {progress['out']} --force"
        )
    return f"at {model.num_timesteps} steps; go on from step {int(found[-1].name)} with --resume {progress['out']}"


if __name__ == "__main__":
    main()
