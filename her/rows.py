"""Read-only arrays of a :class:`~her.storage.HerStorage` in the lockstep layout ``(steps_per_env, n_envs, ...)``.

This is stable-baselines3's buffer layout (``buffer_size, n_envs, ...``; row ``pos - 1`` is the latest
step), so code that reads the stock buffer's arrays (``observations``, ``dones``, ``ep_length``, ...)
can read ours. It serves inspection, tests and porting, not training: sampling never goes through it.

What each name gives (all read-only; call again after adding steps):

* ``"observations"``: ``{key: (T, n, *shape)}``, views of the ring (no copy);
* ``"actions"``, ``"rewards"``, ``"terminateds"``, ``"truncateds"``: views of the ring (``truncateds``
  is false where ``terminateds`` is true);
* ``"next_observations"``: ``{key: (T, n, *shape)}``, assembled (a copy, O(buffer)), since each
  observation is stored once: the next row's observation within an episode, the kept final
  observation after an episode's last step, the pending one after the latest step of an unfinished
  episode, zeros on rows never written. The final observation of an episode that already lost its
  first rows to the ring may be gone (zeros), as that episode can no longer be sampled anyway;
* ``"episode_starts"``: the row where each row's episode starts (that of the unfinished episode
  included; 0 where no longer known, as for the final observation above); ``"episode_lengths"``: its
  length where the episode is complete and can be sampled, else 0 (stable-baselines3's ``ep_start`` /
  ``ep_length``);
* ``"infos"``: ``(T, n)`` object array of the kept info dicts (empty dicts without ``copy_info_dict``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from her._layout import ACTION, REWARD, Ring

if TYPE_CHECKING:
    from her._episodes import Episodes

__all__ = ["ROW_NAMES", "rows"]

ROW_NAMES = (
    "observations",
    "next_observations",
    "actions",
    "rewards",
    "terminateds",
    "truncateds",
    "episode_starts",
    "episode_lengths",
    "infos",
)


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _grid(ring: Ring, flat: np.ndarray) -> np.ndarray:
    """A read-only ``(T, n, ...)`` view of a per-row field laid out at ``row * n + env``."""
    return _readonly(flat.reshape(ring.steps, ring.n_envs, *flat.shape[1:]))


def _episode_slots(ring: Ring, episodes: Episodes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the episode ordinal, its entry in the episode table, and whether it is complete and whole."""
    ordinals = ring.episode.reshape(ring.steps, ring.n_envs)
    envs = np.arange(ring.n_envs)
    slots = envs * episodes.slots + (ordinals & (episodes.slots - 1))
    live = (ordinals >= episodes.oldest) & (ordinals < episodes.current)
    return ordinals, slots, live


def _episode_rows(ring: Ring, episodes: Episodes, name: str) -> np.ndarray:
    ordinals, slots, live = _episode_slots(ring, episodes)
    if name == "episode_lengths":
        return _readonly(np.where(live, episodes.length[slots], 0))
    current = ordinals == episodes.current  # rows of the unfinished episodes
    # A complete episode's start is in the table while its slot still holds it: then the slot's episode
    # covers this row (a later episode in the same slot lies on other rows; this one still holds ours).
    starts, lengths = episodes.start[slots], episodes.length[slots]
    rows = np.arange(ring.steps)[:, None]
    covered = (ordinals > 0) & (lengths > 0) & ((rows - starts) % ring.steps < lengths)
    starts = np.where(covered, starts, 0)
    starts = np.where(current & (ordinals > 0), episodes.current_starts(ring.pos), starts)
    return _readonly(starts)


def _next_observations(ring: Ring, episodes: Episodes) -> dict[str, np.ndarray]:
    steps, n = ring.steps, ring.n_envs
    ordinals, slots, _ = _episode_slots(ring, episodes)
    last_row = (ring.pos - 1) % steps  # the latest step; its next row is the oldest one
    # Within an episode the next observation is the next row's (the ring's copy of row 0 makes that
    # true of the last row too); an episode's last step is where the next row's ordinal differs.
    next_ordinals = np.roll(ordinals, -1, axis=0)
    written = ordinals > 0
    ends = written & (ordinals != next_ordinals)
    ends[last_row] = written[last_row] & (episodes.current_len == 0)
    pending = np.zeros((steps, n), bool)
    pending[last_row] = written[last_row] & (episodes.current_len > 0)
    # The final observation is in the table if the slot still holds this episode: its last row is here.
    rows = np.arange(steps)[:, None]
    lengths = episodes.length[slots]
    kept = ends & (lengths > 0) & ((episodes.start[slots] + lengths - 1) % steps == rows)
    out = {}
    for key, (shape, _) in ring.layout.obs_specs.items():
        name = ring.layout.obs_names[key]
        following = ring.records[n : n + steps * n][name].reshape(steps, n, *shape)
        values = np.where(written.reshape(steps, n, *([1] * len(shape))), following, 0).astype(
            following.dtype
        )
        values[ends & ~kept] = 0
        values[kept] = episodes.final_obs[key][slots[kept]]
        values[pending] = episodes.pending[key][pending[last_row]]
        out[key] = _readonly(values)
    return out


def rows(ring: Ring, episodes: Episodes, name: str) -> Any:
    """The stored ``name`` (one of :data:`ROW_NAMES`) as read-only arrays of shape ``(T, n_envs, ...)``.

    ``ring`` and ``episodes``: the parts of a :class:`~her.storage.HerStorage`, its staged steps
    written (what :meth:`HerStorage.rows <her.storage.HerStorage.rows>` passes).
    """
    if name not in ROW_NAMES:
        raise ValueError(f"name must be one of {list(ROW_NAMES)}, got {name!r}")
    if name == "observations":
        return {key: _grid(ring, view) for key, view in ring.obs.items()}
    if name == "next_observations":
        return _next_observations(ring, episodes)
    if name in ("episode_starts", "episode_lengths"):
        return _episode_rows(ring, episodes, name)
    if name == "infos":
        kept = ring.infos
        infos = np.empty(ring.steps * ring.n_envs, dtype=object)
        for i in range(len(infos)):  # rows never written (or infos not kept) read as empty dicts
            infos[i] = {} if kept is None or kept[i] is None else kept[i]
        return _grid(ring, infos)
    field = {
        "actions": ring.fields[ACTION],
        "rewards": ring.fields[REWARD],
        "terminateds": ring.terminated,
        "truncateds": ring.truncated,
    }[name]
    return _grid(ring, field[:])  # a fresh view object, so the ring's own stays writable
