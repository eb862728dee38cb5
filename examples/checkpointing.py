"""What a checkpoint of an ``examples/train.py`` run holds, and how a resumed run takes it up bit for bit.

Layout, in the run folder (written through ``examples/runfolder.py``, which keeps the folder's rules)::

    run.json                       what ran; "checkpoint" names the last checkpoint (for information)
    checkpoints/<steps>/           model.zip        the model, with its optimiser state
                                   replay_buffer.pkl
                                   env.pkl          the training envs (DummyVecEnv), mid-episode
                                   vecnormalize.pkl the observation statistics, where used
                                   state.pkl        random states, the evaluation curve and clocks
                                   MANIFEST.json    each file's size and SHA-256, the run's id, settings

``<steps>`` is the model's step count on 12 digits. ``RunFolder.save_checkpoint`` writes the files to
``checkpoints/.tmp-<steps>-<pid>/``, fsyncs them and renames the folder into place; only then are
older checkpoints removed, so a crash at any moment leaves a whole checkpoint (or none yet).
``--resume`` loads ``RunFolder.latest_checkpoint()``: every file's size and hash, and the run id, are
checked before anything is loaded, and a whole file that does not fit the run (another env's model)
is refused with one line naming it.

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

A module of ``examples/train.py``, not a script: it sets no torch threads, ``train.py`` does
(``--threads``, default 1).
"""

from __future__ import annotations

import io
import pickle
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
import torch
from runfolder import Checkpoint  # examples/runfolder.py (examples/ is on sys.path)
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

__all__ = ["Checkpoints", "StopTraining", "checkpoint_files", "load_checkpoint", "model_bytes"]

STATE_KEYS = ("timesteps", "numpy", "torch", "python", "action_space")


def model_bytes(model: BaseAlgorithm) -> bytes:
    """The model's zip file, in memory (to be written atomically)."""
    buffer = io.BytesIO()
    model.save(buffer)
    return buffer.getvalue()


def _writer(data: Callable[[], bytes]) -> Callable[[Path], None]:
    """A function writing ``data()`` to the path it is given (the bytes are made when it is called)."""

    def write(path: Path) -> None:
        path.write_bytes(data())

    return write


def checkpoint_files(model: OffPolicyAlgorithm, extra: dict[str, Any]) -> dict[str, Callable[[Path], None]]:
    """File name -> the function writing it, for ``RunFolder.save_checkpoint``; the state is taken now.

    ``extra`` is kept in ``state.pkl`` (the evaluation curve and clocks).
    """
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
    files: dict[str, Callable[[Path], None]] = {
        "model.zip": lambda path: model.save(path),
        "replay_buffer.pkl": lambda path: model.save_replay_buffer(path),
        "env.pkl": _writer(lambda: cloudpickle.dumps(venv)),
    }
    if normalizer is not None:
        state["vecnormalize_returns"] = normalizer.returns.copy()  # VecNormalize does not pickle them
        files["vecnormalize.pkl"] = _writer(lambda: pickle.dumps(normalizer))
    files["state.pkl"] = _writer(lambda: pickle.dumps(state))
    return files


def load_checkpoint(
    checkpoint: Checkpoint, algo: type[OffPolicyAlgorithm], device: str, env_id: str, env_kwargs: dict[str, Any],
    n_envs: int,
) -> tuple[OffPolicyAlgorithm, dict[str, Any]]:  # fmt: skip
    """The model (with its envs and buffer) and ``state.pkl`` of a checkpoint already checked whole.

    ``env_id``, ``env_kwargs`` and ``n_envs`` are the run's: each file is checked to fit them, so a
    file of another run (with its hash recorded) is one line naming it, not a failure mid-training.
    """
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
        raise checkpoint.unfit("env.pkl", f"it holds no {n_envs} envs {env_id} with {env_kwargs}")  # fmt: skip
    if checkpoint.file("vecnormalize.pkl").exists():
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
    # load() re-seeded every generator from the initial seed: put back their states at the checkpoint.
    try:
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
        self._next: int | None = None

    def _after(self, steps: int) -> int | None:
        return (steps // self.save_freq + 1) * self.save_freq if self.save_freq else None

    def _on_training_start(self) -> None:
        self._next = self._after(self.model.num_timesteps)

    def _on_rollout_start(self) -> None:
        steps = self.model.num_timesteps
        stop = self.stop_at is not None and steps >= self.stop_at
        if stop or (self._next is not None and steps >= self._next):
            self.save()
            self._next = self._after(steps)
        if stop:
            raise StopTraining

    def _on_step(self) -> bool:
        return True
