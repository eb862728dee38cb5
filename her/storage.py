"""Episode-aware ring storage for Hindsight Experience Replay, free of any RL framework.

A ring of ``T = capacity // n_envs`` rows (stable-baselines3's layout), each row one step of every env;
each stored quantity is one array of ``T * n_envs`` entries, entry ``row * n_envs + env``. Each
observation is stored **once**: the next observation of a step is the observation of the next row, and
an episode's final observation is kept in a table of ended episodes. For 50-step episodes this halves
the memory of ``obs`` + ``next_obs``.

Steps are counted per env (each write is one row of every env): step ``s`` is in row ``s % T`` until
step ``s + T`` overwrites it. Each entry holds the id of its ended episode (-1 while it runs); episode
``id`` is row ``id % size`` of the table (its first step, length, env and final observation), which
grows when that row still holds an episode with steps in the ring. An episode can be sampled while
its first step is in the ring, so an overwrite needs no bookkeeping beyond clearing the entries it
writes. Sampling draws entries uniformly among those written and keeps those of such episodes:
uniform over their transitions, O(batch).
"""

from __future__ import annotations

import cmath
import heapq
import math
import operator
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.core import ConcurrentUseError, available_memory, check_int, env_infos, object_array
from her import specs
from her.specs import Spec, checked, non_finite_rows, readonly
from her.strategies import GoalSelectionStrategy, goal_step_offsets, parse_strategy

__all__ = ["GoalFn", "HerStorage"]

#: ``fn(achieved_goal, desired_goal, infos) -> array of shape (B,)``, as ``GoalEnv.compute_reward``.
GoalFn = Callable[[np.ndarray, np.ndarray, Any], Any]

SHAPE_AND_DTYPE = operator.attrgetter("shape", "dtype")
FIRST_TABLE_SIZE = 16  # rows of the episode table at first (doubled when needed)
STOCK_NAMES = {"actions": "action", "rewards": "reward", "terminateds": "terminated"}
ROW_NAMES = [*STOCK_NAMES, "observations", "next_observations", "truncateds", "episode_starts"]
ROW_NAMES += ["episode_lengths", "infos"]


