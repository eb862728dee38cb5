"""Parking: steer a car into a parking spot, highway-env's ``parking-v0`` in vectorized numpy.

The task is written once, as functions over a leading batch axis (kinematic bicycle dynamics, the
oriented-rectangle collision test, the observation, reward, success and episode-end flags, the random
start); :class:`ParkingEnv` is the batch of one and :class:`ParkingVectorEnv` the batch of N.

It reproduces highway-env 1.12's ``parking-v0`` number for number (the collision test to rounding
error): the same lot, car, action mapping, integration order, collision rule (including its "will
intersect next step" push), goal sampling, observation scaling, reward, success, crash and truncation
rules, and the same random draws: each lot draws from its own generator as highway-env draws from its
``np_random``, so ``reset(seed=s)`` gives the scene highway-env gives for ``reset(seed=s)``.

Modules: ``lot`` (dimensions and spot geometry), ``config`` (the checked settings), ``scenes`` (start
scenes), ``collision`` (the separating-axis test), ``sim`` (the batch of lots and its stepping),
``render`` (numpy frames) and ``envs`` (the envs and the task's functions).
"""

from goalenvs.envs.parking.collision import box_collision
from goalenvs.envs.parking.config import ParkingConfig
from goalenvs.envs.parking.envs import (
    ParkingEnv,
    ParkingVectorEnv,
    compute_reward,
    compute_terminated,
    compute_truncated,
    goal_reward,
)
from goalenvs.envs.parking.lot import (
    CAR_DIAGONAL,
    CAR_LENGTH,
    CAR_WIDTH,
    LOT_HEIGHT,
    LOT_WIDTH,
    MAX_SPEED,
    MIN_SPEED,
    N_SPOTS,
    OBS_DIM,
    OBS_SCALES,
    POSE_LIMIT,
    SPOT_CENTRE,
    SPOT_DIRECTION,
    SPOT_GOAL_OBS,
    SPOT_HEADING,
    SPOT_LATERAL,
    SPOT_LENGTH,
    SPOT_POSE,
    SPOT_START,
    SPOT_WIDTH,
    SPOT_Y_OFFSET,
    SPOTS_PER_ROW,
    WALL_THICKNESS,
    WALLS,
    closest_spot,
)
from goalenvs.envs.parking.render import render_frame
from goalenvs.envs.parking.sim import ParkingBatch

__all__ = [
    "box_collision",
    "CAR_DIAGONAL",
    "CAR_LENGTH",
    "CAR_WIDTH",
    "closest_spot",
    "compute_reward",
    "compute_terminated",
    "compute_truncated",
    "goal_reward",
    "LOT_HEIGHT",
    "LOT_WIDTH",
    "MAX_SPEED",
    "MIN_SPEED",
    "N_SPOTS",
    "OBS_DIM",
    "OBS_SCALES",
    "ParkingBatch",
    "ParkingConfig",
    "ParkingEnv",
    "ParkingVectorEnv",
    "POSE_LIMIT",
    "render_frame",
    "SPOT_CENTRE",
    "SPOT_DIRECTION",
    "SPOT_GOAL_OBS",
    "SPOT_HEADING",
    "SPOT_LATERAL",
    "SPOT_LENGTH",
    "SPOT_POSE",
    "SPOT_START",
    "SPOT_WIDTH",
    "SPOT_Y_OFFSET",
    "SPOTS_PER_ROW",
    "WALL_THICKNESS",
    "WALLS",
]
