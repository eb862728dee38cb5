"""Episode-aware ring storage for Hindsight Experience Replay, free of any RL framework.

Layout (stable-baselines3's lockstep layout, so ``capacity`` means the same thing): a ring of
``T = capacity // n_envs`` rows, each row one step of every env. A row of an env is one record of
a structured dtype (observation entries, action, reward, flags, episode id side by side): sampling
gathers whole records through an opaque byte view, one memcpy per record, where separate arrays
would cost one cache miss each per sampled row.

Each observation is stored **once**: within an episode the next observation of step ``t`` is the
observation of step ``t + 1``, the next row's (a copy of row 0 after the last row, made by each
sample, makes that true of the last row too). The next observation of an episode's last step (its
final observation) is kept in a table of episodes, with the episode's first row and length. For
50-step episodes this halves the memory of storing ``obs`` and ``next_obs`` side by side.

Which transitions can be sampled: those of the complete episodes still whole in the ring. Rows are
written in order, so per env they form one (circular) window of rows, from the first row of the
oldest whole episode to the row before the unfinished episode. An episode leaves the window as a
whole when the ring overwrites its first row. Sampling is then O(batch): a uniform draw over all
windows names an env and a row; the row's episode id gives its bounds in the episode table.

Episodes get their id when they end (ids count episode ends, so ids grow with time): the table
is a ring of ``F`` entries, entry ``id % F``, doubled whenever an entry still in use would be
overwritten (short episodes never evict long-lived ones).
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Callable, Mapping
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
from gymnasium import spaces

from her._checks import check_array, check_int, check_keys, env_infos
from her.strategies import GoalSelectionStrategy, goal_step_offsets, parse_strategy

__all__ = ["GoalFn", "HerStorage", "available_memory"]

#: ``fn(achieved_goal, desired_goal, infos) -> array of shape (B,)``, as ``GoalEnv.compute_reward``.
GoalFn = Callable[[np.ndarray, np.ndarray, Any], Any]

Spec = tuple[tuple[int, ...], np.dtype]
GOAL_KEYS = ("achieved_goal", "desired_goal")
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
_SIGNATURE = attrgetter("shape", "dtype")
_INITIAL_EPISODES = 16


class HerStorage:
    """Replay storage with hindsight relabelling for any training loop (numpy in, numpy or torch out).

    Args:
        capacity: number of transitions kept (``capacity // n_envs`` steps per environment).
        observation_space: the goal env's ``spaces.Dict`` (or ``{key: (shape, dtype)}``); it must hold
            ``achieved_goal`` and ``desired_goal`` of the same shape and dtype.
        action_space: the action space (or a ``(shape, dtype)`` pair).
        reward_fn: ``reward_fn(achieved_goal, desired_goal, infos)`` returning rewards of shape ``(B,)``,
            usually the env's ``compute_reward`` (see :meth:`from_env`). ``infos``: with
            ``info_keys``, a dict ``{key: (B, ...) array}`` of the stored info columns; else with
            ``copy_info_dict`` the object array of the stored info dicts; else ``None``. It may be
            ``None`` here and given later with :meth:`set_functions`, before sampling relabels.
        n_envs: number of environments adding one transition each per step.
        n_sampled_goal: ``k`` relabelled transitions per real one: a share ``1 - 1/(k+1)`` of each
            batch is relabelled (the exact count of stable-baselines3: ``int(share * batch_size)``).
        goal_selection_strategy: ``"future"`` (inclusive of the current step), ``"final"``, ``"episode"``,
            a :class:`~her.strategies.GoalSelectionStrategy`, or a name given to
            :func:`~her.strategies.register_strategy`.
        info_keys: the info entries the reward reads (the env's ``reward_info_keys``; :meth:`from_env`
            reads them): a sequence of keys, whose shapes and dtypes come from the first infos added,
            or ``{key: (shape, dtype)}``. Stored as columns, cheap; every added info must hold them.
        copy_info_dict: keep each transition's whole info dict and pass them to ``reward_fn`` (slow;
            for envs whose reward reads the info without declaring ``reward_info_keys``).
        recompute_terminated: for relabelled transitions, replace the stored ``terminated`` by
            ``terminated_fn(next_achieved_goal, new_goal, infos)`` (stable-baselines3 keeps the
            stored flag, its issue #627). Off by default for parity.
        terminated_fn: the env's ``compute_terminated``; required with ``recompute_terminated`` when
            ``reward_fn`` is given (otherwise both come later, through :meth:`set_functions`).
        device: ``None`` to sample numpy arrays, or a torch device (``"cpu"``, ``"cuda"``, ...) to sample
            torch tensors there (torch is imported only then).
        seed: seed of the storage's own ``np.random.Generator`` (an int, a ``SeedSequence``, a
            ``Generator``, or ``None`` for fresh entropy). NumPy's global random state is never used.
        pickle_functions: whether pickling keeps ``reward_fn`` and ``terminated_fn``; ``False``
            pickles them as ``None`` (give them again after loading, with :meth:`set_functions`).
        check_finite: refuse float observations, actions and rewards that are NaN or infinite.

    Writing: :meth:`add` stores one step of every env, :meth:`extend` a block of steps (whole
    episodes, a dataset); both copy what they store. A step or block whose arrays do not match the
    spaces (shape, dtype kind, keys) is refused with a one-line error before anything is stored.

    :meth:`sample` returns a finished batch: ``{"observations": {key: (B, ...)}, "actions",
    "rewards", "next_observations": {key: ...}, "terminateds", "truncateds", "relabelled"}`` (rewards
    and flags float32, ``relabelled`` bool); the last ``int(share * B)`` entries are relabelled: new
    desired goal in both observations, reward (and with ``recompute_terminated`` the flag) recomputed.
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
        info_keys: Any = None,
        copy_info_dict: bool = False,
        recompute_terminated: bool = False,
        terminated_fn: GoalFn | None = None,
        device: Any = None,
        seed: int | np.random.SeedSequence | np.random.Generator | None = None,
        pickle_functions: bool = True,
        check_finite: bool = True,
    ) -> None:
        capacity = check_int("capacity", capacity, 1)
        self.n_envs = check_int("n_envs", n_envs, 1)
        self.n_sampled_goal = check_int("n_sampled_goal", n_sampled_goal, 0)
        self.goal_selection_strategy = parse_strategy(goal_selection_strategy)
        # Same expression as stable-baselines3, so int(her_ratio * batch_size) agrees to the last bit.
        self.her_ratio = 1 - (1.0 / (self.n_sampled_goal + 1))
        self.recompute_terminated = bool(recompute_terminated)
        self.reward_fn: GoalFn | None = None
        self.terminated_fn: GoalFn | None = None
        self.set_functions(reward_fn, terminated_fn)
        self.pickle_functions = bool(pickle_functions)
        self.copy_info_dict = bool(copy_info_dict)
        self.info_specs: dict[str, Spec] | None = None  # the info columns' specs, once known
        self.info_keys: tuple[str, ...] = ()
        if isinstance(info_keys, Mapping):
            self.info_specs = {
                key: (tuple(shape), np.dtype(dtype)) for key, (shape, dtype) in info_keys.items()
            }
            self.info_keys = tuple(self.info_specs)
        elif info_keys is not None:
            self.info_keys = tuple(info_keys)
        self.device = device
        self.check_finite = bool(check_finite)
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.obs_specs = field_specs(observation_space)
        self.action_spec = action_spec(action_space)
        self.obs_names = {key: f"obs:{key}" for key in self.obs_specs}
        fields = {self.obs_names[key]: spec for key, spec in self.obs_specs.items()}
        fields["action"] = self.action_spec
        fields["reward"] = ((), np.dtype(np.float32))
        fields["terminated"] = fields["truncated"] = ((), np.dtype(bool))
        fields["episode"] = ((), np.dtype(np.int64))  # the id of the row's episode, once it ended
        self.record = record_dtype(fields, last="episode")
        self._keys = tuple(self.obs_specs)
        self._getters()
        self._fields = (*self.obs_names.values(), "action", "reward", "terminated", "truncated")
        self.steps_per_env = max(capacity // self.n_envs, 1)
        self._warn_if_beyond_memory()
        self._allocate()

    @classmethod
    def from_env(cls, env: Any, capacity: int, **kwargs: Any) -> HerStorage:
        """Storage shaped for ``env`` (a gymnasium env or vector env, or a stable-baselines3 VecEnv).

        Takes the spaces and number of envs from ``env``, its ``compute_reward`` (and
        ``compute_terminated`` when defined), resolved once to functions of this process, and its
        ``reward_info_keys`` (see :mod:`her.envfns`). Other keyword arguments go to the constructor.
        """
        from her.envfns import resolve_env_attribute, resolve_env_function, resolve_env_function_or_reason

        obs_space = getattr(env, "single_observation_space", None) or env.observation_space
        act_space = getattr(env, "single_action_space", None) or env.action_space
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
        if kwargs.get("info_keys") is None and not kwargs.get("copy_info_dict"):
            kwargs["info_keys"] = resolve_env_attribute(env, "reward_info_keys") or None
        kwargs.setdefault("n_envs", int(getattr(env, "num_envs", 1)))
        return cls(capacity, obs_space, act_space, reward_fn, **kwargs)

    def set_functions(self, reward_fn: GoalFn | None, terminated_fn: GoalFn | None = None) -> None:
        """Set the functions relabelling calls (attributes ``reward_fn`` and ``terminated_fn``)."""
        for name, function in (("reward_fn", reward_fn), ("terminated_fn", terminated_fn)):
            if function is not None and not callable(function):
                raise TypeError(f"{name} must be callable, got {type(function).__name__}")
        if self.recompute_terminated and reward_fn is not None and terminated_fn is None:
            raise ValueError(
                "recompute_terminated=True needs terminated_fn (the env's compute_terminated); "
                "pass it, or use HerStorage.from_env on an env that defines compute_terminated"
            )
        self.reward_fn = reward_fn
        self.terminated_fn = terminated_fn

    def check_spaces(self, observation_space: Any, action_space: Any, n_envs: int | None = None) -> None:
        """Raise ``ValueError`` unless this storage holds steps of these spaces (and ``n_envs`` envs).

        For a storage loaded from a file before it is used with an env: the spaces must give the
        shapes and dtypes it was built for (bounds do not matter).
        """
        stored = (self.obs_specs, self.action_spec)
        given = (field_specs(observation_space), action_spec(action_space))
        if given != stored:
            raise ValueError(
                f"this HerStorage holds steps of observation_space {_specs_text(stored[0])} and action_space "
                f"{_spec_text(stored[1])}, not of the observation_space {_specs_text(given[0])} and "
                f"action_space {_spec_text(given[1])} given; build a new storage for these spaces"
            )
        if n_envs is not None and n_envs != self.n_envs:
            raise ValueError(
                f"this HerStorage holds steps of n_envs={self.n_envs} envs, not of the n_envs={n_envs} given; "
                "build a new storage for this number of envs"
            )

    # ------------------------------------------------------------------ state
    def planned_nbytes(self) -> int:
        """Bytes of the arrays the storage allocates (all of :attr:`nbytes`), known before allocating."""
        rows = self.steps_per_env * self.n_envs
        infos = rows * np.dtype(object).itemsize if self.copy_info_dict else 0
        episodes = _INITIAL_EPISODES * (self.record.itemsize + 3 * 8)
        return (
            rows * self.record.itemsize + infos + episodes + self.n_envs * (2 * self.record.itemsize + 4 * 8)
        )

    def _sizes_text(self) -> str:
        steps, n, needed = self.steps_per_env, self.n_envs, self.planned_nbytes()
        return (
            f"HerStorage(capacity={steps * n}) (stable-baselines3's buffer_size; {steps} steps per env x "
            f"n_envs={n}) needs {needed:,} bytes ({needed / 2**30:,.1f} GiB)"
        )

    def _warn_if_beyond_memory(self) -> None:
        needed, available = self.planned_nbytes(), available_memory()
        if available is not None and needed > available:
            info = ", not counting the info dicts" if self.copy_info_dict else ""
            warnings.warn(
                f"{self._sizes_text()}{info}, more than the {available:,} bytes ({available / 2**30:,.1f} "
                "GiB) of memory available: it may exhaust memory as it fills; lower capacity",
                UserWarning,
                stacklevel=3,
            )

    def _allocate(self) -> None:
        T, n = self.steps_per_env, self.n_envs
        try:
            # np.zeros maps zero pages lazily: construction costs O(1), not O(capacity).
            # T rows, then a copy of row 0 (made by sample): a row's next row is n records on.
            self._ring = np.zeros((T + 1) * n, self.record)
            self._infos = np.empty(T * n, dtype=object) if self.copy_info_dict else None
        except (MemoryError, ValueError):
            # numpy's own message names an array shape, not the argument to change.
            raise MemoryError(f"{self._sizes_text()}, which could not be allocated; lower capacity") from None
        self._info_columns: dict[str, np.ndarray] | None = None
        if self.info_specs is not None:
            self._info_columns = {k: np.zeros((T * n, *s), d) for k, (s, d) in self.info_specs.items()}
        self.pos = 0  # row of the next write
        self.full = False  # whether the ring has wrapped around at least once
        self._n_ended = 0  # episodes ended so far: the next episode id
        # The episode table, entry id % len: first row, length, env, final observation (a record).
        self._ep_start = np.zeros(_INITIAL_EPISODES, np.int64)
        self._ep_length = np.zeros(_INITIAL_EPISODES, np.int64)
        self._ep_env = np.zeros(_INITIAL_EPISODES, np.int64)
        self._finals = np.zeros(_INITIAL_EPISODES, self.record)
        # Per env: the sampleable window (first row, rows), the step count at which the unfinished
        # episode began (its length is `_steps - _begin`, beyond T when it outgrew the ring), the
        # longest outgrown episode, and the next observation of the latest step (the final
        # observation if the episode is cut there). Counts, not lengths: an add updates no array.
        self._window_start = np.zeros(n, np.int64)
        self._valid = np.zeros(n, np.int64)
        self._steps = 0  # steps written per env
        self._begin = np.zeros(n, np.int64)
        self._earliest = 0  # min(_begin)
        self._outgrown = np.zeros(n, np.int64)
        self._pending = np.zeros(n, self.record)
        self._quiet = 0  # steps ahead that need no more than a write (see _set_quiet)
        self._set_quiet()
        self._views()

    def _views(self) -> None:
        # Views made once (not pickled: a view pickles as a copy): making one per field per add cost
        # ~0.3 us, 3 us of a one-step add; the record and goal views, 3 us of a sample(256).
        # The step signatures add() has accepted, apart by whether the flags are Python bools (one env):
        # lists, not sets (hashing dtypes costs 0.2 us), and apart (a signature compared with one of
        # the other length is compared item by item first: 0.25 us).
        self._accepted: dict[bool, list[tuple[Any, ...]]] = {False: [], True: []}
        T, n, size = self.steps_per_env, self.n_envs, self.record.itemsize
        self._rows = self._ring[: T * n]
        self._row_fields = {name: self._rows[name] for name in (*self._fields, "episode")}
        self._episode_ids = self._grid("episode")  # (T, n_envs): each row's episode id
        self._pending_views = tuple(self._pending[field] for field in self.obs_names.values())
        self._raw = self._ring.view((np.void, size))  # whole records: a gather is one memcpy each
        # One env: a row and the next as one item, gathered in one copy (~2 us less a sample(256)).
        self._pairs: np.ndarray | None = None
        if n == 1:
            names, formats = ["row", "next", "next_bytes"], [self.record, self.record, self._raw.dtype]
            # Viewed after the gather: a gather of structured items copies them field by field (4x slower).
            self._pair = np.dtype({"names": names, "formats": formats, "offsets": [0, size, size]})
            self._pairs = np.ndarray(T, np.dtype((np.void, 2 * size)), self._ring, 0, (size,))
        # The achieved goals as opaque bytes: numpy copies a strided field item by item (measured:
        # 2048 goals at 1M, 110 us as a field, 50 us as bytes).
        shape, dtype = self.obs_specs["achieved_goal"]
        goal = np.dtype((np.void, dtype.itemsize * int(np.prod(shape, dtype=np.int64))))
        self._goal_offset = self.record.fields["obs:achieved_goal"][1]  # type: ignore[index]  # structured
        self._goal_raw = np.ndarray(len(self._ring), goal, self._ring, self._goal_offset, (size,))
        self._table_views()
        # One env's step as one record: built by one tuple assignment into a scratch record, its float
        # values checked by one dot product per run of same-dtype float fields, copied into the ring
        # whole. Measured (Fetch shapes, stable-baselines3's adapter): add 11.3 -> ~7 us; a dot
        # product per array and a write per field cost 3 and 3.5 us of the 11.
        self._scratch: np.ndarray | None = None
        floats = self._float_runs()
        if self.n_envs == 1 and floats is not None:
            # Without the episode id (the record's last field): the copy leaves the row's id as it is.
            head = np.dtype((np.void, self.record.fields["episode"][1]))  # type: ignore[index]  # structured
            self._scratch = np.zeros(1, self.record[list(self._fields)])
            self._scratch_raw = np.ndarray(1, head, self._scratch)
            self._head_raw = np.ndarray(T * n, head, self._ring, 0, (size,))
            self._scratch_finite = _finite_check(
                [np.ndarray(k, dt, self._scratch, off) for off, k, dt in floats]
            )
            order = self._scratch.dtype.names or ()
            self._in_record_order = itemgetter(*(self._fields.index(name) for name in order))
        # Whether add's quiet steps take the one-record path (one env, no infos kept).
        self._record_path = self._scratch is not None and self._infos is None and not self.info_keys

    def _table_views(self) -> None:
        # The final observations as whole records and their achieved goals as bytes (see _views).
        self._finals_raw = self._finals.view(self._raw.dtype)
        goal, offset = self._goal_raw.dtype, self._goal_offset
        self._finals_goal = np.ndarray(len(self._finals), goal, self._finals, offset, self._finals.strides)
        self._finals_views = tuple(self._finals[field] for field in self.obs_names.values())

    def _float_runs(self) -> list[tuple[int, int, np.dtype]] | None:
        """The record's float fields as runs of one dtype, ``(offset, count, dtype)``; None if a field
        is complex (the one-record path then stays off)."""
        runs: list[tuple[int, int, np.dtype]] = []
        fields = self.record.fields
        assert fields is not None  # a structured dtype
        for name in sorted(fields, key=lambda k: fields[k][1]):
            sub, offset = fields[name][:2]
            base, count = sub.base, int(np.prod(sub.shape, dtype=np.int64))
            if base.kind == "c":
                return None
            if base.kind != "f":
                continue
            if runs and runs[-1][2] == base and runs[-1][0] + runs[-1][1] * base.itemsize == offset:
                runs[-1] = (runs[-1][0], runs[-1][1] + count, base)
            else:
                runs.append((offset, count, base))
        return runs

    def reset(self) -> None:
        """Forget every stored transition (keeps the generator's state)."""
        self._allocate()

    def _getters(self) -> None:
        # The observations of a dict (all, the float ones) as a tuple, in one C call: add()'s fast path.
        float_keys = [key for key, (_, dtype) in self.obs_specs.items() if dtype.kind in "fc"]
        self._values = _tuple_getter(list(self.obs_specs))
        self._float_values = _tuple_getter(float_keys)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._getters()
        self._views()

    def __getstate__(self) -> dict[str, Any]:
        # Views and getters are made again on loading (a view pickles as a copy).
        state = {key: value for key, value in self.__dict__.items() if key not in _MADE_ON_LOAD}
        if not self.pickle_functions:
            state["reward_fn"] = state["terminated_fn"] = None
        return state

    @property
    def num_transitions(self) -> int:
        """Transitions currently held (complete episodes or not)."""
        return (self.steps_per_env if self.full else self.pos) * self.n_envs

    @property
    def num_sampleable(self) -> int:
        """Transitions that :meth:`sample` can return: those of complete episodes still whole."""
        return int(self._valid.sum())

    @property
    def nbytes(self) -> int:
        """Bytes of all arrays the storage holds (info dicts, when kept, not included)."""
        arrays = [self._ring, self._ep_start, self._ep_length, self._ep_env, self._finals, self._pending]
        arrays += [self._window_start, self._valid, self._begin, self._outgrown]
        arrays += [] if self._infos is None else [self._infos]
        arrays += [] if self._info_columns is None else list(self._info_columns.values())
        return sum(a.nbytes for a in arrays)

    @property
    def current_episode_lengths(self) -> np.ndarray:
        """``(n_envs,)``: steps stored of each env's unfinished episode (0 where none is under way)."""
        return _readonly(np.minimum(self._steps - self._begin, self.steps_per_env))

    @property
    def current_episode_starts(self) -> np.ndarray:
        """``(n_envs,)``: row where each env's unfinished episode started (``pos`` where none is under way)."""
        return _readonly((self.pos - self.current_episode_lengths) % self.steps_per_env)

    def _grid(self, name: str) -> np.ndarray:
        """Record field ``name`` as a ``(T, n_envs, ...)`` view."""
        return self._rows[name].reshape(self.steps_per_env, self.n_envs, *self._rows.dtype[name].shape)

    def _episodes(self, env: int) -> list[tuple[int, int]]:
        """(first row, id) of env's sampleable episodes, oldest first."""
        out, row, left = [], int(self._window_start[env]), int(self._valid[env])
        ids = self._episode_ids[:, env]
        while left > 0:
            episode = int(ids[row])
            out.append((row, episode))
            length = int(self._ep_length[episode % len(self._ep_length)])
            row, left = (row + length) % self.steps_per_env, left - length
        return out

    def episode_lengths(self) -> np.ndarray:
        """Lengths of the complete episodes that can be sampled, per env concatenated (for inspection)."""
        size = len(self._ep_length)
        ids = [episode for env in range(self.n_envs) for _, episode in self._episodes(env)]
        return self._ep_length[np.array(ids, np.int64) % size]

    def rows(self, name: str) -> Any:
        """Stored ``name`` as read-only arrays of shape ``(steps_per_env, n_envs, ...)``, for inspection.

        stable-baselines3's layout (row ``pos - 1`` is the latest step): ``"observations"`` (views),
        ``"next_observations"`` (assembled, a copy: the next row's observation within an episode, the
        kept final observation after an episode's end, the pending one after the latest step, zeros
        where unknown), ``"actions"``, ``"rewards"``, ``"terminateds"``, ``"truncateds"`` (views),
        ``"episode_starts"`` (each row's episode's first row, 0 where unknown), ``"episode_lengths"``
        (its length where it can be sampled, else 0), ``"infos"`` (the kept info dicts, else ``{}``).
        """
        if name not in ROW_NAMES:
            raise ValueError(f"name must be one of {list(ROW_NAMES)}, got {name!r}")
        T, n = self.steps_per_env, self.n_envs
        if name == "observations":
            return {key: _readonly(self._grid(field)) for key, field in self.obs_names.items()}
        single = {
            "actions": "action",
            "rewards": "reward",
            "terminateds": "terminated",
            "truncateds": "truncated",
        }
        if name in single:
            return _readonly(self._grid(single[name]))
        if name == "infos":
            kept = self._infos
            infos = np.empty(T * n, dtype=object)
            for i in range(T * n):
                infos[i] = {} if kept is None or kept[i] is None else kept[i]
            return _readonly(infos.reshape(T, n))
        row = np.arange(T)[:, None]
        written = row < (T if self.full else self.pos)
        current_len, current_start = self.current_episode_lengths, self.current_episode_starts
        current = written & ((row - current_start) % T < current_len)
        # Other written rows belong to ended episodes, known while the table holds their entry.
        ids = self._episode_ids
        slot = ids % len(self._ep_length)
        start, length = self._ep_start[slot], self._ep_length[slot]
        offset = (row - start) % T
        known = written & ~current & (ids >= self._n_ended - len(self._ep_length)) & (ids < self._n_ended)
        known &= (self._ep_env[slot] == np.arange(n)) & (offset < length)
        if name == "episode_starts":
            return _readonly(np.where(current, current_start, np.where(known, start, 0)))
        if name == "episode_lengths":
            return _readonly(np.where(known & ((row - self._window_start) % T < self._valid), length, 0))
        # Within an episode the next observation is the next row's; after its end, the kept final
        # observation; after the latest step of an unfinished one, the pending one; else zeros.
        last, pending = (
            known & (offset == length - 1),
            current & ((row - current_start) % T == current_len - 1),
        )
        following = written & ~last & ~pending & (current | known) & ~((row + 1) % T == self.pos)
        out = {}
        for key, field in self.obs_names.items():
            values = np.zeros_like(self._grid(field))
            values[following] = np.roll(self._grid(field), -1, axis=0)[following]
            values[last] = self._finals[field][slot[last]]
            values[pending] = np.broadcast_to(self._pending[field], values.shape)[pending]
            out[key] = _readonly(values)
        return out

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
        (``terminated or truncated``) its final observation, not the reset one. Within an episode the
        next observation of a step is the observation passed with the following step (that is what
        is stored); the one passed here serves if the episode ends or is cut. A step both terminated
        and truncated counts as terminated. ``infos``: None, a list of per-env dicts, or gymnasium's
        dict of arrays (kept with ``info_keys`` or ``copy_info_dict``).

        Every array is checked first (shape ``(n_envs, *shape)`` give or take axes of length 1, a dtype
        that casts to the stored one without changing what the values mean, the observation keys,
        finite values with ``check_finite``): a bad one raises ``ValueError`` or ``TypeError`` naming
        it, and nothing of the step is stored.
        """
        obs, nxt, term, trunc = observations, next_observations, terminateds, truncateds
        # The fast path, for a step of the shapes and dtypes of one already accepted (every step but
        # the first, usually): the full checks cost several times the write itself.
        try:
            o, x = self._values(obs), self._values(nxt)
            # One env's flags may be Python bools (stable-baselines3's adapter gives them so).
            bools = type(term) is bool and type(trunc) is bool
            arrays = (*o, *x, actions, rewards) if bools else (*o, *x, actions, rewards, term, trunc)
            known = (
                type(obs) is dict
                and type(nxt) is dict
                and len(obs) == len(nxt) == len(self._keys)
                and tuple(map(_SIGNATURE, arrays)) in self._accepted[bools]
            )
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):  # not dicts of arrays
            known = False
        if not known:  # the full checks, which explain what is wrong
            self._store(obs, actions, rewards, term, trunc, infos, nxt, None)
            return
        trunc_stored: Any
        done: Any
        if bools:
            ended = done = term or trunc
            trunc_stored = trunc and not term
        else:
            done, trunc_stored = term | trunc, trunc & ~term
            ended = done.any()
        scratch = self._scratch
        if scratch is not None:  # one env: the step as one record (see _views)
            p = self.pos
            t, u = (term, trunc_stored) if bools else (term[0], trunc_stored[0])
            scratch[0] = self._in_record_order((*map(_first, (*o, actions, rewards)), t, u))
            if self.check_finite and not (
                self._scratch_finite()
                and (not ended or all(math.isfinite(abs(np.vdot(a, a))) for a in self._float_values(nxt)))
            ):
                self._store(obs, actions, rewards, term, trunc, infos, nxt, None)  # raises, naming it
                return
            if self._quiet > 0 and self._record_path:
                # A quiet step (see _set_quiet), written here: _write's general path costs ~1 us more
                # (~20 us more for an episode's last step).
                self._head_raw[p] = self._scratch_raw[0]
                for view, value in zip(self._pending_views, x, strict=True):
                    view[...] = value
                self.pos, self._steps, self._quiet = p + 1, self._steps + 1, self._quiet - 1
                if ended:
                    length = self._steps - int(self._begin[0])
                    self._begin[0] = self._earliest = self._steps
                    self._book_end(0, p, length, list(map(_first, x)))
                    if self._quiet < 1:
                        self._set_quiet()
                return
        elif self.check_finite:
            floats = (*self._float_values(obs), *(self._float_values(nxt) if ended else ()), actions, rewards)
            if not all(math.isfinite(abs(np.vdot(a, a))) for a in floats):
                self._store(obs, actions, rewards, term, trunc, infos, nxt, None)  # raises, naming it
                return
        kept = self._kept(infos, None) if self._infos is not None or self.info_keys else None
        fields: dict[str, np.ndarray] | None = None
        if scratch is None:
            fields = dict(zip(self._fields, (*o, actions, rewards, term, trunc_stored), strict=True))
        self._write(1, fields, done if ended else False, nxt, kept)

    def extend(
        self,
        observations: Mapping[str, np.ndarray],
        actions: np.ndarray,
        rewards: np.ndarray,
        terminateds: np.ndarray,
        truncateds: np.ndarray,
        infos: Any,
        next_observations: Mapping[str, np.ndarray],
    ) -> None:
        """Store a block of ``m`` consecutive steps of every env: :meth:`add` with a leading time axis.

        Shapes: observations and next observations ``{key: (m, n_envs, *shape)}``, actions
        ``(m, n_envs, *action_shape)``, rewards, terminateds and truncateds ``(m, n_envs)`` (axes of
        length 1 may be left out, e.g. ``(m, *shape)`` for one env). Step ``i`` of the block is the
        step after step ``i - 1``, as if :meth:`add` had been called ``m`` times: whole episodes (an
        episode ends where ``terminated or truncated``; the next observation there is the final
        observation), or the continuation of the episodes under way. ``infos``: None, or a sequence of
        ``m`` per-step infos as :meth:`add` takes them. Checked as a whole before anything is stored.
        """
        self._store(observations, actions, rewards, terminateds, truncateds, infos, next_observations, 0)

    def _store(
        self, obs: Any, actions: Any, rewards: Any, term: Any, trunc: Any, infos: Any, nxt: Any, m: Any
    ) -> None:
        """Check, then write, one step (``m`` None) or a block (leading axis of length ``m``)."""
        n, finite = self.n_envs, self.check_finite
        keys = frozenset(self.obs_specs)
        check_keys(obs, keys, "observations")
        check_keys(nxt, keys, "next_observations")
        if m is not None:  # a block: its length from the rewards
            m = len(rewards) if hasattr(rewards, "__len__") else 1
        lead = (n,) if m is None else (m, n)
        env_axis = len(lead) - 1

        def check(
            value: Any, spec: Spec, label: str, check_finite: bool = finite, kinds: Any = None
        ) -> np.ndarray:
            shape, dtype = spec
            text = f"n_envs={n}" if m is None else f"steps={m}, n_envs={n}"
            text = f"{text}, then the space's {shape}"
            return check_array(value, (*lead, *shape), dtype, label, text, check_finite, env_axis, kinds)

        obs = {key: check(obs[key], spec, f"observations[{key!r}]") for key, spec in self.obs_specs.items()}
        actions = check(actions, self.action_spec, "actions")
        rewards = check(rewards, ((), np.dtype(np.float32)), "rewards")
        term = check(term, ((), np.dtype(bool)), "terminateds", False, "biu").astype(bool, copy=False)
        trunc = check(trunc, ((), np.dtype(bool)), "truncateds", False, "biu").astype(bool, copy=False)
        done = term | trunc
        # Next observations are stored only where an episode ends (else the next step's observation is).
        nxt = {key: check(nxt[key], spec, f"next_observations[{key!r}]", finite and bool(done.any()))
               for key, spec in self.obs_specs.items()}  # fmt: skip
        if self._infos is not None or self.info_keys:
            infos, columns = self._kept(infos, m)
        if m is None:  # one step: the block of one
            signature = (*obs.values(), *nxt.values(), actions, rewards)
            if all(type(value) is np.ndarray for value in signature):  # accepted: the fast path's now
                accepted = {False: tuple(map(_SIGNATURE, (*signature, term, trunc)))}
                if n == 1:
                    accepted[True] = tuple(map(_SIGNATURE, signature))  # with Python bool flags
                for bools, item in accepted.items():
                    if item not in self._accepted[bools]:
                        self._accepted[bools].append(item)
            m = 1
        T, step = self.steps_per_env, self.steps_per_env * n
        nxt = {key: value.reshape(m * n, *value.shape[len(lead) :]) for key, value in nxt.items()}
        values = (*self._values(obs), actions, rewards, term, trunc & ~term)
        values = tuple(value.reshape(m * n, *value.shape[len(lead) :]) for value in values)
        done = done.reshape(m * n)
        for start in range(0, m * n, step):  # chunks of T steps at most: a chunk covers a row once
            chunk = slice(start, start + step)
            kept = None
            if self._infos is not None or self.info_keys:
                kept = (infos[chunk], {key: value[chunk] for key, value in columns.items()})
            fields = dict(zip(self._fields, (value[chunk] for value in values), strict=True))
            ended = done[chunk] if done[chunk].any() else False
            self._write(
                min(T, m - start // n), fields, ended, {key: value[chunk] for key, value in nxt.items()}, kept
            )

    def _kept(self, infos: Any, m: int | None) -> tuple[list[Any], dict[str, np.ndarray]]:
        """The per-env infos of one step (``m`` None) or of a block of ``m``, and their info columns."""
        steps = [infos] if m is None else (list(infos) if infos is not None else [None] * m)
        if len(steps) != (1 if m is None else m):
            raise ValueError(f"infos must hold one entry per step ({m}), got {len(steps)}")
        infos = [info for step in steps for info in env_infos(step, self.n_envs)]
        return infos, self._info_values(infos)

    def _info_values(self, infos: list[Any]) -> dict[str, np.ndarray]:
        """The ``info_keys`` columns of ``infos`` (their specs fixed by the first infos seen)."""
        if not self.info_keys:
            return {}
        values = {}
        for key in self.info_keys:
            try:
                values[key] = np.array([info[key] for info in infos])
            except (KeyError, TypeError):
                raise ValueError(
                    f"every info must hold {key!r} (info_keys={list(self.info_keys)}: the reward reads it)"
                ) from None
        if self.info_specs is None:
            self.info_specs = {key: (value.shape[1:], value.dtype) for key, value in values.items()}
            T, n = self.steps_per_env, self.n_envs
            self._info_columns = {k: np.zeros((T * n, *s), d) for k, (s, d) in self.info_specs.items()}
        for key, (shape, _) in self.info_specs.items():
            if values[key].shape[1:] != shape:
                raise ValueError(f"info[{key!r}] must have shape {shape}, got {values[key].shape[1:]}")
        return values

    def _write(
        self,
        m: int,
        fields: dict[str, np.ndarray] | None,
        done: Any,
        nxt: Mapping[str, np.ndarray],
        kept: Any,
    ) -> None:
        """Write ``m <= T`` checked steps from ``pos`` on, every array flat: ``(m * n_envs, ...)`` in
        time-major order. ``fields``: ``{record field: values}``; ``done``: the episode ends (or
        False: none); ``nxt``: ``{key: next observations}``; ``kept``: (infos, info columns) or None."""
        T, n, p = self.steps_per_env, self.n_envs, self.pos
        if m > self._quiet:  # some window's first row may be among those written
            self._drop_overwritten(p, m)
        head = min(m, T - p) * n  # the rows up to the ring's end, then the rest from row 0
        row_fields = self._row_fields
        if fields is None:  # one env's step, built as one record by add()
            self._head_raw[p] = self._scratch_raw[0]
            fields = {}
        for name, values in fields.items():
            view = row_fields[name]
            if type(values) is not np.ndarray:  # one env's flag as a Python bool
                view[p] = values
                continue
            view[p * n : p * n + head] = values[:head]
            if head < m * n:
                view[: m * n - head] = values[head:]
        if kept is not None:
            infos, columns = kept
            flat = (((p + np.arange(m)) % T)[:, None] * n + np.arange(n)).reshape(-1)
            if self._infos is not None:
                self._infos[flat] = _object_array(infos)
            for key, value in columns.items():
                assert self._info_columns is not None
                self._info_columns[key][flat] = value
        for view, value in zip(self._pending_views, self._values(nxt), strict=True):
            view[...] = value[-n:]
        self._quiet -= m
        if done is not False:
            shaped = {key: value.reshape(m, n, *value.shape[1:]) for key, value in nxt.items()}
            self._end_episodes(np.reshape(done, (m, n)), shaped)
        self._steps += m
        if self._steps - self._earliest > T:
            self._warn_outgrown(self._steps - self._begin > T, self._steps - self._begin)
        self.full = self.full or p + m >= T
        self.pos = (p + m) % T
        if m > self._quiet:
            self._set_quiet()

    def _set_quiet(self) -> None:
        """The quiet steps ahead: those one env's add can write with nothing else to do, before one
        holds the first row of a window, the ring's last row, or an episode outgrows the ring."""
        T = self.steps_per_env
        if self.n_envs == 1:  # Python ints: 0.6 us, against 3-4 us for the array expression
            drop = (int(self._window_start[0]) - self.pos) % T if self._valid[0] else T
        else:
            live = self._valid > 0
            drop = int(((self._window_start[live] - self.pos) % T).min()) if live.any() else T
        self._quiet = min(drop, T - 1 - self.pos, T - (self._steps - self._earliest))

    def _drop_overwritten(self, p: int, m: int) -> None:
        """Drop the episodes whose first row is among the ``m`` rows written from row ``p``.

        Rows are overwritten oldest first, so they are the oldest episodes of their env's window.
        """
        T = self.steps_per_env
        for env in np.flatnonzero((self._valid > 0) & ((self._window_start - p) % T < m)).tolist():
            start, valid = int(self._window_start[env]), int(self._valid[env])
            while valid > 0 and (start - p) % T < m:
                length = int(self._ep_length[self._episode_ids[start, env] % len(self._ep_length)])
                start, valid = (start + length) % T, valid - length
            self._window_start[env], self._valid[env] = start, valid

    def _end_episodes(self, done: np.ndarray, nxt: dict[str, np.ndarray]) -> None:
        """Book the episodes that end in a block just written from ``pos``, in time order."""
        m, first_step = len(done), self._steps  # the block's first step
        steps, envs = np.nonzero(done)  # row-major: time order, ids grow with time
        for step, env in zip(steps.tolist(), envs.tolist(), strict=True):
            length = int(first_step + step + 1 - self._begin[env])
            self._begin[env] = first_step + step + 1
            # An episode begun before the block whose first row the block overwrote after its end.
            gone = step + 1 < length and (step + 1 - length) % self.steps_per_env < m
            final = [value[step, env] for value in self._values(nxt)]
            self._book_end(env, self.pos + step, length, final, sampleable=not gone)
        self._earliest = int(self._begin.min())

    def _book_end(
        self, env: int, last_row: int, length: int, final: list[np.ndarray], sampleable: bool = True
    ) -> None:
        """Book env's episode of ``length`` steps ending on ``last_row`` (mod T), with its final observation
        (its entries in the order of the observation keys)."""
        T = self.steps_per_env
        if length > T:  # it outgrew the ring and lost its first rows: never sampled
            self._warn_outgrown(np.eye(1, self.n_envs, env, dtype=bool)[0], length)
            return
        first = (last_row + 1 - length) % T
        slot = self._new_episode_slot()
        ids = self._episode_ids[:, env]
        ids[first : first + length] = self._n_ended  # the episode's rows, wrapping around the ring's end
        ids[: max(first + length - T, 0)] = self._n_ended
        self._ep_start[slot], self._ep_length[slot], self._ep_env[slot] = first, length, env
        for view, value in zip(self._finals_views, final, strict=True):
            view[slot] = value
        self._n_ended += 1
        if sampleable:
            if self._valid[env] == 0:
                self._window_start[env] = first
                self._quiet = 0  # a new window: the caller finds the quiet steps again
            self._valid[env] += length

    def _new_episode_slot(self) -> int:
        """The table entry of the next episode id, doubling the table while it holds an episode in use."""
        while True:
            size = len(self._ep_length)
            slot = self._n_ended % size
            old, env = self._n_ended - size, int(self._ep_env[slot])
            if old < 0 or self._valid[env] == 0:
                return slot
            oldest = int(self._episode_ids[self._window_start[env], env])
            if old < oldest:
                return slot
            # Double it: entry id % size moves to id % (2 * size), for the ids the table holds.
            ids = np.arange(max(self._n_ended - size, 0), self._n_ended)
            for name in ("_ep_start", "_ep_length", "_ep_env", "_finals"):
                table = getattr(self, name)
                grown = np.zeros(2 * size, table.dtype)
                grown[ids % (2 * size)] = table[ids % size]
                setattr(self, name, grown)
            self._table_views()

    def _warn_outgrown(self, longer: np.ndarray, lengths: Any) -> None:
        """Note the envs (mask ``longer``) whose episode of ``lengths`` steps outgrew the ring."""
        T = self.steps_per_env
        new = longer & (self._outgrown <= T)
        self._outgrown = np.where(longer, np.maximum(self._outgrown, lengths), self._outgrown)
        if new.any():
            # The text names the envs only, so Python's default filter shows it once per env.
            warnings.warn(
                f"an episode of env(s) {np.flatnonzero(new).tolist()} has outgrown the {T} steps the storage "
                "keeps per env: it is losing its first steps and will never be sampled; raise capacity "
                f"(stable-baselines3's buffer_size) to at least n_envs={self.n_envs} x the longest episode "
                "length, or end episodes sooner (a time limit)",
                stacklevel=4,
            )

    def end_episodes(self) -> np.ndarray:
        """Cut every env's unfinished episode at its latest stored step, marking that step truncated.

        Its next observation (passed with that step) becomes the episode's final observation, so the
        episode can be sampled and relabelled. Used after loading a buffer saved mid-episode when
        the next steps will not continue that episode. Returns the indices of the envs that were cut.
        """
        envs = np.flatnonzero(self._begin < self._steps)
        if self.check_finite:
            for key, field in self.obs_names.items():
                values = self._pending[field][envs]
                if values.dtype.kind not in "fc" or np.isfinite(values).all():
                    continue
                bad = envs[~np.isfinite(values.reshape(len(envs), -1)).all(axis=1)]
                if len(bad):
                    raise ValueError(
                        f"cannot end the unfinished episode(s) of env(s) {list(map(int, bad))}: "
                        f"next_observations[{key!r}] given with their latest step holds non-finite values (NaN or "
                        "inf), which would be their final observation; add a step with finite values first"
                    )
        last = (self.pos - 1) % self.steps_per_env
        rows = self._rows.reshape(self.steps_per_env, self.n_envs)[last]
        for env in envs.tolist():
            rows["truncated"][env] = not rows["terminated"][env]
            final = [view[env] for view in self._pending_views]
            self._book_end(env, last, int(self._steps - self._begin[env]), final)
            self._begin[env] = self._steps
        self._earliest = int(self._begin.min())
        self._set_quiet()
        return envs

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int) -> dict[str, Any]:
        """Sample ``batch_size`` transitions of complete episodes, the last ``int(share * B)`` relabelled.

        Returns numpy arrays, or torch tensors on ``device`` when one was given.
        """
        batch = self.sample_arrays(batch_size)
        if self.device is None:
            return batch
        import torch

        def convert(value: Any) -> Any:
            if isinstance(value, dict):
                return {key: convert(item) for key, item in value.items()}
            return torch.as_tensor(value, device=self.device)

        return convert(batch)

    def sample_arrays(self, batch_size: int) -> dict[str, Any]:
        """:meth:`sample`, always as numpy arrays."""
        if type(batch_size) is not int or batch_size < 1:
            batch_size = check_int("batch_size", batch_size, 1)
        T, n = self.steps_per_env, self.n_envs
        window_ends = np.cumsum(self._valid) if n > 1 else self._valid
        total = int(window_ends[-1])
        if total == 0:
            if self._outgrown.any():
                env = int(np.argmax(self._outgrown))
                length = int(self._outgrown[env])
                raise RuntimeError(
                    f"Unable to sample: the longest episode of env {env} has reached {length} steps, more than "
                    f"the {self.steps_per_env} steps the storage keeps per env (capacity // n_envs), so it can "
                    f"never be sampled; raise capacity (stable-baselines3's buffer_size) to at least "
                    f"{length * self.n_envs} (n_envs={self.n_envs} x the longest episode length), or end "
                    "episodes sooner (a time limit)"
                )
            raise RuntimeError(
                "Unable to sample before the end of the first episode. We recommend choosing a value "
                "for learning_starts that is greater than the maximum number of timesteps in the environment."
            )
        n_relabel = int(self.her_ratio * batch_size)
        uniforms = self.rng.random(batch_size + n_relabel)  # transitions', then their goals'
        # Uniform over all sampleable transitions, like stable-baselines3, without listing them: a
        # draw in [0, total) names an env (by cumulative window sizes) and an offset in its window.
        draws = (uniforms[:batch_size] * total).astype(np.int64)
        np.minimum(draws, total - 1, out=draws)
        if n == 1:  # one window (one env): fewer array operations, 25% of sample(256)
            envs: Any = 0
            draws += self._window_start[0]
            rows = flat = np.remainder(draws, T, out=draws)
        else:
            envs = np.searchsorted(window_ends, draws, side="right")
            rows = (self._window_start[envs] + draws - (window_ends[envs] - self._valid[envs])) % T
            flat = rows * n + envs
        raw = self._raw
        raw[T * n :] = raw[:n]  # the copy of row 0 after the last row (see _allocate)
        # The next observation is the next row's, except after an episode's last step (in the table).
        if self._pairs is not None:
            # Indexing, not take: take copies an array of overlapping items whole first (milliseconds).
            pairs = self._pairs[rows].view(self._pair)
            records, next_records, nxt = pairs["row"], pairs["next"], pairs["next_bytes"]
        else:
            # take, not indexing: 3-5 us less of a sample(256) at 1M
            records, nxt = raw.take(flat).view(self.record), raw.take(flat + n)
            next_records = nxt.view(self.record)
        # The table's length is a power of two (16, doubled when full): & is ~0.6 us less than %.
        slot = records["episode"] & (len(self._ep_length) - 1)
        step = rows - self._ep_start[slot]
        step %= T  # the episode may wrap around the ring's end
        remaining = self._ep_length[slot] - step  # steps left in the episode, this one included
        last = np.flatnonzero(remaining == 1)
        nxt[last] = self._finals_raw[slot[last]]
        batch = {
            "observations": {key: records[field] for key, field in self.obs_names.items()},
            "actions": records["action"],
            "rewards": records["reward"],
            "next_observations": {key: next_records[field] for key, field in self.obs_names.items()},
            "terminateds": records["terminated"].astype(np.float32),
            "truncateds": records["truncated"].astype(np.float32),
            "relabelled": np.arange(batch_size) >= batch_size - n_relabel,
        }
        if n_relabel:
            self._relabel(batch, flat, envs, rows, slot, step, remaining, uniforms[batch_size:])
        return batch

    def _relabel(self, batch: dict[str, Any], flat: np.ndarray, envs: np.ndarray, rows: np.ndarray,
                 slot: np.ndarray, step: np.ndarray, remaining: np.ndarray, uniforms: np.ndarray) -> None:  # fmt: skip
        """New goals for the last ``len(uniforms)`` transitions of ``batch``, their rewards (and flags)."""
        if self.reward_fn is None:
            raise RuntimeError(
                "this HerStorage has no reward_fn; give it with storage.set_functions(env.compute_reward) "
                "(or use HerStorage.from_env) before sampling relabelled transitions"
            )
        if self.recompute_terminated and self.terminated_fn is None:
            raise RuntimeError(
                "recompute_terminated=True, but this HerStorage has no terminated_fn; give it with "
                "storage.set_functions(reward_fn, terminated_fn)"
            )
        v = slice(len(flat) - len(uniforms), None)
        remaining = remaining[v]
        delta = goal_step_offsets(self.goal_selection_strategy, step[v], remaining, uniforms)
        # The goal is the next achieved goal of step t + delta: the achieved goal of the row after it
        # (wrapping around the ring's end), or for the episode's last step, the final observation's.
        goal_rows = rows[v] + delta
        goal_rows += 1
        goal_rows %= self.steps_per_env
        if self.n_envs > 1:
            goal_rows = goal_rows * self.n_envs + envs[v]
        # Indexing, not take: take copies a strided array whole first (the ring: milliseconds).
        goals = self._goal_raw[goal_rows]
        last = np.flatnonzero(delta == remaining - 1)
        goals[last] = self._finals_goal[slot[v][last]]
        shape, dtype = self.obs_specs["achieved_goal"]
        goals = goals.view(dtype).reshape(len(goal_rows), *shape)
        # The goal is part of the state: the next observation pursues the same new goal.
        batch["observations"]["desired_goal"][v] = goals
        batch["next_observations"]["desired_goal"][v] = goals
        infos: Any = None
        if self._info_columns is not None:
            infos = {key: column[flat[v]] for key, column in self._info_columns.items()}
        elif self._infos is not None:
            infos = self._infos[flat[v]]
        # r_t depends on the state s_{t+1} the action led to: compare the *next* achieved goal.
        achieved = batch["next_observations"]["achieved_goal"][v]
        rewards = np.asarray(self.reward_fn(achieved, goals, infos), dtype=np.float32)
        batch["rewards"][v] = rewards.reshape(len(goals))
        if self.recompute_terminated:
            assert self.terminated_fn is not None
            flags = np.asarray(self.terminated_fn(achieved, goals, infos), dtype=np.float32)
            batch["terminateds"][v] = flags.reshape(len(goals))


