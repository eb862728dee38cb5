"""A run of ``train.py`` on disk, for ``train.py`` (which writes it) and ``enjoy.py`` (which reads it):
its ``--conf-file`` and ``run.json``, checked on reading; checkpoints; the success evaluation, its curve,
TensorBoard events, a GIF. docs/training.md says what a ``--conf-file`` may hold and what a bit-for-bit
resume takes (see "Checkpoints and resume").
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import io
import pickle
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
import runfolder
import torch
from nets import gif, run_episodes
from runfolder import Checkpoint, Range, RunError, check_settings, csv_text, load_conf, write_atomic
from stable_baselines3 import DDPG, DQN, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger, TensorBoardOutputFormat
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from goalenvs.zoo import HER_BUFFER
from her import HerReplayBuffer

SCRIPT = "train.py"
# What a run writes at the top of its folder (besides checkpoints/): --force removes these, if a run wrote them.
OUTPUTS = ("run.json", "model.zip", "vecnormalize.pkl", "eval.csv", "success.png", "policy.gif")
ACCEPTED_RUN = "accepted: an output folder of examples/train.py"


def algorithms() -> dict[str, type[OffPolicyAlgorithm]]:
    """Algorithm name -> class; TQC from sb3-contrib when it is installed."""
    algos: dict[str, type[OffPolicyAlgorithm]] = {"dqn": DQN, "sac": SAC, "td3": TD3, "ddpg": DDPG}
    with contextlib.suppress(ImportError):  # else tqc is not offered; argparse says which choices exist
        from sb3_contrib import TQC

        algos["tqc"] = TQC
    return algos


# ---------------------------------------------------------------------------------------- the --conf-file
STRATEGIES = ("future", "final", "episode")
CONF_ACCEPTED = (
    "a module holding `hyperparams` (e.g. goalenvs.zoo.tqc), or a .py or .yml file of env ids -> settings"
)
HER_BUFFER_ACCEPTED = "her.HerReplayBuffer (this script always trains with it)"
_HER_BUFFER_FORMS = ("HerReplayBuffer", "her.HerReplayBuffer", HER_BUFFER)
_MAPPINGS = {  # keys whose value is a mapping (the RL Zoo also evals a string; this script does not)
    "policy_kwargs": "a mapping, e.g. {'net_arch': [64, 64]} (a value such as nn.ReLU: in a .py file or module)",
    "replay_buffer_kwargs": "a mapping, e.g. {'n_sampled_goal': 4}",
    "env_kwargs": "a mapping of the env's arguments",
}


def load_hyperparams(conf: str, option: str) -> tuple[str, dict[str, Any]]:
    """``(name, entries)`` of a ``--conf-file`` as the RL Zoo reads it; the entries are a copy (the RL Zoo
    and stable-baselines3 change the dicts they are given)."""
    name, namespace = conf, dict[str, Any]()
    if conf.endswith((".yml", ".yaml", ".py")):
        path = Path(conf)
        with contextlib.suppress(ValueError):  # else its path as given
            name = str(path.resolve().relative_to(Path.cwd()))
        if not path.is_file():
            raise RunError(f"{option}: {conf} is not a file; accepted: {CONF_ACCEPTED}")
        if path.suffix != ".py":
            return name, load_conf(path, option)
    try:
        if conf.endswith(".py"):  # run, as the RL Zoo does
            exec(compile(Path(conf).read_bytes(), conf, "exec"), namespace)
        else:
            namespace = vars(importlib.import_module(conf))
    except Exception as exc:  # whatever the file or module raises
        raise RunError(
            f"{option}: cannot load {name} ({runfolder.describe_error(exc)}); accepted: {CONF_ACCEPTED}"
        ) from None
    entries = namespace.get("hyperparams")
    if not isinstance(entries, dict):
        raise RunError(
            f"{option}: {name} holds no `hyperparams` mapping of env ids to settings; accepted: {CONF_ACCEPTED}"
        )
    return name, copy.deepcopy(entries)


def evaluate_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A checked hyperparameter entry (:func:`check_hyperparams`) with the RL Zoo's ``"lin_<value>"``
    learning rate as the schedule it names (from <value> down to 0 at the last step)."""
    params = dict(entry)
    if isinstance(params.get("learning_rate"), str):
        params["learning_rate"] = LinearSchedule(float(params["learning_rate"][4:]), 0.0, 1.0)
    return params


