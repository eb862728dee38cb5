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
for the batch, and the single env takes row 0. A task function never learns which env calls it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from goalenvs._util import check_render_mode
from goalenvs.core import GoalEnv

__all__ = [
    "Task",
    "TaskEnv",
    "TaskGoalFunctions",
    "as_actions",
    "check_finite_action",
    "check_reset_options",
    "first_info",
    "first_obs",
    "first_scored",
    "seed_array",
    "seed_generators",
]

Obs = dict[str, np.ndarray]
# A step's (info, reward, terminated, truncated): arrays with a leading batch axis.
Scored = tuple[dict[str, Any], Any, Any, Any]

#: The env indices of a one-env state (the single env's ``envs`` argument).
ONE = np.zeros(1, dtype=np.intp)
ONE.flags.writeable = False
#: No env to skip (the single env never skips: it has no autoreset).
NONE = np.zeros(0, dtype=np.intp)
NONE.flags.writeable = False


#: Seeds below this fit a uint64 array; larger ones (any int >= 0 is a seed) go in an object array.
SEED_LIMIT_U64 = 2**64


def seed_array(seeds: list[int]) -> np.ndarray:
    """Seeds (Python ints >= 0, any size, as ``np.random.SeedSequence`` takes) as the array
    :meth:`Task.seed` takes: uint64 when every seed fits, else an object array of the ints themselves."""
    if all(seed < SEED_LIMIT_U64 for seed in seeds):
        return np.array(seeds, dtype=np.uint64)
    array = np.empty(len(seeds), dtype=object)
    array[:] = seeds
    return array


def seed_generators(rngs: list[Any], seeds: np.ndarray, envs: np.ndarray) -> None:
    """Give env ``envs[j]`` the generator ``gym.Env.reset(seed=seeds[j])`` makes (``rngs`` is indexed by env)."""
    for seed, i in zip(seeds.tolist(), envs.tolist(), strict=True):
        rngs[i] = seeding.np_random(seed)[0]


def check_reset_options(options: Any, accepted: Sequence[str]) -> None:
    """Refuse, in one line naming them and ``accepted``, ``reset`` options with a key no family knows.

    One rule for every family, single and vector (a misspelt option silently ignored would start
    episodes the caller did not ask for): None and ``{}`` pass; anything but a dict is a ``TypeError``.
    """
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise TypeError(
            f"reset options must be None or a dict with keys from {list(accepted)}, got "
            f"{type(options).__name__} ({options!r})"
        )
    unknown = sorted((key for key in options if key not in accepted), key=repr)
    if unknown:
        raise ValueError(f"unknown reset option(s) {unknown}; accepted: {list(accepted)}")


_SHOWN = 4  # non-finite entries quoted in the error, at most


def check_finite_action(name: str, action: np.ndarray, accepted: str) -> None:
    """Raise a one-line ``ValueError`` naming ``name`` and its non-finite entries, if a float ``action`` has any.

    Why refuse rather than clip: ``np.clip`` (Gymnasium-Robotics' Fetch, highway-env) passes NaN
    through, so a NaN action sends the state to NaN (Parking: the car is lost for the rest of the
    episode) or makes MuJoCo reset the simulation mid-episode (Fetch: the arm jumps back to its start
    pose), with no sign of either in the step's return. A non-finite action is always an upstream bug
    (a diverged policy, a division by zero), best reported at the step that received it.
    ``accepted`` says what the action holds (e.g. ``"4 numbers: dx, dy, dz, gripper, ..."``); integer
    and bool actions are always finite, and a huge finite action passes (to be clipped, as before).
    """
    if action.dtype.kind != "f":
        return
    finite = np.isfinite(action)
    if finite.all():
        return
    bad = np.argwhere(~finite)
    entries = ", ".join(
        f"{name}[{', '.join(map(str, index.tolist()))}] = {float(action[tuple(index)])}"
        for index in bad[:_SHOWN]
    )
    more = f" and {len(bad) - _SHOWN} more" if len(bad) > _SHOWN else ""
    raise ValueError(
        f"{name} must hold finite numbers ({accepted}), got {entries}{more}; nothing was stepped"
    )


