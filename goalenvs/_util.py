"""Small helpers of goalenvs' own: argument validation, a time limit's counts.

The checks her uses too (``check_int``, ``check_bool``, per-env infos, object arrays) are defined in
:mod:`goalenvs.core` and imported here, so goalenvs' modules find every helper in one place and each
is written once. Nothing here is public API.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

# Defined with the GoalEnv contract (her uses them too); here for goalenvs' own modules.
from goalenvs.core import (
    available_memory,
    check_bool,
    check_int,
    env_info,
    env_infos,
    env_layers,
    object_array,
    range_text,
)

__all__ = [
    "check_bool",
    "check_int",
    "check_real",
    "available_memory",
    "check_render_mode",
    "env_info",
    "env_infos",
    "object_array",
    "time_limit",
]


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
        raise ValueError(f"{name} must be a finite number{range_text(low, high, strict)}, got {value!r}")
    return x


def check_render_mode(render_mode: str | None, modes: Sequence[str]) -> str | None:
    """``render_mode`` if it is None or one of ``modes``, else a one-line error listing them."""
    if render_mode is not None and render_mode not in modes:
        raise ValueError(f"render_mode must be None or one of {list(modes)}, got {render_mode!r}")
    return render_mode


def time_limit(env: Any) -> tuple[int, int] | None:
    """``(elapsed_steps, max_episode_steps)`` of the outermost ``TimeLimit`` around ``env``, or None.

    Gymnasium's ``TimeLimit`` keeps both counts in underscore attributes and offers no public getter;
    this is the one place that reads them.
    """
    import gymnasium as gym

    for layer in env_layers(env):
        if isinstance(layer, gym.wrappers.TimeLimit):
            return int(layer._elapsed_steps or 0), int(layer._max_episode_steps)
    return None
