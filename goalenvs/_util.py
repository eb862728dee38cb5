"""Small helpers shared across the package: argument validation, wrapper chains, per-env infos.

One home for each, so every error message for a bad argument reads the same way and every lookup
through a wrapper chain follows the same rules. Nothing here is public API.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int, or a one-line error naming ``name`` and the accepted range.

    Bools are refused (``True`` is an int to Python, never a count to a user).
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be{_range(low, high)}, got {value}")
    return int(value)


def check_real(
    name: str, value: Any, low: float | None = None, high: float | None = None, *, strict: bool = False
) -> float:
    """``value`` as a finite float (``low < value`` when ``strict``, else ``low <= value``; same for ``high``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} ({value!r})")
    x = float(value)
    below = low is not None and (x <= low if strict else x < low)
    above = high is not None and (x >= high if strict else x > high)
    if not math.isfinite(x) or below or above:
        raise ValueError(f"{name} must be a finite number{_range(low, high, strict)}, got {value!r}")
    return x


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is a bool (numpy's included), else a one-line error."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} ({value!r})")
    return bool(value)


def check_render_mode(render_mode: str | None, modes: Sequence[str]) -> str | None:
    """``render_mode`` if it is None or one of ``modes``, else a one-line error listing them."""
    if render_mode is not None and render_mode not in modes:
        raise ValueError(f"render_mode must be None or one of {list(modes)}, got {render_mode!r}")
    return render_mode


def _range(low: float | None, high: float | None, strict: bool = False) -> str:
    lo, hi = (">", "<") if strict else (">=", "<=")
    if low is not None and high is not None:
        return f" in [{low}, {high}]" if not strict else f" in ({low}, {high})"
    if low is not None:
        return f" {lo} {low}"
    if high is not None:
        return f" {hi} {high}"
    return ""


def time_limit(env: Any) -> tuple[int, int] | None:
    """``(elapsed_steps, max_episode_steps)`` of the outermost ``TimeLimit`` around ``env``, or None.

    Gymnasium's ``TimeLimit`` keeps both counts in underscore attributes and offers no public getter;
    this is the one place that reads them.
    """
    import gymnasium as gym

    from goalenvs.core import env_layers  # here, not at the top: goalenvs.core imports this module

    for layer in env_layers(env):
        if isinstance(layer, gym.wrappers.TimeLimit):
            return int(layer._elapsed_steps or 0), int(layer._max_episode_steps)
    return None


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