class HerStorage:
    """Replay storage with hindsight relabelling for any training loop (numpy in, numpy or torch out).

    ``capacity`` transitions kept (``capacity // n_envs`` steps per env, as stable-baselines3's) of a
    goal env's ``observation_space`` (``spaces.Dict`` or ``{key: (shape, dtype)}``) and ``action_space``
    (a space or a ``(shape, dtype)`` pair). ``reward_fn(achieved_goal, desired_goal, infos) -> (B,)``
    (the env's ``compute_reward``; may come later, :meth:`set_functions`) gets the stored columns
    ``{key: (B, ...)}`` of ``info_keys`` (the env's ``reward_info_keys``: keys, or ``{key: (shape,
    dtype)}``), else with ``copy_info_dict`` the info dicts, else None. The last ``int((1 - 1/(k+1)) *
    B)`` of a batch are relabelled (``k = n_sampled_goal``; stable-baselines3's count) by
    ``goal_selection_strategy`` (``"future"``, inclusive; ``"final"``, ``"episode"``, or a registered
    name). ``recompute_terminated``: relabelled flags from ``terminated_fn``. ``device``: None for
    numpy batches, or a torch device. ``seed``: of the storage's own generator. ``pickle_functions``:
    whether a pickle keeps the functions. ``check_finite``: refuse NaN and inf (as stored). docs/her.md
    has the details; :meth:`add` and :meth:`extend` refuse what does not fit before storing any of it,
    and a second thread gets :class:`~goalenvs.core.ConcurrentUseError`.
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
        self.n_envs = check_int("n_envs", n_envs, 1)
        self.steps_per_env = max(check_int("capacity", capacity, 1) // self.n_envs, 1)
        self.n_sampled_goal = check_int("n_sampled_goal", n_sampled_goal, 0)
        self.goal_selection_strategy = parse_strategy(goal_selection_strategy)
        # Same expression as stable-baselines3, so int(her_ratio * batch_size) agrees to the last bit.
        self.her_ratio = 1 - (1.0 / (self.n_sampled_goal + 1))
        self.recompute_terminated = bool(recompute_terminated)
        self.set_functions(reward_fn, terminated_fn)
        self.pickle_functions, self.copy_info_dict = bool(pickle_functions), bool(copy_info_dict)
        self.check_finite, self.device = bool(check_finite), device
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.obs_specs = specs.field_specs(observation_space)
        self.action_spec = specs.action_spec(action_space)
        self.action_bounds = specs.integer_bounds(action_space)  # (low, high) of integer actions, or None
        # The info columns' specs: given, or from the first infos added.
        given = info_keys if isinstance(info_keys, Mapping) else None
        self.info_specs = {k: (tuple(s), np.dtype(d)) for k, (s, d) in given.items()} if given else None
        self.info_keys: tuple[str, ...] = tuple(info_keys or ())
        self._lock = threading.Lock()
        # A step's arrays, in the order _checked returns them: observations, action, reward, the two
        # flags, next observations.
        obs = [(f"observations[{key!r}]", spec) for key, spec in self.obs_specs.items()]
        fields = [*obs, ("actions", self.action_spec), ("rewards", ((), np.dtype(np.float32)))]
        fields += [("terminateds", ((), np.dtype(bool))), ("truncateds", ((), np.dtype(bool))), *obs]
        self._labels = [label for label, _ in fields[: -len(obs)]] + ["next_" + label for label, _ in obs]
        self._specs = [spec for _, spec in fields]  # per env
        self._step_specs = tuple(((self.n_envs, *shape), dtype) for shape, dtype in self._specs)
        self._float_fields = [i for i, (_, d) in enumerate(self._specs[: len(obs) + 2]) if d.kind in "fc"]
        self._allocate()

    @classmethod
    def from_env(cls, env: Any, capacity: int, **kwargs: Any) -> HerStorage:
        """Storage for ``env`` (gymnasium env or vector env, or stable-baselines3 VecEnv): its spaces,
        number of envs, ``reward_info_keys``, and ``compute_reward`` (and ``compute_terminated``)
        resolved once to functions of this process (:func:`goalenvs.core.resolve_env_function`)."""
        from goalenvs.core import resolve_env_attribute, resolve_env_function, resolve_env_function_or_reason

        obs_space = getattr(env, "single_observation_space", None) or env.observation_space
        act_space = getattr(env, "single_action_space", None) or env.action_space
        reward_fn, reason = kwargs.pop("reward_fn", None), None
        if reward_fn is None:
            reward_fn, reason = resolve_env_function_or_reason(env, "compute_reward")
        if reward_fn is None:
            name = type(env).__name__
            raise ValueError(
                f"could not get compute_reward of {name} in this process ({reason}); pass reward_fn="
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
        self.reward_fn, self.terminated_fn = reward_fn, terminated_fn

    def check_spaces(self, observation_space: Any, action_space: Any, n_envs: int | None = None) -> None:
        """Raise ``ValueError`` unless this storage holds steps of these spaces (shapes and dtypes;
        bounds do not matter) and ``n_envs`` envs: for a storage loaded from a file."""
        stored = (self.obs_specs, self.action_spec)
        given = (specs.field_specs(observation_space), specs.action_spec(action_space))
        if given != stored:
            raise ValueError(
                f"this HerStorage holds steps of observation_space {specs.specs_text(stored[0])} and action_space "
                f"{specs.specs_text(stored[1])}, not of the observation_space {specs.specs_text(given[0])} and "
                f"action_space {specs.specs_text(given[1])} given; build a new storage for these spaces"
            )
        if n_envs is not None and n_envs != self.n_envs:
            raise ValueError(
                f"this HerStorage holds steps of n_envs={self.n_envs} envs, not of the n_envs={n_envs} given; "
                "build a new storage for this number of envs"
            )

    # ------------------------------------------------------------------ the arrays
    def _row_specs(self) -> dict[str, Spec]:
        """``{name: (shape, dtype)}`` of every per-entry array."""
        row = {f"obs/{key}": spec for key, spec in self.obs_specs.items()}
        row["action"], row["reward"] = self.action_spec, ((), np.dtype(np.float32))
        row["terminated"] = row["truncated"] = ((), np.dtype(bool))
        row["episode"] = ((), np.dtype(np.int64))  # the id of the entry's ended episode, else -1
        row.update({f"info/{key}": spec for key, spec in (self.info_specs or {}).items()})
        return {**row, "info_dict": ((), np.dtype(object))} if self.copy_info_dict else row

    def planned_nbytes(self) -> int:
        """Bytes of the arrays the storage allocates (all of :attr:`nbytes`), known before allocating."""
        obs = sum(np.dtype(d).itemsize * math.prod(s) for s, d in self.obs_specs.values())
        per_row = sum(np.dtype(d).itemsize * math.prod(s) for s, d in self._row_specs().values())
        entries = self.steps_per_env * self.n_envs
        return entries * per_row + FIRST_TABLE_SIZE * (obs + 4 * 8) + self.n_envs * (obs + 2 * 8)

    def _allocate(self) -> None:
        n, size, needed = self.n_envs, self.steps_per_env * self.n_envs, self.planned_nbytes()
        sizes = (
            f"HerStorage(capacity={size}) (stable-baselines3's buffer_size; {self.steps_per_env} steps per "
            f"env x n_envs={n}) needs {needed:,} bytes ({needed / 2**30:,.1f} GiB)"
        )
        available = available_memory()
        if available is not None and needed > available and not hasattr(self, "_data"):  # at construction
            info = ", not counting the info dicts" if self.copy_info_dict else ""
            warnings.warn(
                f"{sizes}{info}, more than the {available:,} bytes ({available / 2**30:,.1f} GiB) of memory "
                "available: it may exhaust memory as it fills; lower capacity",
                stacklevel=3,
            )
        try:  # np.zeros maps zero pages lazily: construction costs O(1), not O(capacity)
            self._data = {name: np.zeros((size, *s), d) for name, (s, d) in self._row_specs().items()}
        except (MemoryError, ValueError):  # numpy's message names an array shape, not the argument
            raise MemoryError(f"{sizes}, which could not be allocated; lower capacity") from None
        self._data["episode"][:] = -1
        self._steps = 0  # steps written per env: the next write goes to row _steps % T
        self._next_id = 0  # of the next episode to end
        # (first step, length) of the sampleable episodes, earliest first step on top, and their steps.
        self._sampleable: list[tuple[int, int]] = []
        self._n_sampleable = 0
        # Per table row: the episode's id (-1: none), first step, length, env, final observation.
        table = {"id": np.full(FIRST_TABLE_SIZE, -1), "first": np.zeros(FIRST_TABLE_SIZE, np.int64)}
        table["length"], table["env"] = np.zeros_like(table["first"]), np.zeros_like(table["first"])
        table.update(
            {f"final/{k}": np.zeros((FIRST_TABLE_SIZE, *s), d) for k, (s, d) in self.obs_specs.items()}
        )
        self._table = table
        # Per env: the step at which its unfinished episode began, the longest episode that outgrew the
        # ring, the next observation given with the latest step.
        self._begin, self._outgrown = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self._earliest = 0  # min(_begin), as an int: the oldest unfinished episode's first step
        self._pending = {key: np.zeros((n, *s), d) for key, (s, d) in self.obs_specs.items()}
        self._prepare()

    def _prepare(self) -> None:
        """What each add would otherwise look up again: the arrays a step writes, in order."""
        names = [*(f"obs/{key}" for key in self.obs_specs), "action", "reward", "terminated", "truncated"]
        self._targets = [self._grid(name) for name in names]  # (T, n_envs, ...) views
        self._episode = self._data["episode"]
        self._obs_values = operator.itemgetter(*self.obs_specs)  # a tuple: there are two goals at least

    def reset(self) -> None:
        """Forget every stored transition (keeps the generator's state)."""
        self._allocate()

    def __getstate__(self) -> dict[str, Any]:
        skip = ("_lock", "_targets", "_episode", "_obs_values")
        state = {key: value for key, value in self.__dict__.items() if key not in skip}
        state["_data"] = {name: array[: self.num_transitions] for name, array in self._data.items()}
        if not self.pickle_functions:
            state["reward_fn"] = state["terminated_fn"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        stored = state.pop("_data")
        if "episode" not in stored:  # pickled before the episode table had ids
            raise ValueError(
                "this HerStorage was pickled by an older goalenvs and cannot be loaded; start a new one"
            )
        self.__dict__.update(state)
        self._lock, self._data, size = threading.Lock(), {}, self.steps_per_env * self.n_envs
        for name, array in stored.items():
            self._data[name] = np.zeros((size, *array.shape[1:]), array.dtype)
            self._data[name][: len(array)] = array
        self._data["episode"][len(stored["episode"]) :] = -1
        self._prepare()

    # ------------------------------------------------------------------ reading
    @property
    def pos(self) -> int:
        """The row of the next write."""
        return self._steps % self.steps_per_env

    @property
    def full(self) -> bool:
        """Whether the ring has wrapped (every row written)."""
        return self._steps >= self.steps_per_env

    @property
    def num_transitions(self) -> int:
        """Transitions currently held (complete episodes or not)."""
        return min(self._steps, self.steps_per_env) * self.n_envs

    @property
    def num_sampleable(self) -> int:
        """Transitions that :meth:`sample` can return: those of complete episodes still whole."""
        return self._n_sampleable

    @property
    def nbytes(self) -> int:
        """Bytes of all arrays the storage holds (info dicts, when kept, not included)."""
        arrays = [*self._data.values(), *self._table.values(), *self._pending.values()]
        return sum(a.nbytes for a in [*arrays, self._begin, self._outgrown])

    @property
    def current_episode_lengths(self) -> np.ndarray:
        """``(n_envs,)``: steps stored of each env's unfinished episode (0 where none is under way)."""
        return readonly(np.minimum(self._steps - self._begin, self.steps_per_env))

    @property
    def current_episode_starts(self) -> np.ndarray:
        """``(n_envs,)``: row where each env's unfinished episode started (``pos`` where none is under way)."""
        return readonly((self.pos - self.current_episode_lengths) % self.steps_per_env)

    def _grid(self, name: str) -> np.ndarray:
        """Per-entry array ``name`` as a ``(T, n_envs, ...)`` view."""
        array = self._data[name]
        return array.reshape(self.steps_per_env, self.n_envs, *array.shape[1:])

    def episode_lengths(self) -> np.ndarray:
        """Lengths of the complete episodes that can be sampled, per env (oldest first) concatenated."""
        whole = (self._table["id"] >= 0) & (self._table["first"] >= self._steps - self.steps_per_env)
        order = np.lexsort((self._table["first"][whole], self._table["env"][whole]))
        return self._table["length"][whole][order]

    def rows(self, name: str) -> Any:
        """Stored ``name`` as read-only ``(steps_per_env, n_envs, ...)`` arrays in stable-baselines3's
        layout (row ``pos - 1`` is the latest step), for inspection: ``"observations"``, ``"actions"``,
        ``"rewards"``, ``"terminateds"``, ``"truncateds"`` (views); ``"next_observations"`` (a copy: the
        next row's observation, an episode's final one, the one given with the latest step, else
        zeros); ``"episode_starts"`` (0 where unknown); ``"episode_lengths"`` (where it can be
        sampled, else 0); ``"infos"`` (the kept info dicts, else ``{}``)."""
        if name not in ROW_NAMES:
            raise ValueError(f"name must be one of {ROW_NAMES}, got {name!r}")
        T, n = self.steps_per_env, self.n_envs
        if name in STOCK_NAMES:
            return readonly(self._grid(STOCK_NAMES[name]))
        if name == "observations":
            return {key: readonly(self._grid(f"obs/{key}")) for key in self.obs_specs}
        if name == "truncateds":  # a step both terminated and truncated counts as terminated
            return readonly(self._grid("truncated") & ~self._grid("terminated"))
        if name == "infos":  # rows never written hold np.zeros' 0
            kept = self._data.get("info_dict", np.zeros(T * n, object))
            return readonly(object_array([i if isinstance(i, Mapping) else {} for i in kept]).reshape(T, n))
        row, episode, table = np.arange(T)[:, None], self._grid("episode"), self._table
        current_len, current_start = self.current_episode_lengths, self.current_episode_starts
        current = (row < (T if self.full else self.pos)) & ((row - current_start) % T < current_len)
        known, at = episode >= 0, episode % len(table["id"])  # rows of ended episodes; their table rows
        start, length = table["first"][at] % T, np.where(known, table["length"][at], 0)
        if name == "episode_starts":
            return readonly(np.where(current, current_start, np.where(known, start, 0)))
        if name == "episode_lengths":
            return readonly(np.where(known & (table["first"][at] >= self._steps - T), length, 0))
        last = known & ((row - start) % T == length - 1)
        latest = current & ((row - current_start) % T == current_len - 1)
        following, out = (current & ~latest) | (known & ~last), {}
        for key in self.obs_specs:
            obs = self._grid(f"obs/{key}")
            values = np.zeros_like(obs)
            values[following] = np.roll(obs, -1, axis=0)[following]
            values[last] = table[f"final/{key}"][at[last]]
            values[latest] = np.broadcast_to(self._pending[key], values.shape)[latest]
            out[key] = readonly(values)
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

        ``next_observations``: what the step led to; where an episode ended (``terminated or
        truncated``; both count as terminated) the final observation, not the reset one. ``infos``:
        None, per-env dicts, or gymnasium's dict of arrays. Every array is checked first (shape, give
        or take axes of length 1; a dtype that casts without changing what the values mean; values
        the stored dtype and an integer action space hold; finite as stored, with ``check_finite``):
        a bad one raises ``ValueError`` or ``TypeError`` naming it, and nothing of the step is stored.
        """
        self._enter("add")
        try:
            arrays = (observations, actions, rewards, terminateds, truncateds, next_observations)
            self._store(None, self._checked(None, *arrays), infos)
        finally:
            self._lock.release()

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
        """Store ``m`` consecutive steps of every env: ``m`` calls of :meth:`add` as one, shapes
        ``(m, n_envs, ...)`` (axes of length 1 may be left out), ``infos`` None or ``m`` per-step infos."""
        m = len(rewards) if hasattr(rewards, "__len__") else 1
        self._enter("extend")
        try:
            arrays = (observations, actions, rewards, terminateds, truncateds, next_observations)
            self._store(m, self._checked(m, *arrays), infos)
        finally:
            self._lock.release()

    def _enter(self, method: str) -> None:
        # One thread at a time (a non-blocking lock): two threads writing one storage would interleave
        # their steps' rows and episode bookkeeping.
        if not self._lock.acquire(False):
            raise ConcurrentUseError(
                f"HerStorage.{method} called from a second thread while another thread is using the storage; "
                "one HerStorage is not thread-safe: give each thread its own, or a lock around its calls"
            )

    def _store(self, m: int | None, values: list[np.ndarray], infos: Any) -> None:
        """Write one step (``m`` None: arrays ``(n_envs, ...)``) or ``m`` steps (``(m, n_envs, ...)``),
        checked by :meth:`_checked`, in blocks up to the ring's end, and book the episodes they end."""
        k, n, T = len(self.obs_specs), self.n_envs, self.steps_per_env
        term, trunc, next_obs = values[k + 2], values[k + 3], values[k + 4 :]
        # A step's few flags: tolist, a third of the time of a numpy call.
        ended = any(term.tolist()) or any(trunc.tolist()) if m is None else term.any() or trunc.any()
        done = (term | trunc).reshape(-1, n) if ended else None  # (steps, n_envs)
        self._check_finite(values, next_obs, done)
        targets = self._targets  # zip(targets, values): a step's values, not its next observations
        if self.info_keys or self.copy_info_dict:
            kept = self._kept_infos(infos, m)
            targets, values = [*targets, *map(self._grid, kept)], [*values[: k + 4], *kept.values()]
        start, steps = 0, m or 1
        while start < steps:
            p = self._steps % T
            rows = min(steps - start, T - p)
            if self._steps >= T:  # a later lap: the steps these rows held leave the ring
                self._episode[p * n : (p + rows) * n] = -1
            for target, value in zip(targets, values, strict=False):
                if m is None:
                    target[p] = value  # an integer index: a third faster than a slice, in every add
                else:
                    target[p : p + rows] = value[start : start + rows]
            self._steps += rows
            for i in np.flatnonzero(done[start : start + rows]).tolist() if done is not None else ():
                step, env = divmod(i, n)  # in time order
                end = self._steps - rows + step + 1  # the step after the episode's last
                at = env if m is None else (start + step, env)
                final = {key: v[at] for key, v in zip(self.obs_specs, next_obs, strict=True)}
                self._book(env, int(self._begin[env]), end - int(self._begin[env]), final, stacklevel=5)
                self._begin[env] = end
                self._earliest = int(self._begin.min())
            start += rows
        # The sampleable episodes whose first step has left the ring leave the count.
        while self._sampleable and self._sampleable[0][0] < self._steps - T:
            self._n_sampleable -= heapq.heappop(self._sampleable)[1]
        for pending, value in zip(self._pending.values(), next_obs, strict=True):
            pending[...] = value if m is None else value[-1]  # a copy: the caller may change its arrays
        if self._steps - self._earliest > T:  # an unfinished episode has outgrown the ring
            for env in np.flatnonzero(self._steps - self._begin > T).tolist():
                self._note_outgrown(env, self._steps - int(self._begin[env]), stacklevel=4)

    def _checked(self, m: int | None, *arrays: Any) -> list[np.ndarray]:
        """The step's arrays (observations, action, reward, two flags, next observations), each of
        exactly its field's shape (with the leading ``(n_envs,)`` or ``(m, n_envs)``) and dtype."""
        obs, nxt, keys = arrays[0], arrays[-1], self.obs_specs.keys()
        if not (type(obs) is dict and type(nxt) is dict and obs.keys() == keys and nxt.keys() == keys):
            specs.check_keys(obs, self.obs_specs, "observations")
            specs.check_keys(nxt, self.obs_specs, "next_observations")
        values = [*self._obs_values(obs), *arrays[1:-1], *self._obs_values(nxt)]
        n, k = self.n_envs, len(keys)
        wanted = self._step_specs if m is None else tuple(((m, n, *s), d) for s, d in self._specs)
        # A training run's steps have exactly the spaces' shapes and dtypes: one comparison of them all.
        try:
            usual = self.action_bounds is None and tuple(map(SHAPE_AND_DTYPE, values)) == wanted
        except AttributeError:  # not arrays
            usual = False
        if not usual:
            lead, axis = "n_envs={}" if m is None else f"steps={m}, n_envs={{}}", int(m is not None)
            kinds = [None] * (k + 2) + ["biu", "biu"] + [None] * k  # flags: integers too (nonzero: True)
            bounds = [None] * k + [self.action_bounds] + [None] * (k + 3)  # integer actions: in the space
            cases = zip(values, self._labels, wanted, bounds, kinds, strict=True)
            values = [
                checked(a, *spec, label, lead, False, b, kind, axis) for a, label, spec, b, kind in cases
            ]
        return values

    def _check_finite(self, values: list[np.ndarray], next_obs: list[np.ndarray], done: Any) -> None:
        """With ``check_finite``, raise (naming the array and the envs) unless every float value stored is
        finite as stored (1e300 is inf in float32); next observations are stored only where episodes
        end (``done``), so only there must they be finite."""
        if not self.check_finite:
            return
        # One sum of the floats (few: as Python floats) is finite only if each is; a false alarm (an
        # overflow of huge values) passes the exact check of each array.
        total, floats = 0.0, [values[i] for i in self._float_fields]
        for a in floats:
            total += sum(a.ravel().tolist()) if a.size < 256 else a.sum()
        if not cmath.isfinite(total):
            for i, a in zip(self._float_fields, floats, strict=True):
                env_axis = a.ndim - 1 - len(self._specs[i][0])
                checked(a, a.shape, a.dtype, self._labels[i], "", True, env_axis=env_axis)
        labels = self._labels[len(self.obs_specs) + 4 :]
        for label, value in zip(labels, next_obs, strict=True) if done is not None else ():
            bad = non_finite_rows(value.reshape(done.size, -1)[done.reshape(-1)])
            if bad:
                raise specs.non_finite(label, (np.flatnonzero(done) % self.n_envs)[bad])

    def _kept_infos(self, infos: Any, m: int | None) -> dict[str, np.ndarray]:
        """The info columns (and, with ``copy_info_dict``, the info dicts) of one step or a block,
        ``{array name: (n_envs, ...) or (m, n_envs, ...)}``."""
        steps = [infos] if m is None else (list(infos) if infos is not None else [None] * m)
        if len(steps) != (m or 1):
            raise ValueError(f"infos must hold one entry per step ({m}), got {len(steps)}")
        flat = [info for step in steps for info in env_infos(step, self.n_envs)]
        out = {"info_dict": object_array(flat)} if self.copy_info_dict else {}
        for key in self.info_keys:
            try:
                out[f"info/{key}"] = np.array([info[key] for info in flat])
            except (KeyError, TypeError):
                raise ValueError(
                    f"every info must hold {key!r} (info_keys={list(self.info_keys)}: the reward reads it)"
                ) from None
        if self.info_keys and self.info_specs is None:  # the columns' specs from the first infos
            self.info_specs = {
                key: (out[f"info/{key}"].shape[1:], out[f"info/{key}"].dtype) for key in self.info_keys
            }
            size = self.steps_per_env * self.n_envs
            self._data.update({f"info/{k}": np.zeros((size, *s), d) for k, (s, d) in self.info_specs.items()})
        for key, (shape, _) in (self.info_specs or {}).items():
            if out[f"info/{key}"].shape[1:] != shape:
                raise ValueError(f"info[{key!r}] must have shape {shape}, got {out[f'info/{key}'].shape[1:]}")
        lead = (self.n_envs,) if m is None else (m, self.n_envs)
        return {name: a.reshape(*lead, *a.shape[1:]) for name, a in out.items()}

    def _book(self, env: int, first: int, length: int, final: dict[str, Any], stacklevel: int) -> None:
        """Book env's episode of ``length`` steps from step ``first`` on, with its final observation
        (``stacklevel``: of a warning that it outgrew the ring, at the caller of add, extend or end_episodes)."""
        T = self.steps_per_env
        if length > T:  # it outgrew the ring and lost its first rows: never sampled
            self._note_outgrown(env, length, stacklevel)
            return
        table, id_ = self._table, self._next_id
        # Row id % size takes the episode once the steps of the one it holds have all left the ring; else
        # the table doubles, each episode moving to its id % (2 * size).
        while table["id"][id_ % len(table["id"])] >= 0:
            row = id_ % len(table["id"])
            if table["first"][row] + table["length"][row] + T <= self._steps:
                break
            size, kept = 2 * len(table["id"]), np.flatnonzero(table["id"] >= 0)
            grown = {name: np.zeros((size, *a.shape[1:]), a.dtype) for name, a in table.items()}
            grown["id"][:] = -1
            for name, array in grown.items():
                array[table["id"][kept] % size] = table[name][kept]
            self._table = table = grown
        row, self._next_id = id_ % len(table["id"]), id_ + 1
        columns = {"id": id_, "first": first, "length": length, "env": env}
        for name, value in [*columns.items(), *((f"final/{key}", v) for key, v in final.items())]:
            table[name][row] = value
        steps = np.arange(max(first, self._steps - T), first + length)  # those still in the ring
        self._episode[steps % T * self.n_envs + env] = id_
        if first >= self._steps - T:
            heapq.heappush(self._sampleable, (first, length))
            self._n_sampleable += length

    def _note_outgrown(self, env: int, length: int, stacklevel: int) -> None:
        """Note that env's episode of ``length`` steps outgrew the ring (a warning the first time)."""
        T = self.steps_per_env
        if self._outgrown[env] <= T:  # the text names the env only: Python's filter shows it once per env
            warnings.warn(
                f"an episode of env(s) [{env}] has outgrown the {T} steps the storage keeps per env: it is "
                "losing its first steps and will never be sampled; raise capacity (stable-baselines3's "
                f"buffer_size) to at least n_envs={self.n_envs} x the longest episode length, or end "
                "episodes sooner (a time limit)",
                stacklevel=stacklevel,
            )
        self._outgrown[env] = max(int(self._outgrown[env]), length)

    def end_episodes(self) -> np.ndarray:
        """Cut every env's unfinished episode at its latest stored step, marking that step truncated;
        the next observation given with it becomes the final one (after loading a buffer saved
        mid-episode, when the next steps will not continue it). Returns the envs that were cut."""
        envs = np.flatnonzero(self._begin < self._steps)
        for key, pending in self._pending.items() if self.check_finite and len(envs) else ():
            bad = envs[non_finite_rows(pending[envs].reshape(len(envs), -1))].tolist()
            if bad:
                raise ValueError(
                    f"cannot end the unfinished episode(s) of env(s) {bad}: next_observations[{key!r}] given "
                    "with their latest step holds non-finite values (NaN or inf), which would be their final "
                    "observation; add a step with finite values first"
                )
        last = (self._steps - 1) % self.steps_per_env
        for env in envs.tolist():
            i = last * self.n_envs + env
            self._data["truncated"][i] = not self._data["terminated"][i]
            final = {key: pending[env] for key, pending in self._pending.items()}
            self._book(env, int(self._begin[env]), self._steps - int(self._begin[env]), final, stacklevel=4)
            self._begin[env] = self._steps
        self._earliest = int(self._begin.min())
        return envs

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int, n_step: int = 1) -> dict[str, Any]:
        """``batch_size`` transitions of complete episodes, the last ``int(her_ratio * B)`` relabelled:
        ``{"observations": {key: (B, ...)}, "actions", "rewards", "next_observations", "terminateds",
        "truncateds", "relabelled"}`` (rewards and flags float32), numpy or torch on ``device``.

        ``n_step > 1`` adds the next ``n`` steps of each transition's episode under its (new) goal, for
        multi-step targets (MHER, arXiv 2102.12962): ``"nstep_observations"`` ``{key: (B, n, ...)}``,
        the states ``s_{t+1} .. s_{t+n}``; ``"nstep_rewards"``, ``"nstep_terminateds"`` ``(B, n)``, of
        steps ``t .. t+n-1``; ``"nstep_valid"`` ``(B, n)``, 1 where that step is in the episode (past its
        end the other three repeat the last step's values)."""
        batch = self.sample_arrays(batch_size, n_step)
        if self.device is None:
            return batch
        import torch

        def tensors(value: Any) -> Any:
            if isinstance(value, dict):
                return {key: tensors(v) for key, v in value.items()}
            return torch.as_tensor(value, device=self.device)

        return tensors(batch)

    def sample_arrays(self, batch_size: int, n_step: int = 1) -> dict[str, Any]:
        """:meth:`sample`, always as numpy arrays."""
        batch_size, n_step = check_int("batch_size", batch_size, 1), check_int("n_step", n_step, 1)
        self._enter("sample")
        try:
            return self._sample(batch_size, n_step)
        finally:
            self._lock.release()

    def _draw(self, count: int, share: float) -> np.ndarray:
        """``count`` entries drawn uniformly among those of the complete episodes still whole (``share``
        of the entries written)."""
        written, table = self.num_transitions, self._table

        def whole(entries: np.ndarray) -> np.ndarray:
            episode = self._episode.take(entries)
            first = table["first"].take(episode % len(table["id"]))
            return entries[(episode >= 0) & (first >= self._steps - self.steps_per_env)]

        if share < 0.25:  # mostly unfinished episodes (early in a run): list the sampleable entries
            sampleable = whole(np.arange(written))
            drawn = (self.rng.random(count) * len(sampleable)).astype(np.int64)
            return sampleable[np.minimum(drawn, len(sampleable) - 1, out=drawn)]
        found = []  # else draw among all written entries and keep the sampleable (rejection: uniform)
        while count > 0:
            drawn = (self.rng.random(int(count / share * 1.1) + 8) * written).astype(np.int64)
            drawn = whole(np.minimum(drawn, written - 1, out=drawn))[:count]
            found.append(drawn)
            count -= len(drawn)
        return found[0] if len(found) == 1 else np.concatenate(found)

    def _sample(self, batch_size: int, n_step: int = 1) -> dict[str, Any]:
        T, n, data, table = self.steps_per_env, self.n_envs, self._data, self._table
        sampleable = self.num_sampleable
        if not sampleable:
            raise RuntimeError(self._nothing_to_sample())
        index = self._draw(batch_size, sampleable / self.num_transitions)  # entries row * n + env
        slot = self._episode.take(index) % len(table["id"])  # their episodes' table rows
        step = (index // n - table["first"].take(slot)) % T  # the step in its episode (which may wrap)
        remaining = table["length"].take(slot) - step  # steps left in the episode, this one included
        last = np.flatnonzero(remaining == 1)  # an episode's last step: its next observation is the final one
        n_relabel = int(self.her_ratio * batch_size)
        next_obs = {key: data[f"obs/{key}"].take((index + n) % (T * n), axis=0) for key in self.obs_specs}
        for key in self.obs_specs:
            next_obs[key][last] = table[f"final/{key}"][slot[last]]
        terminated = data["terminated"].take(index)
        batch = {
            "observations": {key: data[f"obs/{key}"].take(index, axis=0) for key in self.obs_specs},
            "actions": data["action"].take(index, axis=0),
            "rewards": data["reward"].take(index),
            "next_observations": next_obs,
            "terminateds": terminated.astype(np.float32),
            "truncateds": (data["truncated"].take(index) & ~terminated).astype(np.float32),
            "relabelled": np.arange(batch_size) >= batch_size - n_relabel,
        }
        if n_relabel:
            v = slice(batch_size - n_relabel, None)
            self._relabel(batch, v, index[v], slot[v], step[v], remaining[v])
        if n_step > 1:
            self._next_steps(batch, n_step, index, slot, remaining, batch_size - n_relabel)
        return batch

    def _next_steps(
        self, batch: dict[str, Any], n_step: int, index: Any, slot: Any, left: Any, kept: int
    ) -> None:
        """Add the ``nstep_*`` arrays of :meth:`sample`: steps ``t + k - 1`` and states ``s_{t+k}``,
        ``k = 1 .. n`` (clipped to the episode's last step), with the relabelled rows' rewards recomputed."""
        B, n, size = len(index), self.n_envs, self.steps_per_env * self.n_envs
        k = np.minimum(np.arange(1, n_step + 1), left[:, None])  # (B, n): 1 .. steps left
        steps = (index[:, None] + (k - 1) * n) % size  # entries of steps t + k - 1
        final = k == left[:, None]  # s_{t+k} is the episode's final observation
        finals_at = np.broadcast_to(slot[:, None], k.shape)[final]
        obs = {}
        for key in self.obs_specs:
            obs[key] = self._data[f"obs/{key}"].take((steps + n) % size, axis=0)
            obs[key][final] = self._table[f"final/{key}"][finals_at]
        rewards, terminateds = self._data["reward"].take(steps), self._data["terminated"].take(steps)
        if kept < B:  # the relabelled rows: their goal, and the rewards (and flags) under it
            assert self.reward_fn is not None  # else _relabel raised
            goals = batch["observations"]["desired_goal"][kept:]
            obs["desired_goal"][kept:] = goals[:, None]
            achieved = obs["achieved_goal"][kept:].reshape(-1, *goals.shape[1:])
            args = (achieved, np.repeat(goals, n_step, axis=0), self._infos(steps[kept:].ravel()))
            rewards[kept:] = np.reshape(self.reward_fn(*args), (B - kept, n_step))
            if self.recompute_terminated:
                assert self.terminated_fn is not None
                terminateds[kept:] = np.reshape(self.terminated_fn(*args), (B - kept, n_step))
        batch["nstep_observations"] = obs
        batch["nstep_rewards"] = rewards.astype(np.float32)
        batch["nstep_terminateds"] = terminateds.astype(np.float32)
        batch["nstep_valid"] = (np.arange(1, n_step + 1) <= left[:, None]).astype(np.float32)

    def _relabel(self, batch: dict[str, Any], v: slice, index: Any, slot: Any, step: Any, left: Any) -> None:
        """New goals for the transitions ``v`` of ``batch`` (entries ``index``), their rewards (and flags)."""
        if self.reward_fn is None or (self.recompute_terminated and self.terminated_fn is None):
            missing = "reward_fn" if self.reward_fn is None else "terminated_fn (recompute_terminated=True)"
            raise RuntimeError(
                f"this HerStorage has no {missing}; give it with storage.set_functions(reward_fn, terminated_fn) "
                "(or use HerStorage.from_env) before sampling relabelled transitions"
            )
        delta = goal_step_offsets(self.goal_selection_strategy, step, left, self.rng.random(len(index)))
        # The goal is the *next* achieved goal of step t + delta: the achieved goal one row after it
        # (wrapping around the ring's end), or, for the episode's last step, the final observation's.
        size = self.steps_per_env * self.n_envs
        goals = self._data["obs/achieved_goal"].take((index + (delta + 1) * self.n_envs) % size, axis=0)
        last = np.flatnonzero(delta == left - 1)
        goals[last] = self._table["final/achieved_goal"][slot[last]]
        # The goal is part of the state: the next observation pursues the same new goal.
        batch["observations"]["desired_goal"][v] = batch["next_observations"]["desired_goal"][v] = goals
        infos = self._infos(index)
        # r_t depends on the state s_{t+1} the action led to: compare the *next* achieved goal.
        achieved = batch["next_observations"]["achieved_goal"][v]
        batch["rewards"][v] = np.asarray(self.reward_fn(achieved, goals, infos), np.float32).reshape(
            len(goals)
        )
        if self.recompute_terminated:
            assert self.terminated_fn is not None
            flags = np.asarray(self.terminated_fn(achieved, goals, infos), np.float32)
            batch["terminateds"][v] = flags.reshape(len(goals))

    def _infos(self, entries: np.ndarray) -> Any:
        """What the reward function gets of the steps ``entries``: the info columns, the info dicts, or None."""
        if self.info_keys:
            return {key: self._data[f"info/{key}"].take(entries, axis=0) for key in self.info_keys}
        return self._data["info_dict"].take(entries) if self.copy_info_dict else None

    def _nothing_to_sample(self) -> str:
        if not self._outgrown.any():
            return (
                "Unable to sample before the end of the first episode. We recommend choosing a value "
                "for learning_starts that is greater than the maximum number of timesteps in the environment."
            )
        env = int(np.argmax(self._outgrown))
        length, T, n = int(self._outgrown[env]), self.steps_per_env, self.n_envs
        return (
            f"Unable to sample: the longest episode of env {env} has reached {length} steps, more than the {T} "
            "steps the storage keeps per env (capacity // n_envs), so it can never be sampled; raise capacity "
            f"(stable-baselines3's buffer_size) to at least {length * n} (n_envs={n} x the longest episode "
            "length), or end episodes sooner (a time limit)"
        )
