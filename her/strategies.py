"""Goal selection strategies: pure, vectorized samplers of the step whose achieved goal becomes the new goal.

A strategy only decides *which step* of an episode supplies the relabelled goal; the storage turns
that step into a goal. Every function here works on whole batches (no Python loop over samples)
and takes its random draws from the caller (uniform floats), never from NumPy's global state.

Conventions, shared with stable-baselines3 so that results are comparable:

* ``t`` is the index of the sampled transition within its episode (``0 <= t < length``);
* the chosen step ``j`` names the transition whose **next** achieved goal is used, because the
  reward of transition ``t`` depends on the state it leads to (``r_t = f(ag_{t+1}, g)``);
* ``future`` is inclusive: ``j`` is drawn uniformly from ``[t, length)``, so the current
  transition's own outcome can be the goal (stable-baselines3 does the same; the HER paper's
  strict version draws from ``(t, length)``);
* ``final`` always picks ``j = length - 1`` and ``episode`` draws ``j`` uniformly from ``[0, length)``.
"""

from __future__ import annotations

import enum

import numpy as np

__all__ = ["GoalSelectionStrategy", "goal_step_offsets", "parse_strategy"]


class GoalSelectionStrategy(enum.Enum):
    """Where a relabelled goal comes from, within the episode of the transition being relabelled.

    The names and values are those of ``stable_baselines3.her.GoalSelectionStrategy``.
    """

    FUTURE = 0  # a step of the same episode, at or after the current one
    FINAL = 1  # the last step of the episode
    EPISODE = 2  # any step of the episode


_BY_NAME = {strategy.name.lower(): strategy for strategy in GoalSelectionStrategy}


def parse_strategy(value: GoalSelectionStrategy | str | enum.Enum) -> GoalSelectionStrategy:
    """Turn ``"future"`` / ``"final"`` / ``"episode"`` (any case) or an enum member into a strategy.

    Members of stable-baselines3's own ``GoalSelectionStrategy`` are accepted too (matched by name),
    so code written for its buffer keeps working without importing it here.
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
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(
            f"unknown goal_selection_strategy {value!r}; accepted values: {sorted(_BY_NAME)}"
        ) from None


def goal_step_offsets(
    strategy: GoalSelectionStrategy,
    steps: np.ndarray,
    remaining: np.ndarray,
    uniforms: np.ndarray,
) -> np.ndarray:
    """For each transition, the offset ``j - t`` of the step ``j`` whose next achieved goal becomes its goal.

    Args:
        strategy: the goal selection strategy.
        steps: index ``t`` of each transition within its episode, shape ``(B,)``.
        remaining: steps left in each transition's episode, ``t`` included (``length - t >= 1``), ``(B,)``.
        uniforms: floats in ``[0, 1)``, one per transition (unused by ``final``).

    Returns:
        int64 array of shape ``(B,)`` with ``0 <= t + offset < length`` (and ``offset >= 0`` for
        ``future``); ``offset == remaining - 1`` marks a goal at the episode's last step.

    Offsets and uniforms rather than steps and a generator: the storage locates a goal step relative
    to the sampled row (row ``+ j - t``) and draws the uniforms of a whole batch in one call.
    """
    if strategy is GoalSelectionStrategy.FINAL:
        return remaining - 1
    if strategy is GoalSelectionStrategy.FUTURE:
        return _uniform_below(remaining, uniforms)  # j in [t, length): j - t in [0, remaining)
    if strategy is GoalSelectionStrategy.EPISODE:
        return _uniform_below(steps + remaining, uniforms) - steps  # j in [0, length)
    raise ValueError(f"unsupported goal selection strategy {strategy!r}")


def _uniform_below(span: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Uniform integers in ``[0, span)`` from uniform floats in ``[0, 1)`` (int64, all ``span >= 1``).

    Scaling uniform floats is cheaper than Generator.integers with array bounds, and biased by at
    most 2**-53 per value. The clip guards against ``u * span`` rounding up to ``span``.
    """
    offsets = (uniforms * span).astype(np.int64)
    return np.minimum(offsets, span - 1, out=offsets)
