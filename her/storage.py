"""Episode-aware ring storage for Hindsight Experience Replay, free of any RL framework.

:class:`HerStorage` composes three parts, one module each:

* :mod:`her._layout`: the ring of row records. Transitions live in a ring of ``T = capacity //
  n_envs`` rows per environment, all environments writing one row per step (the layout of
  stable-baselines3, so ``capacity`` means the same thing). Each observation is stored once: within
  an episode the next observation of a step is the next row's. For 50-step episodes this halves the
  observation memory compared with storing ``obs`` and ``next_obs`` side by side;
* :mod:`her._episodes`: the episode bookkeeping: which rows form complete episodes still whole in
  the ring (the only ones sampled), each episode's bounds and final observation;
* :mod:`her._sampling`: O(batch) draws of transitions and of their relabelled goals.

Writing happens here: :meth:`HerStorage.add` only stages a step; staged steps are written in blocks
(one array operation per field for the whole block, the episode bookkeeping of a block vectorized
too), at the latest before the next sample.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs._util import check_int, env_infos
from her._episodes import Episodes
from her._layout import (
    ACTION,
    EPISODE,
    REWARD,
    TERMINATED,
    TRUNCATED,
    RecordLayout,
    Ring,
    StepCheck,
    action_spec,
    field_specs,
)
from her._sampling import sample_transitions, to_torch
from her.strategies import GoalSelectionStrategy, parse_strategy

__all__ = ["GoalFn", "HerStorage", "available_memory"]

#: ``fn(achieved_goal, desired_goal, infos) -> array of shape (B,)``, as ``GoalEnv.compute_reward``.
GoalFn = Callable[[np.ndarray, np.ndarray, Any], Any]


class HerStorage:
    """Replay storage with hindsight relabelling for any training loop (numpy in, numpy or torch out).

    Args:
        capacity: number of transitions kept (``capacity // n_envs`` steps per environment).
        observation_space: the goal env's ``spaces.Dict`` (or ``{key: (shape, dtype)}``); it must hold
            ``achieved_goal`` and ``desired_goal`` of the same shape and dtype.
        action_space: the action space (or a ``(shape, dtype)`` pair).
        reward_fn: ``reward_fn(achieved_goal, desired_goal, infos)`` returning rewards of shape ``(B,)``,
            usually the env's ``compute_reward`` (see :meth:`from_env`). ``infos`` is the object array of
            the stored info dicts when ``copy_info_dict`` is true, else ``None``. It may be ``None``
            here and given later with :meth:`set_functions`, before relabelled transitions are sampled.
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
        terminated_fn: the env's ``compute_terminated``; required with ``recompute_terminated`` when
            ``reward_fn`` is given (otherwise both come later, through :meth:`set_functions`).
        device: ``None`` to sample numpy arrays, or a torch device (``"cpu"``, ``"cuda"``, ...) to sample
            torch tensors there (torch is imported only then).
        seed: seed of the storage's own ``np.random.Generator`` (an int, a ``SeedSequence``, a
            ``Generator``, or ``None`` for fresh entropy). NumPy's global random state is never used.
        borrow_arrays: keep references to the arrays given to :meth:`add` until they are written
            (faster; the caller must not modify them in place afterwards) instead of copying them.
        flush_every: staged steps are written to the ring in blocks of at most this many.
        pickle_functions: whether pickling keeps ``reward_fn`` and ``terminated_fn`` (attribute of the
            same name). ``False`` pickles them as ``None``, for functions that are bound methods of an
            env which should not travel with the storage: give them again after loading, with
            :meth:`set_functions`.
        check_finite: refuse, in :meth:`add`, float observations, actions and rewards that are NaN or
            infinite (they would poison training); ``False`` stores them as they are, slightly faster.

    A step whose arrays do not match the spaces (shape, dtype kind, keys) is refused by :meth:`add`
    with a one-line error, before anything is stored: the storage stays as it was. Construction
    warns when the storage needs more memory than is available (see :func:`available_memory`).

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
        self.device = device
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self._layout = RecordLayout(field_specs(observation_space), *action_spec(action_space))
        self.steps_per_env = max(capacity // self.n_envs, 1)
        self.borrow_arrays = bool(borrow_arrays)
        self.check_finite = bool(check_finite)
        self._check = StepCheck(self._layout, self.n_envs, self.check_finite)
        # A block never covers a row twice, which keeps the bulk writes of flush() order-free.
        self._flush_at = min(check_int("flush_every", flush_every, 1), self.steps_per_env)
        self._warn_if_beyond_memory()
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

    def set_functions(self, reward_fn: GoalFn | None, terminated_fn: GoalFn | None = None) -> None:
        """Set the functions relabelling calls (attributes ``reward_fn`` and ``terminated_fn``).

        For a storage built without them, or unpickled without them (``pickle_functions=False``).
        ``reward_fn`` is needed before relabelled transitions are sampled; with
        ``recompute_terminated``, ``terminated_fn`` is needed along with it.
        """
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

    def check_spaces(
        self,
        observation_space: spaces.Dict | Mapping[str, tuple[tuple[int, ...], Any]],
        action_space: spaces.Space | tuple[tuple[int, ...], Any],
        n_envs: int | None = None,
    ) -> None:
        """Raise ``ValueError`` unless this storage holds steps of these spaces (and ``n_envs`` envs).

        For a storage loaded from a file before it is used with an env (e.g. ``storage.check_spaces(
        env.single_observation_space, env.single_action_space, env.num_envs)``): the spaces must
        give the shapes and dtypes it was built for (bounds do not matter). O(number of keys).
        """
        layout = self._layout
        stored = (layout.obs_specs, (layout.action_shape, layout.action_dtype))
        given = (field_specs(observation_space), action_spec(action_space))
        if given != stored:
            raise ValueError(
                "this HerStorage holds steps of observation_space "
                f"{_specs_text(stored[0])} and action_space {_spec_text(stored[1])}, not of the "
                f"observation_space {_specs_text(given[0])} and action_space {_spec_text(given[1])} "
                "given; build a new storage for these spaces"
            )
        if n_envs is not None and n_envs != self.n_envs:
            raise ValueError(
                f"this HerStorage holds steps of n_envs={self.n_envs} envs, not of the n_envs={n_envs} given; "
                "build a new storage for this number of envs"
            )

    # ------------------------------------------------------------------ state
    def planned_nbytes(self) -> int:
        """Bytes of the arrays the storage allocates (all of :attr:`nbytes`), known before allocating."""
        steps, n = self.steps_per_env, self.n_envs
        return Ring.planned_nbytes(self._layout, steps, n, self.copy_info_dict) + Episodes.planned_nbytes(
            self._layout, steps, n
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
        try:
            self._ring = Ring(self._layout, self.steps_per_env, self.n_envs, self.copy_info_dict)
            self._episodes = Episodes(self._layout, self.steps_per_env, self.n_envs)
        except (MemoryError, ValueError):
            # numpy's own message (MemoryError, or ValueError beyond 2**63 bytes) names an array
            # shape, not the argument to change.
            raise MemoryError(f"{self._sizes_text()}, which could not be allocated; lower capacity") from None
        self._staged: list[tuple[Any, ...]] = []  # added steps not yet written (see add / flush)

    def reset(self) -> None:
        """Forget every stored transition (keeps the generator's state)."""
        self._allocate()

    def __getstate__(self) -> dict[str, Any]:
        self.flush()  # staged steps may reference the caller's arrays: write them before pickling
        state = self.__dict__.copy()
        del state["_check"]  # derived from the layout
        if not self.pickle_functions:
            state["reward_fn"] = None
            state["terminated_fn"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "_episodes" not in state:
            state = _state_from_flat(state)
        state.setdefault("check_finite", True)  # pickled before the option
        state["_check"] = StepCheck(state["_layout"], state["n_envs"], state["check_finite"])
        self.__dict__.update(state)

    @property
    def pos(self) -> int:
        """Row the next added step goes to (counting staged steps)."""
        return (self._ring.pos + len(self._staged)) % self.steps_per_env

    @property
    def full(self) -> bool:
        """Whether the ring has wrapped around at least once (counting staged steps)."""
        return self._ring.full or self._ring.pos + len(self._staged) >= self.steps_per_env

    @property
    def num_transitions(self) -> int:
        """Transitions currently held (complete episodes or not)."""
        return (self.steps_per_env if self.full else self.pos) * self.n_envs

    @property
    def num_sampleable(self) -> int:
        """Transitions that :meth:`sample` can return: those of complete episodes still whole."""
        self.flush()
        return self._episodes.total_valid

    @property
    def nbytes(self) -> int:
        """Bytes of all arrays the storage holds (info dicts, when kept, not included)."""
        self.flush()
        return self._ring.nbytes + self._episodes.nbytes

    @property
    def current_episode_lengths(self) -> np.ndarray:
        """``(n_envs,)``: steps stored of each env's unfinished episode (0 where none is under way)."""
        self.flush()
        return _readonly(self._episodes.current_len.copy())

    @property
    def current_episode_starts(self) -> np.ndarray:
        """``(n_envs,)``: row where each env's unfinished episode started (``pos`` where none is under way)."""
        self.flush()
        return _readonly(self._episodes.current_starts(self._ring.pos))

    def episode_lengths(self) -> np.ndarray:
        """Lengths of the complete episodes that can be sampled, per env concatenated (for inspection)."""
        self.flush()
        return self._episodes.sampleable_lengths()

    def rows(self, name: str) -> Any:
        """Stored ``name`` as read-only arrays of shape ``(steps_per_env, n_envs, ...)`` (see :mod:`her.rows`).

        ``name``: ``"observations"`` or ``"next_observations"`` (dicts of arrays), ``"actions"``,
        ``"rewards"``, ``"terminateds"``, ``"truncateds"``, ``"episode_starts"``, ``"episode_lengths"``,
        ``"infos"``. The layout of stable-baselines3's buffers; for inspection, not for training.
        """
        from her.rows import rows

        self.flush()
        return rows(self._ring, self._episodes, name)

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
        A step both terminated and truncated counts as terminated. ``infos``: None, a list of
        per-env dicts, or gymnasium's dict of arrays (kept only with ``copy_info_dict``).

        Steps are staged and written to the ring in blocks (one array operation per field for many
        steps; always before the next :meth:`sample`). Unless ``borrow_arrays`` is true, the arrays are
        copied here, so the caller may reuse them.

        Every array is checked first (shape ``(n_envs, *shape)`` give or take axes of length 1, a
        dtype that casts to the stored one without changing what the values mean, the observation
        keys, finite values with ``check_finite``): a bad one raises ``ValueError`` or ``TypeError``
        naming it, and nothing of the step is stored. With ``copy_info_dict``, ``infos`` must hold
        one entry per env.
        """
        self._check(observations, actions, rewards, terminateds, truncateds, next_observations)
        if self._ring.infos is not None:
            infos = env_infos(infos, self.n_envs)  # split (and checked) now, not when written
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

    def flush(self) -> None:
        """Write the staged steps to the ring (called by :meth:`sample` and when enough are staged)."""
        staged = self._staged
        if not staged:
            return
        ring, episodes, layout = self._ring, self._episodes, self._layout
        n_steps, n, steps = len(staged), self.n_envs, self.steps_per_env
        # add() checked every step, so only memory can fail here; the steps stay staged until then.
        blocks = {
            layout.obs_names[key]: _stack([step[0][key] for step in staged], (n_steps * n, *shape))
            for key, (shape, _) in layout.obs_specs.items()
        }
        blocks[ACTION] = _stack([step[1] for step in staged], (n_steps * n, *layout.action_shape))
        blocks[REWARD] = _stack([step[2] for step in staged], (n_steps * n,))
        terminated = _stack([step[3] for step in staged], (n_steps, n)).astype(bool, copy=False)
        truncated = _stack([step[4] for step in staged], (n_steps, n)).astype(bool, copy=False)
        self._staged = []
        truncated = truncated & ~terminated
        done = terminated | truncated
        rows = ring.pos + np.arange(n_steps)
        if ring.pos + n_steps > steps:
            rows %= steps
        next_obs = [step[6] for step in staged]
        ordinals = episodes.book_block(ring.episode, rows, done, next_obs)
        blocks[TERMINATED] = terminated.reshape(-1)
        blocks[TRUNCATED] = truncated.reshape(-1)
        blocks[EPISODE] = ordinals.reshape(-1)
        infos = None
        if ring.infos is not None:
            infos = [info for step in staged for info in step[5]]  # split per env by add()
        ring.write(n_steps, blocks, infos)
        episodes.set_pending(next_obs[-1])
        episodes.refresh_window()

    def end_episodes(self) -> np.ndarray:
        """Cut every env's unfinished episode at its latest stored step, marking that step truncated.

        Its next observation (passed with that step) becomes the episode's final observation, so the
        episode can be sampled and relabelled. Used after loading a buffer saved mid-episode when
        the next steps will not continue that episode. Returns the indices of the envs that were cut.
        """
        self.flush()
        if self.check_finite:
            self._check_pending()
        ring = self._ring
        last_row = (ring.pos - 1) % self.steps_per_env
        envs = self._episodes.end_unfinished(last_row)
        if envs.size:
            flat = last_row * self.n_envs + envs
            ring.truncated[flat] = ~ring.terminated[flat]
            ring.mirror_first_row()
        return envs

    def _check_pending(self) -> None:
        """Refuse to cut episodes whose final observation would hold NaN or inf (add() checks the
        next observations of a step only when it ends an episode: others are not stored)."""
        episodes = self._episodes
        under_way = episodes.current_len > 0
        for key, pending in episodes.pending.items():
            if pending.dtype.kind not in "fc":
                continue
            finite = np.isfinite(pending.reshape(self.n_envs, -1)).all(axis=1)
            bad = np.flatnonzero(under_way & ~finite).tolist()
            if bad:
                raise ValueError(
                    f"cannot end the unfinished episode(s) of env(s) {bad}: next_observations[{key!r}] given "
                    "with their latest step holds non-finite values (NaN or inf), which would be their final "
                    "observation; add a step with finite values first"
                )

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int) -> dict[str, Any]:
        """Sample ``batch_size`` transitions of complete episodes, the last ``int(share * B)`` relabelled.

        Returns numpy arrays, or torch tensors on ``device`` when one was given.
        """
        batch = self.sample_arrays(batch_size)
        if self.device is None:
            return batch
        return to_torch(batch, self.device)

    def sample_arrays(self, batch_size: int) -> dict[str, Any]:
        """:meth:`sample`, always as numpy arrays."""
        batch_size = check_int("batch_size", batch_size, 1)
        self.flush()
        if self._episodes.total_valid == 0:
            reason = self._episodes.why_empty()
            if reason is not None:
                raise RuntimeError(f"Unable to sample: {reason}")
            raise RuntimeError(
                "Unable to sample before the end of the first episode. We recommend choosing a value "
                "for learning_starts that is greater than the maximum number of timesteps in the environment."
            )
        n_relabel = int(self.her_ratio * batch_size)
        batch, flat, goals = sample_transitions(
            self._ring, self._episodes, self.goal_selection_strategy, self.rng, batch_size, n_relabel
        )
        if goals is not None:
            self._relabel(batch, flat, goals)
        return batch

    def _relabel(self, batch: dict[str, Any], flat: np.ndarray, goals: np.ndarray) -> None:
        """Rewards (and with ``recompute_terminated`` the flags) of the last ``len(goals)`` transitions,
        whose desired goals are now ``goals``; ``flat``: their ring indices."""
        reward_fn = self.reward_fn
        if reward_fn is None:
            raise RuntimeError(
                "this HerStorage has no reward_fn; give it with storage.set_functions(env.compute_reward) "
                "(or use HerStorage.from_env) before sampling relabelled transitions"
            )
        n_relabel = len(goals)
        v = slice(len(batch["relabelled"]) - n_relabel, None)
        infos = self._ring.infos[flat] if self._ring.infos is not None else None
        # r_t depends on the state s_{t+1} the action led to, so the reward of the relabelled
        # transition compares the *next* achieved goal with the new goal.
        achieved = batch["next_observations"]["achieved_goal"][v]
        rewards = np.asarray(reward_fn(achieved, goals, infos), dtype=np.float32)
        batch["rewards"][v] = rewards.reshape(n_relabel)
        if self.recompute_terminated:
            if self.terminated_fn is None:
                raise RuntimeError(
                    "recompute_terminated=True, but this HerStorage has no terminated_fn; give it with "
                    "storage.set_functions(reward_fn, terminated_fn)"
                )
            flags = np.asarray(self.terminated_fn(achieved, goals, infos), dtype=np.float32)
            batch["terminateds"][v] = flags.reshape(n_relabel)


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _spec_text(spec: tuple[tuple[int, ...], np.dtype]) -> str:
    shape, dtype = spec
    return f"{shape} {dtype}"


def _specs_text(specs: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> str:
    return "{" + ", ".join(f"{key!r}: {_spec_text(spec)}" for key, spec in sorted(specs.items())) + "}"


def available_memory() -> int | None:
    """Bytes of memory new allocations can use, or None where this cannot be told.

    psutil's ``virtual_memory().available`` when psutil is installed (as stable-baselines3), else
    Linux's ``MemAvailable`` (``/proc/meminfo``); either way no more than a cgroup v2 memory limit
    leaves (``/sys/fs/cgroup/memory.max`` less ``memory.current``: a container's limit).
    """
    available: int | None = None
    try:
        psutil = importlib.import_module("psutil")
        available = int(psutil.virtual_memory().available)
    except ImportError:
        available = _meminfo_available()
    limit = _cgroup_room()
    if limit is not None:
        available = limit if available is None else min(available, limit)
    return available


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024  # in kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max", "rb") as f:
            limit = f.read().strip()
        if limit == b"max":
            return None
        with open("/sys/fs/cgroup/memory.current", "rb") as f:
            current = int(f.read().strip())
        return max(int(limit) - current, 0)
    except (OSError, ValueError):
        return None


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


# The episode state of a pickle written before the storage was split into parts: {old key: attribute
# of Episodes}.
_FLAT_EPISODE_KEYS = {
    "_starts": "starts",
    "_current": "current",
    "_current_len": "current_len",
    "_oldest": "oldest",
    "_valid": "valid",
    "_damaged": "damaged",
    "_pending": "pending",
    "_slots": "slots",
    "_ep_start": "start",
    "_ep_len": "length",
    "_final_rows": "finals",
}
# Derived values that pickle kept; they are rebuilt.
_FLAT_DERIVED_KEYS = (
    "_obs_names",
    "_record",
    "_pair_record",
    "_goal_view",
    "_window_start",
    "_window_ends",
    "_window_shift",
    "_window_shift0",
    "_total_valid",
    "_force_event_replay",
)


def _state_from_flat(flat: dict[str, Any]) -> dict[str, Any]:
    """Today's state from that of a storage pickled as one flat ``__dict__`` (before the split).

    Such pickles are ``examples/her_ddpg.py``'s ``storage.pkl`` checkpoints and stable-baselines3's
    ``save_replay_buffer`` files of ``her.HerReplayBuffer`` from that time; the arrays are the same.
    """
    state = dict(flat)
    layout = RecordLayout(state.pop("_obs_specs"), state.pop("_action_shape"), state.pop("_action_dtype"))
    if state["_record"] != layout.record:
        raise ValueError("this pickled HerStorage has a record layout this version cannot read")
    for key in _FLAT_DERIVED_KEYS:
        state.pop(key, None)
    common = {"layout": layout, "steps": state["steps_per_env"], "n_envs": state["n_envs"]}
    ring = Ring.__new__(Ring)
    ring.__setstate__(
        {
            **common,
            "records": state.pop("_ring"),
            "infos": state.pop("_infos"),
            "pos": state.pop("_pos"),
            "full": state.pop("_full"),
        }
    )
    episodes = Episodes.__new__(Episodes)
    episodes.__setstate__({**common, **{new: state.pop(old) for old, new in _FLAT_EPISODE_KEYS.items()}})
    state["pickle_functions"] = state.pop("_pickle_functions")
    state.update(_layout=layout, _ring=ring, _episodes=episodes)
    return state
