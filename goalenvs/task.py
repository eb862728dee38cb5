"""A family's task, written once over a leading batch axis, and the single env built from it.

A family (BitFlip, Parking, Fetch) is one :class:`Task`: its validated settings, its spaces, and
functions over the state of ``n`` envs (start episodes, advance them, observe them, score them), plus
the pure goal functions ``compute_reward`` / ``compute_terminated`` / ``compute_truncated``. From that
one task the bases build both envs, so no formula of a family is written twice:

* :class:`TaskEnv`, the single env, is the batch of one: ``reset`` seeds and restarts env 0 of a
  one-env state, ``step`` advances it, and both return row 0 of what the task computed;
* :class:`goalenvs.vector.NativeVectorEnv`, the vector env, is the batch of N, with the seeding, both
  autoreset modes and the info masks of Gymnasium's vector API around the same functions.

This is gymnax's ``Environment`` shape (one ``step`` that owns autoreset; the task supplies
``step_env`` / ``reset_env``) in numpy: where gymnax vmaps a one-env function, a task here is written
for the batch, and the single env takes row 0.

Where a batch of one is measurably slower than the scalar code it replaced (numpy's per-call cost
dominates a one-row array), a task function keeps a one-env twin *inside* it (the same operations on
Python scalars, tested against the batch path), never a second copy of a formula in an env class.
"""

from __future__ import annotations

import dataclasses
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from goalenvs._util import check_render_mode
from goalenvs.core import GoalEnv

__all__ = [
    "ONE",
    "Task",
    "TaskEnv",
    "TaskGoalFunctions",
    "first_obs",
    "first_scored",
    "keyword",
    "seed_generators",
    "settings_signature",
]

Obs = dict[str, np.ndarray]
# A step's (info, reward, terminated, truncated): arrays of the batch, or one env's scalars.
Scored = tuple[dict[str, Any], Any, Any, Any]

#: The env indices of a one-env state (the single env's ``envs`` argument).
ONE = np.zeros(1, dtype=np.intp)
ONE.flags.writeable = False
#: No env to skip (the single env never skips: it has no autoreset).
NONE = np.zeros(0, dtype=np.intp)
NONE.flags.writeable = False


def seed_generators(rngs: list[Any], seeds: np.ndarray, envs: np.ndarray) -> None:
    """Give env ``envs[j]`` the generator ``gym.Env.reset(seed=seeds[j])`` makes (``rngs`` is indexed by env)."""
    for seed, i in zip(seeds.tolist(), envs.tolist(), strict=True):
        rngs[i] = seeding.np_random(seed)[0]


