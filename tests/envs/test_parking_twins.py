"""Parking's fast special cases against the general functions they stand in for, bit for bit.

Each ``*_fast`` twin (a batch of one on scalars, a looked-up constant, a shortcut for a step's own
info) must give exactly what its general version gives, or a single env would drift from the vector
env and from highway-env; these tests draw random inputs and compare the bits.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from goalenvs.core import info_values_or_default
from goalenvs.envs.parking import SPOT_HEADING, SPOT_POSE, ParkingConfig
from goalenvs.envs.parking.envs import _float_array, _info_values_fast
from goalenvs.envs.parking.lot import (
    MAX_SPEED,
    SPOT_GOAL_OBS,
    closest_spot,
    closest_spot_at_origin_fast,
    goal_observation,
)
from goalenvs.envs.parking.sim import ParkingBatch

CONFIGS = [
    {},
    {"vehicles_count": 10},
    {"add_walls": False},
    {"vehicles_count": 4, "add_walls": False},
    {"simulation_frequency": 20, "policy_frequency": 4, "steering_range": 0.3, "acceleration_range": 2.0},
]


def _bits(x) -> bytes:
    return np.ascontiguousarray(x).tobytes()


def _random_batch(config: dict, n: int, rng: np.random.Generator) -> ParkingBatch:
    """A batch of ``n`` lots with a drawn scene, then a random ego anywhere in (and around) the lot."""
    batch = ParkingBatch(ParkingConfig(**config), n)
    batch.reset([np.random.default_rng(s) for s in rng.integers(0, 2**32, n)])
    batch.x[:] = rng.uniform(-40, 40, n)
    batch.y[:] = rng.uniform(-25, 25, n)
    batch.heading[:] = rng.uniform(-4, 4, n)
    batch.speed[:] = rng.uniform(-MAX_SPEED, MAX_SPEED, n)
    return batch


def _random_action(rng: np.random.Generator, n: int) -> np.ndarray:
    dtype = rng.choice([np.float32, np.float64])
    return rng.uniform(-1.5, 1.5, (n, 2)).astype(dtype)  # past [-1, 1] too: the clipping is mapped


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_one_car_free_driving_test_is_the_broad_phase_on_a_batch_of_one(config):
    rng = np.random.default_rng(0)
    answers = set()
    for _ in range(400):
        batch = _random_batch(config, 1, rng)
        batch.crashed[0] = rng.random() < 0.1
        if rng.random() < 0.1:
            batch.has_impact[0] = batch._any_impact = True
        speed = np.abs(batch.speed)
        general = bool(
            not batch.crashed[0]
            and not batch.has_impact[0]
            and not batch._any_obst_impact
            and speed[0] + batch._max_speed_gain <= MAX_SPEED
            and (not batch.k or batch._broad_phase(speed) is None)
        )
        fast = batch._free_driving_one_car_fast()
        assert fast == general
        answers.add(fast)
    assert answers == {True, False}


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_one_car_simulation_is_the_batch_simulation(config):
    rng = np.random.default_rng(1)
    free = 0
    for _ in range(300):
        batch = _random_batch(config, 1, rng)
        batch.speed[:] = rng.uniform(-30, 30, 1)
        if not batch._free_driving_one_car_fast():
            continue  # the twin's domain: an action in which nothing but driving happens
        free += 1
        general = copy.deepcopy(batch)
        action = _random_action(rng, 1)
        batch._simulate_one_car_fast(action[0])
        general._simulate_batch(action)
        assert _bits(batch._ego) == _bits(general._ego)
        assert not general.crashed.any() and not general.has_impact.any()
    assert free > 50


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_one_car_observation_is_the_batch_observation(config):
    rng = np.random.default_rng(2)
    for _ in range(200):
        batch = _random_batch(config, 1, rng)
        assert _bits(batch._observe_one_car_fast()) == _bits(batch._observe_batch())


def test_walls_only_broad_phase_keeps_a_superset_and_changes_no_bit():
    rng = np.random.default_rng(3)
    batch = _random_batch({}, 500, rng)
    assert batch._walls_only
    reach = batch._reach_slope * np.abs(batch.speed) + batch._reach_base
    fast, general = batch._near_walls_only_fast(reach), batch._near_obstacles(reach)
    assert np.all(fast >= general) and general.any() and not fast.all()
    # Simulated with either, every lot ends in the same state, crashes and pushes included.
    slow = copy.deepcopy(batch)
    slow._walls_only = False
    crashed = 0
    for _ in range(20):
        action = _random_action(rng, 500)
        batch.simulate(action)
        slow.simulate(action)
        for name in ("_ego", "crashed", "impact", "has_impact", "time"):
            assert _bits(getattr(batch, name)) == _bits(getattr(slow, name)), name
        crashed = int(batch.crashed.sum())
    assert crashed > 0


def test_closest_spot_at_origin_is_closest_spot():
    rng = np.random.default_rng(4)
    heading = np.concatenate(
        [
            rng.uniform(-10, 10, 2000),
            2 * np.pi * rng.random(2000),
            np.arange(-8, 9) * np.pi / 4,  # ties between the two rows' spots
            np.nextafter(SPOT_HEADING, np.inf),
            np.nextafter(SPOT_HEADING, -np.inf),
        ]
    )
    zeros = np.zeros_like(heading)
    np.testing.assert_array_equal(closest_spot_at_origin_fast(heading), closest_spot(zeros, zeros, heading))


def test_looked_up_spot_goals_are_goal_observations():
    for k in range(len(SPOT_POSE)):
        assert _bits(SPOT_GOAL_OBS[k : k + 1]) == _bits(goal_observation(SPOT_POSE[k : k + 1]))
    spots = np.random.default_rng(5).integers(0, len(SPOT_POSE), 300)
    assert _bits(SPOT_GOAL_OBS[spots]) == _bits(goal_observation(SPOT_POSE[spots]))


@pytest.mark.parametrize(
    ("info", "batch_shape"),
    [
        ({"crashed": True, "time": 3.2}, ()),
        ({"crashed": False, "time": 7}, ()),
        ({"crashed": np.bool_(True), "time": np.float64(1.0)}, ()),
        ({"crashed": np.array(True), "time": np.array(2.5)}, ()),
        ({"crashed": np.array([True, False, True]), "time": np.array([0.2, 100.0, 4.0])}, (3,)),
        ({"crashed": np.array([True, False]), "time": np.array([0.2, 100.0])}, (2, 2)),
        ({"crashed": True, "time": 1.5}, (4,)),
        ([{"crashed": True, "time": 1.0}, {"crashed": False, "time": 2.0}], (2,)),
    ],
)
def test_info_shortcut_is_info_values_or_default(info, batch_shape):
    for key in ("crashed", "time"):
        fast = np.asarray(_info_values_fast(info, key, batch_shape, False, "unused"))
        general = np.asarray(info_values_or_default(info, key, batch_shape, False, "unused"))
        assert (fast.dtype, fast.shape, _bits(fast)) == (general.dtype, general.shape, _bits(general))


def test_float_array_shortcut_is_asarray():
    rng = np.random.default_rng(6)
    for x in (rng.normal(size=(4, 6)), rng.normal(size=6).astype(np.float32), [0.5, 1, 2], 3):
        fast, general = _float_array(x), np.asarray(x, dtype=np.float64)
        assert (fast.dtype, fast.shape, _bits(fast)) == (general.dtype, general.shape, _bits(general))


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_candidate_pairs_sliced_from_tiles_are_the_gathers(config):
    """The broad phase's obstacle columns and the pairs' shapes are slices of arrays tiled once; they
    must be what np.tile and a gather by column give (and the obstacles' rows what a gather gives)."""
    rng = np.random.default_rng(7)
    batch = _random_batch(config, 64, rng)
    if not batch.k:
        assert batch._broad_phase(np.abs(batch.speed)) is None
        return
    pairs = batch._broad_phase(np.abs(batch.speed))
    assert pairs is not None
    lot, k = pairs
    m = lot.size // batch.k
    assert _bits(k) == _bits(np.tile(np.arange(batch.k), m))
    _, _, obst_xy, vectors, shape = batch._pair_data(pairs)
    assert _bits(shape) == _bits(batch._obst_shape[:, k])
    assert _bits(obst_xy) == _bits(np.array([batch.obst_x[lot, k], batch.obst_y[lot, k]]))
    cos_o, sin_o = batch.obst_cos[lot, k], batch.obst_sin[lot, k]
    assert _bits(vectors[:, 3:]) == _bits(np.array([[cos_o, -sin_o], [sin_o, cos_o]]))
