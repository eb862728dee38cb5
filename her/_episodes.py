"""Episode bookkeeping: which rows of the ring form complete episodes that can be sampled.

Every row records the ordinal of the episode it belongs to (episodes are numbered per environment,
1, 2, 3, ...; 0 marks a row never written, so the zero-filled ring needs no initialisation). An
episode's start row, length and final observation (the next observation of its last step, which is
the observation of no stored step) sit in a per-environment table indexed by ``ordinal mod E``;
``E`` is a power of two that doubles whenever more episodes of one env are live at once (so short
episodes never evict long-lived ones).

Per environment, the episodes that may be sampled are the complete ones still whole in the ring.
Because rows are written in order, they form one contiguous (circular) window of rows: from the start
of the oldest whole episode to the row before the current, unfinished episode. Sampling is then
O(batch): a uniform index among all sampleable transitions maps to ``(env, row)`` through the
per-env window sizes (see :meth:`Episodes.refresh_window`), and the episode's bounds come from the
table. Nothing scans the ring.

When the ring overwrites the first row of an episode, the whole episode leaves the window at once
(the oldest episode is dropped before any of its rows could be sampled in a damaged state). To keep
writes cheap, this check runs only on rows where some episode starts (a one-byte mark per row). An
episode longer than the whole ring loses its first steps and is never sampled.

Steps are booked in blocks (:meth:`Episodes.book_block`). A block never covers a row twice, so its
effects separate cleanly and are applied with array operations; the rare block that reaches the first
row of an unfinished episode is replayed step by step instead.

Nothing here is public API: :class:`her.HerStorage` composes these parts.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from her._layout import RecordLayout

__all__ = ["Episodes"]

_INITIAL_SLOTS = 16


class Episodes:
    """The episodes of a ring of ``steps`` rows of ``n_envs`` envs, and the window of sampleable rows.

    Per env, arrays of shape ``(n_envs,)``:

    * ``current``: ordinal of the unfinished episode; ``current_len``: rows it has written so far
      (at most ``steps``); ``damaged``: whether it is longer than the ring (lost its first rows);
      ``overrun``: how many first rows it lost (its length is ``current_len + overrun``);
    * ``outgrown``: the length of the env's longest episode that outgrew the ring (0: none did), for
      the error that says why nothing can be sampled;
    * ``oldest``: ordinal of the oldest complete episode still whole (``oldest == current``: none);
    * ``valid``: transitions of the complete, whole episodes (the env's window size);
    * ``pending``: ``{key: (n_envs, *shape)}``, the next observation of the env's latest step (the
      final observation of its unfinished episode if that is cut there).

    Per row: ``starts`` ``(steps,)``, True where some env's episode starts (the only rows whose
    write may overwrite a first row).

    The episode table, ``slots`` entries per env (a power of two), entry ``env * slots + (ordinal &
    (slots - 1))``: ``start`` (first row), ``length``, ``finals`` (the final observation, in the row
    record layout, so it patches gathered records directly: ``final_obs`` ``{key: view}``,
    ``final_bytes`` and ``final_goal_bytes`` are its views as in :meth:`RecordLayout.byte_views`).

    The window cache (see :meth:`refresh_window`): ``window_start``, ``window_ends``,
    ``window_shift``, ``window_shift0`` and ``total_valid``.
    """

    _VIEWS = ("final_obs", "final_bytes", "final_goal_bytes")
    _WINDOW = ("window_start", "window_ends", "window_shift", "window_shift0", "total_valid")

    def __init__(self, layout: RecordLayout, steps: int, n_envs: int) -> None:
        self.layout = layout
        self.steps = steps
        self.n_envs = n = n_envs
        self.starts = np.zeros(steps, bool)
        self.starts[0] = True
        # Episodes are numbered per env from 1; a row's ordinal 0 means "never written".
        self.current = np.ones(n, np.int64)
        self.current_len = np.zeros(n, np.int64)
        self.oldest = np.ones(n, np.int64)
        self.valid = np.zeros(n, np.int64)
        self.damaged = np.zeros(n, bool)
        self.overrun = np.zeros(n, np.int64)
        self.outgrown = np.zeros(n, np.int64)
        self.pending = {key: np.zeros((n, *shape), dtype) for key, (shape, dtype) in layout.obs_specs.items()}
        self._allocate_table(_INITIAL_SLOTS)
        self.refresh_window()

    def _allocate_table(self, slots: int) -> None:
        self.slots = slots  # a power of two: `ordinal & (slots - 1)` is `ordinal mod slots`
        size = self.n_envs * slots
        self.start = np.zeros(size, np.int64)
        self.length = np.zeros(size, np.int64)
        # Only the observation fields of these records are used.
        self.finals = np.zeros(size, self.layout.record)
        self._build_views()

    def _build_views(self) -> None:
        self.final_obs = self.layout.obs_views(self.finals)
        # Of a final observation only the observation fields are gathered, as of a next row.
        _, self.final_bytes, self.final_goal_bytes = self.layout.byte_views(self.finals)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in self._VIEWS + self._WINDOW:
            del state[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "overrun" not in state:  # pickled before episodes longer than the ring were measured
            state["overrun"] = np.zeros(state["n_envs"], np.int64)
            # A damaged episode is longer than the ring: steps + 1 rows at least.
            state["outgrown"] = np.where(state["damaged"], state["steps"] + 1, 0).astype(np.int64)
        self.__dict__.update(state)
        self._build_views()
        self.refresh_window()

    @property
    def nbytes(self) -> int:
        """Bytes of all its arrays."""
        arrays = [self.finals, self.starts, self.start, self.length, *self.pending.values()]
        arrays += [self.current, self.current_len, self.oldest, self.valid, self.damaged]
        arrays += [self.overrun, self.outgrown]
        return int(sum(a.nbytes for a in arrays))

    @staticmethod
    def planned_nbytes(layout: RecordLayout, steps: int, n_envs: int) -> int:
        """:attr:`nbytes` of new episodes of these arguments, without building them."""
        table = n_envs * _INITIAL_SLOTS * (2 * 8 + layout.record.itemsize)  # start, length, finals
        pending = sum(
            n_envs * int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            for shape, dtype in layout.obs_specs.values()
        )
        per_env = n_envs * (6 * 8 + 1)  # six int64 arrays and damaged
        return steps + table + pending + per_env

    # ------------------------------------------------------------------ reading
    def refresh_window(self) -> None:
        """Cache, per env, where its sampleable rows start and the cumulative window sizes.

        Draw ``d`` in ``[0, total_valid)`` belongs to the first env with ``d < window_ends[env]``;
        its row is ``window_start[env] + (d - draws before env's window)`` mod ``steps``, i.e.
        ``(window_shift[env] + d) mod steps``.
        """
        slots = self.slots
        self.window_start = self.start[np.arange(self.n_envs) * slots + (self.oldest & (slots - 1))]
        self.window_ends = np.cumsum(self.valid)
        self.total_valid = int(self.window_ends[-1])
        self.window_shift = self.window_start - (self.window_ends - self.valid)
        self.window_shift0 = int(self.window_shift[0])

    def sampleable_lengths(self) -> np.ndarray:
        """Lengths of the complete, whole episodes, per env concatenated (oldest first)."""
        lengths = []
        for env in range(self.n_envs):
            ordinals = np.arange(self.oldest[env], self.current[env])
            lengths.append(self.length[env * self.slots + (ordinals & (self.slots - 1))])
        return np.concatenate(lengths) if lengths else np.zeros(0, np.int64)

    def current_starts(self, pos: int) -> np.ndarray:
        """Row where each env's unfinished episode started, ``pos`` being the row of the next write."""
        return (pos - self.current_len) % self.steps

    # ------------------------------------------------------------------ writing
    def book_block(
        self,
        ring_episode: np.ndarray,
        rows: np.ndarray,
        done: np.ndarray,
        next_obs: Sequence[Mapping[str, Any]],
    ) -> np.ndarray:
        """Book a block of steps about to be written; return each step's episode ordinals ``(n_steps, n_envs)``.

        ``ring_episode``: the ring's per-record episode ordinals (the rows' contents before the
        write); ``rows``: the distinct rows the block's steps go to; ``done``: ``(n_steps, n_envs)``
        episode ends; ``next_obs``: each step's next observations (``{key: (n_envs, *shape)}``, the
        final observation where an episode ends).
        """
        if self._reaches_own_start(len(rows)):
            return self._replay_block(ring_episode, rows, done, next_obs)
        return self._book_block_at_once(ring_episode, rows, done, next_obs)

    def _reaches_own_start(self, n_steps: int) -> bool:
        # An unfinished episode so long that a block of n_steps reaches its own first row.
        return bool(self.damaged.any() or (self.current_len > self.steps - n_steps).any())

    def _book_block_at_once(
        self,
        ring_episode: np.ndarray,
        rows: np.ndarray,
        done: np.ndarray,
        next_obs: Sequence[Mapping[str, Any]],
    ) -> np.ndarray:
        """:meth:`book_block`, vectorized: valid when no unfinished episode reaches its own first row.

        Then the block's effects separate cleanly: (1) it overwrites old episodes only, all of which
        are dropped (each live episode lies after the write position in ring order, so if the block
        touches one of its rows it touches its first row too); (2) it closes the episodes whose ends
        it contains.
        """
        n_steps, n, steps, slots = len(rows), self.n_envs, self.steps, self.slots
        current_len0 = self.current_len
        current0 = self.current
        if self.starts[rows].any():
            old = ring_episode.reshape(steps, n)[rows]  # the episodes being overwritten, (n_steps, n)
            live = (old >= self.oldest) & (old < current0)
            if live.any():
                newest = np.where(live, old, -1).max(axis=0)
                envs = np.flatnonzero(newest >= 0)
                new_oldest = newest[envs] + 1
                # The dropped episodes are the head of the env's window: count rows up to the next start.
                next_start = self.start[envs * slots + (new_oldest & (slots - 1))]
                dropped = np.where(
                    new_oldest < current0[envs],
                    (next_start - self.window_start[envs]) % steps,
                    self.valid[envs],
                )
                self.valid[envs] -= dropped
                self.oldest[envs] = new_oldest
        ends = np.cumsum(done, axis=0)
        ordinals = current0 + ends - done  # the ordinal of the episode each step belongs to
        starts = self.starts
        starts[rows] = False
        if (current_len0 == 0).any():
            starts[rows[0]] = True
        if not ends[-1].any():
            self.current_len = current_len0 + n_steps
            return ordinals
        # Every episode end in the block, env-major then in step order.
        end_env, end_step = np.nonzero(done.T)
        end_ordinal = ordinals[end_step, end_env]
        first = np.ones(len(end_env), bool)
        first[1:] = end_env[1:] != end_env[:-1]
        previous_end = np.empty_like(end_step)
        previous_end[1:] = end_step[:-1]
        # An env's first end closes the episode it had under way (current_len0 rows before the
        # block); each later end closes the episode that began after the previous end.
        lengths = np.where(first, end_step + 1 + current_len0[end_env], end_step - previous_end)
        while (end_ordinal - self.oldest[end_env] >= self.slots).any():
            self._grow_table()
        slots = self.slots
        slot = end_env * slots + (end_ordinal & (slots - 1))
        end_rows = rows[end_step]
        self.start[slot] = (end_rows + 1 - lengths) % steps
        self.length[slot] = lengths
        pairs = list(zip(end_step.tolist(), end_env.tolist(), strict=True))
        for key, (shape, _) in self.layout.obs_specs.items():
            self.final_obs[key][slot] = [np.reshape(next_obs[k][key], (n, *shape))[e] for k, e in pairs]
        self.valid += np.bincount(end_env, weights=lengths, minlength=n).astype(np.int64)
        n_ends = ends[-1]
        last_end = n_steps - 1 - np.argmax(done[::-1], axis=0)
        self.current = current0 + n_ends
        self.current_len = np.where(n_ends > 0, n_steps - 1 - last_end, current_len0 + n_steps)
        starts[(end_rows + 1) % steps] = True
        return ordinals

    def _replay_block(
        self,
        ring_episode: np.ndarray,
        rows: np.ndarray,
        done: np.ndarray,
        next_obs: Sequence[Mapping[str, Any]],
    ) -> np.ndarray:
        """:meth:`book_block` applied in step order.

        Only *event* steps need work: steps where an episode ends, and steps writing a row where
        some episode starts (which may overwrite an old episode's first row). Between events the
        per-env state just advances, so the loop runs about twice per episode, not once per step.
        """
        n_steps, n = len(rows), self.n_envs
        ordinals = np.empty((n_steps, n), np.int64)
        done_any = np.asarray(done.any(axis=1))  # (n_steps,)
        marked = self.starts[rows] | done_any
        marked[1:] |= done_any[:-1]  # the step after an episode's end starts a new one
        events = np.flatnonzero(marked).tolist()
        applied = 0  # steps whose effect on the current episodes has been applied
        i = 0
        while i < len(events):
            k = events[i]
            row = int(rows[k])
            if k > applied:
                ordinals[applied:k] = self.current
                self.current_len += k - applied
            if self.starts[row]:
                self._before_overwrite(ring_episode[row * n : (row + 1) * n], row)
            ordinals[k] = self.current
            self.current_len += 1
            applied = k + 1
            if done_any[k]:
                envs = np.flatnonzero(done[k])
                finals = {
                    key: np.reshape(next_obs[k][key], (n, *shape))[envs]
                    for key, (shape, _) in self.layout.obs_specs.items()
                }
                self.end(envs, row, finals)
            # An episode may now start on the next row (an end, or a long episode losing its head).
            if (
                k + 1 < n_steps
                and self.starts[rows[k + 1]]
                and (i + 1 == len(events) or events[i + 1] != k + 1)
            ):
                events.insert(i + 1, k + 1)
            i += 1
        if applied < n_steps:
            ordinals[applied:] = self.current
            self.current_len += n_steps - applied
        return ordinals

    def _before_overwrite(self, ordinals: np.ndarray, row: int) -> None:
        """Row ``row``, holding episodes ``ordinals`` (one per env), is about to be written for every
        env: drop the episodes that start there."""
        dropped = (ordinals >= self.oldest) & (ordinals < self.current)
        if dropped.any():
            envs = np.flatnonzero(dropped)
            slots = envs * self.slots + (ordinals[envs] & (self.slots - 1))
            self.valid[envs] -= self.length[slots]
            self.oldest[envs] = ordinals[envs] + 1
        # An unfinished episode as long as the ring is now losing its first step: it is damaged (never
        # sampled, dropped when it ends); it goes on from the next row.
        own = ordinals == self.current
        if own.any():
            if (own & ~self.damaged).any():
                self._warn_outgrown(np.flatnonzero(own & ~self.damaged))
            self.damaged |= own
            self.current_len[own] -= 1
            self.overrun[own] += 1
            # With this step (written next) it is current_len + 1 + overrun steps long.
            length = self.current_len[own] + 1 + self.overrun[own]
            self.outgrown[own] = np.maximum(self.outgrown[own], length)
            self.starts[(row + 1) % self.steps] = True
        # Episodes (of any env) still starting here after this write: those that start with it.
        self.starts[row] = bool((self.current_len == 0).any())

    def set_pending(self, next_obs: Mapping[str, Any]) -> None:
        """Keep ``next_obs`` (``{key: (n_envs, *shape)}``), the next observations of the latest step."""
        for key, pending in self.pending.items():
            pending[...] = np.reshape(next_obs[key], pending.shape)

    def end_unfinished(self, last_row: int) -> np.ndarray:
        """Close every unfinished episode at ``last_row``, the latest written row; return their envs.

        Their pending next observations become their final observations.
        """
        envs = np.flatnonzero(self.current_len > 0)
        if envs.size:
            self.end(envs, last_row, {key: pending[envs] for key, pending in self.pending.items()})
            self.refresh_window()
        return envs

    def end(self, envs: np.ndarray, last_row: int, finals: Mapping[str, np.ndarray]) -> None:
        """Close the unfinished episodes of ``envs`` whose last step is on ``last_row``.

        ``finals``: ``{key: (len(envs), *shape)}``, their final observations. The window cache is
        not refreshed (callers do, once their whole update is booked).
        """
        ordinals = self.current[envs]
        while (ordinals - self.oldest[envs] >= self.slots).any():
            self._grow_table()
        slots = envs * self.slots + (ordinals & (self.slots - 1))
        lengths = self.current_len[envs]
        self.start[slots] = (last_row + 1 - lengths) % self.steps
        self.length[slots] = lengths
        for key, final in self.final_obs.items():
            final[slots] = finals[key]
        damaged = self.damaged[envs]
        self.valid[envs] += np.where(damaged, 0, lengths)
        if damaged.any():
            # It filled the whole ring, so it was the env's only episode: the window stays empty.
            self.oldest[envs[damaged]] = ordinals[damaged] + 1
            self.damaged[envs] = False
        self.current[envs] += 1
        self.current_len[envs] = 0
        self.overrun[envs] = 0
        self.starts[(last_row + 1) % self.steps] = True

    def _warn_outgrown(self, envs: np.ndarray) -> None:
        # The text names the env only, so Python's default filter shows it once per env.
        warnings.warn(
            f"an episode of env(s) {envs.tolist()} has outgrown the {self.steps} steps the storage keeps per "
            "env: it is losing its first steps and will never be sampled; raise capacity (stable-baselines3's "
            f"buffer_size) to at least n_envs={self.n_envs} x the longest episode length, or end episodes "
            "sooner (a time limit)",
            stacklevel=2,
        )

    def why_empty(self) -> str | None:
        """Why nothing can be sampled when episodes outgrew the ring (None when none did)."""
        if not self.outgrown.any():
            return None
        env = int(np.argmax(self.outgrown))
        length = int(self.outgrown[env])
        return (
            f"the longest episode of env {env} has reached {length} steps, more than the {self.steps} steps "
            f"the storage keeps per env (capacity // n_envs), so it can never be sampled; raise capacity "
            f"(stable-baselines3's buffer_size) to at least {length * self.n_envs} "
            f"(n_envs={self.n_envs} x the longest episode length), or end episodes sooner (a time limit)"
        )

    def _grow_table(self) -> None:
        """Double the per-env episode slots, moving every live episode to ``ordinal mod 2E``."""
        old_slots = self.slots
        old_start, old_length, old_finals = self.start, self.length, self.finals
        self._allocate_table(old_slots * 2)
        ordinals = self.oldest[:, None] + np.arange(old_slots)[None, :]  # (n_envs, old_slots)
        live = ordinals < self.current[:, None]
        envs = np.broadcast_to(np.arange(self.n_envs)[:, None], ordinals.shape)[live]
        ordinals = ordinals[live]
        src = envs * old_slots + (ordinals & (old_slots - 1))
        dst = envs * self.slots + (ordinals & (self.slots - 1))
        self.start[dst] = old_start[src]
        self.length[dst] = old_length[src]
        self.finals[dst] = old_finals[src]
