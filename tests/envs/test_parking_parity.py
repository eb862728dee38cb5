"""Parking-v0 against highway-env's parking-v0 (the reference): seeded scenes, rollouts step by step,
the speed cap, wall and parked-car crashes, success, truncation, the reward and the collision test."""

from __future__ import annotations

import importlib.util
import warnings

import gymnasium as gym
import numpy as np
import pytest

import goalenvs.core
from goalenvs.envs.parking import ParkingEnv
from goalenvs.envs.parking.collision import box_collision
from goalenvs.envs.parking.lot import SPOT_CENTRE

HIGHWAY = importlib.util.find_spec("highway_env") is not None
needs_highway = pytest.mark.skipif(not HIGHWAY, reason="highway-env (the reference) is not installed")
TOL = 1e-9


def _highway(config: dict | None = None, seed: int = 0):
    """highway-env's parking env (unwrapped), reset with ``seed``."""
    import highway_env  # noqa: F401  (registers parking-v0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make("parking-v0", config=config or {}).unwrapped
        env.reset(seed=seed)
    return env


def _copy_scene_into_highway(ours: ParkingEnv, ref) -> None:
    """Put ``ours``'s ego, goal and parked cars into highway-env's env ``ref`` (same config)."""
    b = ours._state
    ref.vehicle.position = np.array([b.x[0], b.y[0]])
    ref.vehicle.heading = float(b.heading[0])
    ref.vehicle.speed = float(b.speed[0])
    ref.vehicle.goal.position = b.goal[0, :2].copy()
    ref.vehicle.goal.heading = float(b.goal[0, 2])
    parked = ref.road.vehicles[1:]
    assert len(parked) == b.n_vehicles
    for j, car in enumerate(parked):
        car.position = np.array([b.obst_x[0, j], b.obst_y[0, j]])
        car.heading = float(b.obst_heading[0, j])


def _compare_rollout(ours: ParkingEnv, ref, actions, *, until_end: bool = True) -> list[tuple]:
    """Step both envs with ``actions``; assert equal observations (1e-9), rewards and flags each step.

    Returns (terminated, truncated, info) of each step; stops after the first episode end when
    ``until_end`` (what happens after an episode ends is not part of the contract).
    """
    out = []
    for t, action in enumerate(actions):
        obs_r, reward_r, term_r, trunc_r, info_r = ref.step(action)
        obs_o, reward_o, term_o, trunc_o, info_o = ours.step(action)
        for key in obs_r:
            np.testing.assert_allclose(obs_o[key], obs_r[key], rtol=0, atol=TOL, err_msg=f"{key} at step {t}")
        assert reward_o == pytest.approx(float(reward_r), abs=TOL), f"reward at step {t}"
        assert (term_o, trunc_o) == (bool(term_r), bool(trunc_r)), f"flags at step {t}"
        assert info_o["crashed"] == bool(info_r["crashed"]), f"crashed at step {t}"
        assert info_o["is_success"] == bool(info_r["is_success"]), f"is_success at step {t}"
        assert info_o["speed"] == pytest.approx(info_r["speed"], abs=TOL)
        out.append((term_o, trunc_o, info_o))
        if until_end and (term_o or trunc_o):
            break
    return out


def _smooth_actions(n: int, seed: int) -> np.ndarray:
    """Slowly varying actions that keep the car moderate (float32, as a policy emits)."""
    t = np.arange(n)[:, None]
    phase = np.random.default_rng(seed).uniform(0, 2 * np.pi, 2)
    return (0.3 * np.sin(0.07 * t + phase) + np.array([0.05, 0.0])).astype(np.float32)


@needs_highway
@pytest.mark.parametrize("vehicles_count", [0, 10])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seeded_reset_gives_highway_envs_scene(seed, vehicles_count):
    ref = _highway({"vehicles_count": vehicles_count}, seed)
    obs_r = ref.observation_type.observe()
    env = ParkingEnv(vehicles_count=vehicles_count)
    obs_o, info = env.reset(seed=seed)
    for key in obs_r:
        np.testing.assert_array_equal(obs_o[key], obs_r[key])
    b = env._state
    parked_r = np.array([[*v.position, v.heading] for v in ref.road.vehicles[1:]]).reshape(-1, 3)
    parked_o = np.stack(
        [b.obst_x[0, :vehicles_count], b.obst_y[0, :vehicles_count], b.obst_heading[0, :vehicles_count]], 1
    )
    np.testing.assert_array_equal(parked_o, parked_r)
    assert info == {"speed": 0.0, "crashed": False, "is_success": False, "time": 0.0}


