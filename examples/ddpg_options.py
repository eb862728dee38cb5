"""The options of ``examples/her_ddpg.py``: parsed and checked before the first write.

Every setting (an option, the ``--conf-file`` entry and, on ``--resume``, the run's ``config.json``) is
checked against :data:`RANGES` and the run's folder against ``examples/runfolder.py``'s rules before
anything is written; a mistake is one :class:`~runfolder.RunError` line naming the option, file or key.
The settings class is the script's (``her_ddpg.Config``), given as an argument: ``her_ddpg`` runs as
``__main__``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import torch
import yaml
from runfolder import (
    ArgumentParser,
    Range,
    RunError,
    RunFolder,
    check_capacity,
    check_new_folder,
    check_settings,
    folder_path,
    resumed_folder,
)
from workers import World, launch, part

if TYPE_CHECKING:
    from her_ddpg import Config

SCRIPT = "her_ddpg.py"
CONF_FILE = Path(__file__).resolve().parent / "hyperparams" / "her_ddpg.yml"
# What a run writes at the top of its folder (besides checkpoints/): --force removes these, if a run wrote them.
OUTPUTS = ("config.json", "commands.txt", "eval.csv", "success.png", "policy.gif")


# Settings added after runs were recorded, with the value those runs used: a config.json or checkpoint
# without the key is read with it, so that such a run resumes as it ran.
ADDED_SETTINGS: dict[str, Any] = {
    "fused_adam": False,
    "flush_denormals": False,
    "policy_polyak": 0.0,
    "device": "cpu",
}

DEVICES = ("cpu", "cuda")  # where the networks live (--device)

# The settings a resumed run may change: they change how it computes, not what it learns (beyond the last
# bits, for the device). The others must match config.json and the checkpoint.
FREE_ON_RESUME = ("epochs", "threads", "device")

# The accepted values of every numeric setting, checked before anything is written (options, the
# --conf-file entry and, on --resume, config.json alike).
_PROBABILITY = Range(float, 0.0, 1.0)
_COUNTS = ("epochs", "n_envs", "n_cycles", "n_batches", "batch_size", "buffer_size", "hidden", "layers")
RANGES: dict[str, Range] = {
    "seed": Range(int, 0, 2**32 - 1),
    **{name: Range(int, 1) for name in (*_COUNTS, "eval_episodes", "threads")},
    "lr_actor": Range(float, 0.0, low_open=True),
    "lr_critic": Range(float, 0.0, low_open=True),
    "gamma": Range(float, 0.0, 1.0, high_open=True),  # 1: the critic's target clip 1/(1-gamma) is infinite
    "polyak": _PROBABILITY,
    "policy_polyak": Range(float, 0.0, 1.0, high_open=True),  # 1: the average would never leave the start
    "action_l2": Range(float, 0.0),
    "noise_eps": Range(float, 0.0),
    "random_eps": _PROBABILITY,
    "n_sampled_goal": Range(int, 0),
    "clip_obs": Range(float, 0.0, low_open=True),
    "norm_clip": Range(float, 0.0, low_open=True),
    "norm_eps": Range(float, 0.0, low_open=True),
}


def check_config(values: dict[str, Any], where: str) -> None:
    """Raise :class:`RunError` for a value of the wrong type or outside its range (``where``: its source)."""
    for name, value in values.items():
        if name in ("env_id",) and not isinstance(value, str):
            raise RunError(f"{where} {name}: {value!r} is not accepted; accepted: an env id (a string)")
        if name in ("bf16", "fused_adam", "flush_denormals") and not isinstance(value, bool):
            raise RunError(f"{where} {name}: {value!r} is not accepted; accepted: true or false")
        if name == "device" and value not in DEVICES:
            label = "--device" if where == "option" else f"{where} {name}"
            raise RunError(f"{label}: {value!r} is not accepted; accepted: {' or '.join(DEVICES)}")
    check_settings(values, RANGES, where)


def check_device(cfg: Config) -> Config:
    """``cfg``, once its device is known to be here (a run on CUDA on a machine without one is one line)."""
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise RunError(
            f"--device: cuda is not available here (torch {torch.__version__} sees no CUDA device); accepted: cpu"
        )
    return cfg


def build_parser(config: type[Config], description: str) -> ArgumentParser:
    parser = ArgumentParser(prog=SCRIPT, description=description)
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR")
    parser.add_argument("--output", type=Path, help="default runs/<env>_ddpg_s<seed>")
    parser.add_argument("--force", action="store_true", help="replace the run in a non-empty output folder")
    parser.add_argument("--save-freq", type=int, default=5, help="epochs between checkpoints (0: none)")
    parser.add_argument("--profile", action="store_true", help="print where the time went")
    parser.add_argument("--no-gif", action="store_true", help="skip the GIF of the trained policy")
    parser.add_argument(
        "--tensorboard",
        type=folder_path,
        metavar="DIR",
        help="also write TensorBoard events, per epoch, to DIR/<run name>_<N> (tensorboard --logdir DIR)",
    )
    parser.add_argument(
        "--env-threads", type=int, default=1, help="threads stepping each worker's envs' physics (default 1)"
    )
    parser.add_argument(
        "--evaluate",
        type=int,
        metavar="N",
        help="with --resume: only report the checkpoint's success over N episodes, where it fails and what "
        "the normalisers' clip hid (--norm-clip may differ from the run's)",
    )
    parser.add_argument(
        "--best",
        action="store_true",
        help="with --evaluate: the policy of the run's best evaluation so far (kept in its checkpoints) "
        "instead of the last one",
    )
    parser.add_argument(
        "--conf-file", type=Path, default=None, help=f"per-env settings (default {CONF_FILE})"
    )
    texts = {
        "threads": "torch threads per worker (default 1)",
        "device": "where the networks live: cpu (default) or cuda (each worker on GPU LOCAL_RANK; untested here)",
        "bf16": "hidden layers in bfloat16 (default: where the CPU, or with --device cuda the GPU, computes "
        "it natively)",
    }
    for f in fields(config):
        flag = ["--" + f.name.replace("_", "-")] + (["--env"] if f.name == "env_id" else [])
        text = texts.get(f.name, f"default {f.default}")
        if f.type == "bool" or isinstance(f.default, bool):
            parser.add_argument(
                *flag, action=argparse.BooleanOptionalAction, default=None, help=texts.get(f.name)
            )
        else:
            parser.add_argument(*flag, type=type(f.default), default=None, help=text)
    return parser


def read_conf(path: Path, env_id: str, config: type[Config]) -> dict[str, Any]:
    """The ``env_id`` entry of a her_ddpg YAML file, its keys and values checked (file and key named on error)."""
    try:
        entries = yaml.safe_load(path.read_text()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RunError(f"--conf-file: cannot read {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(entries, dict) or not isinstance(entries.get(env_id) or {}, dict):
        raise RunError(f"--conf-file: {path} is not a mapping of env ids to mappings of settings")
    entry = dict(entries.get(env_id) or {})
    unknown = sorted(set(entry) - {f.name for f in fields(config)} - {"env_id"})
    if unknown:
        raise RunError(f"--conf-file: {path} entry {env_id!r} has unknown keys {unknown}")
    entry.pop("env_id", None)
    check_config(entry, f"--conf-file: {path}, entry {env_id!r}, key")
    return entry


def read_config(run_dir: Path, config: type[Config]) -> tuple[dict[str, Any], Any]:
    """The settings in the ``config.json`` of a run folder, checked as the options are (an edited file is
    one line), and the run's TensorBoard folder recorded there (None: none; checked by the caller)."""
    path = run_dir / "config.json"
    fix = "restore it (the checkpoint's manifest holds the run's settings) or start again with --force"
    try:
        saved = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunError(f"--resume: {run_dir} holds no config.json of a her_ddpg run") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunError(f"--resume: {path} is not valid JSON ({exc}); {fix}") from None
    names = {f.name for f in fields(config)}
    tensorboard = saved.pop("tensorboard", None) if isinstance(saved, dict) else None  # absent: older runs
    if isinstance(saved, dict):
        saved = {**ADDED_SETTINGS, **saved}
    if not isinstance(saved, dict) or set(saved) != names:
        got = sorted(saved) if isinstance(saved, dict) else type(saved).__name__
        raise RunError(f"--resume: {path} does not hold the settings of a her_ddpg run (keys {got}); {fix}")
    check_config(saved, f"--resume: {path}, key")
    return saved, tensorboard


