"""The one table of goalenvs ids. ``import goalenvs`` registers them all with Gymnasium.

Entry points are strings, so registering imports nothing heavy: MuJoCo and friends are imported only
when an env that needs them is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

__all__ = ["ENVS", "EnvEntry", "register_envs"]

NAMESPACE = "goalenvs"


@dataclass(frozen=True)
class EnvEntry:
    """One registered id: what ``gym.make`` / ``gym.make_vec`` need, plus a line for ``goalenvs list``."""

    name: str  # id without the namespace, e.g. "BitFlip-v0"
    entry_point: str
    description: str
    vector_entry_point: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None

    @property
    def id(self) -> str:
        return f"{NAMESPACE}/{self.name}"


ENVS: tuple[EnvEntry, ...] = (
    EnvEntry(
        name="BitFlip-v0",
        entry_point="goalenvs.envs.bitflip:BitFlipEnv",
        vector_entry_point="goalenvs.envs.bitflip:BitFlipVectorEnv",
        description="Flip bits until they match a goal bit string (the HER paper's toy task); n_bits=10.",
        # No max_episode_steps: the episode length is the `max_steps` argument (default n_bits), and
        # the env truncates itself so that `compute_truncated` can agree with `step`.
    ),
    EnvEntry(
        name="Parking-v0",
        entry_point="goalenvs.envs.parking:ParkingEnv",
        vector_entry_point="goalenvs.envs.parking:ParkingVectorEnv",
        description="Park a car in a goal spot (highway-env's parking-v0, numerically the same, ~100x faster).",
        # No max_episode_steps: the env truncates itself after `duration` simulated seconds (100 s:
        # 500 steps), as highway-env does, so that `compute_truncated` can agree with `step`.
    ),
    *(
        EnvEntry(
            name=f"Fetch{title}{suffix}-v0",
            entry_point="goalenvs.envs.fetch:FetchEnv",
            description=f"{blurb} ({reward_type} reward; Gymnasium-Robotics' Fetch{title}-v4 on MuJoCo 3/4).",
            kwargs={"task": task, "reward_type": reward_type},
            max_episode_steps=50,
        )
        for task, title, blurb in (
            ("reach", "Reach", "Fetch arm: move the gripper to a point"),
            ("push", "Push", "Fetch arm: push a block to a point on the table"),
            ("slide", "Slide", "Fetch arm: slide a puck to a point out of reach"),
            ("pick_and_place", "PickAndPlace", "Fetch arm: carry a block to a point on the table or in air"),
        )
        for reward_type, suffix in (("sparse", ""), ("dense", "Dense"))
    ),
)


def register_envs() -> None:
    """Register every id of :data:`ENVS` with Gymnasium (idempotent)."""
    for entry in ENVS:
        if entry.id in gym.registry:
            continue
        gym.register(
            id=entry.id,
            entry_point=entry.entry_point,
            vector_entry_point=entry.vector_entry_point,
            max_episode_steps=entry.max_episode_steps,
            kwargs=dict(entry.kwargs),
        )