# The accepted values of every numeric or boolean key of a hyperparameter entry (the RL Zoo's keys that
# the stable-baselines3 and sb3-contrib algorithms take), checked before anything is written.
_UNIT = Range(float, 0.0, 1.0)
_POSITIVE = Range(float, 0.0, low_open=True)
HYPERPARAM_RANGES: dict[str, Range | type] = {
    **{key: Range(int, 1) for key in ("n_timesteps", "n_envs", "buffer_size", "batch_size", "train_freq",
                                      "target_update_interval", "policy_delay", "n_steps", "stats_window_size")},
    "learning_starts": Range(int, 0),
    "gradient_steps": Range(int, -1),  # -1: as many gradient steps as env steps in the rollout
    "sde_sample_freq": Range(int, -1),  # -1: only at the start of a rollout
    "top_quantiles_to_drop_per_net": Range(int, 0),
    **dict.fromkeys(("gamma", "exploration_fraction", "exploration_initial_eps", "exploration_final_eps"), _UNIT),
    "tau": Range(float, 0.0, 1.0, low_open=True),  # 0 would never move the target networks
    "learning_rate": _POSITIVE,  # or "lin_<number>"
    "ent_coef": _POSITIVE,  # or "auto", "auto_<number>"
    "target_entropy": Range(float),  # or "auto"
    "max_grad_norm": _POSITIVE,
    "noise_std": Range(float, 0.0),
    "target_policy_noise": Range(float, 0.0),
    "target_noise_clip": Range(float, 0.0),
    **dict.fromkeys(("use_sde", "use_sde_at_warmup", "optimize_memory_usage"), bool),
}  # fmt: skip
HER_RANGES = {"n_sampled_goal": Range(int, 0)}
# Keys this script reads itself; the others go to the algorithm's constructor (those it sets itself excepted).
OWN_KEYS = ("n_timesteps", "n_envs", "env_kwargs", "normalize", "noise_std", "noise_type")
SET_HERE = ("env", "seed", "device", "verbose", "_init_setup_model", "action_noise")


def not_accepted(where: str, key: str, value: Any, accepted: str) -> RunError:
    return RunError(f"{where} {key}: {value!r} is not accepted; accepted: {accepted}")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _check_strings(params: Mapping[str, Any], where: str) -> None:
    """The keys that take a word or a list besides a number: learning_rate, ent_coef, target_entropy, train_freq."""
    lr = params.get("learning_rate")
    if isinstance(lr, str) and not (lr.startswith("lin_") and _POSITIVE.accepts(_number(lr[4:]))):
        raise not_accepted(where, "learning_rate", lr, 'a number > 0, or "lin_<number > 0>" (decayed to 0)')
    ent = params.get("ent_coef")
    if isinstance(ent, str) and not (
        ent == "auto" or (ent.startswith("auto_") and _POSITIVE.accepts(_number(ent[5:])))
    ):
        raise not_accepted(where, "ent_coef", ent, 'a number > 0, "auto" or "auto_<initial value > 0>"')
    if isinstance(params.get("target_entropy"), str) and params["target_entropy"] != "auto":
        raise not_accepted(where, "target_entropy", params["target_entropy"], 'a finite number or "auto"')
    freq = params.get("train_freq")
    if isinstance(freq, (list, tuple)) and not (
        len(freq) == 2 and Range(int, 1).accepts(freq[0]) and freq[1] in ("step", "episode")
    ):
        raise not_accepted(
            where, "train_freq", freq, 'an integer >= 1, or [integer >= 1, "step" or "episode"]'
        )
    if "noise_type" in params and params["noise_type"] != "normal":
        raise not_accepted(where, "noise_type", params["noise_type"], '"normal" (with noise_std)')
    if "policy" in params and not isinstance(params["policy"], str):
        raise not_accepted(where, "policy", params["policy"], "a policy name such as 'MultiInputPolicy'")


