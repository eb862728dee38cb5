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
``render`` (numpy frames) and ``envs`` (the task and its two envs).
"""

from goalenvs.envs.parking.config import ParkingConfig
from goalenvs.envs.parking.envs import (
    ParkingEnv,
    ParkingTask,
    ParkingVectorEnv,
    compute_reward,
    compute_terminated,
    compute_truncated,
    goal_reward,
)

__all__ = [
    "ParkingConfig",
    "ParkingEnv",
    "ParkingTask",
    "ParkingVectorEnv",
    "compute_reward",
    "compute_terminated",
    "compute_truncated",
    "goal_reward",
]
