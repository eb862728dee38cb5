"""Adapters that bring third-party goal envs up to the GoalEnv contract.

* :class:`VectorizedComputeReward`: a ``compute_reward`` written for one transition at a time
  becomes one that takes any batch (a Python loop: correct, not fast; it says so in a warning).
* :class:`LegacyGoalEnv`: an env written against the legacy ``gym.GoalEnv`` /
  ``gym_robotics.GoalEnv`` API (``reset() -> obs``, 4-tuple ``step``, ``seed()``, old-gym spaces,
  no ``compute_terminated`` / ``compute_truncated``) as a Gymnasium goal env.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs._util import env_info
from goalenvs.core import check_goal_space, info_values
from goalenvs.wrappers._base import (
    GOAL_FUNCTIONS,
    GoalFunctions,
    GoalWrapper,
    goal_batch_shape,
    single_env_space,
)

__all__ = ["LegacyGoalEnv", "VectorizedComputeReward"]


def _info_row(info: Any, i: int, n: int) -> Any:
    """Row ``i`` of a batch of ``n`` infos: None, one dict for all, a vector env's dict of arrays, or a sequence."""
    if info is None:
        return None
    if isinstance(info, Mapping):
        return env_info(info, i, n)
    if isinstance(info, (Sequence, np.ndarray)):
        return np.asarray(info, dtype=object).reshape(-1)[i]
    raise TypeError(f"info must be None, a dict, or a sequence/array of dicts, got {type(info).__name__}")


def _fixed_shape(space: gym.Space, what: str) -> tuple[int, ...]:
    """``space.shape``, or a ValueError for a goal space without one (Tuple, Sequence, Graph, ...)."""
    if space.shape is None:
        raise ValueError(f"{what} goals must have a fixed shape, got the space {space}")
    return space.shape