def check_her_settings(values: Mapping[str, Any], where: str) -> None:
    """HER's settings (replay_buffer_kwargs, --strategy/--n-sampled-goal overrides)."""
    strategy = values.get("goal_selection_strategy", "future")
    if strategy not in STRATEGIES:
        raise not_accepted(where, "goal_selection_strategy", strategy, f"one of {list(STRATEGIES)}")
    check_settings(values, HER_RANGES, where)


def check_hyperparams(entry: Mapping[str, Any], algo: str, algo_class: type, where: str) -> dict[str, Any]:
    """``entry`` checked key by key (a :class:`RunError` naming ``where``, e.g. ``"argument --conf-file:
    dqn.yml, entry 'goalenvs/BitFlip-v0', key"``); returned with whole floats of integer keys as ints."""
    accepted = set(inspect.signature(algo_class).parameters) - {"self", *SET_HERE}
    accepted |= set(OWN_KEYS)
    unknown = sorted(set(entry) - accepted)
    if unknown:
        raise RunError(
            f"{where} {unknown[0]}: not a setting of {algo.upper()}+HER; accepted: {sorted(accepted)}"
        )
    params = dict(entry)
    for key, value in params.items():
        spec = HYPERPARAM_RANGES.get(key)
        if isinstance(spec, Range) and spec.kind is int and isinstance(value, float) and value.is_integer():
            params[key] = int(value)
    _check_strings(params, where)
    words = ("learning_rate", "ent_coef", "target_entropy")
    check_settings(
        {k: v for k, v in params.items() if not (k in words and isinstance(v, str))
         and not (k == "train_freq" and isinstance(v, (list, tuple)))},
        HYPERPARAM_RANGES, where,
    )  # fmt: skip
    for key, form in _MAPPINGS.items():
        if params.get(key) is not None and not isinstance(params[key], dict):
            raise not_accepted(where, key, params[key], form)
    if params.get("replay_buffer_kwargs"):
        check_her_settings(
            params["replay_buffer_kwargs"], f"{where.removesuffix(', key')}, replay_buffer_kwargs key"
        )
    buffer = params.get("replay_buffer_class")
    if buffer not in (None, HerReplayBuffer, *_HER_BUFFER_FORMS):
        raise not_accepted(where, "replay_buffer_class", buffer, HER_BUFFER_ACCEPTED)
    if buffer is HerReplayBuffer:  # a .py file's class: run.json keeps its name
        params["replay_buffer_class"] = "her.HerReplayBuffer"
    if "normalize" in params and not isinstance(params["normalize"], (bool, dict)):
        raise not_accepted(
            where, "normalize", params["normalize"], "true, false or a mapping of VecNormalize's arguments"
        )
    return params


# ---------------------------------------------------------------------------------------- run.json
# What run.json must hold, with the accepted values of each (checked before a folder is locked).
RUN_KEYS: dict[str, Any] = {
    **dict.fromkeys(("env", "algo"), str),
    **dict.fromkeys(("env_kwargs", "hyperparams", "her_overrides"), dict),
    "seed": Range(int, 0, 2**32 - 1),  # NumPy's seeds
    **{k: Range(int, 1) for k in ("total_timesteps", "n_envs", "eval_freq", "eval_episodes", "save_freq")},
    "commands": list,
}


