"""What every goal-aware wrapper shares: finding the wrapped env's goal functions, and stepping.

A goal-aware wrapper keeps one promise: ``compute_reward`` / ``compute_terminated`` /
``compute_truncated`` take goals *as this wrapper's observations show them*. A wrapper that changes
goals (normalising, flattening) maps them back with :meth:`GoalFunctions.goal_to_inner` before
calling the wrapped env's functions; a wrapper that changes the reward replaces ``compute_reward``
and makes ``step`` return its answer. Either way ``step``'s reward is ``compute_reward`` of the
returned observation, which is what Hindsight Experience Replay relies on.

Each wrapper's logic is a mixin over a leading batch axis (a single env is batch shape ``()``), used
twice: with :class:`GoalWrapper` for single envs and with :class:`VectorGoalWrapper` for vector
envs, whose ``step`` also handles autoreset rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from goalenvs._util import object_array
from goalenvs.core import GOAL_FUNCTIONS, check_goal_space, find_goal_function

__all__ = [
    "GOAL_FUNCTIONS",
    "GoalFunctions",
    "GoalWrapper",
    "VectorGoalWrapper",
    "find_goal_function",
    "goal_batch_shape",
]


def goal_batch_shape(goal: np.ndarray, goal_shape: tuple[int, ...], name: str = "goal") -> tuple[int, ...]:
    """The leading batch shape of ``goal``, whose trailing axes must be ``goal_shape``."""
    n = len(goal_shape)
    if goal.ndim < n or goal.shape[goal.ndim - n :] != goal_shape:
        raise ValueError(f"{name} must have shape (..., {', '.join(map(str, goal_shape))}), got {goal.shape}")
    return goal.shape[: goal.ndim - n]


def single_env_space(env: Any) -> spaces.Dict:
    """``env.observation_space``, checked to be a goal env's (:func:`goalenvs.core.check_goal_space`).

    A TypeError when ``env`` is no single gymnasium.Env.
    """
    if not isinstance(env, gym.Env):
        hint = (
            " (use goalenvs.wrappers.vector for a gymnasium.vector.VectorEnv)"
            if isinstance(env, VectorEnv)
            else ""
        )
        raise TypeError(f"env must be a gymnasium.Env{hint}, got {type(env).__name__}")
    return check_goal_space(env.observation_space)


def vector_env_space(env: Any) -> spaces.Dict:
    """``env.single_observation_space``, checked to be a goal env's (:func:`goalenvs.core.check_goal_space`).

    A TypeError when ``env`` is no gymnasium.vector.VectorEnv.
    """
    if not isinstance(env, VectorEnv):
        raise TypeError(
            f"env must be a gymnasium.vector.VectorEnv (use goalenvs.wrappers for a single env), "
            f"got {type(env).__name__}"
        )
    return check_goal_space(env.single_observation_space)


class GoalFunctions:
    """compute_reward / compute_terminated / compute_truncated of the wrapped env, seen through the wrapper.

    The wrapped env's functions are looked up once, at construction. ``compute_terminated`` and
    ``compute_truncated`` are properties that raise ``AttributeError`` when the wrapped env lacks them,
    so ``getattr(wrapper, "compute_terminated", None)`` answers as it would for the bare env.
    """

    _inner_fns: dict[str, Callable[..., Any] | None]

    def _find_inner_functions(self, env: Any) -> None:
        self._inner_fns = {name: find_goal_function(env, name) for name in GOAL_FUNCTIONS}

    def goal_to_inner(self, goal: Any) -> Any:
        """Map goals as this wrapper shows them to goals as the wrapped env expects them (identity here)."""
        return goal

    def _inner(self, name: str) -> Callable[..., Any]:
        fn = self._inner_fns[name]
        if fn is None:
            raise AttributeError(f"the env wrapped by {type(self).__name__} defines no {name}")
        return fn

    def _forward(self, name: str, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        fn = self._inner(name)
        return fn(self.goal_to_inner(achieved_goal), self.goal_to_inner(desired_goal), info)

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        """The wrapped env's reward for goals as this wrapper's observations show them (any batch shape)."""
        return self._forward("compute_reward", achieved_goal, desired_goal, info)

    @property
    def compute_terminated(self) -> Callable[..., np.ndarray]:
        """The wrapped env's ``compute_terminated`` for goals as this wrapper shows them."""
        self._inner("compute_terminated")  # AttributeError when the wrapped env has none
        return functools.partial(self._forward, "compute_terminated")

    @property
    def compute_truncated(self) -> Callable[..., np.ndarray]:
        """The wrapped env's ``compute_truncated`` for goals as this wrapper shows them."""
        self._inner("compute_truncated")
        return functools.partial(self._forward, "compute_truncated")

    # Hooks the concrete wrappers override -------------------------------------------------------

    #: True when the wrapper changes the reward: ``step`` then returns ``compute_reward`` of its obs.
    recompute_reward: bool = False

    def _setup(self, space: spaces.Dict) -> spaces.Dict:
        """Validate the wrapped env's (single) observation space and return this wrapper's."""
        return space

    def observation(self, obs: Any) -> Any:
        """Transform an observation (a single one, or a batch with a leading axis)."""
        return obs


