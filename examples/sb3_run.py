"""A run of ``train.py`` on disk, for ``train.py`` (which writes it) and ``enjoy.py`` (which reads it):
``run.json``, checked on reading; checkpoints; the success evaluation, its curve, TensorBoard events, a GIF.

A resumed run is bit for bit the uninterrupted one; stable-baselines3's ``save`` / ``load`` alone is
not, for four reasons, each handled here: (1) callbacks' ``on_step`` runs before the transition is
stored, so checkpoints are taken between rollouts; (2) ``load`` resets the envs, so they are pickled
and loaded with ``force_reset=False``, the buffer with ``truncate_last_traj=False``; (3) ``load``
re-seeds NumPy, torch and the action space, so their states are put back; (4) ``VecNormalize`` does
not pickle its running returns, so they are kept too. Not kept: envs that do not pickle (refused when
the run starts), an Ornstein-Uhlenbeck noise (reset by every ``learn``) and the clocks.
"""

from __future__ import annotations

import io
import pickle
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
import runfolder
import torch
from nets import gif, run_episodes
from runfolder import Checkpoint, Range, RunError, check_settings, csv_text, write_atomic
from stable_baselines3 import DDPG, DQN, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger, TensorBoardOutputFormat
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv, VecNormalize
from zoo_conf import check_her_settings, check_hyperparams, not_accepted

SCRIPT = "train.py"
# What a run writes at the top of its folder (besides checkpoints/): --force removes these, if a run wrote them.
OUTPUTS = ("run.json", "model.zip", "vecnormalize.pkl", "eval.csv", "success.png", "policy.gif")
ACCEPTED_RUN = "accepted: an output folder of examples/train.py"


def algorithms() -> dict[str, type[OffPolicyAlgorithm]]:
    """Algorithm name -> class; TQC from sb3-contrib when it is installed."""
    algos: dict[str, type[OffPolicyAlgorithm]] = {"dqn": DQN, "sac": SAC, "td3": TD3, "ddpg": DDPG}
    try:
        from sb3_contrib import TQC
    except ImportError:  # tqc is then not offered; argparse says which choices exist
        return algos
    algos["tqc"] = TQC
    return algos


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


class Checkpoints(BaseCallback):
    """Call ``save()`` every ``save_freq`` env steps (if set), between rollouts; stop after ``stop_at``."""

    def __init__(self, save: Callable[[], None], save_freq: int | None, stop_at: int | None = None):
        super().__init__()
        self.save, self.save_freq, self.stop_at = save, save_freq, stop_at
        self.next: int | None = None

    def after(self, steps: int) -> int | None:
        return (steps // self.save_freq + 1) * self.save_freq if self.save_freq else None

    def _on_training_start(self) -> None:
        self.next = self.after(self.model.num_timesteps)

    def _on_rollout_start(self) -> None:
        steps = self.model.num_timesteps
        stop = self.stop_at is not None and steps >= self.stop_at
        if stop or (self.next is not None and steps >= self.next):
            self.save()
            self.next = self.after(steps)
        if stop:
            raise StopTraining

    def _on_step(self) -> bool:
        return True


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
    """Every ``eval_freq`` env steps, between rollouts, evaluate the policy: a row of ``eval.csv`` (through
    ``write``); ``state()`` / ``restore()`` carry the curve and the clocks across a resume."""

    def __init__(self, run: dict[str, Any], write: Callable[[str, str], object]):
        super().__init__()
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

    def _on_rollout_start(self) -> None:
        if self.model.num_timesteps >= self.next:
            while self.next <= self.model.num_timesteps:
                self.next += self.eval_freq
            self.evaluate()

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
