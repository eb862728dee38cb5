"""The lot and the car: highway-env's ``parking-v0`` dimensions, spot geometry and goal features.

Constants are highway-env's values (the comments say where they come from). Spot order is
highway-env's lane order, which the seeded draws index into, so it must not change.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "CAR_DIAGONAL",
    "CAR_LENGTH",
    "CAR_WIDTH",
    "LOT_HEIGHT",
    "LOT_WIDTH",
    "MAX_SPEED",
    "MIN_SPEED",
    "N_SPOTS",
    "OBS_DIM",
    "OBS_SCALES",
    "POSE_LIMIT",
    "SPOTS_PER_ROW",
    "SPOT_CENTRE",
    "SPOT_DIRECTION",
    "SPOT_HEADING",
    "SPOT_LATERAL",
    "SPOT_LENGTH",
    "SPOT_POSE",
    "SPOT_START",
    "SPOT_WIDTH",
    "SPOT_Y_OFFSET",
    "WALLS",
    "WALL_THICKNESS",
    "closest_spot",
    "goal_observation",
]

CAR_LENGTH = 5.0  # Vehicle.LENGTH [m]
CAR_WIDTH = 2.0  # Vehicle.WIDTH [m]
CAR_DIAGONAL = math.sqrt(CAR_LENGTH**2 + CAR_WIDTH**2)
MAX_SPEED = 40.0  # Vehicle.MAX_SPEED [m/s]
MIN_SPEED = -40.0  # Vehicle.MIN_SPEED [m/s]

SPOTS_PER_ROW = 14  # ParkingEnv._create_road(spots=14)
SPOT_WIDTH = 4.0  # [m]
SPOT_LENGTH = 8.0  # [m]
SPOT_Y_OFFSET = 10.0  # the rows start 10 m either side of the aisle's centre line
N_SPOTS = 2 * SPOTS_PER_ROW
LOT_WIDTH, LOT_HEIGHT = 70.0, 42.0  # the walls' extent [m]
WALL_THICKNESS = 1.0

#: Observation and goal features ``[x, y, vx, vy, cos_h, sin_h]`` are divided by these.
OBS_SCALES = np.array([100.0, 100.0, 5.0, 5.0, 1.0, 1.0])
OBS_DIM = 6
#: ``reset(options=...)`` poses must lie within this many metres of the lot's centre, in x and y.
POSE_LIMIT = 100.0


def _spot_geometry() -> tuple[np.ndarray, ...]:
    """Start points, unit directions, lateral directions, headings and centres of the 28 spots.

    Spot order is highway-env's lane order: the 14 spots of the row at y in [10, 18] (left to right),
    then the 14 at y in [-18, -10]. Goals and parked cars are drawn by position in this order, so it
    must match for seeded resets to agree with highway-env.
    """
    starts, ends = [], []
    for k in range(SPOTS_PER_ROW):
        x = (k + 1 - SPOTS_PER_ROW // 2) * SPOT_WIDTH - SPOT_WIDTH / 2
        starts.append((x, SPOT_Y_OFFSET))
        ends.append((x, SPOT_Y_OFFSET + SPOT_LENGTH))
    for k in range(SPOTS_PER_ROW):
        x = (k + 1 - SPOTS_PER_ROW // 2) * SPOT_WIDTH - SPOT_WIDTH / 2
        starts.append((x, -SPOT_Y_OFFSET))
        ends.append((x, -SPOT_Y_OFFSET - SPOT_LENGTH))
    start = np.array(starts, dtype=np.float64)
    end = np.array(ends, dtype=np.float64)
    delta = end - start
    length = np.sqrt((delta**2).sum(axis=1))
    direction = delta / length[:, None]
    lateral = np.stack([-direction[:, 1], direction[:, 0]], axis=1)
    heading = np.arctan2(delta[:, 1], delta[:, 0])
    # highway-env places goals and parked cars at lane.position(length / 2, 0) (4 m is half of 8 m).
    centre = start + (SPOT_LENGTH / 2) * direction + 0.0 * lateral
    return start, direction, lateral, heading, centre


SPOT_START, SPOT_DIRECTION, SPOT_LATERAL, SPOT_HEADING, SPOT_CENTRE = _spot_geometry()
SPOT_POSE = np.column_stack([SPOT_CENTRE, SPOT_HEADING])  # (x, y, heading) of a car parked in each spot

# The four walls, in the order highway-env adds them (bottom, top, left, right): centre x, y, heading,
# length, width. The order matters: when the car is about to hit two things, the last one's push wins.
WALLS = np.array(
    [
        [0.0, -LOT_HEIGHT / 2, 0.0, LOT_WIDTH, WALL_THICKNESS],
        [0.0, LOT_HEIGHT / 2, 0.0, LOT_WIDTH, WALL_THICKNESS],
        [-LOT_WIDTH / 2, 0.0, np.pi / 2, LOT_HEIGHT, WALL_THICKNESS],
        [LOT_WIDTH / 2, 0.0, np.pi / 2, LOT_HEIGHT, WALL_THICKNESS],
    ]
)


def wrap_to_pi(angle: np.ndarray) -> np.ndarray:
    """``angle`` (radians) wrapped to [-pi, pi), as highway-env's ``wrap_to_pi``."""
    return ((angle + np.pi) % (2 * np.pi)) - np.pi


def _spot_position_distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The position part of :func:`closest_spot`'s distance, ``(n, 28)`` for positions ``(n,)``."""
    dx = x[:, None] - SPOT_START[:, 0]
    dy = y[:, None] - SPOT_START[:, 1]
    s = dx * SPOT_DIRECTION[:, 0] + dy * SPOT_DIRECTION[:, 1]
    r = dx * SPOT_LATERAL[:, 0] + dy * SPOT_LATERAL[:, 1]
    return np.abs(r) + np.maximum(s - SPOT_LENGTH, 0) + np.maximum(0 - s, 0)


def closest_spot(x: np.ndarray, y: np.ndarray, heading: np.ndarray) -> np.ndarray:
    """Index of the spot nearest each pose ``(n,)`` (metres, radians), by highway-env's lane distance.

    highway-env keeps the spot "under" the ego (its lane index) out of the goal draw; this is
    ``RoadNetwork.get_closest_lane_index``: L1 distance to the spot's segment plus the heading gap.
    """
    angle = np.abs(wrap_to_pi(heading[:, None] - SPOT_HEADING))
    return np.argmin(_spot_position_distance(x, y) + angle, axis=1)


def goal_observation(pose: np.ndarray) -> np.ndarray:
    """The ``desired_goal`` of goal poses ``(m, 3)``: ``[x, y, 0, 0, cos h, sin h] / scales``, ``(m, 6)``."""
    goal_obs = np.zeros((len(pose), OBS_DIM))
    goal_obs[:, :2] = pose[:, :2]
    goal_obs[:, 4] = np.cos(pose[:, 2])
    goal_obs[:, 5] = np.sin(pose[:, 2])
    goal_obs /= OBS_SCALES
    return goal_obs