class GoalWrapper(GoalFunctions, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Base of the single-env goal wrappers: ``step`` and ``reset`` keep the GoalEnv contract.

    Subclasses record their constructor arguments (``gym.utils.RecordConstructorArgs``), as
    Gymnasium's wrappers do, so ``gym.make(wrapped.spec)`` rebuilds the wrapped env.
    """

    def __init__(self, env: gym.Env) -> None:
        space = single_env_space(env)
        gym.Wrapper.__init__(self, env)
        self._find_inner_functions(env)
        self.observation_space = self._setup(space)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return self.observation(obs), info

    def step(self, action: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs = self.observation(obs)
        if self.recompute_reward:
            reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
        return obs, reward, terminated, truncated, info


def _autoreset_mode(env: VectorEnv) -> AutoresetMode:
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    try:
        return AutoresetMode(getattr(mode, "value", mode))
    except ValueError:
        raise ValueError(f"unknown autoreset_mode {mode!r} in the vector env's metadata") from None


class VectorGoalWrapper(GoalFunctions, gym.vector.VectorWrapper):
    """Base of the vector goal wrappers: the same logic over the batch, autoreset rows handled.

    With ``NEXT_STEP`` autoreset (Gymnasium's default) the step after an episode ends only resets
    that sub-env and its reward (0) is no transition's: it is passed through unchanged. With
    ``SAME_STEP`` the real last observation is in ``info["final_obs"]``; it is transformed too,
    and a recomputed reward of an ended row uses its goals.
    """

    def __init__(self, env: VectorEnv) -> None:
        space = vector_env_space(env)
        gym.vector.VectorWrapper.__init__(self, env)
        self._find_inner_functions(env)
        self._mode = _autoreset_mode(env)
        self._autoreset = np.zeros(env.num_envs, dtype=bool)
        single = self._setup(space)
        if single is not space:
            self.single_observation_space = single
            self.observation_space = batch_space(single, env.num_envs)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        # VectorEnv.reset is annotated seed: int | None, but Sync/Async and native vector envs take a list.
        obs, info = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]
        self._autoreset[:] = False
        return self.observation(obs), info

    def _final_obs(self, info: dict[str, Any]) -> Any:
        """``info["final_obs"]`` transformed: Gymnasium's object array of per-env observations (None where
        no episode ended), or one dict of batched arrays (a native env's ``batched_final_obs=True``)."""
        final = info["final_obs"]
        if isinstance(final, Mapping):
            return self.observation(final)
        return object_array([None if item is None else self.observation(item) for item in final])

    def _transition_goals(
        self, obs: Any, info: dict[str, Any], ended: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Next achieved and desired goals of each row's transition (SAME_STEP: ended rows from final_obs)."""
        ag, dg = np.array(obs["achieved_goal"]), np.array(obs["desired_goal"])
        rows = np.flatnonzero(ended)
        if rows.size and "final_obs" in info:
            final = info["final_obs"]
            if isinstance(final, Mapping):  # a native vector env's batched_final_obs=True: a dict of arrays
                ag[rows], dg[rows] = final["achieved_goal"][rows], final["desired_goal"][rows]
            else:  # Gymnasium's layout: an object array of per-env observations (None where not ended)
                for i in rows:
                    ag[i], dg[i] = final[i]["achieved_goal"], final[i]["desired_goal"]
        return ag, dg

    def _fill_info(
        self,
        obs: Any,
        info: dict[str, Any],
        terminated: np.ndarray,
        ended: np.ndarray,
        reset_rows: np.ndarray,
    ) -> dict[str, Any]:
        """Add entries to a step's info (a hook; ``reset_rows`` were only reset by this step)."""
        return info

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        reset_rows = self._autoreset
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        obs = self.observation(obs)
        done = np.logical_or(terminated, truncated)
        same_step = self._mode == AutoresetMode.SAME_STEP
        if same_step and "final_obs" in info:
            info = dict(info)
            info["final_obs"] = self._final_obs(info)
        ended = done if same_step else np.zeros_like(done)
        if self.recompute_reward:
            ag, dg = self._transition_goals(obs, info, ended)
            new = np.asarray(self.compute_reward(ag, dg, info))
            # NEXT_STEP: a row that ended last step was only reset; its reward is the env's (0).
            rewards = np.where(reset_rows, rewards, new).astype(new.dtype, copy=False)
        info = self._fill_info(obs, info, np.asarray(terminated, dtype=bool), ended, reset_rows)
        self._autoreset = done.copy() if self._mode == AutoresetMode.NEXT_STEP else np.zeros_like(done)
        return obs, rewards, terminated, truncated, info
