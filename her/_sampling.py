"""Sampling: transitions drawn uniformly among the sampleable ones, and the goals they are relabelled with.

O(batch) work per sample, nothing scans the ring: a uniform draw names an env and a row through the
window cache of :class:`~her._episodes.Episodes`, one gather reads the row's record and the next
row's observation (see :class:`~her._layout.Ring`), the episode table gives the episode's bounds,
and a goal is the achieved goal of another row of the same episode, or an episode's final
observation. The reward functions are called by :class:`her.HerStorage`, not here.

Nothing here is public API.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from her._episodes import Episodes
from her._layout import ACTION, EPISODE, REWARD, TERMINATED, TRUNCATED, Ring
from her.strategies import GoalSelectionStrategy, goal_step_offsets

__all__ = ["sample_transitions", "to_torch"]


def sample_transitions(
    ring: Ring,
    episodes: Episodes,
    strategy: GoalSelectionStrategy,
    rng: np.random.Generator,
    batch_size: int,
    n_relabel: int,
) -> tuple[dict[str, Any], np.ndarray, np.ndarray | None]:
    """Draw ``batch_size`` transitions of complete, whole episodes; give the last ``n_relabel`` new goals.

    Needs ``episodes.total_valid > 0``. Returns ``(batch, flat, goals)``: ``batch`` as
    :meth:`her.HerStorage.sample_arrays` returns it, but with the stored rewards and flags (the
    relabelled transitions' desired goals, in both observations, are already the new goals);
    ``flat``: the ring indices of the relabelled transitions (for their kept infos); ``goals``:
    ``(n_relabel, *goal_shape)``, the new goals (None when ``n_relabel`` is 0).
    """
    layout = ring.layout
    n, steps = ring.n_envs, ring.steps
    total = episodes.total_valid
    # One call draws the uniforms of the transitions, then those of their goals (the same stream
    # as two calls; a final goal needs none).
    goal_draws = 0 if strategy is GoalSelectionStrategy.FINAL else n_relabel
    uniforms = rng.random(batch_size + goal_draws)
    # Uniform over all sampleable transitions, like stable-baselines3, without listing them: a draw
    # in [0, total) names an env (by cumulative window sizes) and an offset in its window. (Scaled
    # uniform floats rather than Generator.integers; the clip covers u * total rounding up to
    # total, and the bias is below 2**-53.)
    draws = (uniforms[:batch_size] * total).astype(np.int64)
    np.minimum(draws, total - 1, out=draws)
    envs: np.ndarray | None
    if ring.pair_bytes is not None:  # one env: flat index = row
        envs = None
        rows = draws
        rows += episodes.window_shift0
        rows %= steps
        flat = rows
        # Row and next row in one gather (see Ring).
        pairs = ring.pair_bytes[rows].view(layout.pair_record)
        records, next_records, next_bytes = pairs["row"], pairs["next"], pairs["next_bytes"]
    else:
        envs = np.searchsorted(episodes.window_ends, draws, side="right")
        rows = episodes.window_shift[envs] + draws
        rows %= steps
        flat = rows * n + envs
        records = ring.bytes[flat].view(layout.record)
        # The next row's record is n records on; the copy of row 0 makes that true of the last row.
        next_bytes = ring.next_bytes[flat + n]
        next_records = next_bytes.view(layout.next_record)
    slot = records[EPISODE] & (episodes.slots - 1)
    if envs is not None:
        slot += envs * episodes.slots
    step = rows - episodes.start[slot]
    step %= steps  # the episode may wrap around the ring's end
    remaining = episodes.length[slot] - step  # steps left in the episode, this one included

    # The next observation is the next row's, except after an episode's last step (kept apart).
    last = np.flatnonzero(remaining == 1)
    if last.size:
        next_bytes[last] = episodes.final_bytes[slot[last]]
    observations = {key: records[name] for key, name in layout.obs_names.items()}
    next_observations = {key: next_records[name] for key, name in layout.obs_names.items()}
    relabelled = np.zeros(batch_size, bool)
    v = slice(batch_size - n_relabel, batch_size)
    goals = None
    if n_relabel:
        relabelled[v] = True
        goals = _goals(
            ring,
            episodes,
            strategy,
            None if envs is None else envs[v],
            rows[v],
            slot[v],
            step[v],
            remaining[v],
            uniforms[batch_size:],
        )
        observations["desired_goal"][v] = goals
        # The goal is part of the state: the next observation pursues the same new goal.
        next_observations["desired_goal"][v] = goals
    batch = {
        "observations": observations,
        "actions": records[ACTION],
        "rewards": records[REWARD],
        "next_observations": next_observations,
        "terminateds": records[TERMINATED].astype(np.float32),
        "truncateds": records[TRUNCATED].astype(np.float32),
        "relabelled": relabelled,
    }
    return batch, flat[v], goals


def _goals(
    ring: Ring,
    episodes: Episodes,
    strategy: GoalSelectionStrategy,
    envs: np.ndarray | None,
    rows: np.ndarray,
    slot: np.ndarray,
    step: np.ndarray,
    remaining: np.ndarray,
    uniforms: np.ndarray,
) -> np.ndarray:
    """New goals: the next achieved goal of a step of the same episode chosen by the strategy."""
    if strategy is GoalSelectionStrategy.FINAL:
        # Always the episode's last step, whose next achieved goal is its final observation's.
        return episodes.final_goal_bytes[slot].view(ring.layout.goal_view)
    delta = goal_step_offsets(strategy, step, remaining, uniforms)
    # The next achieved goal of step t + delta is the achieved goal of the row after it (row
    # + delta + 1, wrapping around the ring's end), or, for the episode's last step (delta ==
    # remaining - 1), the final observation's (kept in the episode table).
    goal_rows = rows + delta
    goal_rows += 1
    goal_rows %= ring.steps
    if envs is not None:
        goal_rows *= ring.n_envs
        goal_rows += envs
    goals = ring.goal_bytes[goal_rows]
    last = np.flatnonzero(delta == remaining - 1)
    if last.size:
        goals[last] = episodes.final_goal_bytes[slot[last]]
    return goals.view(ring.layout.goal_view)


def to_torch(batch: dict[str, Any], device: Any) -> dict[str, Any]:
    """``batch`` with every array as a torch tensor on ``device`` (nested dicts kept)."""
    import torch

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: convert(item) for key, item in value.items()}
        return torch.as_tensor(value, device=device)

    return {key: convert(value) for key, value in batch.items()}