class Task(ABC):
    """One family's task: settings, spaces, and functions over the state of ``n`` envs.

    ``state`` is whatever :meth:`new_state` makes (the task's own class); every array in it has a
    leading axis of ``n`` envs. ``envs`` and ``skip`` are int index arrays into that axis. The single
    env calls the same functions on a state of one env and returns row 0 of their answers
    (:func:`first_obs`, :func:`first_scored`); the vector env returns them whole.
    """

    #: Info keys that only a step reports: an episode that has just started (``reset``, autoreset)
    #: leaves them out. No goalenvs family has one (a reset info with the step's keys is what Minari's
    #: ``DataCollector(record_infos=True)`` needs), but the vector env's masks support them.
    step_only_info_keys: ClassVar[tuple[str, ...]] = ()
    #: The keys ``reset(options=...)`` accepts; any other is refused (:func:`check_reset_options`).
    reset_option_keys: ClassVar[tuple[str, ...]] = ()
    #: What one env's action holds, for the error on an action of the wrong shape or a non-finite one.
    action_help: str = ""

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
        """Give ``envs`` the random streams a single env reset with ``seeds`` draws from (ints >= 0 of any
        size: a uint64 array, or an object array of Python ints when one is >= 2**64; see :func:`seed_array`)."""

    @abstractmethod
    def reset(self, state: Any, envs: np.ndarray, options: dict[str, Any] | None) -> None:
        """Start new episodes in ``envs``, drawing from their own streams (``options``: ``reset``'s, or
        None on an autoreset)."""

    def check_actions(self, actions: np.ndarray, name: str) -> None:
        """Refuse (``ValueError`` naming ``name``) an action whose values the task cannot step; the
        envs have checked its shape. Here: a float action with a NaN or infinite entry."""
        check_finite_action(name, actions, self.action_help)

    @abstractmethod
    def step(self, state: Any, actions: np.ndarray, skip: np.ndarray) -> None:
        """Advance every env but those of ``skip`` (their action is ignored) by one step.

        ``actions`` has shape ``(n, *action_space.shape)`` and has passed :meth:`check_actions`.
        """

    @abstractmethod
    def observe(self, state: Any) -> Obs:
        """The batch observation: arrays with a leading ``n`` axis, made anew by each call (never views
        of the state: the caller keeps them)."""

    @abstractmethod
    def score(self, state: Any, obs: Obs) -> Scored:
        """A step's ``(info, reward, terminated, truncated)`` for ``observe``'s ``obs``, each with a
        leading ``n`` axis.

        Reward and flags are the task's ``compute_*`` on ``(obs, info)``, from shared intermediate
        results where that saves work (each through the same functions ``compute_*`` call).
        """

    def min_bytes_per_env(self) -> int:
        """A lower estimate of the memory one env of a vector env takes (its state, a step's
        observation, info and temporaries), for refusing a ``num_envs`` that cannot fit before
        allocating it. Here: 5 copies of one observation (the state's, ``observe``'s, the returned
        batch, temporaries) and 2 of one action, plus 128 bytes of counters, flags, reward and info
        arrays: below what BitFlip (bits: 370 bytes; images) and Parking were measured to take; a
        task with more (Fetch's ``MjData``) adds it."""

        def nbytes(space: spaces.Space) -> int:
            shape, dtype = space.shape or (1,), space.dtype or np.dtype(np.int64)
            return math.prod(shape) * dtype.itemsize

        obs = sum(nbytes(space) for space in self.observation_space.values())
        return 5 * obs + 2 * nbytes(self.action_space) + 128

    def reset_info(self, state: Any, obs: Obs) -> dict[str, Any]:
        """The info of episodes that have just started: the step info without ``step_only_info_keys``."""
        info = self.score(state, obs)[0]
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


