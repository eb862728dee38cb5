"""The goal functions of an environment: their names, and each as a function of this process.

:data:`GOAL_FUNCTIONS` names the pure functions of the GoalEnv contract; :func:`find_goal_function`
looks one up through an env's wrappers (goalenvs' wrappers and checker use it too);
:func:`resolve_env_function` also reaches envs in other processes, for relabelling.

Relabelling calls the reward function on every sampled batch, so it must be cheap to call. With a
``SubprocVecEnv`` the environments live in worker processes, and stable-baselines3 calls
``env_method("compute_reward", ...)`` on every sample: the whole batch is pickled to a worker and
back. The GoalEnv contract makes ``compute_reward`` pure (it reads no env state), so any instance of
the same environment computes the same rewards. We therefore resolve the function **once** and call
it here:

1. a native gymnasium vector env that defines the method itself (e.g. goalenvs' vector envs): that
   method, already vectorized;
2. local environments (a gymnasium ``Env``/``Wrapper``, stable-baselines3's ``DummyVecEnv``,
   gymnasium's ``SyncVectorEnv``, under any vec-env wrappers such as ``VecNormalize``): the method of
   the first environment, looked up through its wrappers as ``VecEnv.env_method`` would;
3. environments in other processes (``SubprocVecEnv``, ``AsyncVectorEnv``): the env's ``EnvSpec`` is
   fetched (a small picklable record) and one environment is made from it in this process, whose
   method is used.

We deliberately do not fetch the bound method itself with ``get_attr("compute_reward")``: that
pickles the whole environment inside the worker, and an environment that cannot be pickled makes
stable-baselines3's worker die, breaking the training env. When neither route works (a remote env
made without a spec) the resolver returns ``None`` and the caller decides (the stable-baselines3
adapter then falls back to ``env_method`` with a warning; ``HerStorage`` asks for an explicit function).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import gymnasium as gym

__all__ = [
    "GOAL_FUNCTIONS",
    "IDS_IN_WORKERS",
    "env_layers",
    "find_goal_function",
    "locate_env_attribute",
    "resolve_env_attribute",
    "resolve_env_function",
    "resolve_env_function_or_reason",
]

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
