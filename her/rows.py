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

if TYPE_CHECKING:
    from her.storage import HerStorage

__all__ = ["ROW_NAMES", "current_episode_starts", "rows"]

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


def _grid(storage: HerStorage, flat: np.ndarray) -> np.ndarray:
    """A read-only ``(T, n, ...)`` view of a per-row field laid out at ``row * n + env``."""
    return _readonly(flat.reshape(storage.steps_per_env, storage.n_envs, *flat.shape[1:]))


def current_episode_starts(storage: HerStorage) -> np.ndarray:
    """The row where each env's unfinished episode started (``pos`` where none is under way)."""
    storage.flush()
    return _readonly((storage._pos - storage._current_len) % storage.steps_per_env)


def _episode_slots(storage: HerStorage) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the episode ordinal, its slot in the episode table, and whether it is complete and whole."""
    n = storage.n_envs
    ordinals = storage._episode.reshape(storage.steps_per_env, n)
    envs = np.arange(n)
    slots = envs * storage._slots + (ordinals & (storage._slots - 1))
    live = (ordinals >= storage._oldest) & (ordinals < storage._current)
    return ordinals, slots, live


def _episode_rows(storage: HerStorage, name: str) -> np.ndarray:
    ordinals, slots, live = _episode_slots(storage)
    if name == "episode_lengths":
        return _readonly(np.where(live, storage._ep_len[slots], 0))
    current = ordinals == storage._current  # rows of the unfinished episodes
    # A complete episode's start is in the table while its slot still holds it: then the slot's episode
    # covers this row (a later episode in the same slot lies on other rows; this one still holds ours).
    starts, lengths = storage._ep_start[slots], storage._ep_len[slots]
    rows = np.arange(storage.steps_per_env)[:, None]
    covered = (ordinals > 0) & (lengths > 0) & ((rows - starts) % storage.steps_per_env < lengths)
    starts = np.where(covered, starts, 0)
    starts = np.where(current & (ordinals > 0), current_episode_starts(storage), starts)
    return _readonly(starts)


def _next_observations(storage: HerStorage) -> dict[str, np.ndarray]:
    steps, n = storage.steps_per_env, storage.n_envs
    ordinals, slots, _ = _episode_slots(storage)
    last_row = (storage._pos - 1) % steps  # the latest step; its next row is the oldest one
    # Within an episode the next observation is the next row's (the ring's mirror row makes that
    # true of the last row too); an episode's last step is where the next row's ordinal differs.
    next_ordinals = np.roll(ordinals, -1, axis=0)
    written = ordinals > 0
    ends = written & (ordinals != next_ordinals)
    ends[last_row] = written[last_row] & (storage._current_len == 0)
    pending = np.zeros((steps, n), bool)
    pending[last_row] = written[last_row] & (storage._current_len > 0)
    # The final observation is in the table if the slot still holds this episode: its last row is here.
    rows = np.arange(steps)[:, None]
    lengths = storage._ep_len[slots]
    kept = ends & (lengths > 0) & ((storage._ep_start[slots] + lengths - 1) % steps == rows)
    out = {}
    for key, (shape, _) in storage._obs_specs.items():
        name = storage._obs_names[key]
        following = storage._ring[n : n + steps * n][name].reshape(steps, n, *shape)
        values = np.where(written.reshape(steps, n, *([1] * len(shape))), following, 0).astype(
            following.dtype
        )
        values[ends & ~kept] = 0
        values[kept] = storage._ep_final[key][slots[kept]]
        values[pending] = storage._pending[key][pending[last_row]]
        out[key] = _readonly(values)
    return out


def rows(storage: HerStorage, name: str) -> Any:
    """The stored ``name`` (one of :data:`ROW_NAMES`) as read-only arrays of shape ``(T, n_envs, ...)``."""
    if name not in ROW_NAMES:
        raise ValueError(f"name must be one of {list(ROW_NAMES)}, got {name!r}")
    storage.flush()
    if name == "observations":
        return {key: _grid(storage, view) for key, view in storage._obs.items()}
    if name == "next_observations":
        return _next_observations(storage)
    if name in ("episode_starts", "episode_lengths"):
        return _episode_rows(storage, name)
    if name == "infos":
        kept = storage._infos
        infos = np.empty(storage.steps_per_env * storage.n_envs, dtype=object)
        for i in range(len(infos)):  # rows never written (or infos not kept) read as empty dicts
            infos[i] = {} if kept is None or kept[i] is None else kept[i]
        return _grid(storage, infos)
    field = {
        "actions": storage._actions,
        "rewards": storage._rewards,
        "terminateds": storage._terminated,
        "truncateds": storage._truncated,
    }[name]
    return _grid(storage, field[:])  # a fresh view object, so the storage's own stays writable
