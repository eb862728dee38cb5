"""The one table of goalenvs ids. ``import goalenvs`` registers them all with Gymnasium.

Entry points are strings, so registering imports nothing heavy: MuJoCo and friends are imported only
when an env that needs them is made.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

__all__ = ["ENVS", "EnvEntry", "make_env", "register_envs"]

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
            # No max_episode_steps: the env truncates itself after `max_steps` (default 50) steps.
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


def make_env(**kwargs: Any) -> gym.Env:
    """The entry point ``gym.make`` calls for every goalenvs id: the env, inside a GoalContractChecker.

    Why not register the env class itself: the goal contract checker must go on unless
    ``gym.make(..., disable_env_checker=True)``, and Gymnasium 1.x offers no hook for that. Its
    ``EnvSpec.additional_wrappers`` are applied whatever the flag says (and forbid ``gym.make_vec``'s
    vector entry point), and the flag is not passed to the entry point. So this function reads
    ``gym.make``'s decision from its caller's frame (``env_spec`` and ``disable_env_checker``, the
    names ``gymnasium.make`` has used since 1.0; tests/test_wrappers.py pins them), exactly as
    ``make`` applies Gymnasium's own PassiveEnvChecker. Construct an env class directly to skip both.
    """
    caller = sys._getframe(1)
    if caller.f_code is not gym.envs.registration.make.__code__:
        raise TypeError(
            "goalenvs.registration.make_env is the entry point gym.make calls; use gym.make('goalenvs/...') "
            "or construct the env class (e.g. goalenvs.envs.bitflip.BitFlipEnv) directly"
        )
    env_spec = caller.f_locals["env_spec"]
    disable = caller.f_locals["disable_env_checker"]
    entry = _BY_ID.get(env_spec.id)
    if entry is None:
        raise gym.error.Error(f"{env_spec.id} is not a goalenvs id; goalenvs ids are {sorted(_BY_ID)}")
    env = load_env_creator(entry.entry_point)(**kwargs)
    if disable is False or (disable is None and not env_spec.disable_env_checker):
        from goalenvs.wrappers.checker import GoalContractChecker  # light: numpy and gymnasium only

        env = GoalContractChecker(env)
    return env


_BY_ID = {entry.id: entry for entry in ENVS}


def register_envs() -> None:
    """Register every id of :data:`ENVS` with Gymnasium (idempotent).

    Each id's entry point is :func:`make_env` (which builds ``EnvEntry.entry_point`` and adds the
    goal contract checker); the vector entry point is the vector env class itself.
    """
    for entry in ENVS:
        if entry.id in gym.registry:
            continue
        gym.register(
            id=entry.id,
            entry_point="goalenvs.registration:make_env",
            vector_entry_point=entry.vector_entry_point,
            max_episode_steps=entry.max_episode_steps,
            kwargs=dict(entry.kwargs),
        )