def read_run(run_dir: Path, option: str) -> dict[str, Any]:
    """The ``run.json`` of a run folder, every value checked as a new run's are (an edited file is one line)."""
    path = run_dir / "run.json"
    if not run_dir.is_dir():
        what = "does not exist" if not run_dir.exists() else "is not a folder"
        raise RunError(f"{option}: {run_dir} {what}; {ACCEPTED_RUN}")
    fix = "restore it from a copy (each checkpoint's MANIFEST.json holds the run's settings) or start again with --force"
    run = runfolder.read_json(path, option, SCRIPT, fix)
    if not isinstance(run, dict) or any(key not in run for key in RUN_KEYS):
        missing = sorted(set(RUN_KEYS) - set(run)) if isinstance(run, dict) else sorted(RUN_KEYS)
        raise RunError(
            f"{option}: {path} does not describe a run of {SCRIPT} (missing keys {missing}); {fix}"
        )
    where = f"{option}: {path}, key"
    check_settings({k: run[k] for k in RUN_KEYS if k != "save_freq" or run[k] is not None}, RUN_KEYS, where)
    if run["env"] not in gym.registry:
        raise not_accepted(where, "env", run["env"], "a registered env id")
    if run["algo"] not in algorithms():
        raise not_accepted(where, "algo", run["algo"], f"one of {sorted(algorithms())}")
    check_her_settings(run["her_overrides"], f"{option}: {path}, her_overrides key")
    algo_class = algorithms()[run["algo"]]
    where = f"{option}: {path}, entry hyperparams, key"
    run["hyperparams"] = check_hyperparams(run["hyperparams"], run["algo"], algo_class, where)
    return run


# ---------------------------------------------------------------------------------------- checkpoints
STATE_KEYS = ("timesteps", "numpy", "torch", "python", "action_space")


def model_bytes(model: BaseAlgorithm) -> bytes:
    """The model's zip file, in memory (to be written atomically)."""
    buffer = io.BytesIO()
    model.save(buffer)
    return buffer.getvalue()


def checkpoint_files(model: OffPolicyAlgorithm, extra: dict[str, Any]) -> dict[str, Callable[[Path], Any]]:
    """File name -> the function writing it, for ``RunFolder.save_checkpoint``; ``extra`` goes in ``state.pkl``."""
    normalizer = model.get_vec_normalize_env()
    venv = normalizer.venv if normalizer is not None else model.get_env()
    state: dict[str, Any] = {
        "timesteps": model.num_timesteps,
        "numpy": np.random.get_state(),  # noqa: NPY002  (stable-baselines3 draws exploration from it)
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "action_space": model.action_space.np_random.bit_generator.state,
        **extra,
    }
    files: dict[str, Callable[[Path], Any]] = {
        "model.zip": lambda path: model.save(path),
        "replay_buffer.pkl": lambda path: model.save_replay_buffer(path),
        "env.pkl": lambda path: path.write_bytes(cloudpickle.dumps(venv)),
    }
    if normalizer is not None:
        state["vecnormalize_returns"] = normalizer.returns.copy()  # VecNormalize does not pickle them
        files["vecnormalize.pkl"] = lambda path: path.write_bytes(pickle.dumps(normalizer))
    files["state.pkl"] = lambda path: path.write_bytes(pickle.dumps(state))
    return files


def load_checkpoint(
    checkpoint: Checkpoint, algo: type[OffPolicyAlgorithm], device: str, run: dict[str, Any]
) -> tuple[OffPolicyAlgorithm, dict[str, Any]]:
    """The model (with its envs and buffer) and ``state.pkl`` of a whole checkpoint; a file that does not fit
    the run's env, ``env_kwargs`` and ``n_envs`` is one line naming it."""
    env_id, env_kwargs, n_envs = run["env"], run["env_kwargs"], run["n_envs"]
    state = checkpoint.load("state.pkl", lambda p: pickle.loads(p.read_bytes()))
    if not isinstance(state, dict) or any(k not in state for k in STATE_KEYS):
        raise checkpoint.unfit("state.pkl", f"it holds no checkpoint state (keys {list(STATE_KEYS)})")
    if state["timesteps"] != checkpoint.tag:
        raise checkpoint.unfit("state.pkl", f"it is of step {state['timesteps']}, not {checkpoint.tag}")
    single = gym.make(env_id, **env_kwargs)
    spaces = single.observation_space, single.action_space
    single.close()
    env = checkpoint.load("env.pkl", lambda p: pickle.loads(p.read_bytes()))
    if (
        not isinstance(env, VecEnv)
        or env.num_envs != n_envs
        or (env.observation_space, env.action_space) != spaces
    ):
        raise checkpoint.unfit("env.pkl", f"it holds no {n_envs} envs {env_id} with {env_kwargs}")
    if (checkpoint.path / "vecnormalize.pkl").exists():
        if "vecnormalize_returns" not in state:
            raise checkpoint.unfit(
                "state.pkl", "it holds no VecNormalize returns, and vecnormalize.pkl is there"
            )
        env = checkpoint.load("vecnormalize.pkl", lambda p: VecNormalize.load(str(p), env))
        env.returns = state["vecnormalize_returns"]
    model = checkpoint.load("model.zip", lambda p: algo.load(p, env=env, device=device, force_reset=False))
    if model.num_timesteps != checkpoint.tag:
        raise checkpoint.unfit("model.zip", f"it is of step {model.num_timesteps}, not {checkpoint.tag}")
    checkpoint.load("replay_buffer.pkl", lambda p: model.load_replay_buffer(p, truncate_last_traj=False))
    if getattr(model.replay_buffer, "observation_space", None) != spaces[0]:
        raise checkpoint.unfit("replay_buffer.pkl", f"its observations are not those of {env_id}")
    try:  # load() re-seeded every generator from the initial seed: put back their states at the checkpoint
        np.random.set_state(state["numpy"])  # noqa: NPY002
        torch.set_rng_state(state["torch"])
        random.setstate(state["python"])
        model.action_space.np_random.bit_generator.state = state["action_space"]
    except (TypeError, ValueError, RuntimeError) as exc:
        raise checkpoint.unfit("state.pkl", f"{type(exc).__name__}: {exc}") from None
    return model, state


