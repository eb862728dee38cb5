"""The GoalEnv base class and the small helpers every goal-conditioned task shares.

A goal-conditioned environment keeps one contract that Hindsight Experience Replay relies on:

* its observation space is a ``Dict`` with ``observation``, ``achieved_goal`` and ``desired_goal``;
* ``compute_reward(achieved_goal, desired_goal, info)`` is a pure function of its arguments,
  vectorized over any leading batch shape, and ``step`` returns exactly
  ``compute_reward(obs["achieved_goal"], obs["desired_goal"], info)``;
* ``compute_terminated`` / ``compute_truncated`` follow the same rules for the episode flags.

A replay buffer can then store a transition once and later ask what its reward would have been for
any other goal, without touching the environment's state.

This module is the one place that finds an env's goal functions through its wrappers (the checker,
the wrappers and her's relabelling all use :func:`locate_env_attribute` / :func:`resolve_env_function`).
The ``her`` package imports this module and nothing else of goalenvs; goalenvs imports nothing of her.
The few small checks both use (``check_int``, ``check_bool``, per-env infos) are defined at the end.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = [
    "GOAL_FUNCTIONS",
    "GOAL_KEYS",
    "IDS_IN_WORKERS",
    "ConcurrentUseError",
    "GoalEnv",
    "GoalEnvError",
    "available_memory",
    "check_bool",
    "check_goal_space",
    "check_int",
    "env_info",
    "env_infos",
    "env_layers",
    "find_goal_function",
    "info_values",
    "locate_env_attribute",
    "object_array",
    "range_text",
    "resolve_env_attribute",
    "resolve_env_function",
    "resolve_env_function_or_reason",
]

#: The keys a goal environment's ``Dict`` observation space must have.
GOAL_KEYS: tuple[str, str, str] = ("observation", "achieved_goal", "desired_goal")

ObsT = TypeVar("ObsT")
ActT = TypeVar("ActT")


class GoalEnvError(Exception):
    """An environment breaks the GoalEnv contract that Hindsight Experience Replay relies on."""


class ConcurrentUseError(RuntimeError):
    """An object that one thread at a time may use (a native vector env, a ``FetchEnv``, a HER
    storage) was entered from a second thread while another thread was inside it."""


def check_goal_space(space: gym.Space) -> spaces.Dict:
    """Raise ``GoalEnvError`` unless ``space`` is a goal environment's observation space; return it.

    That is a ``spaces.Dict`` with the keys ``observation``, ``achieved_goal`` and ``desired_goal``,
    whose two goal subspaces have the same shape and dtype (a relabelled goal is an achieved goal put
    where the desired goal was, so the two must be interchangeable). The return value is ``space``
    itself, typed as the ``Dict`` it was found to be.
    """
    if not isinstance(space, spaces.Dict):
        raise GoalEnvError(
            f"a goal environment needs a gymnasium.spaces.Dict observation space with keys "
            f"{list(GOAL_KEYS)}, got {type(space).__name__}"
        )
    missing = [key for key in GOAL_KEYS if key not in space.spaces]
    if missing:
        raise GoalEnvError(
            f"the observation space lacks the key(s) {missing}; a goal environment needs {list(GOAL_KEYS)}, "
            f"it has {list(space.spaces)}"
        )
    achieved, desired = space["achieved_goal"], space["desired_goal"]
    nested = [key for key in GOAL_KEYS[1:] if isinstance(space[key], (spaces.Dict, spaces.Tuple))]
    if nested:
        raise GoalEnvError(
            f"{' and '.join(nested)} {'is a' if len(nested) == 1 else 'are'} {type(space[nested[0]]).__name__} "
            f"space{'s' if len(nested) > 1 else ''}; HER stores and relabels each goal as one array, so goals that are dicts or tuples of "
            "arrays (as Gymnasium-Robotics' FrankaKitchen has) are outside the goal env contract"
        )
    if achieved.shape != desired.shape or achieved.dtype != desired.dtype:
        raise GoalEnvError(
            "achieved_goal and desired_goal spaces differ "
            f"(shape {achieved.shape} vs {desired.shape}, dtype {achieved.dtype} vs {desired.dtype}); "
            "HER puts achieved goals in place of desired goals, so they must have the same shape and dtype"
        )
    return space


def info_values(info: Any, key: str, batch_shape: tuple[int, ...], default: Any = None) -> np.ndarray:
    """Read ``key`` from the info of a batch of transitions as an array of shape ``batch_shape``.

    Accepts every form an info batch takes in practice:

    * ``None`` (no info): every entry is ``default``;
    * one ``dict`` (a single transition, or a vector env's dict of arrays): its value is broadcast
      to ``batch_shape``;
    * a sequence or object array of dicts (a replay buffer's stored infos), of shape ``batch_shape``.

    For ``batch_shape == ()`` from a dict, the result is a numpy scalar (it behaves as a 0-d array).

    Raises ``KeyError`` naming the key when it is missing and no ``default`` is given.
    """
    if info is None:
        if default is None:
            raise KeyError(f"info is None but {key!r} is needed to compute this quantity")
        return np.full(batch_shape, default)
    if isinstance(info, dict) or isinstance(info, Mapping):  # dict first: the fast, common case
        if key not in info:
            if default is None:
                raise KeyError(f"info has no {key!r} entry (keys: {sorted(info)})")
            return np.full(batch_shape, default)
        value = np.asarray(info[key])
        if value.shape == batch_shape:
            return value[()] if not batch_shape else value  # one transition: a numpy scalar, cheap to compare
        return np.broadcast_to(value, batch_shape)
    if isinstance(info, (Sequence, np.ndarray)):
        infos = np.asarray(info, dtype=object)
        flat = infos.reshape(-1)
        values = []
        for item in flat:
            if item is None or key not in item:
                if default is None:
                    raise KeyError(f"an info in the batch has no {key!r} entry")
                values.append(default)
            else:
                values.append(item[key])
        return np.asarray(values).reshape(infos.shape).reshape(batch_shape)
    raise TypeError(f"info must be None, a dict, or a sequence/array of dicts, got {type(info).__name__}")


# Messages already given by warn_once in this process.
_WARNED: set[str] = set()


def warn_once(message: str, stacklevel: int = 3) -> None:
    """Issue ``message`` as a ``UserWarning`` the first time this process asks for it, never again.

    For advice given from inside ``compute_reward`` & co., which a replay buffer calls on every batch.
    """
    if message in _WARNED:
        return
    _WARNED.add(message)
    warnings.warn(message, UserWarning, stacklevel=stacklevel)


# Why an info lacks a key, and how to keep the infos: the end of the warnings below.
NO_INFO_CAUSE = (
    "stable-baselines3's HerReplayBuffer relabels with empty info dicts (her.HerReplayBuffer with "
    "info=None) unless replay_buffer_kwargs=dict(copy_info_dict=True), which keeps each step's info"
)

NO_ELAPSED_STEPS = (
    "{env}'s compute_truncated got an info without 'elapsed_steps': those transitions count as not "
    "truncated. " + NO_INFO_CAUSE + "."
)


def info_values_or_default(
    info: Any, key: str, batch_shape: tuple[int, ...], default: Any, warning: str
) -> np.ndarray:
    """:func:`info_values`, except that an info without ``key`` (or ``info=None``) reads as ``default``.

    The first time that happens in this process, ``warning`` is issued (say what is lost and how to
    keep it): a replay buffer that keeps no infos must not crash training, nor lose a term silently.
    """
    try:
        return info_values(info, key, batch_shape)
    except KeyError:
        warn_once(warning, stacklevel=4)
        return info_values(info, key, batch_shape, default=default)


class GoalEnv(gym.Env[ObsT, ActT], Generic[ObsT, ActT]):
    """A Gymnasium environment whose task is to reach a goal, ready for Hindsight Experience Replay.

    Subclasses set a ``Dict`` observation space (checked by :func:`check_goal_space` at every
    ``reset``) and implement the three pure, vectorized functions below. ``step`` must compute its
    reward, terminated and truncated flags by calling them, so they cannot drift apart.

    Attributes:
        reward_info_keys: the info keys ``compute_reward`` reads (Parking: ``("crashed",)``); HER
            buffers store those entries beside the goals and pass them back when relabelling, so the
            terms they carry are kept. ``goalenvs check`` verifies the declaration.
    """

    reward_info_keys: tuple[str, ...] = ()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsT, dict[str, Any]]:
        """Seed ``self.np_random`` (when ``seed`` is given) and check the observation space.

        Subclasses call this first, then build and return their ``(obs, info)``. Like
        ``gym.Env.reset``, whose signature it keeps, it returns what that base returns (nothing).
        """
        result = super().reset(seed=seed, options=options)
        check_goal_space(self.observation_space)
        return result

    @abstractmethod
    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Reward for reaching ``achieved_goal`` when ``desired_goal`` was asked for.

        Args:
            achieved_goal: goals of shape ``batch_shape + goal_shape`` (``batch_shape`` may be ``()``).
            desired_goal: same shape as ``achieved_goal``.
            info: the step's info dict, a batch of them, or ``None`` (see :func:`info_values`).

        Returns:
            rewards of shape ``batch_shape`` (a 0-d array for a single transition).
        """

    @abstractmethod
    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Whether the episode ends because the task is done (or failed); boolean array of ``batch_shape``."""

    @abstractmethod
    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Whether the episode is cut short (e.g. by a time limit); boolean array of ``batch_shape``."""


# ---------------------------------------------------------------------------- finding goal functions
# The goal functions of an environment: their names, and each as a function of this process.
#
# :data:`GOAL_FUNCTIONS` names the pure functions of the GoalEnv contract; :func:`find_goal_function`
# looks one up through an env's wrappers (goalenvs' wrappers and checker use it too);
# :func:`resolve_env_function` also reaches envs in other processes, for relabelling.
#
# Relabelling calls the reward function on every sampled batch, so it must be cheap to call. With a
# ``SubprocVecEnv`` the environments live in worker processes, and stable-baselines3 calls
# ``env_method("compute_reward", ...)`` on every sample: the whole batch is pickled to a worker and
# back. The GoalEnv contract makes ``compute_reward`` pure (it reads no env state), so any instance of
# the same environment computes the same rewards. We therefore resolve the function **once** and call
# it here:
#
# 1. a native gymnasium vector env that defines the method itself (e.g. goalenvs' vector envs): that
#    method, already vectorized;
# 2. local environments (a gymnasium ``Env``/``Wrapper``, stable-baselines3's ``DummyVecEnv``,
#    gymnasium's ``SyncVectorEnv``, under any vec-env wrappers such as ``VecNormalize``): the method of
#    the first environment, looked up through its wrappers as ``VecEnv.env_method`` would;
# 3. environments in other processes (``SubprocVecEnv``, ``AsyncVectorEnv``): the env's ``EnvSpec`` is
#    fetched (a small picklable record) and one environment is made from it in this process, whose
#    method is used.
#
# We deliberately do not fetch the bound method itself with ``get_attr("compute_reward")``: that
# pickles the whole environment inside the worker, and an environment that cannot be pickled makes
# stable-baselines3's worker die, breaking the training env. When neither route works (a remote env
# made without a spec) the resolver returns ``None`` and the caller decides (the stable-baselines3
# adapter then falls back to ``env_method`` with a warning; ``HerStorage`` asks for an explicit function).

#: The pure functions of the GoalEnv contract, in the order HER needs them.
GOAL_FUNCTIONS: tuple[str, str, str] = ("compute_reward", "compute_terminated", "compute_truncated")


def env_layers(env: Any) -> list[Any]:
    """``env`` and every env it wraps, outermost first (following ``.env`` as Gymnasium wrappers do)."""
    layers = [env]
    while (inner := getattr(layers[-1], "env", None)) is not None and inner is not layers[-1]:
        layers.append(inner)
    return layers


def locate_env_attribute(env: Any, name: str, functions_only: bool = True) -> tuple[Any, Any, int] | None:
    """``(value, provider, index)`` of ``env``'s attribute ``name`` (a function, with ``functions_only``),
    or None.

    Looked up through the wrappers, outermost first, as ``get_wrapper_attr`` does; ``provider`` is the
    layer that has it and ``index`` its place in :func:`env_layers` of ``env``. For a vector env the
    chain of vector wrappers is searched first, then the layers of sub-env 0 of a ``SyncVectorEnv``
    (goal functions are pure, so any sub-env answers for all of them); ``index`` is then
    ``len(env_layers(env))``. In-process envs only (see :func:`resolve_env_function` for the others).
    """
    layers = env_layers(env)
    chains: list[tuple[list[Any], int | None]] = [(layers, None)]
    sub_envs = getattr(layers[-1], "envs", None)
    if isinstance(env, gym.vector.VectorEnv) and sub_envs:
        chains.append((env_layers(sub_envs[0]), len(layers)))
    for chain, index in chains:
        for i, layer in enumerate(chain):
            value = getattr(layer, name, _MISSING)
            if callable(value) if functions_only else value is not _MISSING:
                return value, layer, i if index is None else index
    return None


_MISSING = object()


def find_goal_function(env: Any, name: str) -> Callable[..., Any] | None:
    """``env``'s ``name`` function (see :func:`locate_env_attribute`), or None."""
    found = locate_env_attribute(env, name)
    return None if found is None else found[0]


def resolve_env_attribute(env: Any, name: str) -> Any:
    """``env``'s attribute ``name`` (e.g. ``"reward_info_keys"``) found as :func:`resolve_env_function`
    finds a function (through wrappers, vec envs and worker processes), or None."""
    return resolve_env_function_or_reason(env, name, functions_only=False)[0]


def _wrapper_attr(env: Any, name: str) -> Any:
    """``name`` looked up through gymnasium wrappers (outermost first), as ``env_method`` does."""
    if hasattr(env, "get_wrapper_attr"):
        try:
            return env.get_wrapper_attr(name)
        except AttributeError:
            return None
    return getattr(env, name, None)


def _local_envs(env: Any) -> list[Any] | None:
    """The in-process environments behind a vec env (through vec-env wrappers), or None."""
    base = env
    # stable-baselines3 VecEnvWrapper chains expose the innermost VecEnv as `.unwrapped` (and `.venv`).
    for _ in range(64):
        inner = getattr(base, "venv", None)
        if inner is None:
            break
        base = inner
    envs = getattr(base, "envs", None)
    if isinstance(envs, (list, tuple)) and envs:
        return list(envs)
    return None


# Why "goalenvs/..." ids (and any id registered by an import) may be unknown in worker processes.
IDS_IN_WORKERS = (
    "ids registered by an import, such as goalenvs' (`import goalenvs`), are unknown in SubprocVecEnv "
    "workers that did not run that import: stable-baselines3's default start method (forkserver, else "
    "spawn) starts them fresh, importing only the main module. Fixes: ids with the module prefix, "
    'e.g. "goalenvs:goalenvs/Parking-v0" (gym.make imports goalenvs first, in whichever process makes '
    'the env), or SubprocVecEnv(..., start_method="fork") (workers inherit the main process\' registry)'
)


def _remote_spec(env: Any) -> tuple[Any, str]:
    """The EnvSpec of the first env of a stable-baselines3 VecEnv whose envs live elsewhere, or why not."""
    try:
        specs = env.get_attr("spec", indices=[0])
    except (AttributeError, EOFError, BrokenPipeError, ConnectionError) as err:
        return None, f"their spec could not be fetched ({type(err).__name__}: {err})"
    spec = specs[0] if specs else None
    if spec is None:
        return None, "were not made by gym.make (their spec is None), so none can be rebuilt here"
    return spec, ""


_VECTOR_ONLY_KWARGS = (
    "num_envs",
    "vectorization_mode",
    "vector_kwargs",
    "wrappers",
    "autoreset_mode",
    "num_threads",
    "batched_final_obs",
)


def _env_from_spec(spec: Any) -> tuple[Any, str]:
    """One plain environment made in this process from ``spec`` (a vector env's spec works too), or why not."""
    entry_point = getattr(spec, "entry_point", None)
    if entry_point is None or (isinstance(entry_point, str) and ":" not in entry_point):
        # Gymnasium gives envs made without gym.make a spec too, with entry point "no-entry-point".
        return None, (
            f"its spec ({spec.id!r}) has no entry point to rebuild it from (the env was not made by gym.make)"
        )
    kwargs = {key: value for key, value in (spec.kwargs or {}).items() if key not in _VECTOR_ONLY_KWARGS}
    try:
        # Without the spec's extra wrappers: some (e.g. stable-baselines3's Monitor) cannot be
        # recreated, and the functions we want belong to the environment itself.
        spec = dataclasses.replace(spec, kwargs=kwargs, additional_wrappers=())
        return gym.make(spec, disable_env_checker=True), ""
    except Exception as err:  # an unmakeable spec means "not resolvable here", not a crash of training
        return None, f"making its spec {spec.id!r} here failed ({type(err).__name__}: {err})"


def resolve_env_function(env: Any, name: str) -> Callable[..., Any] | None:
    """Return ``env``'s method ``name`` (e.g. ``"compute_reward"``) as a callable of this process.

    ``env`` may be a gymnasium env or wrapper, a gymnasium vector env, or a stable-baselines3 VecEnv
    (possibly wrapped). Returns ``None`` when the method cannot be had in this process (the env lacks
    it, or the env lives in another process and has no spec to rebuild it from).
    """
    return resolve_env_function_or_reason(env, name)[0]


def resolve_env_function_or_reason(env: Any, name: str, functions_only: bool = True) -> tuple[Any, str]:
    """:func:`resolve_env_function`, and when it gives ``None``, why (a clause for a warning)."""
    if isinstance(env, gym.Env):
        return _found(_wrapper_attr(env, name), name)
    if isinstance(env, gym.vector.VectorEnv):
        base = env.unwrapped
        # Vector wrappers first, then a native vector env's own function (already vectorized).
        own = find_goal_function(env, name) if functions_only else getattr(base, name, None)
        if own is not None:
            return own, ""
        local = _local_envs(base)
        if local is not None:
            return _found(_wrapper_attr(local[0], name), name)
        spec = getattr(base, "spec", None) or getattr(env, "spec", None)
        reason = "its envs run in other processes and it has no spec to rebuild one from"
    else:  # a stable-baselines3 VecEnv, through its VecEnvWrappers
        local = _local_envs(env)
        if local is not None:
            return _found(_wrapper_attr(local[0], name), name)
        spec, reason = _remote_spec(env)
        reason = f"its envs run in other processes and {reason}"
    if spec is None:
        return None, reason
    # Pure functions make the local env's state irrelevant; the bound method we return keeps it alive.
    local_env, why = _env_from_spec(spec)
    if local_env is None:
        return None, f"its envs run in other processes, and {why}"
    return _found(_wrapper_attr(local_env, name), name)


def _found(function: Any, name: str) -> tuple[Callable[..., Any] | None, str]:
    return (function, "") if function is not None else (None, f"the env defines no {name}")


# ---------------------------------------------------------------------------- shared small helpers
# Argument checks and per-env infos: goalenvs' envs and wrappers (through goalenvs._util) and her use them.


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int, or a one-line error naming ``name`` and the accepted range.

    Bools are refused (``True`` is an int to Python, never a count to a user).
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be{range_text(low, high)}, got {value}")
    return int(value)


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is a bool (numpy's included), else a one-line error."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} ({value!r})")
    return bool(value)


def range_text(low: float | None, high: float | None, strict: bool = False) -> str:
    """The accepted range in an error message: `` in [low, high]``, `` >= low``, ... (empty if none)."""
    lo, hi = (">", "<") if strict else (">=", "<=")
    if low is not None and high is not None:
        return f" in [{low}, {high}]" if not strict else f" in ({low}, {high})"
    if low is not None:
        return f" {lo} {low}"
    if high is not None:
        return f" {hi} {high}"
    return ""


def env_info(infos: Any, i: int, n: int | None = None) -> dict[str, Any]:
    """Env ``i``'s info from a vector step's infos.

    ``infos`` is Gymnasium's dict of arrays (a key counts for env ``i`` where its ``"_" + key`` mask
    is True or absent; nested dicts such as ``final_info`` are sliced the same way), a sequence of
    per-env dicts (stable-baselines3's ``VecEnv``), or None (an empty dict). Only numpy arrays with a
    leading axis (of length ``n``, when given) are sliced; any other value is shared by every env.
    """
    if infos is None:
        return {}
    if not isinstance(infos, Mapping):
        item = infos[i]
        return dict(item) if isinstance(item, Mapping) else item
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get("_" + key)
        if mask is not None and not np.asarray(mask)[i]:
            continue
        if isinstance(value, Mapping):
            out[key] = env_info(value, i, n)
        elif isinstance(value, np.ndarray) and value.ndim >= 1 and (n is None or len(value) == n):
            out[key] = value[i]
        else:
            out[key] = value
    return out


def env_infos(infos: Any, n_envs: int) -> list[Any]:
    """The ``n_envs`` per-env infos of a vector step (see :func:`env_info`); None gives Nones."""
    if infos is None:
        return [None] * n_envs
    if not isinstance(infos, Mapping):
        if not isinstance(infos, (Sequence, np.ndarray)):
            raise TypeError(
                f"infos must be None, a list of dicts or a dict of arrays, got {type(infos).__name__}"
            )
        if len(infos) != n_envs:
            raise ValueError(f"infos must have one entry per env ({n_envs}), got {len(infos)}")
        return list(infos)
    return [env_info(infos, i, n_envs) for i in range(n_envs)]


def object_array(items: Sequence[Any]) -> np.ndarray:
    """A 1-d object array holding ``items`` as they are (``np.array`` would nest sequences)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def available_memory() -> int | None:
    """Bytes of memory new allocations can use, or None where this cannot be told.

    psutil's ``virtual_memory().available`` when psutil is installed (as stable-baselines3), else
    Linux's ``MemAvailable`` (``/proc/meminfo``); either way no more than a cgroup v2 memory limit
    leaves (``/sys/fs/cgroup/memory.max`` less ``memory.current``: a container's limit). The native
    vector envs' ``num_envs`` check uses it, and HerStorage's memory check may.
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