class VectorizeLogic(GoalFunctions):
    """Call the wrapped env's one-at-a-time goal functions row by row over any batch shape."""

    def _init_vectorize(self, space: spaces.Dict) -> None:
        """Set up for the (checked) goal observation space ``space``."""
        self._goal_shape = _fixed_shape(space["desired_goal"], "desired_goal")
        warnings.warn(
            f"VectorizedComputeReward calls the wrapped env's {', '.join(self._present())} once per transition "
            "in a Python loop: correct for any batch, but slow for HER's large batches. Vectorize them "
            "(operate on the last axis, read infos with goalenvs.info_values) to drop this wrapper.",
            UserWarning,
            stacklevel=3,
        )

    def _present(self) -> list[str]:
        return [name for name in GOAL_FUNCTIONS if self._inner_fns.get(name) is not None]

    def _forward(self, name: str, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        fn = self._inner(name)
        ag, dg = np.asarray(achieved_goal), np.asarray(desired_goal)
        batch = goal_batch_shape(ag, self._goal_shape, "achieved_goal")
        if dg.shape != ag.shape:
            raise ValueError(f"achieved_goal {ag.shape} and desired_goal {dg.shape} must have the same shape")
        if batch == ():
            return np.asarray(fn(ag, dg, info)).reshape(())
        n = int(np.prod(batch))
        flat_ag = ag.reshape((n,) + self._goal_shape)
        flat_dg = dg.reshape((n,) + self._goal_shape)
        if isinstance(info, (Sequence, np.ndarray)) and not isinstance(info, Mapping):
            if np.asarray(info, dtype=object).size != n:
                raise ValueError(f"got {np.asarray(info, dtype=object).size} infos for a batch of {n} goals")
        values = [np.asarray(fn(flat_ag[i], flat_dg[i], _info_row(info, i, n))).reshape(()) for i in range(n)]
        return np.stack(values).reshape(batch)


class VectorizedComputeReward(VectorizeLogic, GoalWrapper):
    """Make a one-at-a-time ``compute_reward`` (and ``compute_terminated`` / ``compute_truncated``) take batches.

    HER calls ``compute_reward`` on a batch of stored transitions; a third-party env whose function
    reads ``float(...)`` or reduces over every axis then fails, or silently returns one number for the
    whole batch. This wrapper calls it row by row (infos as a list, an object array, one dict or a
    vector env's dict of arrays) and returns an array of the batch shape. It warns once, at
    construction: the loop is slow, and vectorizing the env's function is the real fix.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        super().__init__(env)
        if self._inner_fns["compute_reward"] is None:
            raise ValueError(f"{env} defines no compute_reward to vectorize")
        self._init_vectorize(single_env_space(env))


# ---------------------------------------------------------------------------------------------------
# Legacy API


def _convert_space(space: Any) -> gym.Space:
    """A Gymnasium space equal to an old ``gym`` space (read through its attributes)."""
    if isinstance(space, gym.Space):
        return space
    kind = type(space).__name__
    if kind == "Dict":
        return spaces.Dict({k: _convert_space(v) for k, v in space.spaces.items()})
    if kind == "Tuple":
        return spaces.Tuple(tuple(_convert_space(s) for s in space.spaces))
    if kind == "Box":
        return spaces.Box(np.asarray(space.low), np.asarray(space.high), tuple(space.shape), space.dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiBinary":
        return spaces.MultiBinary(space.n)
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(space.nvec), dtype=space.dtype)
    raise TypeError(f"cannot convert the {kind} space {space!r} to a Gymnasium space")


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class LegacyGoalEnv(gym.Env):
    """A goal env written against the legacy ``gym.GoalEnv`` / ``gym_robotics.GoalEnv`` API, as a Gymnasium one.

    * ``reset(seed=..., options=...)`` returns ``(obs, info)``; the seed goes to the legacy
      ``reset(seed=...)`` when it takes one, else to the legacy ``seed(seed)``.
    * ``step`` returns the 5-tuple: a legacy 4-tuple's ``done`` becomes ``truncated`` when
      ``info["TimeLimit.truncated"]`` says the time limit ended the episode, else ``terminated``.
      A 5-tuple (gym 0.26 style) passes through.
    * ``info["TimeLimit.truncated"]`` is set at every step, and ``compute_truncated`` reads it:
      truncation is a matter of time, not of goals, so a stored transition's info answers for any goal.
    * ``compute_terminated`` is the given function; by default nothing terminates, which is right for
      the legacy robotics envs (their episodes end only by the time limit). If the legacy env ends an
      episode on its own (e.g. on success) the adapter warns once: pass ``compute_terminated``.
    * Old ``gym`` spaces become Gymnasium spaces.

    Args:
        env: the legacy env (any object with the legacy API; it need not inherit from anything).
        compute_terminated: ``fn(achieved_goal, desired_goal, info) -> bool array`` saying where the
            legacy env's ``done`` comes from reaching (or failing) the goal, vectorized.

    ``compute_reward`` is the legacy env's; if it works one transition at a time, wrap this adapter
    in :class:`VectorizedComputeReward`.
    """

    def __init__(self, env: Any, compute_terminated: Callable[[Any, Any, Any], Any] | None = None) -> None:
        for attr in ("reset", "step", "compute_reward", "observation_space", "action_space"):
            if not hasattr(env, attr):
                raise TypeError(f"a legacy goal env needs {attr!r}; {type(env).__name__} has none")
        if compute_terminated is not None and not callable(compute_terminated):
            raise TypeError(f"compute_terminated must be None or a callable, got {compute_terminated!r}")
        self.legacy_env = env
        self.observation_space = _convert_space(env.observation_space)
        self.action_space = _convert_space(env.action_space)
        check_goal_space(self.observation_space)
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.render_mode = getattr(env, "render_mode", None)
        self._terminated_fn = compute_terminated
        self._reset_takes_seed = _accepts(env.reset, "seed")
        self._warned_terminated = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        env = self.legacy_env
        if self._reset_takes_seed:
            kwargs: dict[str, Any] = {"seed": seed}
            if options is not None:
                kwargs["options"] = options
            out = env.reset(**kwargs)
        else:
            if seed is not None:
                if not hasattr(env, "seed"):
                    raise TypeError(
                        f"{type(env).__name__} has neither reset(seed=...) nor seed(); it cannot be seeded"
                    )
                env.seed(seed)
            if options:
                raise ValueError(f"{type(env).__name__}.reset takes no options, got {sorted(options)}")
            out = env.reset()
        # gym < 0.26 returned the observation alone; 0.26 returned (obs, info).
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
            return out[0], dict(out[1])
        return out, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        out = self.legacy_env.step(action)
        if len(out) == 4:
            obs, reward, done, info = out
            info = dict(info)
            truncated = bool(done) and bool(info.get("TimeLimit.truncated", False))
            terminated = bool(done) and not truncated
        elif len(out) == 5:
            obs, reward, terminated, truncated, info = out
            info = dict(info)
            terminated, truncated = bool(terminated), bool(truncated)
        else:
            raise ValueError(f"the legacy env's step returned {len(out)} values; expected 4 or 5")
        info["TimeLimit.truncated"] = truncated
        if terminated and self._terminated_fn is None and not self._warned_terminated:
            self._warned_terminated = True
            warnings.warn(
                f"{type(self.legacy_env).__name__} ended an episode by itself (done without "
                "TimeLimit.truncated), but LegacyGoalEnv was given no compute_terminated, so relabelled "
                "transitions are never terminal. Pass compute_terminated=fn(achieved_goal, desired_goal, info) "
                "saying when the env ends an episode (e.g. on success).",
                UserWarning,
                stacklevel=2,
            )
        return obs, float(reward), terminated, truncated, info

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> Any:
        """The legacy env's ``compute_reward`` (vectorized only if it is)."""
        return self.legacy_env.compute_reward(achieved_goal, desired_goal, info)

    def _batch_shape(self, achieved_goal: Any) -> tuple[int, ...]:
        """The leading batch shape of ``achieved_goal`` (goals of the achieved_goal space)."""
        space = self.observation_space
        assert isinstance(space, spaces.Dict)  # check_goal_space in __init__
        return goal_batch_shape(
            np.asarray(achieved_goal), _fixed_shape(space["achieved_goal"], "achieved_goal")
        )

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        """The given ``compute_terminated``, else False everywhere (bool of the batch shape)."""
        if self._terminated_fn is not None:
            return np.asarray(self._terminated_fn(achieved_goal, desired_goal, info), dtype=bool)
        return np.zeros(self._batch_shape(achieved_goal), dtype=bool)

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        """``info["TimeLimit.truncated"]`` of each transition (False where absent); bool of the batch shape."""
        batch = self._batch_shape(achieved_goal)
        return info_values(info, "TimeLimit.truncated", batch, default=False).astype(bool)

    def render(self) -> Any:
        return self.legacy_env.render()

    def close(self) -> None:
        close = getattr(self.legacy_env, "close", None)
        if callable(close):
            close()
