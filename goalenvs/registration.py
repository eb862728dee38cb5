"""The one table of goalenvs ids. ``import goalenvs`` registers them all with Gymnasium.

Entry points are strings ("module:callable"), so registering imports nothing heavy (MuJoCo and
friends are imported only when an env that needs them is made), and an env's spec can be written as
JSON: Minari datasets, ``EnvSpec.to_json`` and ``gym.make(spec)`` in another process all work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

__all__ = [
    "ENVS",
    "EnvEntry",
    "MANIPULATE_VARIANTS",
    "make_bitflip",
    "make_env",
    "make_fetch",
    "make_hand_manipulate",
    "make_hand_reach",
    "make_parking",
    "register_envs",
]

NAMESPACE = "goalenvs"


@dataclass(frozen=True)
class EnvEntry:
    """One registered id: what ``gym.make`` / ``gym.make_vec`` need, plus a line for ``goalenvs list``.

    ``entry_point`` is the env class ("module:Class"); ``maker`` is the function Gymnasium is given
    (a "goalenvs.registration:make_*" string), which builds that class and adds the goal contract
    checker (see :func:`make_env`).
    """

    name: str  # id without the namespace, e.g. "BitFlip-v0"
    entry_point: str
    maker: str
    description: str
    vector_entry_point: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None

    @property
    def id(self) -> str:
        return f"{NAMESPACE}/{self.name}"


#: The in-hand manipulation ids: name, object, target position and rotation modes (Gymnasium-Robotics'
#: registration of ``HandManipulate*-v1``; ``Block``, ``Egg`` and ``Pen`` are its aliases of ``...Full``).
MANIPULATE_VARIANTS = (
    ("Block", "block", "random", "xyz", "rotate and move a block to a target pose"),
    ("BlockRotateZ", "block", "ignore", "z", "rotate a block about z to a target orientation"),
    ("BlockRotateParallel", "block", "ignore", "parallel", "rotate a block to an axis-aligned target"),
    ("BlockRotateXYZ", "block", "ignore", "xyz", "rotate a block to a target orientation"),
    ("BlockFull", "block", "random", "xyz", "rotate and move a block to a target pose"),
    ("Egg", "egg", "random", "xyz", "rotate and move an egg to a target pose"),
    ("EggRotate", "egg", "ignore", "xyz", "rotate an egg to a target orientation"),
    ("EggFull", "egg", "random", "xyz", "rotate and move an egg to a target pose"),
    ("Pen", "pen", "random", "xyz", "rotate and move a pen to a target pose"),
    ("PenRotate", "pen", "ignore", "xyz", "rotate a pen to a target orientation"),
    ("PenFull", "pen", "random", "xyz", "rotate and move a pen to a target pose"),
)

ENVS: tuple[EnvEntry, ...] = (
    EnvEntry(
        name="BitFlip-v0",
        entry_point="goalenvs.envs.bitflip:BitFlipEnv",
        maker="goalenvs.registration:make_bitflip",
        vector_entry_point="goalenvs.envs.bitflip:BitFlipVectorEnv",
        description="Flip bits until they match a goal bit string (the HER paper's toy task); n_bits=10.",
        # No max_episode_steps: the episode length is the `max_steps` argument (default n_bits), and
        # the env truncates itself so that `compute_truncated` can agree with `step`.
    ),
    EnvEntry(
        name="Parking-v0",
        entry_point="goalenvs.envs.parking:ParkingEnv",
        maker="goalenvs.registration:make_parking",
        vector_entry_point="goalenvs.envs.parking:ParkingVectorEnv",
        description="Park a car in a goal spot (highway-env's parking-v0, numerically the same, simulated as numpy batches).",
        # No max_episode_steps: the env truncates itself after `duration` simulated seconds (100 s:
        # 500 steps), as highway-env does, so that `compute_truncated` can agree with `step`.
    ),
    *(
        EnvEntry(
            name=f"Fetch{title}{suffix}-v0",
            entry_point="goalenvs.envs.fetch:FetchEnv",
            maker="goalenvs.registration:make_fetch",
            vector_entry_point="goalenvs.envs.fetch:FetchVectorEnv",
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
    *(
        EnvEntry(
            name=f"HandReach{suffix}-v0",
            entry_point="goalenvs.envs.hand:HandReachEnv",
            maker="goalenvs.registration:make_hand_reach",
            vector_entry_point="goalenvs.envs.hand:HandReachVectorEnv",
            description=f"Shadow Hand: bring the five fingertips to a goal ({reward_type} reward; "
            "Gymnasium-Robotics' HandReach-v3 on MuJoCo 3/4).",
            kwargs={"reward_type": reward_type},
            # No max_episode_steps: the env truncates itself after `max_steps` (default 50) steps.
        )
        for reward_type, suffix in (("sparse", ""), ("dense", "Dense"))
    ),
    *(
        EnvEntry(
            name=f"HandManipulate{title}{suffix}-v0",
            entry_point="goalenvs.envs.hand:HandManipulateEnv",
            maker="goalenvs.registration:make_hand_manipulate",
            vector_entry_point="goalenvs.envs.hand:HandManipulateVectorEnv",
            description=f"Shadow Hand: {blurb} ({reward_type} reward; Gymnasium-Robotics' "
            f"HandManipulate{title}-v1 on MuJoCo 3/4).",
            kwargs={
                "object": obj,
                "target_position": position,
                "target_rotation": rotation,
                "reward_type": reward_type,
            },
            # No max_episode_steps: the env truncates itself after `max_steps` (default 100) steps.
        )
        for title, obj, position, rotation, blurb in MANIPULATE_VARIANTS
        for reward_type, suffix in (("sparse", ""), ("dense", "Dense"))
    ),
)


def make_env(entry_point: str, *, check_goal_contract: bool = True, **kwargs: Any) -> gym.Env:
    """Build the env of ``entry_point`` with ``kwargs``, inside a GoalContractChecker unless told not to.

    Every goalenvs id is registered with a ``make_*`` function of this module that calls this one
    with its class (``EnvEntry.maker``), so ``gym.make("goalenvs/X-v0", **kwargs)`` lands here. The
    goal contract checker is switched off with ``gym.make(id, check_goal_contract=False)``: Gymnasium
    passes ``disable_env_checker`` to no entry point, so that flag governs only Gymnasium's own
    PassiveEnvChecker. Construct an env class directly to get the bare env.
    """
    from goalenvs._util import check_bool

    check_bool("check_goal_contract", check_goal_contract)
    env = load_env_creator(entry_point)(**kwargs)
    if not isinstance(env, gym.Env):  # a vector env class belongs in EnvEntry.vector_entry_point
        raise TypeError(f"{entry_point} built a {type(env).__name__}, not a gymnasium.Env")
    if check_goal_contract:
        from goalenvs.wrappers.checker import GoalContractChecker  # light: numpy and gymnasium only

        env = GoalContractChecker(env)
    return env


# The registered entry points: named module-level functions, not ``functools.partial(make_env, ...)``,
# because Gymnasium writes a spec's entry point as JSON (Minari datasets) only when it is a string.


def make_bitflip(*, check_goal_contract: bool = True, **kwargs: Any) -> gym.Env:
    """``gym.make("goalenvs/BitFlip-v0")``: a ``BitFlipEnv(**kwargs)`` (see :func:`make_env`)."""
    return make_env("goalenvs.envs.bitflip:BitFlipEnv", check_goal_contract=check_goal_contract, **kwargs)


def make_parking(*, check_goal_contract: bool = True, **kwargs: Any) -> gym.Env:
    """``gym.make("goalenvs/Parking-v0")``: a ``ParkingEnv(**kwargs)`` (see :func:`make_env`)."""
    return make_env("goalenvs.envs.parking:ParkingEnv", check_goal_contract=check_goal_contract, **kwargs)


def make_fetch(*, check_goal_contract: bool = True, **kwargs: Any) -> gym.Env:
    """``gym.make("goalenvs/Fetch*-v0")``: a ``FetchEnv(**kwargs)`` (see :func:`make_env`)."""
    return make_env("goalenvs.envs.fetch:FetchEnv", check_goal_contract=check_goal_contract, **kwargs)


def make_hand_reach(*, check_goal_contract: bool = True, **kwargs: Any) -> gym.Env:
    """``gym.make("goalenvs/HandReach*-v0")``: a ``HandReachEnv(**kwargs)`` (see :func:`make_env`)."""
    return make_env("goalenvs.envs.hand:HandReachEnv", check_goal_contract=check_goal_contract, **kwargs)


def make_hand_manipulate(*, check_goal_contract: bool = True, **kwargs: Any) -> gym.Env:
    """``gym.make("goalenvs/HandManipulate*-v0")``: a ``HandManipulateEnv(**kwargs)`` (see :func:`make_env`)."""
    return make_env("goalenvs.envs.hand:HandManipulateEnv", check_goal_contract=check_goal_contract, **kwargs)


_BY_ID = {entry.id: entry for entry in ENVS}


def register_envs() -> None:
    """Register every id of :data:`ENVS` with Gymnasium (idempotent).

    Each id's entry point is the string ``EnvEntry.maker`` (a ``make_*`` function of this module: it
    builds the env and adds the goal contract checker); the vector entry point is the vector env class
    itself.
    """
    for entry in ENVS:
        if entry.id in gym.registry:
            continue
        gym.register(
            id=entry.id,
            entry_point=entry.maker,
            vector_entry_point=entry.vector_entry_point,
            max_episode_steps=entry.max_episode_steps,
            kwargs=dict(entry.kwargs),
        )
