"""Train an off-policy agent with our HER replay buffer on a goalenvs task, and report its success rate.

    python examples/train.py                                   # BitFlip n_bits=15, DQN + HER (the main job)
    python examples/train.py --env goalenvs/Parking-v0 --algo tqc
    python examples/train.py --env goalenvs/FetchReach-v0 --algo sac --timesteps 10000 --seed 1
    python examples/train.py --env goalenvs/FetchPush-v0 --save-freq 50000   # checkpoints; after a crash:
    python examples/train.py --resume runs/FetchPush-v0_tqc_s0                # goes on from the last one

Hyperparameters come from ``goalenvs.zoo.<algo>`` (the RL Zoo's ``--conf-file``, so the same settings
run under ``python -m rl_zoo3.train``); options override them. docs/training.md says what the output
folder holds, how ``--resume`` goes on bit for bit from a checkpoint, and how a mistake ends (one line).
"""

from __future__ import annotations

import argparse
import inspect
import json
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
import runfolder
import sb3_run
import torch
from gymnasium import spaces
from native_vec_env import make_training_envs
from nets import curve_png
from runfolder import RunError, RunFolder, folder_path, integer, tensorboard_folder
from sb3_run import OUTPUTS, SCRIPT
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ProgressBarCallback
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecNormalize

import goalenvs
from her import HerReplayBuffer

DEFAULT_ENV = "goalenvs/BitFlip-v0"
DEFAULT_ALGO = {"goalenvs/BitFlip-v0": "dqn"}
# Options that define a run: --resume takes them from run.json and refuses them on the command line.
RUN_OPTIONS = tuple(
    "env algo seed n_envs strategy n_sampled_goal env_kwargs output eval_freq eval_episodes conf_file force".split()
)
# The settings a checkpoint keeps in its manifest: run.json must agree with them to resume.
RUN_SETTINGS = tuple(
    "env algo env_kwargs seed n_envs eval_freq eval_episodes hyperparams her_overrides".split()
)


# ---------------------------------------------------------------------------------------- the command line
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
    """An argparse type: a torch device that exists here (a missing GPU is an error, not a silent CPU run)."""
    n_cuda, mps = torch.cuda.device_count(), torch.backends.mps.is_available()
    accepted = ["auto", "cpu", *(["cuda", "cuda:N"] if n_cuda else []), *(["mps"] if mps else [])]
    cuda = re.fullmatch(r"cuda(?::(\d+))?", text)
    if text in ("auto", "cpu") or (text == "mps" and mps) or (cuda and int(cuda.group(1) or 0) < n_cuda):
        return text
    why = (f" ({n_cuda} CUDA GPUs)" if torch.version.cuda else " (a CPU-only torch)") if cuda else ""
    raise argparse.ArgumentTypeError(f"{text!r} is not available{why}; accepted here: {accepted}")


