"""Success-rate evaluation of an ``examples/train.py`` run: the policy's actions, batched episodes, the curve.

The deterministic policy runs ``n_episodes`` episodes side by side in one vector env (one batched
forward pass per step), the i-th episode seeded ``seed + i``; the same seeds at every evaluation, so
the curve moves with the policy, not with the episodes drawn.

A module of ``examples/train.py``, not a script: it sets no torch threads, ``train.py`` does
(``--threads``, default 1).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from runfolder import csv_text, curve_png  # examples/runfolder.py
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger

__all__ = ["EvalSuccess", "act", "dump_alone", "evaluate", "make_eval_envs", "plot_curve"]


def act(model: BaseAlgorithm, obs: dict[str, np.ndarray]) -> np.ndarray:
    """Deterministic actions for raw observations (one or a batch), normalised first if the model trains on a VecNormalize."""
    normalizer = model.get_vec_normalize_env()
    inputs = obs if normalizer is None else normalizer.normalize_obs(obs)
    return model.predict(inputs, deterministic=True)[0]


def make_eval_envs(env_id: str, n_episodes: int, env_kwargs: dict[str, Any]) -> gym.vector.VectorEnv:
    """One vector env for the evaluation episodes: all of them side by side where the env has a native
    vector version (cheap), else at most 10 copies (100 MuJoCo Fetch envs would hold ~1 GB)."""
    native = gym.spec(env_id).vector_entry_point is not None
    return gym.make_vec(env_id, num_envs=n_episodes if native else min(n_episodes, 10), **env_kwargs)


def evaluate(
    model: BaseAlgorithm, envs: gym.vector.VectorEnv, n_episodes: int, seed: int
) -> tuple[float, float]:
    """(success rate, mean return) of ``n_episodes`` deterministic episodes, ``envs.num_envs`` at a time.

    The episodes of a wave run side by side (one batched forward pass per step), seeded ``seed + i``
    for the i-th episode; an env's episode counts until its first end, what follows in it is ignored.
    Success is ``info["is_success"]`` at that end.
    """
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
        count = min(width, n_episodes - first)
        success[first : first + count], returns[first : first + count] = (
            wave_success[:count],
            wave_returns[:count],
        )
    return float(success.mean()), float(returns.mean())


class EvalSuccess(BaseCallback):
    """Every ``eval_freq`` env steps, between rollouts (after their gradient steps), evaluate the policy.

    Rows go to ``eval.csv``, rewritten each time through ``write(name, text)`` (the run folder's
    atomic, recorded write). ``state()`` / ``restore()`` carry the curve and the clocks across a resume.
    """

    def __init__(self, run: dict[str, Any], write: Callable[[str, str], object]):
        super().__init__()
        self.envs = make_eval_envs(run["env"], run["eval_episodes"], run["env_kwargs"])
        self.n_episodes, self.eval_freq, self.seed = (
            run["eval_episodes"],
            run["eval_freq"],
            run["seed"] + 10_000,
        )
        self.write = write
        self.rows: list[dict[str, float]] = []
        self._next = self.eval_freq
        self.wall0, self.cpu0 = 0.0, 0.0  # time of the sessions before this one
        self.start_wall, self.start_cpu = time.perf_counter(), time.process_time()

    def wall(self) -> float:
        return self.wall0 + time.perf_counter() - self.start_wall

    def cpu(self) -> float:
        return self.cpu0 + time.process_time() - self.start_cpu

    def state(self) -> dict[str, Any]:
        return {"rows": list(self.rows), "next": self._next, "wall": self.wall(), "cpu": self.cpu()}

    def restore(self, state: dict[str, Any]) -> None:
        self.rows, self._next = list(state["rows"]), state["next"]
        self.wall0, self.cpu0 = state["wall"], state["cpu"]
        self.write_csv()  # drops rows a crashed session wrote after its last checkpoint

    def write_csv(self) -> None:
        if not self.rows:
            return
        self.write("eval.csv", csv_text(self.rows))

    def evaluate(self) -> None:
        success, returns = evaluate(self.model, self.envs, self.n_episodes, self.seed)
        self.rows.append({
            "timesteps": self.model.num_timesteps,
            "success_rate": success,
            "mean_return": returns,
            "wall_time_s": round(self.wall(), 2),
            "cpu_time_s": round(self.cpu(), 2),
        })  # fmt: skip
        self.write_csv()
        # Through stable-baselines3's logger (TensorBoard with train.py --tensorboard), at the step measured.
        dump_alone(
            self.logger, {"eval/success_rate": success, "eval/mean_reward": returns}, self.model.num_timesteps
        )

    def _on_rollout_start(self) -> None:
        if self.model.num_timesteps >= self._next:
            while self._next <= self.model.num_timesteps:
                self._next += self.eval_freq
            self.evaluate()

    def _on_step(self) -> bool:
        return True


def dump_alone(logger: Logger, values: dict[str, float], step: int) -> None:
    """Write ``values`` at ``step`` through stable-baselines3's ``logger``, and only them: what the
    algorithm has recorded since its last dump (``train/...``) stays pending for its own next dump, so
    its series get no second point at one step (as they would from a plain ``dump`` here, which
    stable-baselines3's ``EvalCallback`` does)."""
    tables: tuple[dict[str, Any], ...] = (logger.name_to_value, logger.name_to_count, logger.name_to_excluded)
    pending = [dict(d) for d in tables]
    for d in tables:
        d.clear()
    for key, value in values.items():
        logger.record(key, value)
    logger.dump(step)
    for d, held in zip(tables, pending, strict=True):
        d.update(held)


def plot_curve(rows: list[dict[str, float]], title: str) -> bytes:
    """The success curve as a PNG file's bytes."""
    steps = [r["timesteps"] for r in rows]
    return curve_png(steps, [r["success_rate"] for r in rows], "environment steps", title)
