"""Goal selection strategies: pure, vectorized samplers of the step whose achieved goal becomes the new goal.

``sampler(steps, remaining, uniforms) -> offsets``, int64 arrays of shape ``(B,)`` (``uniforms``: floats
in ``[0, 1)`` drawn by the caller, never from NumPy's global state): ``steps`` is each transition's
index ``t`` in its episode, ``remaining`` the steps left, ``t`` included; the result is the offset
``j - t`` of the chosen step ``0 <= j < length``. As stable-baselines3's: step ``j`` names the
transition whose **next** achieved goal is used (``r_t = f(ag_{t+1}, g)``); ``future`` draws ``j`` from
``[t, length)`` (inclusive, unlike the HER paper's ``(t, length)``), ``final`` is ``length - 1``,
``episode`` any step. More: :func:`register_strategy` (docs/her.md, "Adding a goal-selection strategy").
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import numpy as np

#: ``sampler(steps, remaining, uniforms) -> offsets`` (see the module docstring).
GoalSampler = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class GoalSelectionStrategy(enum.Enum):
    """The built-in strategies; names and values are those of ``stable_baselines3.her.GoalSelectionStrategy``."""

    FUTURE = 0  # a step of the same episode, at or after the current one
    FINAL = 1  # the last step of the episode
    EPISODE = 2  # any step of the episode


def _uniform_below(span: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Uniform integers in ``[0, span)`` from uniform floats (scaling is cheaper than
    ``Generator.integers`` with array bounds, biased by at most 2**-53; the clip guards rounding up)."""
    offsets = (uniforms * span).astype(np.int64)
    return np.minimum(offsets, span - 1, out=offsets)


def _future(steps: np.ndarray, remaining: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    return _uniform_below(remaining, uniforms)  # j in [t, length): j - t in [0, remaining)


def _final(steps: np.ndarray, remaining: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    return remaining - 1


def _episode(steps: np.ndarray, remaining: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    return _uniform_below(steps + remaining, uniforms) - steps  # j in [0, length)


_SAMPLERS: dict[str, GoalSampler] = {"future": _future, "final": _final, "episode": _episode}


def register_strategy(name: str, sampler: GoalSampler) -> None:
    """Make ``name`` (lower case) a goal selection strategy that every her storage accepts.

    ``sampler(steps, remaining, uniforms)`` returns, per transition, the offset ``j - t`` of the step
    ``j`` of the same episode whose next achieved goal becomes the goal (see the module docstring).
    Built-in names cannot be replaced.
    """
    if not isinstance(name, str) or name != name.lower() or not name:
        raise ValueError(f"a strategy name must be a non-empty lower-case str, got {name!r}")
    if name.upper() in GoalSelectionStrategy.__members__:
        raise ValueError(f"{name!r} is a built-in strategy and cannot be replaced")
    if not callable(sampler):
        raise TypeError(f"sampler must be callable, got {type(sampler).__name__}")
    _SAMPLERS[name] = sampler


def strategy_names() -> list[str]:
    """The accepted strategy names, built-in and registered."""
    return sorted(_SAMPLERS)


def parse_strategy(value: GoalSelectionStrategy | str | enum.Enum) -> GoalSelectionStrategy | str:
    """A strategy from its name (any case) or an enum member (stable-baselines3's too, by name).

    Returns the :class:`GoalSelectionStrategy` member of a built-in strategy, the name of a
    registered one; an unknown name raises ``ValueError`` naming the accepted values.
    """
    if isinstance(value, GoalSelectionStrategy):
        return value
    if isinstance(value, enum.Enum):
        name = value.name.lower()
    elif isinstance(value, str):
        name = value.lower()
    else:
        raise TypeError(
            f"goal_selection_strategy must be a str or a GoalSelectionStrategy, got {type(value).__name__}"
        )
    if name not in _SAMPLERS:
        raise ValueError(f"unknown goal_selection_strategy {value!r}; accepted values: {strategy_names()}")
    return GoalSelectionStrategy.__members__.get(name.upper(), name)


def goal_step_offsets(
    strategy: GoalSelectionStrategy | str, steps: np.ndarray, remaining: np.ndarray, uniforms: np.ndarray
) -> np.ndarray:
    """Per transition, the offset ``j - t`` of the step whose next achieved goal becomes its goal."""
    name = strategy.name.lower() if isinstance(strategy, GoalSelectionStrategy) else strategy
    return _SAMPLERS[name](steps, remaining, uniforms)