def build_parser() -> runfolder.ArgumentParser:
    parser = runfolder.ArgumentParser(
        prog=SCRIPT, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--env", help=f"a goal env id (default {DEFAULT_ENV})")
    add("--algo", choices=sorted(sb3_run.algorithms()), help="default: dqn for BitFlip, tqc otherwise")
    add("--timesteps", type=integer(1), help="default: n_timesteps of the hyperparameter file")
    add("--seed", type=integer(0, 2**32 - 1), help="default 0")
    add("--n-envs", type=integer(1), help="parallel envs (default: the file's, else 1)")
    add("--strategy", choices=["future", "final", "episode"], help="HER goal selection")
    add("--n-sampled-goal", type=integer(0), help="HER relabelled goals per real one (k)")
    add("--env-kwargs", type=json_object, help="JSON object, e.g. '{\"n_bits\": 20}'")
    add("--output", type=Path, help="output folder (default runs/<env>_<algo>_s<seed>)")
    add("--force", action="store_true", help="replace the outputs of a run already in --output")
    add("--device", type=device_name, help="torch device: auto, cpu, cuda, cuda:N (default auto)")
    add("--threads", type=integer(1), help="torch intra-op threads (default 1)")
    add("--eval-freq", type=integer(1), help="env steps between evaluations (default: timesteps/10)")
    add("--eval-episodes", type=integer(1), help="episodes per evaluation (default 100)")
    add("--conf-file", help="module or .py/.yml file, as the RL Zoo's (default goalenvs.zoo.<algo>)")
    add("--save-freq", type=integer(1), help="checkpoint every N env steps (and at the end)")
    add("--stop-at", type=integer(1), help="checkpoint and stop after N env steps (resume later)")
    add("--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR from its checkpoint")
    add("--no-progress", action="store_true", help="no progress bar")
    add("--no-gif", action="store_true", help="skip recording a GIF of the trained policy")
    add("--tensorboard", type=folder_path, metavar="DIR", help="TensorBoard events in DIR/<run name>_<N>")
    return parser


# ---------------------------------------------------------------------------------------- validation
def _accepted_kwargs(env_id: str) -> list[str] | None:
    """The keyword arguments of the env's class (made with its defaults); None where that cannot be told."""
    try:
        env = gym.make(env_id)
    except Exception:  # whatever the env raises
        return None
    params = inspect.signature(type(env.unwrapped)).parameters
    env.close()
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
        accepted = _accepted_kwargs(env_id)
        takes = f"; it takes {accepted}" if accepted is not None else ""
        raise RunError(
            f"argument --env-kwargs: {env_id} takes no argument {unknown.group(1)!r}{takes}"
        ) from None
    except (ValueError, gym.error.Error) as exc:
        raise RunError(f"argument --env-kwargs: {env_id} with {env_kwargs}: {exc}") from None
    obs_space = env.observation_space
    keys = {"observation", "achieved_goal", "desired_goal"}
    goal_obs = isinstance(obs_space, spaces.Dict) and keys <= set(obs_space.spaces)
    if not goal_obs or not hasattr(env.unwrapped, "compute_reward"):
        env.close()
        raise RunError(
            f"argument --env: {env_id!r} is not a goal env (HER needs a Dict observation with observation, "
            f"achieved_goal and desired_goal, and compute_reward; it has {type(obs_space).__name__}); "
            f"accepted: a goal env such as {[e.id for e in goalenvs.ENVS]}"
        )
    return env


def resolve_new_run(args: argparse.Namespace) -> dict[str, Any]:
    """Everything a new run needs, validated before anything is written (errors: :class:`RunError`)."""
    env_id = args.env or DEFAULT_ENV
    if env_id not in gym.registry:
        raise RunError(
            f"argument --env: unknown env {env_id!r}; goalenvs ids: {[e.id for e in goalenvs.ENVS]}"
        )
    algo = args.algo or DEFAULT_ALGO.get(env_id, "tqc")
    if algo not in sb3_run.algorithms():
        raise RunError(
            f"argument --algo: {algo!r} is not available here (choices {sorted(sb3_run.algorithms())}; tqc needs sb3-contrib)"
        )
    conf_name, entries = sb3_run.load_hyperparams(
        args.conf_file or f"goalenvs.zoo.{algo}", "argument --conf-file"
    )
    entry = entries.get(env_id)
    if entry is not None and not isinstance(entry, dict):
        raise RunError(
            f"argument --conf-file: {conf_name}, entry {env_id!r}: {entry!r} is not a mapping of hyperparameters"
        )
    where = f"argument --conf-file: {conf_name}, entry {env_id!r}, key"
    file_kwargs = (entry or {}).get("env_kwargs") or {}
    if not isinstance(file_kwargs, dict):
        raise sb3_run.not_accepted(where, "env_kwargs", file_kwargs, "a mapping of the env's arguments")
    env_kwargs = {**file_kwargs, **(args.env_kwargs or {})}
    check_goal_env(env_id, env_kwargs).close()
    if entry is None:
        raise RunError(
            f"argument --algo: {conf_name} has no entry for {env_id!r} (entries: {sorted(entries)}); "
            "pass another --algo or --conf-file"
        )
    entry = sb3_run.check_hyperparams(entry, algo, sb3_run.algorithms()[algo], where)
    if args.timesteps is None and "n_timesteps" not in entry:
        raise RunError(f"argument --timesteps: required, as {conf_name} gives no n_timesteps for {env_id}")
    timesteps = args.timesteps or entry["n_timesteps"]
    if args.stop_at is not None and args.stop_at >= timesteps:
        raise RunError(
            f"argument --stop-at: {args.stop_at} is not below the run's {timesteps} steps; accepted: 1 to {timesteps - 1}"
        )
    seed = args.seed if args.seed is not None else 0
    out = args.output or Path("runs") / f"{env_id.split('/')[-1]}_{algo}_s{seed}"
    her = {"goal_selection_strategy": args.strategy, "n_sampled_goal": args.n_sampled_goal}
    # A folder in use is refused before the model is built.
    RunFolder(out, SCRIPT, OUTPUTS).check_new(args.force)
    tensorboard_folder(None, args.tensorboard, "argument --tensorboard")
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
        "her_overrides": {k: v for k, v in her.items() if v is not None},
        "output": str(out),
        "tensorboard": None,  # the run's TensorBoard folder, made in --tensorboard DIR once the run starts
    }


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
    run = sb3_run.read_run(args.resume, "argument --resume")
    file, option = args.resume / "run.json", "argument --tensorboard"
    recorded = tensorboard_folder(run.get("tensorboard"), args.tensorboard, option, "argument --resume", file)
    run["tensorboard"] = None if recorded is None else str(recorded)
    RunFolder(args.resume, SCRIPT, OUTPUTS).lock(probe=True)  # a folder in use is refused before loading
    if args.save_freq is not None:
        run["save_freq"] = args.save_freq
    run["output"] = str(args.resume)
    return run


