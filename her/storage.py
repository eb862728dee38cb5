"""Episode-aware ring storage for Hindsight Experience Replay, free of any RL framework.

Layout
------
Transitions live in a ring of ``T = capacity // n_envs`` rows per environment, all environments
writing one row per step (the same lockstep layout as stable-baselines3, so ``capacity`` means the
same thing). Each row is one record of a structured dtype (observation entries, action, reward,
flags, episode ordinal side by side), stored flat at index ``row * n_envs + env``: a batch gathers
with one ``np.take``, touching one place in memory per sampled transition.

Each observation is stored **once**. Within an episode the next observation of step ``t`` is the
observation of step ``t + 1``, i.e. the row after it. Only the next observation of an episode's last
step (the terminal observation, which is never the observation of any stored step) is kept apart, in
a small per-episode table. For 50-step episodes this halves the observation memory compared with
storing ``obs`` and ``next_obs`` side by side.

Episodes
--------
Every row records the ordinal of the episode it belongs to (episodes are numbered per environment,
1, 2, 3, ...; 0 marks a row never written, so the zero-filled ring needs no initialisation). An episode's start row, length and terminal observation sit in a per-environment table
indexed by ``ordinal mod E``; ``E`` is a power of two that doubles whenever more episodes of one env
are live at once (so short episodes never evict long-lived ones).

Per environment, the episodes that may be sampled are the complete ones still whole in the ring.
Because rows are written in order, they form one contiguous (circular) window of rows: from the start
of the oldest whole episode to the row before the current, unfinished episode. Sampling is then
O(batch): draw a uniform index among all sampleable transitions, map it to ``(env, row)`` through
the per-env window sizes, and read the episode's bounds from the table. Nothing scans the buffer.

When the ring overwrites the first row of an episode, the whole episode leaves the window at once
(the oldest episode is dropped before any of its rows could be sampled in a damaged state). To keep
``add`` cheap, this check runs only on rows where some episode starts (a one-byte mark per row). An
episode longer than the whole ring loses its first steps and is never sampled.

Writing
-------
``add`` only stages a step; staged steps are written in blocks (one array operation per field for
the whole block), and the episode bookkeeping of a block is vectorized too. A block never covers a
row twice, so its effects separate cleanly (see ``_block_episode_events``); the rare block that
reaches the first row of an unfinished episode is replayed step by step instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from her.strategies import GoalSelectionStrategy, goal_step_offsets, parse_strategy

__all__ = ["GoalFn", "HerStorage"]

#: ``fn(achieved_goal, desired_goal, infos) -> array of shape (B,)``, as ``GoalEnv.compute_reward``.
GoalFn = Callable[[np.ndarray, np.ndarray, Any], Any]

_GOAL_KEYS = ("achieved_goal", "desired_goal")
_INITIAL_EPISODE_SLOTS = 16


def _field_specs(observation_space: Any) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``{key: (shape, dtype)}`` from a ``spaces.Dict`` or a mapping of ``(shape, dtype)`` pairs."""
    if isinstance(observation_space, spaces.Dict):
        items = [(key, (space.shape, space.dtype)) for key, space in observation_space.spaces.items()]
    elif isinstance(observation_space, Mapping):
        items = list(observation_space.items())
    else:
        raise TypeError(
            "observation_space must be a gymnasium.spaces.Dict or a mapping {key: (shape, dtype)}, "
            f"got {type(observation_space).__name__}"
        )
    specs = {}
    for key, spec in items:
        try:
            shape, dtype = spec
            specs[key] = (tuple(int(d) for d in shape), np.dtype(dtype))
        except (TypeError, ValueError):
            raise TypeError(
                f"observation_space[{key!r}] has no usable (shape, dtype), got {spec!r}"
            ) from None
    missing = [key for key in _GOAL_KEYS if key not in specs]
    if missing:
        raise ValueError(
            f"observation_space lacks the key(s) {missing}; HER needs 'achieved_goal' and 'desired_goal' "
            f"(it has {list(specs)})"
        )
    if specs["achieved_goal"] != specs["desired_goal"]:
        raise ValueError(
            "observation_space['achieved_goal'] and ['desired_goal'] differ "
            f"({specs['achieved_goal']} vs {specs['desired_goal']}); relabelling puts achieved goals in "
            "place of desired goals, so they need the same shape and dtype"
        )
    return specs


def _action_spec(action_space: Any) -> tuple[tuple[int, ...], np.dtype]:
    if isinstance(action_space, spaces.Space):
        if action_space.shape is None or action_space.dtype is None:
            raise TypeError(f"action_space {action_space} has no fixed shape and dtype")
        return tuple(action_space.shape), np.dtype(action_space.dtype)
    try:
        shape, dtype = action_space
        return tuple(int(d) for d in shape), np.dtype(dtype)
    except (TypeError, ValueError):
        raise TypeError(
            f"action_space must be a gymnasium Space or a (shape, dtype) pair, got {action_space!r}"
        ) from None


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _split_infos(infos: Any, n_envs: int) -> list[Any]:
    """Per-env info dicts from a list of dicts (SB3) or a dict of arrays (gymnasium vector envs)."""
    if infos is None:
        return [None] * n_envs
    if isinstance(infos, Mapping):
        # gymnasium vector envs: {key: array over envs, "_key": mask of envs that set it}.
        per_env: list[dict[str, Any]] = [{} for _ in range(n_envs)]
        for key, values in infos.items():
            if key.startswith("_"):
                continue
            mask = infos.get("_" + key)
            for env in range(n_envs):
                if mask is None or mask[env]:
                    per_env[env][key] = values[env]
        return per_env
    if isinstance(infos, Sequence) or isinstance(infos, np.ndarray):
        if len(infos) != n_envs:
            raise ValueError(f"infos must have one entry per env ({n_envs}), got {len(infos)}")
        return list(infos)
    raise TypeError(f"infos must be None, a list of dicts or a dict of arrays, got {type(infos).__name__}")