def keyword(name: str, default: Any) -> inspect.Parameter:
    """A keyword-only parameter of an env class's signature (``render_mode``, ``autoreset_mode``, ...)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)


def settings_signature(
    settings: type, leading: tuple[inspect.Parameter, ...] = (), trailing: tuple[inspect.Parameter, ...] = ()
) -> inspect.Signature:
    """An env class's signature, made from the dataclass of its validated arguments (a family writes
    its arguments once, as that dataclass's fields, and its env classes take ``*args, **kwargs`` into it).

    ``leading`` parameters (the vector env's ``num_envs``), then the dataclass's ``__init__`` fields
    (keyword-only where the field is), then ``trailing`` ones (keyword-only: ``render_mode``, ...).
    ``inspect.signature``, IDEs and ``examples/train.py``'s list of accepted arguments read it.
    """
    params = list(leading)
    for f in dataclasses.fields(settings):
        if not f.init:
            continue
        kind = inspect.Parameter.KEYWORD_ONLY if f.kw_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        params.append(inspect.Parameter(f.name, kind, default=default, annotation=f.type))
    return inspect.Signature([*params, *trailing])


class Task(ABC):
    """One family's task: settings, spaces, and functions over the state of ``n`` envs.

    ``state`` is whatever :meth:`new_state` makes (the task's own class); every array in it has a
    leading axis of ``n`` envs. ``envs`` and ``skip`` are int index arrays into that axis.

    ``single=True`` tells a function that the single env calls it: ``n == 1``, ``step`` gets one
    env's action and ``reset`` its options (error messages speak of one env), and ``observe`` /
    ``score`` answer for env 0 alone, as the single env returns it (batch shape ``()``: one env's
    observation arrays, an info of scalars, a float reward and bool flags). The answer is the batch
    answer's row 0: a task computes both with the same functions, on row 0 of its arrays or on all
    of them (:func:`first_obs` and :func:`first_scored` take row 0 of a batch answer, for a task where
    that costs nothing that matters).
    """

    #: Info keys that only a step reports: an episode that has just started (``reset``, autoreset)
    #: leaves them out (Fetch, whose ``reset`` info is empty as Gymnasium-Robotics' is).
    step_only_info_keys: ClassVar[tuple[str, ...]] = ()

    @property
    @abstractmethod
    def observation_space(self) -> spaces.Dict:
        """One env's observation space."""

    @property
    @abstractmethod
    def action_space(self) -> spaces.Space:
        """One env's action space."""

    @abstractmethod
    def new_state(self, n: int) -> Any:
        """The state of ``n`` envs, before any seeding."""

    @abstractmethod
    def seed(self, state: Any, seeds: np.ndarray, envs: np.ndarray) -> None:
        """Give ``envs`` the random streams a single env reset with ``seeds`` (int64 >= 0) draws from."""

    @abstractmethod
    def reset(self, state: Any, envs: np.ndarray, options: dict[str, Any] | None, single: bool) -> None:
        """Start new episodes in ``envs``, drawing from their own streams (``options``: ``reset``'s, or
        None on an autoreset)."""

    @abstractmethod
    def step(self, state: Any, actions: Any, skip: np.ndarray, single: bool) -> None:
        """Advance every env but those of ``skip`` (their action is ignored) by one step.

        Checks ``actions`` before anything moves: a refused action leaves the state as it was.
        """

    @abstractmethod
    def observe(self, state: Any, single: bool) -> Obs:
        """The batch observation: arrays with a leading ``n`` axis (none if ``single``), made anew by
        each call (never views of the state: the caller keeps them)."""

    @abstractmethod
    def score(self, state: Any, obs: Obs, single: bool) -> Scored:
        """A step's ``(info, reward, terminated, truncated)`` for ``observe``'s ``obs``, each with a
        leading ``n`` axis (scalars if ``single``).

        Reward and flags are the task's ``compute_*`` on ``(obs, info)``, from shared intermediate
        results where that saves work (each through the same functions ``compute_*`` call).
        """

    def reset_info(self, state: Any, obs: Obs, single: bool) -> dict[str, Any]:
        """The info of episodes that have just started: the step info without ``step_only_info_keys``."""
        info = self.score(state, obs, single)[0]
        for key in self.step_only_info_keys:
            info.pop(key, None)
        return info

    def render(self, state: Any, env: int, render_mode: str | None) -> Any:
        """Env ``env``'s frame in ``render_mode`` (one the env accepts); None (and a warning if the task
        gives one) without a render mode."""
        return None

    def close(self, state: Any) -> None:
        """Release what ``render`` made (a renderer); the state stays usable."""
        return None

    # The pure goal functions, vectorized over any leading batch shape (see goalenvs.core.GoalEnv).
    compute_reward: Callable[..., np.ndarray]
    compute_terminated: Callable[..., np.ndarray]
    compute_truncated: Callable[..., np.ndarray]


class TaskGoalFunctions:
    """An env's ``compute_reward`` / ``compute_terminated`` / ``compute_truncated``: its task's.

    Shared by :class:`TaskEnv` and :class:`~goalenvs.vector.NativeVectorEnv`, so the single and the
    vector env of a family answer with the same functions. Extra arguments (Parking's ``p``) pass through.
    """

    _task: Task

    def compute_reward(
        self, achieved_goal: Any, desired_goal: Any, info: Any = None, *args: Any, **kwargs: Any
    ) -> np.ndarray:
        """The task's reward for reaching ``achieved_goal`` when ``desired_goal`` was asked for (see the
        env's "Rewards"); pure, vectorized over any leading batch shape."""
        return self._task.compute_reward(achieved_goal, desired_goal, info, *args, **kwargs)

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        """Whether the task is over (done or failed), see the env's "Episode End"; bool of the batch shape."""
        return self._task.compute_terminated(achieved_goal, desired_goal, info)

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Whether the episode is cut short (time), see the env's "Episode End"; bool of the batch shape."""
        return self._task.compute_truncated(achieved_goal, desired_goal, info)


def first_obs(obs: Obs) -> Obs:
    """Row 0 of a batch observation: env 0's observation."""
    return {key: value[0] for key, value in obs.items()}


def _scalar(value: np.ndarray) -> Any:
    """Row 0 of an info array as a single env reports it: a Python scalar where numpy batches it back
    to the same dtype (bool, int64, float64), else the numpy scalar (float32 stays float32), so that a
    ``SyncVectorEnv`` of single envs gives the vector env's dtypes."""
    item = value[0]
    if value.dtype.kind == "b" or value.dtype == np.int64 or value.dtype == np.float64:
        return item.item()
    return item


def first_scored(scored: Scored) -> tuple[dict[str, Any], float, bool, bool]:
    """Row 0 of :meth:`Task.score`'s batch answer, as the single env returns it: an info of scalars,
    a Python float reward (stable-baselines3's ``check_env`` rejects numpy scalars), bool flags."""
    info, reward, terminated, truncated = scored
    return (
        {key: _scalar(value) for key, value in info.items()},
        float(reward[0]),
        bool(terminated[0]),
        bool(truncated[0]),
    )


class TaskEnv(TaskGoalFunctions, GoalEnv[Obs, Any]):
    """The single env of a family: the batch of one of its :class:`Task`.

    A family's env class sets ``metadata`` and its docstring, and its ``__init__`` validates its own
    arguments into a task and calls :meth:`_init_task`. Reward, terminated and truncated are the
    task's ``compute_*`` on the step's observation and info (through :meth:`Task.score`), so they
    cannot drift from what a replay buffer recomputes.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def _init_task(self, task: Task, render_mode: str | None) -> None:
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        self._task = task
        # Gymnasium types a Dict space as a space of dicts of spaces, not of the arrays it holds.
        self.observation_space = task.observation_space  # type: ignore[assignment]
        self.action_space = task.action_space
        self._state = task.new_state(1)
        self._seeded = False
        self._started = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed, options=options)
        task, state = self._task, self._state
        if seed is not None:
            task.seed(state, np.array([seed], dtype=np.int64), ONE)
        elif not self._seeded:  # unseeded: a seed from the (entropy-seeded) np_random
            task.seed(state, self.np_random.integers(0, 2**63, size=1, dtype=np.int64), ONE)
        self._seeded = True
        task.reset(state, ONE, options, True)
        self._started = True
        obs = task.observe(state, True)
        return obs, task.reset_info(state, obs, True)

    def step(self, action: Any) -> tuple[Obs, Any, bool, bool, dict[str, Any]]:
        if not self._started:
            raise gym.error.ResetNeeded("call reset() before step()")
        task, state = self._task, self._state
        task.step(state, action, NONE, True)
        obs = task.observe(state, True)
        info, reward, terminated, truncated = task.score(state, obs, True)
        return obs, reward, terminated, truncated, info

    def render(self) -> Any:
        return self._task.render(self._state, 0, self.render_mode)

    def close(self) -> None:
        self._task.close(self._state)
        super().close()