def settings(run: Mapping[str, Any]) -> dict[str, Any]:
    """The settings that define a run as each checkpoint's manifest keeps them (as JSON reads them back)."""
    return json.loads(json.dumps({key: run[key] for key in RUN_SETTINGS}, default=repr))


# ---------------------------------------------------------------------------------------- the run
def build_model(run: dict[str, Any], device: str) -> OffPolicyAlgorithm:
    """The algorithm of a new run; what its constructor refuses is one line naming the hyperparameter file."""
    params = sb3_run.evaluate_entry(run["hyperparams"])
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
        return sb3_run.algorithms()[run["algo"]](
            policy,
            env,
            replay_buffer_class=HerReplayBuffer,
            replay_buffer_kwargs=her_kwargs,
            seed=run["seed"],
            device=device,
            verbose=0,
            **params,
        )
    except (TypeError, ValueError, AssertionError, KeyError) as exc:  # the constructors' own checks
        raise RunError(
            f"argument --conf-file: {run['conf_file']}, entry {run['env']!r}: {run['algo'].upper()}+HER "
            f"cannot be built from it ({runfolder.describe_error(exc)})"
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
    model = build_model(run, device)
    if run["save_freq"] or args.stop_at:  # fail now, not at the first checkpoint
        try:
            cloudpickle.dumps(model.get_env())
        except Exception as exc:  # whatever pickling raises
            raise RunError(
                f"argument --save-freq: checkpoints pickle the training envs, and {run['env']} "
                f"does not pickle ({runfolder.describe_error(exc)}); train without checkpoints"
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
        how = "checkpoints are written with --save-freq N or --stop-at N"
        checkpoint = folder.resume_from("argument --resume", how, out / "run.json", settings(run), "settings")
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
        model, state = sb3_run.load_checkpoint(checkpoint, sb3_run.algorithms()[run["algo"]], device, run)
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
    torch.set_num_threads(args.threads or 1)
    if args.resume:
        folder, model, state = open_resumed(run, args, device)
    else:
        (folder, model), state = create(run, args, device), None
    progress.update(folder=folder, model=model)
    with folder:
        # TensorBoard (--tensorboard, or a resumed run's), hiding what a stopped session wrote after its checkpoint
        purge = model.num_timesteps + 1 if state is not None else None
        writer = runfolder.summary_writer(run["tensorboard"], args.tensorboard, folder.path, purge)
        if writer is not None:
            run["tensorboard"] = writer.log_dir
            sb3_run.log_to_tensorboard(model, writer)
        try:
            return _learn(folder, model, run, state, args, argv)
        finally:
            if writer is not None:
                writer.close()  # flushed at every dump too: a killed run loses nothing dumped


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

    def save() -> None:  # the model, and what else a checkpoint keeps: the curve and its clocks
        checkpoint = folder.save_checkpoint(
            model.num_timesteps,
            sb3_run.checkpoint_files(model, {"eval": eval_cb.state()}),
            {"timesteps": model.num_timesteps, "settings": settings(run)},
        )
        run["checkpoint"], run["checkpoint_timesteps"] = f"checkpoints/{checkpoint.path.name}", checkpoint.tag
        write_run(folder, run)  # names it, for information: --resume loads the latest whole checkpoint

    eval_cb = sb3_run.EvalSuccess(run, folder.write, save, args.stop_at)
    if state is not None:
        eval_cb.restore(state["eval"])
    write_run(folder, run)
    callbacks: list[BaseCallback] = [eval_cb]
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
    except sb3_run.StopTraining:
        if not args.no_progress:
            callbacks[-1].on_training_end()  # closes the bar
        run.update(status="stopped", timesteps=model.num_timesteps)
        write_run(folder, run)
        folder.write("success.png", curve_png(eval_cb.rows, "timesteps", "environment steps", title))
        print(
            f"stopped at {model.num_timesteps} of {run['total_timesteps']} steps (checkpoint in "
            f"{out / run['checkpoint']}); go on with: {command_line(['--resume', str(out)])}"
        )
        return float("nan")
    if not eval_cb.rows or eval_cb.rows[-1]["timesteps"] != model.num_timesteps:
        eval_cb.evaluate()  # the final point of the curve is the trained agent
    folder.write("model.zip", sb3_run.model_bytes(model))
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
    folder.write("success.png", curve_png(eval_cb.rows, "timesteps", "environment steps", title))
    with gym.make(run["env"], **run["env_kwargs"]) as probe:  # for its render modes; closed after
        renders = "rgb_array" in probe.metadata.get("render_modes", [])
    if renders and not args.no_gif:
        folder.record("policy.gif")
        sb3_run.record(
            model, run["env"], run["env_kwargs"], out / "policy.gif", n_episodes=3, seed=run["seed"]
        )
    print(
        f"{run['env']} {run['algo']}+HER: success rate {final['success_rate']:.1%} over {run['eval_episodes']} "
        f"episodes after {model.num_timesteps} steps ({run['wall_time_s'] / 60:.1f} min); outputs in {out}"
    )
    return float(final["success_rate"])


def main(argv: list[str] | None = None) -> float:
    """Train (or resume) a run; returns its final success rate (``nan`` when stopped by ``--stop-at``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    progress: dict[str, Any] = {}
    return runfolder.run_main(SCRIPT, lambda: _train(argv, progress), lambda: _where(progress))


def _where(progress: dict[str, Any]) -> str:
    model: OffPolicyAlgorithm | None = progress.get("model")
    where = "before training started" if model is None else f"at {model.num_timesteps} steps"
    return runfolder.stopped_at(where, progress.get("folder"), "step")


if __name__ == "__main__":
    main()