class HerStorage:
    """Replay storage with hindsight relabelling for any training loop (numpy in, numpy or torch out).

    Args:
        capacity: number of transitions kept (``capacity // n_envs`` steps per environment).
        observation_space: the goal env's ``spaces.Dict`` (or ``{key: (shape, dtype)}``); it must hold
            ``achieved_goal`` and ``desired_goal`` of the same shape and dtype.
        action_space: the action space (or a ``(shape, dtype)`` pair).
        reward_fn: ``reward_fn(achieved_goal, desired_goal, infos)`` returning rewards of shape ``(B,)``,
            usually the env's ``compute_reward`` (see :meth:`from_env`). ``infos`` is the object array of
            the stored info dicts when ``copy_info_dict`` is true, else ``None``. It may be set later
            (attribute ``reward_fn``) but must be set before relabelled transitions are sampled.
        n_envs: number of environments adding one transition each per :meth:`add`.
        n_sampled_goal: ``k`` relabelled transitions per real one: a share ``1 - 1/(k+1)`` of each
            batch is relabelled (the exact count of stable-baselines3: ``int(share * batch_size)``).
        goal_selection_strategy: ``"future"`` (inclusive of the current step), ``"final"``, ``"episode"``
            or a :class:`~her.strategies.GoalSelectionStrategy`.
        copy_info_dict: keep each transition's info dict and pass them to ``reward_fn`` (slower; only
            for envs whose reward reads the info).
        recompute_terminated: for relabelled transitions, replace the stored ``terminated`` by
            ``terminated_fn(next_achieved_goal, new_goal, infos)``: a transition that reaches its new goal
            then ends the episode, as it would have online (stable-baselines3 keeps the stored flag, its
            issue #627). Off by default for parity.
        terminated_fn: the env's ``compute_terminated``; required when ``recompute_terminated`` is true.
        device: ``None`` to sample numpy arrays, or a torch device (``"cpu"``, ``"cuda"``, ...) to sample
            torch tensors there (torch is imported only then).
        seed: seed of the storage's own ``np.random.Generator`` (an int, a ``SeedSequence``, a
            ``Generator``, or ``None`` for fresh entropy). NumPy's global random state is never used.
        borrow_arrays: keep references to the arrays given to :meth:`add` until they are written
            (faster; the caller must not modify them in place afterwards) instead of copying them.
        flush_every: staged steps are written to the ring in blocks of at most this many.

    Data flow: :meth:`add` takes one step of every env, as gymnasium returns it; :meth:`sample` returns
    ``{"observations": {key: (B, ...)}, "actions", "rewards", "next_observations": {key: ...},
    "terminateds", "truncateds", "relabelled"}`` (rewards and flags as float32, ``relabelled`` bool).
    The last ``int(share * B)`` entries are the relabelled ones.
    """

    def __init__(
        self,
        capacity: int,
        observation_space: spaces.Dict | Mapping[str, tuple[tuple[int, ...], Any]],
        action_space: spaces.Space | tuple[tuple[int, ...], Any],
        reward_fn: GoalFn | None,
        *,
        n_envs: int = 1,
        n_sampled_goal: int = 4,
        goal_selection_strategy: GoalSelectionStrategy | str = "future",
        copy_info_dict: bool = False,
        recompute_terminated: bool = False,
        terminated_fn: GoalFn | None = None,
        device: Any = None,
        seed: int | np.random.SeedSequence | np.random.Generator | None = None,
        borrow_arrays: bool = False,
        flush_every: int = 256,
    ) -> None:
        capacity = _positive_int("capacity", capacity)
        self.n_envs = _positive_int("n_envs", n_envs)
        self.n_sampled_goal = _positive_int("n_sampled_goal", n_sampled_goal, minimum=0)
        self.goal_selection_strategy = parse_strategy(goal_selection_strategy)
        # Same expression as stable-baselines3, so int(her_ratio * batch_size) agrees to the last bit.
        self.her_ratio = 1 - (1.0 / (self.n_sampled_goal + 1))
        if reward_fn is not None and not callable(reward_fn):
            raise TypeError(f"reward_fn must be callable, got {type(reward_fn).__name__}")
        if recompute_terminated and terminated_fn is None:
            raise ValueError(
                "recompute_terminated=True needs terminated_fn (the env's compute_terminated); "
                "pass it, or use HerStorage.from_env on an env that defines compute_terminated"
            )
        self.reward_fn = reward_fn
        self.terminated_fn = terminated_fn
        self.recompute_terminated = bool(recompute_terminated)
        self.copy_info_dict = bool(copy_info_dict)
        self.device = device
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

        self._obs_specs = _field_specs(observation_space)
        self._action_shape, self._action_dtype = _action_spec(action_space)
        # Record field names: "obs:<key>" for observation entries cannot collide with "meta:<name>".
        self._obs_names = {key: f"obs:{key}" for key in self._obs_specs}
        fields = {self._obs_names[key]: spec for key, spec in self._obs_specs.items()}
        fields[_ACTION] = (self._action_shape, self._action_dtype)
        fields[_REWARD] = ((), np.dtype(np.float32))
        fields[_TERMINATED] = ((), np.dtype(bool))
        fields[_TRUNCATED] = ((), np.dtype(bool))
        fields[_EPISODE] = ((), np.dtype(np.int64))
        self._record = _record_dtype(fields)
        self.steps_per_env = max(capacity // self.n_envs, 1)
        self.borrow_arrays = bool(borrow_arrays)
        # A block never covers a row twice, which keeps the bulk writes of flush() order-free.
        self._flush_at = min(_positive_int("flush_every", flush_every), self.steps_per_env)
        # Whether pickling keeps reward_fn / terminated_fn (adapters that re-resolve them say no).
        self._pickle_functions = True
        self._force_event_replay = False  # tests compare the vectorized block path with the replay
        self._allocate()

    @classmethod
    def from_env(cls, env: Any, capacity: int, **kwargs: Any) -> HerStorage:
        """Storage shaped for ``env`` (a gymnasium env or vector env, or a stable-baselines3 VecEnv).

        Takes the spaces and number of envs from ``env`` and its ``compute_reward`` (and
        ``compute_terminated`` when defined), resolved once to functions of this process (see
        :mod:`her.envfns`). Other keyword arguments go to the constructor.
        """
        from her.envfns import resolve_env_function, resolve_env_function_or_reason

        obs_space = getattr(env, "single_observation_space", None) or env.observation_space
        act_space = getattr(env, "single_action_space", None) or env.action_space
        n_envs = int(getattr(env, "num_envs", 1))
        reward_fn = kwargs.pop("reward_fn", None)
        if reward_fn is None:
            reward_fn, reason = resolve_env_function_or_reason(env, "compute_reward")
            if reward_fn is None:
                raise ValueError(
                    f"could not get compute_reward of {type(env).__name__} in this process ({reason}); "
                    "pass reward_fn="
                )
        if kwargs.get("terminated_fn") is None:
            kwargs["terminated_fn"] = resolve_env_function(env, "compute_terminated")
        kwargs.setdefault("n_envs", n_envs)
        return cls(capacity, obs_space, act_space, reward_fn, **kwargs)

    # ------------------------------------------------------------------ state
    def _allocate(self) -> None:
        n_rows = self.steps_per_env * self.n_envs
        # One record per row: observation entries, action, reward, flags and episode ordinal side by
        # side, so sampling a row touches one place in memory instead of one per array (with a
        # million rows, random gathers are bound by cache misses, not by the bytes copied).
        # np.zeros maps zero pages lazily: construction costs O(1), not O(capacity).
        # The ring is followed by a copy of its first row (kept by _mirror_first_row), so the row
        # after any row is the next record in memory, the ring's last row included: sampling reads
        # a row and its next row without wrapping their index (see _build_views).
        self._ring = np.zeros(n_rows + self.n_envs, self._record)
        # True on rows where some env's episode starts: only there can `add` overwrite a first row.
        self._starts = np.zeros(self.steps_per_env, bool)
        self._starts[0] = True
        self._infos = np.empty(n_rows, dtype=object) if self.copy_info_dict else None

        n = self.n_envs
        # Episodes are numbered per env from 1; a row's ordinal 0 means "never written".
        self._current = np.ones(n, np.int64)  # ordinal of each env's unfinished episode
        self._current_len = np.zeros(n, np.int64)  # rows it has written so far (at most steps_per_env)
        self._oldest = np.ones(n, np.int64)  # ordinal of the oldest complete episode still whole
        self._valid = np.zeros(n, np.int64)  # transitions of the complete, whole episodes
        self._damaged = np.zeros(n, bool)  # unfinished episode longer than the ring (lost its head)
        # The next observation of each env's latest step: needed if its episode is cut short there.
        self._pending = {key: np.zeros((n, *shape), dtype) for key, (shape, dtype) in self._obs_specs.items()}
        self._allocate_episode_table(_INITIAL_EPISODE_SLOTS)
        self._pos = 0  # row of the next flushed step
        self._full = False
        self._staged: list[tuple] = []  # added steps not yet written (see add / flush)
        self._refresh_window()

    def _allocate_episode_table(self, slots: int) -> None:
        self._slots = slots  # power of two: `ordinal & (slots - 1)` is `ordinal mod slots`
        size = self.n_envs * slots
        self._ep_start = np.zeros(size, np.int64)
        self._ep_len = np.zeros(size, np.int64)
        # Final observations, in the row record layout (only the observation fields are used), so
        # they patch a gathered batch of records directly.
        self._final_rows = np.zeros(size, self._record)
        self._build_views()

    _VIEWS = (
        "_rows",
        "_obs",
        "_ep_final",
        "_actions",
        "_rewards",
        "_terminated",
        "_truncated",
        "_episode",
        "_ring_bytes",
        "_pair_bytes",
        "_next_bytes",
        "_goal_bytes",
        "_final_bytes",
        "_final_goal_bytes",
    )

    def _build_views(self) -> None:
        """Per-field views into the records (rebuilt after unpickling and table growth)."""
        rows = self._rows = self._ring[: self.steps_per_env * self.n_envs]
        # numpy field access gives views, no copies
        self._obs = {key: rows[name] for key, name in self._obs_names.items()}
        self._actions = rows[_ACTION]
        self._rewards = rows[_REWARD]
        self._terminated = rows[_TERMINATED]
        self._truncated = rows[_TRUNCATED]
        self._episode = rows[_EPISODE]
        self._ep_final = {key: self._final_rows[name] for key, name in self._obs_names.items()}

        # Opaque byte views (numpy void items) for the sampling gathers: fancy indexing copies a void
        # item with one memcpy, where it copies a structured record field by field (~5x slower) and
        # the field views are strided 2-d arrays (~2x slower to gather from).
        record = self._record
        size = record.itemsize
        self._ring_bytes = self._ring.view(np.dtype((np.void, size)))
        # Of the next row only the observation is used: its record up to the end of the last
        # observation field (248 of 280 bytes for Fetch), which saves memory traffic in the gather.
        obs_fields = {name: record.fields[name][:2] for name in self._obs_names.values()}
        obs_end = max(offset + dtype.itemsize for dtype, offset in obs_fields.values())
        # Rounded up to 8 bytes as the record's size is, so gathered fields stay aligned (and their
        # strides multiples of their item sizes, which torch.from_numpy requires).
        obs_end = -(-obs_end // 8) * 8
        obs_bytes = np.dtype((np.void, obs_end))
        next_record = np.dtype(
            {
                "names": list(obs_fields),
                "formats": [dtype for dtype, _ in obs_fields.values()],
                "offsets": [offset for _, offset in obs_fields.values()],
                "itemsize": obs_end,
            }
        )
        # A gathered transition: its record, then its next row's observation, as records and as
        # bytes (which the final observation of an episode's last step overwrites).
        self._pair_record = np.dtype(
            {
                "names": ["row", "next", "next_bytes"],
                "formats": [record, next_record, obs_bytes],
                "offsets": [0, size, size],
                "itemsize": size + obs_end,
            }
        )
        self._next_bytes, self._final_bytes = (
            np.ndarray(len(table), obs_bytes, table, strides=(size,))
            for table in (self._ring, self._final_rows)
        )
        # With one env the next row's record follows the row's: item r of this overlapping view is
        # row r and the observation of row r + 1 (the ring's last row pairs with the mirror of row
        # 0), so one gather reads both, touching one run of memory per sampled transition. (With
        # more envs the next row is n records on, and copying the records between would cost more
        # than it saves.)
        self._pair_bytes: np.ndarray | None = None
        if self.n_envs == 1:
            self._pair_bytes = np.ndarray(
                len(self._rows), np.dtype((np.void, size + obs_end)), self._ring, strides=(size,)
            )
        goal_shape, goal_dtype = self._obs_specs["achieved_goal"]
        goal_offset = record.fields[self._obs_names["achieved_goal"]][1]
        goal_bytes = np.dtype((np.void, int(np.prod(goal_shape, dtype=np.int64)) * goal_dtype.itemsize))
        # Gathered goal bytes are viewed back as (B, *goal_shape) arrays of this dtype.
        self._goal_view = np.dtype((goal_dtype, goal_shape)) if goal_shape else goal_dtype
        self._goal_bytes, self._final_goal_bytes = (
            np.ndarray(len(table), goal_bytes, table, goal_offset, strides=(size,))
            for table in (self._ring, self._final_rows)
        )

    def _mirror_first_row(self) -> None:
        """Copy the ring's first row after its last (after every write that may touch row 0)."""
        n = self.n_envs
        self._ring_bytes[-n:] = self._ring_bytes[:n]

    def reset(self) -> None:
        """Forget every stored transition (keeps the generator's state)."""
        self._allocate()

    def __getstate__(self) -> dict[str, Any]:
        self.flush()  # staged steps may reference the caller's arrays: write them before pickling
        state = self.__dict__.copy()
        # Views would be pickled as copies of their data: keep only the records they view.
        for name in self._VIEWS:
            del state[name]
        if not self._pickle_functions:
            state["reward_fn"] = None
            state["terminated_fn"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "_ring" not in state:  # pickled before the ring had its mirror row
            rows = state.pop("_rows")
            ring = state["_ring"] = np.empty(len(rows) + state["n_envs"], state["_record"])
            ring[: len(rows)] = rows
            ring[len(rows) :] = rows[: state["n_envs"]]
        self.__dict__.update(state)
        self._build_views()

    @property
    def num_transitions(self) -> int:
        """Transitions currently held (complete episodes or not)."""
        return (self.steps_per_env if self.full else self.pos) * self.n_envs

    @property
    def num_sampleable(self) -> int:
        """Transitions that :meth:`sample` can return: those of complete episodes still whole."""
        self.flush()
        return self._total_valid

    @property
    def nbytes(self) -> int:
        """Bytes of all arrays the storage holds (info dicts, when kept, not included)."""
        self.flush()
        arrays = [self._ring, self._final_rows, self._starts, self._ep_start, self._ep_len]
        arrays += [self._current, self._current_len, self._oldest, self._valid, self._damaged]
        arrays += list(self._pending.values())
        if self._infos is not None:
            arrays.append(self._infos)
        return int(sum(a.nbytes for a in arrays))

    def rows(self, name: str) -> Any:
        """Stored ``name`` as read-only arrays of shape ``(steps_per_env, n_envs, ...)`` (see :mod:`her.rows`).

        ``name``: ``"observations"`` or ``"next_observations"`` (dicts of arrays), ``"actions"``,
        ``"rewards"``, ``"terminateds"``, ``"truncateds"``, ``"episode_starts"``, ``"episode_lengths"``,
        ``"infos"``. The layout of stable-baselines3's buffers; for inspection, not for training.
        """
        from her.rows import rows

        return rows(self, name)

    @property
    def current_episode_starts(self) -> np.ndarray:
        """Row where each env's unfinished episode started (``pos`` where none is under way)."""
        from her.rows import current_episode_starts

        return current_episode_starts(self)

    def episode_lengths(self) -> np.ndarray:
        """Lengths of the complete episodes that can be sampled, per env concatenated (for inspection)."""
        self.flush()
        lengths = []
        for env in range(self.n_envs):
            ordinals = np.arange(self._oldest[env], self._current[env])
            lengths.append(self._ep_len[env * self._slots + (ordinals & (self._slots - 1))])
        return np.concatenate(lengths) if lengths else np.zeros(0, np.int64)

    # ------------------------------------------------------------------ writing
    def add(
        self,
        observations: Mapping[str, np.ndarray],
        actions: np.ndarray,
        rewards: np.ndarray,
        terminateds: np.ndarray,
        truncateds: np.ndarray,
        infos: Any,
        next_observations: Mapping[str, np.ndarray],
    ) -> None:
        """Store one step of every env (leading axis ``n_envs`` on every argument).

        ``next_observations`` are the observations the step led to: for an env whose episode ended
        (``terminated or truncated``) its final observation, not the reset one. Within an episode,
        the next observation of a step is taken to be the observation passed with the following
        ``add`` (that is what is stored); the one passed here serves if the episode ends or is cut.
        A step both terminated and truncated counts as terminated.

        Steps are staged and written to the ring in blocks (one array operation per field for many
        steps; always before the next :meth:`sample`). Unless ``borrow_arrays`` is true, the arrays are
        copied here, so the caller may reuse them.
        """
        if not self.borrow_arrays:
            observations = {key: np.array(value) for key, value in observations.items()}
            next_observations = {key: np.array(value) for key, value in next_observations.items()}
            actions = np.array(actions)
            rewards = np.array(rewards)
            terminateds = np.array(terminateds)
            truncateds = np.array(truncateds)
        staged = self._staged
        staged.append((observations, actions, rewards, terminateds, truncateds, infos, next_observations))
        if len(staged) >= self._flush_at:
            self.flush()

    @property
    def pos(self) -> int:
        """Row the next added step goes to (counting staged steps)."""
        return (self._pos + len(self._staged)) % self.steps_per_env

    @property
    def full(self) -> bool:
        """Whether the ring has wrapped around at least once (counting staged steps)."""
        return self._full or self._pos + len(self._staged) >= self.steps_per_env

    def flush(self) -> None:
        """Write the staged steps to the ring (called by :meth:`sample` and when enough are staged)."""
        staged = self._staged
        if not staged:
            return
        self._staged = []
        n_steps, n, steps = len(staged), self.n_envs, self.steps_per_env
        pos = self._pos
        try:
            obs_blocks = {
                key: _stack([step[0][key] for step in staged], (n_steps * n, *shape))
                for key, (shape, _) in self._obs_specs.items()
            }
            action_block = _stack([step[1] for step in staged], (n_steps * n, *self._action_shape))
            reward_block = _stack([step[2] for step in staged], (n_steps * n,))
            terminated = _stack([step[3] for step in staged], (n_steps, n)).astype(bool, copy=False)
            truncated = _stack([step[4] for step in staged], (n_steps, n)).astype(bool, copy=False)
        except (ValueError, KeyError) as error:
            raise type(error)(
                f"add() expects arrays with a leading axis of n_envs={n}: observations and next_observations "
                f"as dicts with keys {list(self._obs)} of shapes {self._obs_specs}, actions of shape "
                f"{(n, *self._action_shape)}, rewards/terminateds/truncateds of shape ({n},) ({error})"
            ) from error
        truncated = truncated & ~terminated
        done = terminated | truncated
        rows = pos + np.arange(n_steps)
        if pos + n_steps > steps:
            rows %= steps
        if self._force_event_replay or self._damaged.any() or (self._current_len > steps - n_steps).any():
            # Some unfinished episode is so long that the block reaches its own first row: replay
            # the block step by step (rare: only when episodes are nearly as long as the ring).
            ordinals = self._replay_episode_events(staged, rows, done)
        else:
            ordinals = self._block_episode_events(staged, rows, done)

        # Bulk writes: the block covers distinct rows (n_steps <= steps), possibly wrapping once.
        head = min(n_steps, steps - pos) * n
        blocks = [(self._rewards, reward_block), (self._terminated, terminated.reshape(-1))]
        blocks += [(self._truncated, truncated.reshape(-1)), (self._episode, ordinals.reshape(-1))]
        blocks += [(self._actions, action_block)]
        blocks += [(self._obs[key], block) for key, block in obs_blocks.items()]
        for store, block in blocks:
            store[pos * n : pos * n + head] = block[:head]
            if head < len(block):
                store[: len(block) - head] = block[head:]
        if self._infos is not None:
            infos = [info for step in staged for info in _split_infos(step[5], n)]
            flat_rows = (rows[:, None] * n + np.arange(n)).reshape(-1)
            self._infos[flat_rows] = _object_array(infos)
        for key, pending in self._pending.items():
            pending[...] = np.reshape(staged[-1][6][key], pending.shape)
        self._full = self._full or pos + n_steps >= steps
        self._pos = (pos + n_steps) % steps
        self._mirror_first_row()
        self._refresh_window()

    def _block_episode_events(self, staged: list[tuple], rows: np.ndarray, done: np.ndarray) -> np.ndarray:
        """The episode bookkeeping of a staged block, vectorized; returns each step's episode ordinals.

        Valid when no unfinished episode reaches its own first row within the block. Then the
        block's effects separate cleanly: (1) it overwrites old episodes only, all of which are
        dropped (each live episode lies after ``pos`` in ring order, so if the block touches one of
        its rows it touches its first row too); (2) it closes the episodes whose ends it contains.
        """
        n_steps, n, steps, slots = len(rows), self.n_envs, self.steps_per_env, self._slots
        current_len0 = self._current_len
        current0 = self._current
        if self._starts[rows].any():
            old = self._episode.reshape(steps, n)[rows]  # the episodes being overwritten, (steps, envs)
            live = (old >= self._oldest) & (old < current0)
            if live.any():
                newest = np.where(live, old, -1).max(axis=0)
                envs = np.flatnonzero(newest >= 0)
                new_oldest = newest[envs] + 1
                # The dropped episodes are the head of the env's window: count rows up to the next start.
                next_start = self._ep_start[envs * slots + (new_oldest & (slots - 1))]
                dropped = np.where(
                    new_oldest < current0[envs],
                    (next_start - self._window_start[envs]) % steps,
                    self._valid[envs],
                )
                self._valid[envs] -= dropped
                self._oldest[envs] = new_oldest
        ends = np.cumsum(done, axis=0)
        ordinals = current0 + ends - done  # the ordinal of the episode each step belongs to
        starts = self._starts
        starts[rows] = False
        if (current_len0 == 0).any():
            starts[rows[0]] = True
        if not ends[-1].any():
            self._current_len = current_len0 + n_steps
            return ordinals
        # Every episode end in the block, env-major then in step order.
        end_env, end_step = np.nonzero(done.T)
        end_ordinal = ordinals[end_step, end_env]
        first = np.ones(len(end_env), bool)
        first[1:] = end_env[1:] != end_env[:-1]
        previous_end = np.empty_like(end_step)
        previous_end[1:] = end_step[:-1]
        lengths = np.where(first, end_step + 1 + current_len0[end_env], end_step - previous_end)
        while (end_ordinal - self._oldest[end_env] >= self._slots).any():
            self._grow_episode_table()
        slots = self._slots
        slot = end_env * slots + (end_ordinal & (slots - 1))
        end_rows = rows[end_step]
        self._ep_start[slot] = (end_rows + 1 - lengths) % steps
        self._ep_len[slot] = lengths
        pairs = list(zip(end_step.tolist(), end_env.tolist(), strict=True))
        for key, (shape, _) in self._obs_specs.items():
            self._ep_final[key][slot] = [np.reshape(staged[k][6][key], (n, *shape))[e] for k, e in pairs]
        self._valid += np.bincount(end_env, weights=lengths, minlength=n).astype(np.int64)
        n_ends = ends[-1]
        last_end = n_steps - 1 - np.argmax(done[::-1], axis=0)
        self._current = current0 + n_ends
        self._current_len = np.where(n_ends > 0, n_steps - 1 - last_end, current_len0 + n_steps)
        starts[(end_rows + 1) % steps] = True
        return ordinals

    def _replay_episode_events(self, staged: list[tuple], rows: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Apply, in step order, the episode bookkeeping of a staged block; return each step's ordinals.

        Only *event* steps need work: steps where an episode ends, and steps writing a row where
        some episode starts (which may overwrite an old episode's first row). Between events the
        per-env state just advances, so the loop runs about twice per episode, not once per step.
        """
        n_steps = len(rows)
        ordinals = np.empty((n_steps, self.n_envs), np.int64)
        done_any = done.any(axis=1)
        marked = self._starts[rows] | done_any
        marked[1:] |= done_any[:-1]  # the step after an episode's end starts a new one
        events = np.flatnonzero(marked).tolist()
        applied = 0  # steps whose effect on the current episodes has been applied
        i = 0
        while i < len(events):
            k = events[i]
            row = int(rows[k])
            if k > applied:
                ordinals[applied:k] = self._current
                self._current_len += k - applied
            if self._starts[row]:
                self._before_overwrite(row)
            ordinals[k] = self._current
            self._current_len += 1
            applied = k + 1
            if done_any[k]:
                envs = np.flatnonzero(done[k])
                finals = {
                    key: np.reshape(staged[k][6][key], (self.n_envs, *shape))[envs]
                    for key, (shape, _) in self._obs_specs.items()
                }
                self._end_episodes(envs, row, finals)
            # An episode may now start on the next row (an end, or a long episode losing its head).
            if (
                k + 1 < n_steps
                and self._starts[rows[k + 1]]
                and (i + 1 == len(events) or events[i + 1] != k + 1)
            ):
                events.insert(i + 1, k + 1)
            i += 1
        if applied < n_steps:
            ordinals[applied:] = self._current
            self._current_len += n_steps - applied
        return ordinals

    def _refresh_window(self) -> None:
        """Cache, per env, where its sampleable rows start and the cumulative window sizes."""
        slots = self._slots
        self._window_start = self._ep_start[np.arange(self.n_envs) * slots + (self._oldest & (slots - 1))]
        self._window_ends = np.cumsum(self._valid)
        self._total_valid = int(self._window_ends[-1])
        # Row of draw d: window_start[env] + (d - draws before env's window), mod steps_per_env.
        self._window_shift = self._window_start - (self._window_ends - self._valid)
        self._window_shift0 = int(self._window_shift[0])

    def _before_overwrite(self, pos: int) -> None:
        """Row ``pos`` is about to be written for every env: drop the episodes that start there."""
        ordinals = self._episode[pos * self.n_envs : (pos + 1) * self.n_envs]
        dropped = (ordinals >= self._oldest) & (ordinals < self._current)
        if dropped.any():
            envs = np.flatnonzero(dropped)
            slots = envs * self._slots + (ordinals[envs] & (self._slots - 1))
            self._valid[envs] -= self._ep_len[slots]
            self._oldest[envs] = ordinals[envs] + 1
        # An unfinished episode as long as the ring is now losing its first step: it is damaged (never
        # sampled, dropped when it ends); it goes on from the next row.
        own = ordinals == self._current
        if own.any():
            self._damaged |= own
            self._current_len[own] -= 1
            self._starts[(pos + 1) % self.steps_per_env] = True
        # Episodes (of any env) still starting here after this write: those that start with it.
        self._starts[pos] = bool((self._current_len == 0).any())

    def _end_episodes(self, envs: np.ndarray, last_row: int, finals: Mapping[str, np.ndarray]) -> None:
        """Close the unfinished episodes of ``envs`` whose last step is ``last_row``."""
        ordinals = self._current[envs]
        while (ordinals - self._oldest[envs] >= self._slots).any():
            self._grow_episode_table()
        slots = envs * self._slots + (ordinals & (self._slots - 1))
        lengths = self._current_len[envs]
        self._ep_start[slots] = (last_row + 1 - lengths) % self.steps_per_env
        self._ep_len[slots] = lengths
        for key, final in self._ep_final.items():
            final[slots] = finals[key]
        damaged = self._damaged[envs]
        self._valid[envs] += np.where(damaged, 0, lengths)
        if damaged.any():
            # It filled the whole ring, so it was the env's only episode: the window stays empty.
            self._oldest[envs[damaged]] = ordinals[damaged] + 1
            self._damaged[envs] = False
        self._current[envs] += 1
        self._current_len[envs] = 0
        self._starts[(last_row + 1) % self.steps_per_env] = True

    def _grow_episode_table(self) -> None:
        """Double the per-env episode slots, moving every live episode to ``ordinal mod 2E``."""
        old_slots = self._slots
        old_start, old_len, old_final = self._ep_start, self._ep_len, self._final_rows
        self._allocate_episode_table(old_slots * 2)
        ordinals = self._oldest[:, None] + np.arange(old_slots)[None, :]  # (n_envs, old_slots)
        live = ordinals < self._current[:, None]
        envs = np.broadcast_to(np.arange(self.n_envs)[:, None], ordinals.shape)[live]
        ordinals = ordinals[live]
        src = envs * old_slots + (ordinals & (old_slots - 1))
        dst = envs * self._slots + (ordinals & (self._slots - 1))
        self._ep_start[dst] = old_start[src]
        self._ep_len[dst] = old_len[src]
        self._final_rows[dst] = old_final[src]

    def end_episodes(self) -> np.ndarray:
        """Cut every env's unfinished episode at its latest stored step, marking that step truncated.

        Its next observation (passed with that step) becomes the episode's final observation, so the
        episode can be sampled and relabelled. Used after loading a buffer saved mid-episode when
        the next steps will not continue that episode. Returns the indices of the envs that were cut.
        """
        self.flush()
        envs = np.flatnonzero(self._current_len > 0)
        if envs.size:
            last_row = (self._pos - 1) % self.steps_per_env
            flat = last_row * self.n_envs + envs
            self._truncated[flat] = ~self._terminated[flat]
            self._end_episodes(envs, last_row, {key: pending[envs] for key, pending in self._pending.items()})
            self._mirror_first_row()
            self._refresh_window()
        return envs

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int) -> dict[str, Any]:
        """Sample ``batch_size`` transitions of complete episodes, the last ``int(share * B)`` relabelled.

        Returns numpy arrays, or torch tensors on ``device`` when one was given.
        """
        batch = self.sample_arrays(batch_size)
        if self.device is None:
            return batch
        return _to_torch(batch, self.device)

    def sample_arrays(self, batch_size: int) -> dict[str, Any]:
        """:meth:`sample`, always as numpy arrays."""
        batch_size = _positive_int("batch_size", batch_size)
        self.flush()
        n, steps = self.n_envs, self.steps_per_env
        total = self._total_valid
        if total == 0:
            raise RuntimeError(
                "Unable to sample before the end of the first episode. We recommend choosing a value "
                "for learning_starts that is greater than the maximum number of timesteps in the environment."
            )
        n_relabel = int(self.her_ratio * batch_size)
        # One call draws the uniforms of the transitions, then those of their goals (the same stream
        # as two calls; a final goal needs none).
        goal_draws = 0 if self.goal_selection_strategy is GoalSelectionStrategy.FINAL else n_relabel
        uniforms = self.rng.random(batch_size + goal_draws)
        # Uniform over all sampleable transitions, like stable-baselines3, without listing them:
        # a draw in [0, total) names an env (by cumulative window sizes) and an offset in its window.
        # (Scaled uniform floats: half the cost of Generator.integers; the clip covers u * total
        # rounding up to total, and the bias is below 2**-53.)
        draws = (uniforms[:batch_size] * total).astype(np.int64)
        np.minimum(draws, total - 1, out=draws)
        if n == 1:  # one env: flat index = row
            envs = None
            rows = draws
            rows += self._window_shift0
            rows %= steps
            flat = rows
            # Row and next row in one gather (see _build_views).
            pairs = self._pair_bytes[rows].view(self._pair_record)
            records, next_records, next_bytes = pairs["row"], pairs["next"], pairs["next_bytes"]
        else:
            envs = np.searchsorted(self._window_ends, draws, side="right")
            rows = self._window_shift[envs] + draws
            rows %= steps
            flat = rows * n + envs
            records = self._ring_bytes[flat].view(self._record)
            # The next row's record is n records on; the mirror row makes that true of the last row.
            next_bytes = self._next_bytes[flat + n]
            next_records = next_bytes.view(self._pair_record["next"])
        slot = records[_EPISODE] & (self._slots - 1)
        if envs is not None:
            slot += envs * self._slots
        step = rows - self._ep_start[slot]
        step %= steps  # the episode may wrap around the ring's end
        remaining = self._ep_len[slot] - step  # steps left in the episode, this one included

        # The next observation is the next row's, except after an episode's last step (kept apart).
        last = np.flatnonzero(remaining == 1)
        if last.size:
            next_bytes[last] = self._final_bytes[slot[last]]
        observations = {key: records[name] for key, name in self._obs_names.items()}
        next_observations = {key: next_records[name] for key, name in self._obs_names.items()}
        rewards = records[_REWARD]
        terminated = records[_TERMINATED].astype(np.float32)
        truncated = records[_TRUNCATED].astype(np.float32)
        relabelled = np.zeros(batch_size, bool)
        if n_relabel:
            v = slice(batch_size - n_relabel, batch_size)
            relabelled[v] = True
            goals = self._sample_goals(
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
            infos = self._infos[flat[v]] if self._infos is not None else None
            if self.reward_fn is None:
                raise RuntimeError(
                    "this HerStorage has no reward_fn; set storage.reward_fn = env.compute_reward "
                    "(or use HerStorage.from_env) before sampling relabelled transitions"
                )
            # r_t depends on the state s_{t+1} the action led to, so the reward of the relabelled
            # transition compares the *next* achieved goal with the new goal.
            achieved = next_observations["achieved_goal"][v]
            new_rewards = np.asarray(self.reward_fn(achieved, goals, infos), dtype=np.float32)
            rewards[v] = new_rewards.reshape(n_relabel)
            if self.recompute_terminated:
                assert self.terminated_fn is not None  # checked in __init__
                flags = np.asarray(self.terminated_fn(achieved, goals, infos), dtype=np.float32)
                terminated[v] = flags.reshape(n_relabel)
        return {
            "observations": observations,
            "actions": records[_ACTION],
            "rewards": rewards,
            "next_observations": next_observations,
            "terminateds": terminated,
            "truncateds": truncated,
            "relabelled": relabelled,
        }

    def _sample_goals(
        self,
        envs: np.ndarray | None,
        rows: np.ndarray,
        slot: np.ndarray,
        step: np.ndarray,
        remaining: np.ndarray,
        uniforms: np.ndarray,
    ) -> np.ndarray:
        """New goals: the next achieved goal of a step of the same episode chosen by the strategy."""
        if self.goal_selection_strategy is GoalSelectionStrategy.FINAL:
            # Always the episode's last step, whose next achieved goal is its final observation's.
            return self._final_goal_bytes[slot].view(self._goal_view)
        delta = goal_step_offsets(self.goal_selection_strategy, step, remaining, uniforms)
        # The next achieved goal of step t + delta is the achieved goal of the row after it (row
        # + delta + 1, wrapping around the ring's end), or, for the episode's last step (delta ==
        # remaining - 1), the final observation's (kept in the episode table).
        goal_rows = rows + delta
        goal_rows += 1
        goal_rows %= self.steps_per_env
        if envs is not None:
            goal_rows *= self.n_envs
            goal_rows += envs
        goals = self._goal_bytes[goal_rows]
        last = np.flatnonzero(delta == remaining - 1)
        if last.size:
            goals[last] = self._final_goal_bytes[slot[last]]
        return goals.view(self._goal_view)


_ACTION, _REWARD, _TERMINATED, _TRUNCATED, _EPISODE = (
    "meta:action",
    "meta:reward",
    "meta:terminated",
    "meta:truncated",
    "meta:episode",
)


def _record_dtype(fields: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> np.dtype:
    """The structured dtype of one row record, every field aligned to its item size.

    Fields are placed by decreasing item size, so none needs padding; the record is padded to a
    multiple of 8 bytes, which keeps every field aligned in every row of an array of records.
    """
    names, formats, offsets = [], [], []
    offset = 0
    for name, (shape, dtype) in sorted(fields.items(), key=lambda item: -item[1][1].itemsize):
        names.append(name)
        formats.append((dtype, shape) if shape else dtype)
        offsets.append(offset)
        offset += int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    itemsize = max(-(-offset // 8) * 8, 8)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize})


def _stack(items: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    """The staged values of one field as one array of ``shape`` (steps x envs flattened as asked)."""
    first = items[0]
    try:
        if type(first) is np.ndarray and first.ndim:
            # One C call for the whole block (np.stack would expand every item in Python first).
            block = first if len(items) == 1 else np.concatenate(items)
        else:  # Python scalars / sequences, e.g. the one-env flags of the stable-baselines3 adapter
            block = np.array(items)
        return block.reshape(shape)
    except ValueError:  # items of mixed kinds or shapes: flatten each, then check the total size
        return np.concatenate([np.asarray(item).reshape(-1) for item in items]).reshape(shape)


def _object_array(items: list[Any]) -> np.ndarray:
    """A 1-d object array of ``items`` (``np.array`` would try to nest sequences)."""
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def _to_torch(batch: dict[str, Any], device: Any) -> dict[str, Any]:
    import torch

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: convert(item) for key, item in value.items()}
        return torch.as_tensor(value, device=device)

    return {key: convert(value) for key, value in batch.items()}
