"""her: Hindsight Experience Replay storage, goal strategies and a stable-baselines3 adapter.

* :class:`HerStorage`: framework-free replay storage with hindsight relabelling (numpy in, numpy or
  torch out), usable from any training loop;
* :class:`GoalSelectionStrategy`, :func:`parse_strategy` and :func:`register_strategy`: the goal
  selection strategies, and how to add one;
* :class:`HerReplayBuffer`: a drop-in for ``stable_baselines3.HerReplayBuffer``;
* :class:`HerReplayStorage`: a drop-in for rllte's ``HerReplayStorage`` (torch tensors in and out).

Importing ``her`` imports neither torch nor stable-baselines3 nor rllte: ``her.HerReplayBuffer`` and
``her.HerReplayStorage`` load their adapter (and what it needs) on first access.
"""

from __future__ import annotations

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


def __getattr__(name: str) -> Any:
    # The adapters need torch (and stable-baselines3); load them only when asked for.
    if name == "HerReplayBuffer":
        from her.sb3 import HerReplayBuffer

        return HerReplayBuffer
    if name == "HerReplayStorage":
        from her.rllte import HerReplayStorage

        return HerReplayStorage
    raise AttributeError(f"module 'her' has no attribute {name!r}")
