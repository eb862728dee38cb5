"""Start scenes: highway-env's random draws (ego heading, goal spot, parked cars) and given poses.

Each lot draws from its own generator, the very calls highway-env makes on its ``np_random`` and in
its order, so ``reset(seed=s)`` gives highway-env's scene for ``reset(seed=s)``, and lot ``i`` of a
vector env seeded ``s`` replays the single env seeded ``s + i``. Only the scalar draws loop over
lots (a few calls per new episode); the geometry around them is batched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from goalenvs.envs.parking.lot import (
    LOT_HEIGHT,
    LOT_WIDTH,
    N_SPOTS,
    POSE_LIMIT,
    SPOT_POSE,
    closest_spot,
)

__all__ = ["OPTION_KEYS", "draw_scenes", "pose_option"]

#: The keys ``reset(options=...)`` accepts.
OPTION_KEYS = ("ego_pose", "goal_pose")


def pose_option(options: Mapping[str, Any], key: str, n: int) -> np.ndarray | None:
    """``options[key]`` as ``n`` poses ``(n, 3)`` (x, y in metres, heading in radians), or None when
    absent; one pose ``(3,)`` is given to every lot. A one-line error for a bad shape or value."""
    if key not in options or options[key] is None:
        return None
    pose = np.asarray(options[key], dtype=np.float64)
    if pose.shape == (3,):
        pose = np.broadcast_to(pose, (n, 3))
    if pose.shape != (n, 3):
        raise ValueError(
            f"options[{key!r}] must be (x, y, heading) in metres and radians, or an array of shape "
            f"({n}, 3) with one pose per environment; got shape {np.shape(options[key])}"
        )
    if not np.all(np.isfinite(pose)) or np.any(np.abs(pose[:, :2]) > POSE_LIMIT):
        raise ValueError(
            f"options[{key!r}] must be finite with |x|, |y| <= {POSE_LIMIT} m (the lot spans "
            f"{LOT_WIDTH} x {LOT_HEIGHT} m around (0, 0)), got {pose.tolist()}"
        )
    return pose


def _goal_spot(draw: Any, ego_spot: Any) -> Any:
    """highway-env's goal: the ``draw``-th free spot when only the ego's is taken (k, or k + 1 from
    the ego's spot on)."""
    return draw + (draw >= ego_spot)


def draw_scenes(
    rngs: Sequence[np.random.Generator],
    vehicles_count: int,
    ego_pose: np.ndarray | None = None,
    goal_pose: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One start scene per generator: ego poses ``(n, 3)``, goal poses ``(n, 3)`` and the parked cars'
    spots ``(n, vehicles_count)``.

    highway-env's draws, in its order, on each lot's own generator: the ego's heading
    ``2 pi U(0, 1)`` at (0, 0); the goal, a uniform pick among the spots other than the ego's; then
    each parked car, a uniform pick among the spots still free. A pose given in ``ego_pose`` /
    ``goal_pose`` (shape ``(n, 3)``) replaces its draw; the spot nearest it is kept free.
    """
    n = len(rngs)
    if ego_pose is None:
        ego_pose = np.zeros((n, 3))
        # highway-env draws np_random.uniform(): the same number as random(), with less argument handling.
        ego_pose[:, 2] = 2.0 * np.pi * np.array([rng.random() for rng in rngs])
    ego_spot = closest_spot(ego_pose[:, 0], ego_pose[:, 1], ego_pose[:, 2])
    drawn = goal_pose is None
    goals: list[int] = [0] * n
    if goal_pose is not None:
        goals = closest_spot(goal_pose[:, 0], goal_pose[:, 1], goal_pose[:, 2]).tolist()
    parked = np.empty((n, vehicles_count), dtype=np.intp)
    for i, (rng, ego_i) in enumerate(zip(rngs, ego_spot.tolist(), strict=True)):
        if drawn:
            goals[i] = _goal_spot(int(rng.integers(0, N_SPOTS - 1)), ego_i)
        if vehicles_count:
            # Each parked car takes the k-th spot still free, k drawn on the lot's generator.
            free = [spot for spot in range(N_SPOTS) if spot != ego_i and spot != goals[i]]
            parked[i] = [free.pop(rng.integers(0, len(free))) for _ in range(vehicles_count)]
    if goal_pose is not None:
        return ego_pose, goal_pose, parked
    return ego_pose, SPOT_POSE[np.array(goals, dtype=np.intp)], parked