@needs_highway
@pytest.mark.parametrize("seed", [3, 4])
def test_observations_match_highway_for_60_steps_without_collision(seed):
    # No walls, so nothing can stop the 60 steps early; the walls' own tests are below.
    ref = _highway({"add_walls": False}, seed=seed)
    env = ParkingEnv(add_walls=False)
    env.reset(seed=seed)
    steps = _compare_rollout(env, ref, _smooth_actions(60, seed))
    assert len(steps) == 60 and not any(info["crashed"] for *_, info in steps)


@needs_highway
def test_observations_match_highway_from_a_given_pose_with_parked_cars():
    """reset(options=...) places the car; highway-env, given the same scene, drives it the same."""
    config = {"vehicles_count": 6}
    env = ParkingEnv(vehicles_count=6)
    env.reset(
        seed=5, options={"ego_pose": (-10.0, 2.0, 0.3), "goal_pose": (SPOT_CENTRE[3, 0], 14.0, np.pi / 2)}
    )
    ref = _highway(config)
    _copy_scene_into_highway(env, ref)
    actions = np.tile(np.array([0.05, -0.05], np.float32), (55, 1))
    steps = _compare_rollout(env, ref, actions)
    assert len(steps) == 55 and not any(info["crashed"] for *_, info in steps)


@needs_highway
def test_speed_cap_matches_highway():
    """Full throttle with no walls: speed passes 40 m/s, where highway-env caps the held action."""
    config = {"add_walls": False}
    env = ParkingEnv(add_walls=False)
    env.reset(seed=0, options={"ego_pose": (0.0, 0.0, 0.1)})
    ref = _highway(config)
    _copy_scene_into_highway(env, ref)
    actions = np.tile(np.array([1.0, 0.02], np.float32), (60, 1))
    steps = _compare_rollout(env, ref, actions)
    assert len(steps) == 60 and max(info["speed"] for *_, info in steps) > 40.0


@needs_highway
@pytest.mark.parametrize("heading", [-np.pi / 2, 0.4, np.pi - 0.3])
def test_wall_crash_matches_highway(heading):
    """Driving into a wall crashes at the same step, with the same push, in both."""
    env = ParkingEnv()
    env.reset(seed=0, options={"ego_pose": (5.0, -12.0, heading)})
    ref = _highway()
    _copy_scene_into_highway(env, ref)
    actions = np.tile(np.array([0.8, 0.0], np.float32), (80, 1))
    steps = _compare_rollout(env, ref, actions)
    terminated, truncated, info = steps[-1]
    assert terminated and info["crashed"] and not truncated
    assert env.step(np.zeros(2, np.float32))[4]["crashed"], "a crash is permanent"


@needs_highway
def test_parked_car_crash_matches_highway():
    """Driving into a parked car (not a wall) crashes at the same step in both."""
    env = ParkingEnv(vehicles_count=10)
    env.reset(seed=1)
    b = env._state
    j = int(np.argmax(b.obst_y[0, :10]))  # a car in the upper row (y = 14)
    # Put the car in the aisle below it, facing it (reset options would redraw the parked cars).
    b.x[0], b.y[0], b.heading[0] = b.obst_x[0, j] + 0.5, 0.0, np.pi / 2
    ref = _highway({"vehicles_count": 10})
    _copy_scene_into_highway(env, ref)
    actions = np.tile(np.array([0.6, 0.0], np.float32), (40, 1))
    steps = _compare_rollout(env, ref, actions)
    terminated, _, info = steps[-1]
    assert terminated and info["crashed"]
    assert env._state.y[0] < 12.0, "the car stopped at the parked car, not at the wall behind it"