def check_world(cfg: Config, world: World, horizon: int, where: str) -> None:
    """Raise :class:`RunError` unless every worker gets at least one env, one sample per batch and room
    for its envs' episodes (``where``: the option the buffer size came from)."""
    if world.size > cfg.n_envs:
        raise RunError(
            f"--n-envs: {cfg.n_envs} envs cannot be shared by {world.size} workers; accepted: n_envs >= the "
            f"number of workers ({world.size}), or fewer workers"
        )
    for rank in range(world.size):
        lo, hi = World(rank, world.size).share(cfg.n_envs)
        if part(cfg.batch_size, lo, hi, cfg.n_envs) < 1:
            raise RunError(
                f"--batch-size: {cfg.batch_size} cannot be shared by {world.size} workers; accepted: "
                f"batch_size >= n_envs ({cfg.n_envs})"
            )
        share = f" (the share of worker {rank} of {world.size})" if world.size > 1 else ""
        check_capacity(part(cfg.buffer_size, lo, hi, cfg.n_envs), hi - lo, horizon, where + share)


def parse_args(
    argv: list[str] | None, world: World, config: type[Config], description: str = ""
) -> tuple[Config, Path, argparse.Namespace]:
    """The run's settings and folder, every value checked; writes nothing (errors: :class:`RunError`)."""
    parser = build_parser(config, description)
    args = parser.parse_args(argv)
    if args.env_threads < 1:
        raise RunError(f"--env-threads: {args.env_threads} is not accepted; accepted: an integer >= 1")
    values = {f.name: getattr(args, f.name) for f in fields(config) if getattr(args, f.name) is not None}
    check_config(values, "option")
    if args.save_freq < 0:
        raise RunError(
            f"--save-freq: {args.save_freq} is not accepted; accepted: an integer >= 0 (0: no checkpoints)"
        )
    if args.evaluate is not None and args.evaluate < 1:
        raise RunError(f"--evaluate: {args.evaluate} is not accepted; accepted: an integer >= 1")
    if args.best and args.evaluate is None:
        raise RunError(
            "--best: chooses the policy that --evaluate reports; accepted: --resume RUN --evaluate N --best"
        )
    if args.evaluate is not None and args.tensorboard is not None:
        raise RunError("--tensorboard: --evaluate writes nothing; accepted: --evaluate without --tensorboard")
    if args.tensorboard is not None:
        _check_tensorboard_installed()
    args.tensorboard_run = None  # a resumed run's own TensorBoard folder (recorded in its config.json)
    if args.evaluate is not None and world.size > 1:
        raise RunError(
            f"--evaluate: runs in one process, not under torchrun ({world.size} workers); accepted: "
            f"python examples/her_ddpg.py --resume {args.resume} --evaluate {args.evaluate}"
        )
    if args.resume is not None:
        return _resumed(args, values, config)
    if args.evaluate is not None:
        raise RunError("--evaluate: needs --resume RUN_DIR (the run whose checkpoint to evaluate)")
    env_id = values.get("env_id", config.env_id)
    if env_id not in gym.registry:
        raise RunError(f"--env-id: no env {env_id!r} is registered; accepted: {_fetch_ids()}")
    if not env_id.startswith("goalenvs/Fetch"):
        raise RunError(f"--env-id: this agent runs the goalenvs Fetch ids {_fetch_ids()}, got {env_id!r}")
    entry = read_conf(args.conf_file or CONF_FILE, env_id, config)
    cfg = check_device(config(**{**entry, **values}))
    if cfg.device == "cuda" and "bf16" not in {**entry, **values}:
        cfg = replace(cfg, bf16=torch.cuda.is_bf16_supported())
    where = "--buffer-size"
    if "buffer_size" not in values:
        where = (
            f"--conf-file: {args.conf_file or CONF_FILE}, key buffer_size"
            if "buffer_size" in entry
            else "--buffer-size (its default)"
        )
    probe = gym.make(env_id)  # the episode length: Fetch envs truncate themselves
    horizon = int(probe.unwrapped.max_steps)  # type: ignore[attr-defined]  # FetchEnv's, not gym.Env's
    probe.close()
    check_world(cfg, world, horizon, where)
    out = args.output or Path("runs") / f"{cfg.env_id.split('/')[-1]}_ddpg_s{cfg.seed}"
    if _restarted(out):  # torchrun's restart of this launch: it goes on where the launch got to
        args.resume, args.output, args.force, args.conf_file = out, None, False, None
        return _resumed(args, values, config)
    RunFolder.check_new(out, args.force, OUTPUTS, SCRIPT)
    if args.tensorboard is not None:
        check_new_folder(args.tensorboard, "--tensorboard")
    return cfg, out, args


