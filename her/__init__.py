"""her: Hindsight Experience Replay storage, goal strategies and framework adapters.

:class:`HerStorage` (framework-free; numpy in, numpy or torch out), the goal selection strategies,
:class:`HerReplayBuffer` (drop-in for ``stable_baselines3.HerReplayBuffer``) and :class:`HerReplayStorage`
(for rllte's). Importing ``her`` imports neither torch, stable-baselines3 nor rllte: the adapters load
(with what they need) on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from goalenvs.core import resolve_env_function
from her.storage import GoalFn, HerStorage
from her.strategies import GoalSelectionStrategy, parse_strategy, register_strategy

if TYPE_CHECKING:
    from her.rllte import HerReplayStorage
    from her.sb3 import HerReplayBuffer

__all__ = [
    "GoalFn",
    "GoalSelectionStrategy",
    "HerReplayBuffer",
    "HerReplayStorage",
    "HerStorage",
    "parse_strategy",
    "register_strategy",
    "resolve_env_function",
]


_ADAPTERS = {"HerReplayBuffer": "her.sb3", "HerReplayStorage": "her.rllte"}


def __getattr__(name: str) -> Any:
    # The adapters need torch (and stable-baselines3 or rllte's types): loaded only when asked for.
    if name not in _ADAPTERS:
        raise AttributeError(f"module 'her' has no attribute {name!r}")
    return getattr(importlib.import_module(_ADAPTERS[name]), name)
