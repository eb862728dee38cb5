"""Checkpoints of an ``examples/train.py`` run, written so that a crash never leaves a broken one.

Layout, in the run folder::

    run.json                       what ran; "checkpoint" names the last whole checkpoint
    checkpoints/<steps>/           model.zip        the model, with its optimiser state
                                   replay_buffer.pkl
                                   env.pkl          the training envs (DummyVecEnv), mid-episode
                                   vecnormalize.pkl the observation statistics, where used
                                   state.pkl        random states, the evaluation curve and clocks

A checkpoint is written to ``checkpoints/.tmp-<steps>/``, flushed to disk and renamed into place;
only then does ``run.json`` (written to a temporary file, flushed and renamed over the old one) name
it, and only then are older checkpoints removed. A crash at any moment leaves ``run.json`` naming a
whole checkpoint (or none yet).

What makes a resumed run the same, bit for bit, as one that was not interrupted (stable-baselines3's
``save`` / ``load`` alone does not):

* the checkpoint is taken between rollouts (``on_rollout_start``), after the gradient steps of the
  last rollout and with every collected transition in the buffer. stable-baselines3's callbacks'
  ``on_step`` runs after ``env.step`` but before the transition is stored, so a buffer saved there
  misses the step the model has already counted;
* the envs are pickled with the checkpoint and the model is loaded with ``force_reset=False``, so
  training goes on from the same observation, mid-episode, instead of from a fresh ``reset``; the
  buffer is loaded with ``truncate_last_traj=False`` for the same reason (the episode goes on);
* ``load`` re-seeds NumPy's global generator, torch's and the action space's from the initial seed
  (``_setup_model`` calls ``set_random_seed``): their states at the checkpoint are put back after it;
* ``VecNormalize`` does not pickle its running returns (reward normalisation): they are kept too.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import shutil
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

__all__ = ["Checkpoints", "StopTraining", "load_checkpoint", "save_checkpoint", "write_atomic", "write_run"]


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write ``path`` through a temporary file renamed over it: a crash leaves the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_run(out: Path, run: dict[str, Any]) -> None:
    """``run.json``, atomically (values JSON cannot hold are written as their repr)."""
    write_atomic(out / "run.json", json.dumps(run, indent=2, default=repr) + "\n")


def model_bytes(model: BaseAlgorithm) -> bytes:
    """The model's zip file, in memory (to be written with :func:`write_atomic`)."""
    buffer = io.BytesIO()
    model.save(buffer)
    return buffer.getvalue()


def save_checkpoint(model: BaseAlgorithm, run: dict[str, Any], extra: dict[str, Any]) -> None:
    """Write ``checkpoints/<steps>/`` for ``model``, point run.json at it and remove older checkpoints.

    ``run`` is the run description (``run["output"]`` the run folder); it is updated and rewritten.
    ``extra`` is kept in ``state.pkl`` (the evaluation curve and clocks).
    """
    out = Path(run["output"])
    steps = model.num_timesteps
    name = f"checkpoints/{steps:012d}"
    if run.get("checkpoint") == name:
        return  # this state is saved already (a periodic checkpoint at the last step)
    final, tmp = out / name, out / f"checkpoints/.tmp-{steps:012d}"
    final.parent.mkdir(exist_ok=True)
    for stale in (final, tmp):  # left by a session that crashed before naming it in run.json
        shutil.rmtree(stale, ignore_errors=True)
    tmp.mkdir()
    model.save(tmp / "model.zip")
    model.save_replay_buffer(tmp / "replay_buffer.pkl")
    normalizer = model.get_vec_normalize_env()
    venv = normalizer.venv if normalizer is not None else model.get_env()
    (tmp / "env.pkl").write_bytes(cloudpickle.dumps(venv))
    state: dict[str, Any] = {
        "timesteps": steps,
        "numpy": np.random.get_state(),  # noqa: NPY002  (stable-baselines3 draws exploration from it)
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "action_space": model.action_space.np_random.bit_generator.state,
        **extra,
    }
    if normalizer is not None:
        (tmp / "vecnormalize.pkl").write_bytes(pickle.dumps(normalizer))
        state["vecnormalize_returns"] = normalizer.returns.copy()  # VecNormalize does not pickle them
    (tmp / "state.pkl").write_bytes(pickle.dumps(state))
    for path in tmp.iterdir():
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    os.replace(tmp, final)
    run["checkpoint"], run["checkpoint_timesteps"] = name, steps
    write_run(out, run)
    for old in final.parent.iterdir():
        if old != final:
            shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(
    run: dict[str, Any], algo: type[BaseAlgorithm], device: str
) -> tuple[BaseAlgorithm, dict[str, Any]]:
    """The model (with its envs and buffer) and the ``state.pkl`` of the checkpoint run.json names."""
    path = Path(run["output"]) / run["checkpoint"]
    state = pickle.loads((path / "state.pkl").read_bytes())
    env = pickle.loads((path / "env.pkl").read_bytes())
    if (path / "vecnormalize.pkl").exists():
        env = VecNormalize.load(str(path / "vecnormalize.pkl"), env)
        env.returns = state["vecnormalize_returns"]
    model = algo.load(path / "model.zip", env=env, device=device, force_reset=False)
    model.load_replay_buffer(path / "replay_buffer.pkl", truncate_last_traj=False)
    # load() re-seeded every generator from the initial seed: put back their states at the checkpoint.
    np.random.set_state(state["numpy"])  # noqa: NPY002
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    model.action_space.np_random.bit_generator.state = state["action_space"]
    return model, state


class StopTraining(Exception):
    """Raised between rollouts, after a checkpoint, to end a session at ``stop_at`` steps."""


class Checkpoints(BaseCallback):
    """Checkpoint every ``run["save_freq"]`` env steps (if set), between rollouts; stop after ``stop_at``.

    ``extra()`` gives what else goes into each checkpoint (see :func:`save_checkpoint`).
    """

    def __init__(self, run: dict[str, Any], extra: Any, stop_at: int | None = None):
        super().__init__()
        self.run, self.extra, self.stop_at = run, extra, stop_at
        self.save_freq: int | None = run.get("save_freq")
        self._next: int | None = None

    def _after(self, steps: int) -> int | None:
        return (steps // self.save_freq + 1) * self.save_freq if self.save_freq else None

    def _on_training_start(self) -> None:
        self._next = self._after(self.model.num_timesteps)

    def _on_rollout_start(self) -> None:
        steps = self.model.num_timesteps
        stop = self.stop_at is not None and steps >= self.stop_at
        if stop or (self._next is not None and steps >= self._next):
            save_checkpoint(self.model, self.run, self.extra())
            self._next = self._after(steps)
        if stop:
            raise StopTraining

    def _on_step(self) -> bool:
        return True