@needs_highway
def test_success_matches_highway():
    """Stopping on the goal ends the episode with is_success in both."""
    env = ParkingEnv()
    env.reset(seed=2)
    gx, gy, gh = env._state.goal[0]
    env.reset(seed=2, options={"ego_pose": (gx, gy - 0.3, gh), "goal_pose": (gx, gy, gh)})
    ref = _highway(seed=2)
    _copy_scene_into_highway(env, ref)
    steps = _compare_rollout(env, ref, [np.zeros(2, np.float32)])
    terminated, _, info = steps[-1]
    assert terminated and info["is_success"] and not info["crashed"]


@needs_highway
def test_truncation_matches_highway():
    env = ParkingEnv(duration=3, add_walls=False)
    env.reset(seed=0)
    ref = _highway({"duration": 3, "add_walls": False})
    steps = _compare_rollout(env, ref, np.zeros((20, 2), np.float32))
    assert len(steps) == 15 and steps[-1][1]


@needs_highway
@pytest.mark.parametrize("p", [0.5, 1.0, 0.3])
def test_compute_reward_matches_highway_on_random_batches(p):
    ref = _highway()
    env = ParkingEnv()
    rng = np.random.default_rng(0)
    ag = rng.normal(size=(64, 6))
    dg = rng.normal(size=(64, 6))
    crashed = rng.random(64) < 0.3
    expected_goal = ref.compute_reward(ag, dg, {}, p=p)
    np.testing.assert_allclose(env.compute_reward(ag, dg, None, p=p), expected_goal, rtol=1e-12)
    # highway-env's step reward: goal term + collision_reward * crashed.
    infos = [{"crashed": bool(c)} for c in crashed]
    np.testing.assert_allclose(
        env.compute_reward(ag, dg, infos, p=p), expected_goal - 5.0 * crashed, rtol=1e-12
    )
    success = expected_goal > -0.12
    if p == 0.5:
        np.testing.assert_array_equal(env.compute_terminated(ag, dg, infos), success | crashed)


@needs_highway
def test_compute_reward_with_an_empty_info_is_highway_envs(monkeypatch):
    monkeypatch.setattr(goalenvs.core, "_WARNED", set())
    ref = _highway()
    rng = np.random.default_rng(2)
    ag, dg = rng.normal(size=(8, 6)), rng.normal(size=(8, 6))
    with pytest.warns(UserWarning, match="crash penalty"):
        np.testing.assert_allclose(
            ParkingEnv().compute_reward(ag, dg, {}), ref.compute_reward(ag, dg, {}), rtol=1e-12
        )


@needs_highway
def test_box_collision_matches_highway_polygon_test():
    """The centre-and-extent form agrees with highway-env's corner-based test on random pairs."""
    from highway_env import utils
    from highway_env.vehicle.objects import Obstacle

    rng = np.random.default_rng(0)
    n = 400
    heading = rng.uniform(-np.pi, np.pi, n)
    travel = rng.uniform(-2.0, 2.0, n)
    heading_o = rng.choice([0.0, np.pi / 2, -np.pi / 2, 0.7], n)
    size_o = rng.choice([0, 1], n)  # a parked car or a wall
    half_length = np.where(size_o, 35.0, 2.5)
    half_width = np.where(size_o, 0.5, 1.0)
    rx = rng.uniform(-6, 6, n)
    ry = rng.uniform(-4, 4, n)
    got = box_collision(
        rx, ry, heading, travel, np.cos(heading_o), np.sin(heading_o), half_length, half_width
    )
    seen = set()
    for i in range(n):
        car = Obstacle(None, [rx[i], ry[i]], heading=heading[i])
        car.LENGTH, car.WIDTH = 5.0, 2.0
        obstacle = Obstacle(None, [0.0, 0.0], heading=heading_o[i])
        obstacle.LENGTH, obstacle.WIDTH = 2 * half_length[i], 2 * half_width[i]
        displacement = travel[i] * np.array([np.cos(heading[i]), np.sin(heading[i])])
        intersecting, will, translation = utils.are_polygons_intersecting(
            car.polygon(), obstacle.polygon(), displacement, np.zeros(2)
        )
        assert (got[0][i], got[1][i]) == (intersecting, will), i
        if will:
            np.testing.assert_allclose(got[2][i], translation, atol=1e-9, err_msg=str(i))
        seen.add((intersecting, will))
    assert seen == {(True, True), (False, True), (False, False)}