def as_actions(
    task: Task, actions: Any, shape: tuple[int, ...] | None, num_envs: int | None = None
) -> np.ndarray:
    """``actions`` as the ``(n, *shape)`` array :meth:`Task.step` takes (``shape``: one env's action's),
    checked by shape and by :meth:`Task.check_actions`: one env's action for the single env
    (``num_envs`` None), ``num_envs`` of them for the vector env. A one-line ``ValueError`` otherwise,
    before anything moves."""
    a = actions if type(actions) is np.ndarray else np.asarray(actions)
    shape = shape or ()
    if num_envs is None:
        if a.shape != shape:
            raise ValueError(f"action must have shape {shape} ({task.action_help}), got shape {a.shape}")
        task.check_actions(a, "action")
        return a[None]
    if a.shape != (num_envs, *shape):
        trailing = "".join(f", {d}" for d in shape) if shape else ","
        raise ValueError(
            f"actions must have shape (num_envs{trailing}) = {(num_envs, *shape)} "
            f"({task.action_help}, per env), got shape {a.shape}"
        )
    task.check_actions(a, "actions")
    return a


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


#: The dtype characters of bool, int64 and float64, the dtypes numpy batches Python scalars to.
_PYTHON_SCALAR_CHARS = "".join(np.dtype(t).char for t in (np.bool_, np.int64, np.float64))


def _scalar(value: np.ndarray) -> Any:
    """Row 0 of an info array as a single env reports it: a Python scalar where numpy batches it back
    to the same dtype (bool, int64, float64), else the numpy scalar (float32 stays float32), so that a
    ``SyncVectorEnv`` of single envs gives the vector env's dtypes."""
    if value.dtype.char in _PYTHON_SCALAR_CHARS:
        return value.item(0)
    return value[0]


def first_info(info: dict[str, Any]) -> dict[str, Any]:
    """Row 0 of a batch info, as the single env reports it (see :func:`first_scored`)."""
    return {key: _scalar(value) for key, value in info.items()}


def first_scored(scored: Scored) -> tuple[dict[str, Any], float, bool, bool]:
    """Row 0 of :meth:`Task.score`'s batch answer, as the single env returns it: an info of scalars,
    a Python float reward (stable-baselines3's ``check_env`` rejects numpy scalars), bool flags."""
    info, reward, terminated, truncated = scored
    return (
        first_info(info),
        float(reward.item(0)),
        bool(terminated.item(0)),
        bool(truncated.item(0)),
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
        check_reset_options(options, self._task.reset_option_keys)  # before anything changes
        super().reset(seed=seed, options=options)
        task, state = self._task, self._state
        if seed is not None:
            # gym.Env.reset has checked it (an int >= 0, of any size, as SeedSequence takes).
            task.seed(state, seed_array([int(seed)]), ONE)
        elif not self._seeded:  # unseeded: a seed from the (entropy-seeded) np_random
            task.seed(state, self.np_random.integers(0, 2**63, size=1, dtype=np.int64), ONE)
        self._seeded = True
        task.reset(state, ONE, options)
        self._started = True
        obs = task.observe(state)
        return first_obs(obs), first_info(task.reset_info(state, obs))

    def step(self, action: Any) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        if not self._started:
            raise gym.error.ResetNeeded("call reset() before step()")
        task, state = self._task, self._state
        task.step(state, as_actions(task, action, self.action_space.shape), NONE)
        obs = task.observe(state)
        info, reward, terminated, truncated = first_scored(task.score(state, obs))
        return first_obs(obs), reward, terminated, truncated, info

    def render(self) -> Any:
        return self._task.render(self._state, 0, self.render_mode)

    def close(self) -> None:
        self._task.close(self._state)
        super().close()