class StopTraining(Exception):
    """Raised between rollouts, after a checkpoint, to end a session at ``stop_at`` steps."""


# ---------------------------------------------------------------------------------------- evaluation
def act(model: BaseAlgorithm, obs: dict[str, np.ndarray]) -> np.ndarray:
    """Deterministic actions for raw observations (one or a batch), normalised first if the model trains on a VecNormalize."""
    normalizer = model.get_vec_normalize_env()
    inputs = obs if normalizer is None else normalizer.normalize_obs(obs)
    return model.predict(inputs, deterministic=True)[0]


def evaluate(
    model: BaseAlgorithm, envs: gym.vector.VectorEnv, n_episodes: int, seed: int
) -> tuple[float, float]:
    """(success rate, mean return) of ``n_episodes`` deterministic episodes seeded ``seed + i``, ``envs.num_envs``
    at a time; an env's episode counts until its first end, its success is ``info["is_success"]`` there."""
    success, returns = np.zeros(n_episodes, bool), np.zeros(n_episodes)
    width = envs.num_envs
    for first in range(0, n_episodes, width):
        obs, _ = envs.reset(seed=seed + first)
        running = np.arange(width) < n_episodes - first  # the last wave may use only some envs
        wave_success, wave_returns = np.zeros(width, bool), np.zeros(width)
        while running.any():
            obs, reward, terminated, truncated, info = envs.step(act(model, obs))
            wave_returns[running] += reward[running]
            ended = running & (terminated | truncated)
            wave_success[ended] = np.asarray(info.get("is_success", np.zeros(width)), dtype=bool)[ended]
            running &= ~ended
        success[first : first + width] = wave_success[: n_episodes - first]
        returns[first : first + width] = wave_returns[: n_episodes - first]
    return float(success.mean()), float(returns.mean())