def field_specs(observation_space: Any) -> dict[str, Spec]:
    """``{key: (shape, dtype)}`` from a ``spaces.Dict`` or a mapping of ``(shape, dtype)`` pairs."""
    items: list[tuple[str, Any]]
    if isinstance(observation_space, spaces.Dict):
        items = [(key, (space.shape, space.dtype)) for key, space in observation_space.spaces.items()]
    elif isinstance(observation_space, Mapping):
        items = list(observation_space.items())
    else:
        raise TypeError(
            "observation_space must be a gymnasium.spaces.Dict or a mapping {key: (shape, dtype)}, "
            f"got {type(observation_space).__name__}"
        )
    specs: dict[str, Spec] = {}
    for key, spec in items:
        try:
            shape, dtype = spec
            specs[key] = (tuple(int(d) for d in shape), np.dtype(dtype))
        except (TypeError, ValueError):
            raise TypeError(
                f"observation_space[{key!r}] has no usable (shape, dtype), got {spec!r}"
            ) from None
    missing = [key for key in GOAL_KEYS if key not in specs]
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


def action_spec(action_space: Any) -> Spec:
    """``(shape, dtype)`` of a gymnasium Space or of a ``(shape, dtype)`` pair."""
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


def record_dtype(fields: Mapping[str, Spec], last: str | None = None) -> np.dtype:
    """The structured dtype of one row record, every field aligned to its item size.

    Fields are placed by decreasing item size, so none needs padding, but ``last`` goes last (aligned);
    the record is padded to a multiple of 8 bytes, so every field stays aligned in an array of
    records (``torch.from_numpy`` needs strides that are multiples of the item size).
    """
    names, formats, offsets, offset = [], [], [], 0
    for name, (shape, dtype) in sorted(
        fields.items(), key=lambda item: (item[0] == last, -item[1][1].itemsize)
    ):
        names.append(name)
        formats.append((dtype, shape) if shape else dtype)
        offset = -(-offset // dtype.alignment) * dtype.alignment
        offsets.append(offset)
        offset += int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    itemsize = max(-(-offset // 8) * 8, 8)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize})


def _readonly(array: np.ndarray) -> np.ndarray:
    array = array.view()
    array.flags.writeable = False
    return array


def _finite_check(runs: list[np.ndarray]) -> Callable[[], bool]:
    """A function telling whether every ``run . run`` is finite: false if NaN or inf is anywhere in the
    real arrays ``runs`` (a huge finite value may make it false too; the full checks then tell which).
    ``np.vdot``: the one product that does not warn when it overflows. One or two runs (the usual
    record) are spelt out: ``all(map(...))`` costs 0.3-0.5 us more."""
    isfinite, vdot = math.isfinite, np.vdot
    if len(runs) == 1:
        (a,) = runs
        return lambda: isfinite(vdot(a, a))
    if len(runs) == 2:
        a, b = runs
        return lambda: isfinite(vdot(a, a)) and isfinite(vdot(b, b))
    return lambda: all(map(isfinite, map(vdot, runs, runs)))


_first = itemgetter(0)
# What _getters and _views make: not pickled.
_MADE_ON_LOAD = frozenset(
    "_values _float_values _accepted _rows _pair _pairs _row_fields _episode_ids _pending_views _raw _goal_raw _goal_offset "
    "_finals_raw _finals_goal _finals_views _scratch _scratch_raw _head_raw _scratch_finite _in_record_order _record_path".split()
)


def _tuple_getter(keys: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """``mapping -> tuple of mapping[key] for key in keys``, one C call where it can."""
    if len(keys) > 1:
        return itemgetter(*keys)
    return lambda mapping: tuple(mapping[key] for key in keys)


def _object_array(items: list[Any]) -> np.ndarray:
    """A 1-d object array holding ``items`` as they are (``np.array`` would nest sequences)."""
    out = np.empty(len(items), dtype=object)
    out[:] = [None] * len(items)
    for i, item in enumerate(items):
        out[i] = item
    return out


def _spec_text(spec: Spec) -> str:
    return f"{spec[0]} {spec[1]}"


def _specs_text(specs: Mapping[str, Spec]) -> str:
    return "{" + ", ".join(f"{key!r}: {_spec_text(spec)}" for key, spec in sorted(specs.items())) + "}"


def available_memory() -> int | None:
    """Bytes of memory new allocations can use, or None where this cannot be told.

    psutil's ``virtual_memory().available`` when psutil is installed (as stable-baselines3), else
    Linux's ``MemAvailable`` (``/proc/meminfo``); either way no more than a cgroup v2 memory limit
    leaves (``/sys/fs/cgroup/memory.max`` less ``memory.current``: a container's limit).
    """
    available: int | None = None
    try:
        available = int(importlib.import_module("psutil").virtual_memory().available)
    except ImportError:
        try:
            with open("/proc/meminfo", "rb") as f:
                for line in f:
                    if line.startswith(b"MemAvailable:"):
                        available = int(line.split()[1]) * 1024  # in kB
        except (OSError, ValueError, IndexError):
            pass
    try:
        with open("/sys/fs/cgroup/memory.max", "rb") as f:
            limit = f.read().strip()
        if limit != b"max":
            with open("/sys/fs/cgroup/memory.current", "rb") as f:
                room = max(int(limit) - int(f.read().strip()), 0)
            available = room if available is None else min(available, room)
    except (OSError, ValueError):
        pass
    return available
