"""The GoalEnv base class and the small helpers every goal-conditioned task shares.

A goal-conditioned environment keeps one contract that Hindsight Experience Replay relies on:

* its observation space is a ``Dict`` with ``observation``, ``achieved_goal`` and ``desired_goal``;
* ``compute_reward(achieved_goal, desired_goal, info)`` is a pure function of its arguments,
  vectorized over any leading batch shape, and ``step`` returns exactly
  ``compute_reward(obs["achieved_goal"], obs["desired_goal"], info)``;
* ``compute_terminated`` / ``compute_truncated`` follow the same rules for the episode flags.

A replay buffer can then store a transition once and later ask what its reward would have been for
any other goal, without touching the environment's state.
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["GOAL_KEYS", "GoalEnv", "GoalEnvError", "check_goal_space", "info_values"]

#: The keys a goal environment's ``Dict`` observation space must have.
GOAL_KEYS: tuple[str, str, str] = ("observation", "achieved_goal", "desired_goal")

ObsT = TypeVar("ObsT")
ActT = TypeVar("ActT")


class GoalEnvError(Exception):
    """An environment breaks the GoalEnv contract that Hindsight Experience Replay relies on."""


def check_goal_space(space: gym.Space) -> spaces.Dict:
    """Raise ``GoalEnvError`` unless ``space`` is a goal environment's observation space; return it.

    That is a ``spaces.Dict`` with the keys ``observation``, ``achieved_goal`` and ``desired_goal``,
    whose two goal subspaces have the same shape and dtype (a relabelled goal is an achieved goal put
    where the desired goal was, so the two must be interchangeable). The return value is ``space``
    itself, typed as the ``Dict`` it was found to be.
    """
    if not isinstance(space, spaces.Dict):
        raise GoalEnvError(
            f"a goal environment needs a gymnasium.spaces.Dict observation space with keys "
            f"{list(GOAL_KEYS)}, got {type(space).__name__}"
        )
    missing = [key for key in GOAL_KEYS if key not in space.spaces]
    if missing:
        raise GoalEnvError(
            f"the observation space lacks the key(s) {missing}; a goal environment needs {list(GOAL_KEYS)}, "
            f"it has {list(space.spaces)}"
        )
    achieved, desired = space["achieved_goal"], space["desired_goal"]
    nested = [key for key in GOAL_KEYS[1:] if isinstance(space[key], (spaces.Dict, spaces.Tuple))]
    if nested:
        raise GoalEnvError(
            f"{' and '.join(nested)} {'is a' if len(nested) == 1 else 'are'} {type(space[nested[0]]).__name__} "
            f"space{'s' if len(nested) > 1 else ''}; HER stores and relabels each goal as one array, so goals that are dicts or tuples of "
            "arrays (as Gymnasium-Robotics' FrankaKitchen has) are outside the goal env contract"
        )
    if achieved.shape != desired.shape or achieved.dtype != desired.dtype:
        raise GoalEnvError(
            "achieved_goal and desired_goal spaces differ "
            f"(shape {achieved.shape} vs {desired.shape}, dtype {achieved.dtype} vs {desired.dtype}); "
            "HER puts achieved goals in place of desired goals, so they must have the same shape and dtype"
        )
    return space


def info_values(info: Any, key: str, batch_shape: tuple[int, ...], default: Any = None) -> np.ndarray:
    """Read ``key`` from the info of a batch of transitions as an array of shape ``batch_shape``.

    Accepts every form an info batch takes in practice:

    * ``None`` (no info): every entry is ``default``;
    * one ``dict`` (a single transition, or a vector env's dict of arrays): its value is broadcast
      to ``batch_shape``;
    * a sequence or object array of dicts (a replay buffer's stored infos), of shape ``batch_shape``.

    For ``batch_shape == ()`` from a dict, the result is a numpy scalar (it behaves as a 0-d array).

    Raises ``KeyError`` naming the key when it is missing and no ``default`` is given.
    """
    if info is None:
        if default is None:
            raise KeyError(f"info is None but {key!r} is needed to compute this quantity")
        return np.full(batch_shape, default)
    if isinstance(info, dict) or isinstance(info, Mapping):  # dict first: the fast, common case
        if key not in info:
            if default is None:
                raise KeyError(f"info has no {key!r} entry (keys: {sorted(info)})")
            return np.full(batch_shape, default)
        value = np.asarray(info[key])
        if value.shape == batch_shape:
            return value[()] if not batch_shape else value  # one transition: a numpy scalar, cheap to compare
        return np.broadcast_to(value, batch_shape)
    if isinstance(info, (Sequence, np.ndarray)):
        infos = np.asarray(info, dtype=object)
        flat = infos.reshape(-1)
        values = []
        for item in flat:
            if item is None or key not in item:
                if default is None:
                    raise KeyError(f"an info in the batch has no {key!r} entry")
                values.append(default)
            else:
                values.append(item[key])
        return np.asarray(values).reshape(infos.shape).reshape(batch_shape)
    raise TypeError(f"info must be None, a dict, or a sequence/array of dicts, got {type(info).__name__}")


# Messages already given by warn_once in this process.
_WARNED: set[str] = set()


def warn_once(message: str, stacklevel: int = 3) -> None:
    """Issue ``message`` as a ``UserWarning`` the first time this process asks for it, never again.

    For advice given from inside ``compute_reward`` & co., which a replay buffer calls on every batch.
    """
    if message in _WARNED:
        return
    _WARNED.add(message)
    warnings.warn(message, UserWarning, stacklevel=stacklevel)


# Why an info lacks a key, and how to keep the infos: the end of the warnings below.
NO_INFO_CAUSE = (
    "stable-baselines3's HerReplayBuffer relabels with empty info dicts (her.HerReplayBuffer with "
    "info=None) unless replay_buffer_kwargs=dict(copy_info_dict=True), which keeps each step's info"
)

NO_ELAPSED_STEPS = (
    "{env}'s compute_truncated got an info without 'elapsed_steps': those transitions count as not "
    "truncated. " + NO_INFO_CAUSE + "."
)


def info_values_or_default(
    info: Any, key: str, batch_shape: tuple[int, ...], default: Any, warning: str
) -> np.ndarray:
    """:func:`info_values`, except that an info without ``key`` (or ``info=None``) reads as ``default``.

    The first time that happens in this process, ``warning`` is issued (say what is lost and how to
    keep it): a replay buffer that keeps no infos must not crash training, nor lose a term silently.
    """
    try:
        return info_values(info, key, batch_shape)
    except KeyError:
        warn_once(warning, stacklevel=4)
        return info_values(info, key, batch_shape, default=default)


class GoalEnv(gym.Env[ObsT, ActT], Generic[ObsT, ActT]):
    """A Gymnasium environment whose task is to reach a goal, ready for Hindsight Experience Replay.

    Subclasses set a ``Dict`` observation space (checked by :func:`check_goal_space` at every
    ``reset``) and implement the three pure, vectorized functions below. ``step`` must compute its
    reward, terminated and truncated flags by calling them, so they cannot drift apart.
    """

    #: The info keys ``compute_reward`` reads (a replay buffer stores them for relabelling).
    reward_info_keys: tuple[str, ...] = ()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsT, dict[str, Any]]:
        """Seed ``self.np_random`` (when ``seed`` is given) and check the observation space.

        Subclasses call this first, then build and return their ``(obs, info)``. Like
        ``gym.Env.reset``, whose signature it keeps, it returns what that base returns (nothing).
        """
        result = super().reset(seed=seed, options=options)
        check_goal_space(self.observation_space)
        return result

    @abstractmethod
    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Reward for reaching ``achieved_goal`` when ``desired_goal`` was asked for.

        Args:
            achieved_goal: goals of shape ``batch_shape + goal_shape`` (``batch_shape`` may be ``()``).
            desired_goal: same shape as ``achieved_goal``.
            info: the step's info dict, a batch of them, or ``None`` (see :func:`info_values`).

        Returns:
            rewards of shape ``batch_shape`` (a 0-d array for a single transition).
        """

    @abstractmethod
    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Whether the episode ends because the task is done (or failed); boolean array of ``batch_shape``."""

    @abstractmethod
    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Whether the episode is cut short (e.g. by a time limit); boolean array of ``batch_shape``."""