class EvalSuccess(BaseCallback):
    """Between rollouts: every ``eval_freq`` env steps, evaluate the policy (a row of ``eval.csv``, through
    ``write``); then every ``save_freq`` env steps (if set) call ``save()``, and after ``stop_at`` save and
    stop. ``state()`` / ``restore()`` carry the curve and the clocks across a resume."""

    def __init__(
        self, run: dict[str, Any], write: Callable[..., object], save: Callable[[], None], stop_at: int | None
    ):
        super().__init__()
        self.save, self.save_freq, self.stop_at = save, run["save_freq"], stop_at
        self.next_save: int | None = None
        # All episodes side by side where the env has a native vector env (cheap), else 10 copies at most
        # (100 MuJoCo Fetch envs would hold ~1 GB).
        n, native = run["eval_episodes"], gym.spec(run["env"]).vector_entry_point is not None
        self.envs = gym.make_vec(run["env"], num_envs=n if native else min(n, 10), **run["env_kwargs"])
        self.n_episodes, self.eval_freq = run["eval_episodes"], run["eval_freq"]
        self.seed, self.write = run["seed"] + 10_000, write
        self.rows: list[dict[str, float]] = []
        self.next = self.eval_freq
        self.wall0, self.cpu0 = 0.0, 0.0  # time of the sessions before this one
        self.start_wall, self.start_cpu = time.perf_counter(), time.process_time()

    def wall(self) -> float:
        return self.wall0 + time.perf_counter() - self.start_wall

    def cpu(self) -> float:
        return self.cpu0 + time.process_time() - self.start_cpu

    def state(self) -> dict[str, Any]:
        return {"rows": list(self.rows), "next": self.next, "wall": self.wall(), "cpu": self.cpu()}

    def restore(self, state: dict[str, Any]) -> None:
        self.rows, self.next = list(state["rows"]), state["next"]
        self.wall0, self.cpu0 = state["wall"], state["cpu"]
        if self.rows:  # drops rows a crashed session wrote after its last checkpoint
            self.write("eval.csv", csv_text(self.rows))

    def evaluate(self) -> None:
        success, returns = evaluate(self.model, self.envs, self.n_episodes, self.seed)
        self.rows.append({"timesteps": self.model.num_timesteps, "success_rate": success, "mean_return": returns,
                          "wall_time_s": round(self.wall(), 2), "cpu_time_s": round(self.cpu(), 2)})  # fmt: skip
        self.write("eval.csv", csv_text(self.rows))
        # Through the outputs of stable-baselines3's logger (TensorBoard with --tensorboard), at the step measured,
        # by a logger of their own: what the algorithm recorded since its last dump stays pending for its own
        # next dump (a dump of the model's logger here would give its series a second point at one step).
        alone = Logger(self.logger.dir, self.logger.output_formats)
        alone.record("eval/success_rate", success)
        alone.record("eval/mean_reward", returns)
        alone.dump(self.model.num_timesteps)

    def after(self, steps: int) -> int | None:
        return (steps // self.save_freq + 1) * self.save_freq if self.save_freq else None

    def _on_training_start(self) -> None:
        self.next_save = self.after(self.model.num_timesteps)

    def _on_rollout_start(self) -> None:
        steps = self.model.num_timesteps
        if steps >= self.next:
            while self.next <= steps:
                self.next += self.eval_freq
            self.evaluate()
        stop = self.stop_at is not None and steps >= self.stop_at
        if stop or (self.next_save is not None and steps >= self.next_save):
            self.save()
            self.next_save = self.after(steps)
        if stop:
            raise StopTraining

    def _on_step(self) -> bool:
        return True


def record(
    model: BaseAlgorithm, env_id: str, env_kwargs: dict, path: Path, n_episodes: int, seed: int
) -> float:
    """Write ``n_episodes`` deterministic episodes as an animated GIF, atomically; returns their success rate."""
    env = gym.make(env_id, render_mode="rgb_array", **env_kwargs)
    frames: list[Any] = []
    seeds = [seed] + [None] * (n_episodes - 1)  # the later episodes go on with the env's own stream
    successes = run_episodes(env, lambda obs: act(model, obs), seeds, frames)
    write_atomic(path, gif(frames, 1000 / env.metadata.get("render_fps", 10)))  # no half GIF if interrupted
    env.close()
    return float(np.mean(successes))


class _TensorBoard(TensorBoardOutputFormat):
    """stable-baselines3's TensorBoard output, writing with ``writer`` (runfolder's ``summary_writer``)."""

    def __init__(self, writer: Any) -> None:  # no super(): it opens a writer
        self.writer, self._is_closed = writer, False


def log_to_tensorboard(model: BaseAlgorithm, writer: Any) -> None:
    """The model's scalars as TensorBoard events through ``writer``, in the run's own folder (stable-baselines3's
    own ``tensorboard_log`` option, kept in the model, names its parent)."""
    model.tensorboard_log = str(Path(writer.log_dir).parent)
    model.set_logger(Logger(writer.log_dir, [_TensorBoard(writer)]))
