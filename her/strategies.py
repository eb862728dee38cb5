"""Goal selection strategies: pure, vectorized samplers of the step whose achieved goal becomes the new goal.

A strategy only decides *which step* of an episode supplies the relabelled goal; the storage turns
that step into a goal. Every function here works on whole batches (no Python loop over samples)
and draws from the generator it is given, never from NumPy's global state.

Conventions, shared with stable-baselines3 so that results are comparable:

* ``t`` is the index of the sampled transition within its episode (``0 <= t < length``);
* the returned step ``j`` names the transition whose **next** achieved goal is used, because the
  reward of transition ``t`` depends on the state it leads to (``r_t = f(ag_{t+1}, g)``);
* ``future`` is inclusive: ``j`` is drawn uniformly from ``[t, length)``, so the current
  transition's own outcome can be the goal (stable-baselines3 does the same; the HER paper's
  strict version draws from ``(t, length)``);
* ``final`` always picks ``j = length - 1`` and ``episode`` draws ``j`` uniformly from ``[0, length)``.
"""

from __future__ import annotations

import enum

import numpy as np

__all__ = ["GoalSelectionStrategy", "goal_step_offsets", "parse_strategy", "sample_goal_steps"]


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


def sample_goal_steps(
    strategy: GoalSelectionStrategy,
    steps: np.ndarray,
    lengths: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draw, for each transition, the step of its episode whose next achieved goal becomes the goal.

    Args:
        strategy: the goal selection strategy.
        steps: index ``t`` of each transition within its episode, shape ``(B,)``.
        lengths: length of each transition's episode, shape ``(B,)``; ``0 <= steps < lengths``.
        rng: the generator to draw from.

    Returns:
        int64 array of shape ``(B,)`` with ``0 <= j < lengths`` (and ``j >= steps`` for ``future``).
    """
    if strategy is GoalSelectionStrategy.FINAL:
        return lengths - 1
    return steps + goal_step_offsets(strategy, steps, lengths - steps, rng.random(len(steps)))


def goal_step_offsets(
    strategy: GoalSelectionStrategy,
    steps: np.ndarray,
    remaining: np.ndarray,
    uniforms: np.ndarray,
) -> np.ndarray:
    """:func:`sample_goal_steps` as offsets ``j - t``, from ``remaining = length - t``.

    ``uniforms`` are floats in ``[0, 1)``, one per transition (unused by ``final``): with those of
    ``rng.random(B)`` the result is ``sample_goal_steps(...) - steps`` exactly. The storage locates
    a goal step relative to the sampled row (row ``+ j - t``) and draws the uniforms of a whole batch
    at once, so this form saves it a round trip through episode starts and a generator call.
    ``remaining - 1`` marks a goal at the episode's last step.
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

    Scaling uniform floats is 4x cheaper than Generator.integers with array bounds, and biased by
    at most 2**-53 per value. The clip guards against ``u * span`` rounding up to ``span``.
    """
    offsets = (uniforms * span).astype(np.int64)
    return np.minimum(offsets, span - 1, out=offsets)