def _resumed(
    args: argparse.Namespace, values: dict[str, Any], config: type[Config]
) -> tuple[Config, Path, argparse.Namespace]:
    """``parse_args`` of a run resumed (``--resume``, or torchrun's restart of the launch that wrote it)."""
    if args.output is not None and args.output.resolve() != args.resume.resolve():
        raise RunError(
            f"--output: --resume continues the run in its own folder {args.resume}, not {args.output}; "
            "accepted: no --output with --resume"
        )
    if args.force or args.conf_file is not None:
        given = "--force" if args.force else "--conf-file"
        raise RunError(f"{given}: cannot be given with --resume (the run keeps its folder and settings)")
    if (args.resume / "checkpoint.pt").is_file() and not (args.resume / ".run-manifest.json").exists():
        raise RunError(
            f"--resume: {args.resume} was written by an earlier her_ddpg.py (checkpoint.pt, storage.pkl, "
            "envs.pkl), whose checkpoints this version cannot resume; finish it with that version, or start "
            "a new run in another --output"
        )
    saved, recorded = read_config(args.resume, config)
    if args.evaluate is None:
        args.tensorboard_run = resumed_folder(
            recorded, args.tensorboard, "--tensorboard", "--resume", args.resume / "config.json"
        )
        if args.tensorboard_run is not None:
            _check_tensorboard_installed()
    free: tuple[str, ...] = FREE_ON_RESUME
    free += ("norm_clip", "policy_polyak") if args.evaluate is not None else ()
    changed = {k: v for k, v in values.items() if k not in free and v != saved[k]}
    if changed:
        may = "--epochs, --threads and --device"
        if args.evaluate is not None:
            may = "--epochs, --threads, --device, --norm-clip and --policy-polyak"
        raise RunError(f"--resume: continues a run as configured; only {may} may change, got {changed}")
    return check_device(config(**{**saved, **values})), args.resume, args


def _restarted(out: Path) -> bool:
    """Whether this is ``torchrun``'s restart of its workers (``--max-restarts``, after one failed) in the
    launch that wrote ``out``'s last checkpoint: then the run goes on from there, as with ``--resume``.

    A restart never replaces a run. Its command is the launch's own, so a ``--force`` given to start over
    was carried out by the first attempt; carried out again, it would throw away what the attempts since
    had learned. So where ``out`` holds anything but a checkpoint of this launch, the restart stops in one
    line (the launch's id is ``torchrun``'s: see :func:`workers.launch`).
    """
    run_id, restarts = launch()
    if restarts == 0 or not out.is_dir() or not any(out.iterdir()):
        return False
    try:
        folder: RunFolder | None = RunFolder.read_only(out, SCRIPT, OUTPUTS, option="--output")
    except RunError:  # not a run folder of this script: the new run's own checks say so
        folder = None
    checkpoint = None if folder is None else folder.latest_checkpoint(verify=False)  # --resume verifies it
    if checkpoint is not None and run_id is not None and checkpoint.meta.get("launch") == run_id:
        return True
    why = (
        f"{out} holds no checkpoint to go on from"
        if checkpoint is None
        else (
            f"the last checkpoint in {out} (epoch {checkpoint.meta.get('epoch')}) is not this launch's"
            + ("" if run_id else ": torchrun names no launch (give it --rdzv-id)")
        )
    )
    go_on = "" if checkpoint is None else f"go on from it with --resume {out}, or "
    raise RunError(
        f"torchrun restarted the workers (restart {restarts}), but {why}; a restart replaces nothing: "
        f"{go_on}start the run again with --force"
    )


def _check_tensorboard_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        raise RunError("--tensorboard: needs the tensorboard package; pip install tensorboard")


def _fetch_ids() -> list[str]:
    return sorted(i for i in gym.registry if i.startswith("goalenvs/Fetch"))


def _int_option(argv: list[str], flag: str) -> int:
    """The value of ``flag`` in ``argv`` (1 if absent or not valid: parse_args reports it), read before
    the workers meet, so that each is pinned to as many cores as it runs threads."""
    value = "1"
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return int(value) if value.isdigit() and int(value) >= 1 else 1


def env_threads_option(argv: list[str]) -> int:
    return _int_option(argv, "--env-threads")


def cores_each(argv: list[str]) -> int:
    """The cores a worker keeps busy: its physics threads or its torch threads (``--threads`` given on
    the command line; one set in a --conf-file is read too late to count), whichever are more."""
    return max(env_threads_option(argv), _int_option(argv, "--threads"))
