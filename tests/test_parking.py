"""Parking-v0: parity with highway-env's parking-v0, the vector env, seeding, arguments, rendering."""

from __future__ import annotations

import importlib.util
import warnings

import gymnasium as gym
import numpy as np
import pytest

import goalenvs.core
from goalenvs.envs.parking import (
    OBS_SCALES,
    SPOT_CENTRE,
    SPOT_HEADING,
    ParkingEnv,
    ParkingVectorEnv,
    box_collision,
)

HIGHWAY = importlib.util.find_spec("highway_env") is not None
needs_highway = pytest.mark.skipif(not HIGHWAY, reason="highway-env (the reference) is not installed")
TOL = 1e-9


# ------------------------------------------------------------------------------------------ helpers


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
    b = ours._batch
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


# ------------------------------------------------------------------------------- highway parity


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
    b = env._batch
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
    b = env._batch
    j = int(np.argmax(b.obst_y[0, :10]))  # a car in the upper row (y = 14)
    # Put the car in the aisle below it, facing it (reset options would redraw the parked cars).
    b.x[0], b.y[0], b.heading[0] = b.obst_x[0, j] + 0.5, 0.0, np.pi / 2
    ref = _highway({"vehicles_count": 10})
    _copy_scene_into_highway(env, ref)
    actions = np.tile(np.array([0.6, 0.0], np.float32), (40, 1))
    steps = _compare_rollout(env, ref, actions)
    terminated, _, info = steps[-1]
    assert terminated and info["crashed"]
    assert env._batch.y[0] < 12.0, "the car stopped at the parked car, not at the wall behind it"


@needs_highway
def test_success_matches_highway():
    """Stopping on the goal ends the episode with is_success in both."""
    env = ParkingEnv()
    env.reset(seed=2)
    gx, gy, gh = env._batch.goal[0]
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


# ------------------------------------------------------------------------ reward and relabelling


def test_collision_term_travels_in_info_for_relabelling():
    env = ParkingEnv()
    ag = np.zeros((3, 6))
    dg = np.zeros((3, 6))
    infos = np.array([{"crashed": False}, {"crashed": True}, {"crashed": False}], dtype=object)
    np.testing.assert_array_equal(env.compute_reward(ag, dg, infos), [0.0, -5.0, 0.0])
    np.testing.assert_array_equal(env.compute_terminated(ag, dg, infos), [True, True, True])
    np.testing.assert_array_equal(env.compute_reward(ag, dg, None), [0.0, 0.0, 0.0])
    vector_info = {"crashed": np.array([True, False, False])}
    np.testing.assert_array_equal(env.compute_reward(ag, dg, vector_info), [-5.0, 0.0, 0.0])


def test_infos_without_crashed_score_the_goal_term_and_warn_once(monkeypatch):
    # stable-baselines3's HerReplayBuffer passes a list of empty dicts unless copy_info_dict=True.
    monkeypatch.setattr(goalenvs.core, "_WARNED", set())
    env = ParkingEnv()
    rng = np.random.default_rng(1)
    ag, dg = rng.normal(size=(5, 6)), rng.normal(size=(5, 6))
    goal = env.compute_reward(ag, dg, None)
    with pytest.warns(UserWarning) as record:
        np.testing.assert_array_equal(env.compute_reward(ag, dg, [{} for _ in range(5)]), goal)
        np.testing.assert_array_equal(env.compute_reward(ag[0], dg[0], {}), goal[0])  # no second warning
    assert len(record) == 1
    message = str(record[0].message)
    assert "compute_reward got an info without 'crashed'" in message
    assert "crash penalty (collision_reward) is lost in relabelling" in message
    assert "copy_info_dict=True" in message
    # Entries that have the flag keep their penalty in a mixed batch.
    infos = [{}, {"crashed": True}, {}, {}, {"crashed": False}]
    np.testing.assert_array_equal(env.compute_reward(ag, dg, infos), goal + np.array([0, -5.0, 0, 0, 0]))
    with pytest.warns(UserWarning, match="compute_terminated got an info without 'crashed'"):
        np.testing.assert_array_equal(env.compute_terminated(ag, dg, [{}] * 5), goal > -0.12)
    with pytest.warns(UserWarning, match="compute_truncated got an info without 'time'"):
        assert not env.compute_truncated(ag, dg, [{}] * 5).any()
    np.testing.assert_array_equal(env.compute_truncated(ag[:2], dg[:2], [{}, {"time": 100.0}]), [False, True])


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


def test_step_reward_is_compute_reward_through_a_crash():
    env = ParkingEnv(collision_reward=-7.0)
    env.reset(seed=0, options={"ego_pose": (0.0, -15.0, -np.pi / 2)})
    for _ in range(60):
        obs, reward, terminated, truncated, info = env.step(np.array([1.0, 0.0], np.float32))
        assert reward == env.compute_reward(obs["achieved_goal"], obs["desired_goal"], info)
        if terminated:
            break
    assert info["crashed"] and reward < -7.0
    # Relabelled with its own achieved goal, the crashing transition still pays the penalty.
    assert env.compute_reward(obs["achieved_goal"], obs["achieved_goal"], info) == -7.0


# ----------------------------------------------------------------------- vector env and seeding


@pytest.mark.parametrize("vehicles_count", [0, 5])
def test_vector_env_equals_single_envs_from_given_starts(vehicles_count):
    n = 4
    rng = np.random.default_rng(3)
    ego = np.column_stack([rng.uniform(-20, 20, n), rng.uniform(-4, 4, n), rng.uniform(-np.pi, np.pi, n)])
    spots = rng.choice(28, n, replace=False)
    goal = np.column_stack([SPOT_CENTRE[spots], SPOT_HEADING[spots]])
    vec = ParkingVectorEnv(num_envs=n, vehicles_count=vehicles_count)
    obs_v, info_v = vec.reset(seed=10, options={"ego_pose": ego, "goal_pose": goal})
    singles = [ParkingEnv(vehicles_count=vehicles_count) for _ in range(n)]
    starts = [
        s.reset(seed=10 + i, options={"ego_pose": ego[i], "goal_pose": goal[i]})
        for i, s in enumerate(singles)
    ]
    for i, (obs, _info) in enumerate(starts):
        for key in obs:
            np.testing.assert_array_equal(obs_v[key][i], obs[key])
    actions = rng.uniform(-1, 1, (120, n, 2)).astype(np.float32)
    pending = [False] * n
    ends = 0
    for step_actions in actions:
        obs_v, reward_v, term_v, trunc_v, info_v = vec.step(step_actions)
        for i, env in enumerate(singles):
            if pending[i]:  # next-step autoreset: the single env resets where the vector env did
                obs, info = env.reset()
                reward, term, trunc = 0.0, False, False
            else:
                obs, reward, term, trunc, info = env.step(step_actions[i])
            for key in obs:
                np.testing.assert_array_equal(obs_v[key][i], obs[key])
            assert (reward_v[i], term_v[i], trunc_v[i]) == (reward, term, trunc)
            for key in ("crashed", "is_success", "speed", "time"):
                assert info_v[key][i] == info[key]
            pending[i] = term or trunc
            ends += pending[i]
    assert ends > 0, "the rollout should cover autoresets"


def test_vector_env_via_make_vec():
    import goalenvs  # noqa: F401  (registers the ids)

    vec = gym.make_vec("goalenvs/Parking-v0", num_envs=3, vehicles_count=2)
    assert isinstance(vec.unwrapped, ParkingVectorEnv)
    assert vec.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    obs, _ = vec.reset(seed=0)
    assert obs["observation"].shape == (3, 6) and obs["observation"].dtype == np.float64
    out = vec.step(np.zeros((3, 2), np.float32))
    assert out[1].shape == (3,) and out[2].dtype == bool


def test_seeding_is_deterministic():
    def rollout(seed):
        env = ParkingEnv(vehicles_count=4)
        obs, _ = env.reset(seed=seed)
        frames = [obs["observation"], obs["desired_goal"]]
        actions = np.random.default_rng(0).uniform(-1, 1, (80, 2)).astype(np.float32)
        for a in actions:
            obs, _, terminated, truncated, _ = env.step(a)
            frames.append(obs["observation"])
            if terminated or truncated:
                obs, _ = env.reset()  # continues the seeded stream
                frames.append(obs["desired_goal"])
        return np.concatenate(frames)

    np.testing.assert_array_equal(rollout(7), rollout(7))
    assert not np.array_equal(rollout(7), rollout(8))
    vec_a, vec_b = ParkingVectorEnv(num_envs=5), ParkingVectorEnv(num_envs=5)
    np.testing.assert_array_equal(
        vec_a.reset(seed=1)[0]["desired_goal"], vec_b.reset(seed=1)[0]["desired_goal"]
    )
    single = ParkingEnv().reset(seed=3)[0]["desired_goal"]
    np.testing.assert_array_equal(vec_a.reset(seed=[9, 3, 9, 9, 9])[0]["desired_goal"][1], single)


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_copies_continue_exactly_like_the_original(how):
    """A copy taken mid-episode (crashes and pushes included) steps on exactly as the original."""
    import copy
    import pickle

    def clone(env):
        return pickle.loads(pickle.dumps(env)) if how == "pickle" else copy.deepcopy(env)

    rng = np.random.default_rng(5)
    vec = ParkingVectorEnv(num_envs=16, vehicles_count=6)
    vec.reset(seed=0)
    single = ParkingEnv(vehicles_count=6)
    single.reset(seed=0, options={"ego_pose": (0.0, -15.0, -np.pi / 2)})  # drives into the wall
    for _ in range(20):
        vec.step(rng.uniform(-1, 1, (16, 2)))
        single.step(np.array([1.0, 0.0]))
    pairs = [(vec, clone(vec)), (single, clone(single))]
    crashed = 0
    for step in range(60):
        actions = rng.uniform(-1, 1, (16, 2))
        for original, copied in pairs:
            action = actions if original is vec else np.array([1.0, 0.0])
            out_a, out_b = original.step(action), copied.step(action)
            for key in out_a[0]:
                np.testing.assert_array_equal(out_a[0][key], out_b[0][key])
            for a, b in zip(out_a[1:4], out_b[1:4], strict=True):
                np.testing.assert_array_equal(a, b)
            crashed += int(np.sum(out_a[4]["crashed"]))
            if original is single and (out_a[2] or out_a[3]):
                original.reset(seed=step)
                copied.reset(seed=step)
    assert crashed > 0, "the rollout should cover collisions"


def test_goal_sampling_never_uses_the_ego_spot_and_is_uniform_over_the_rest():
    env = ParkingVectorEnv(num_envs=4000, vehicles_count=3)
    obs, _ = env.reset(seed=0)
    b = env._batch
    goal_spot = np.argmin(np.abs(b.goal[:, None, :2] - SPOT_CENTRE[None]).sum(-1), axis=1)
    counts = np.bincount(goal_spot, minlength=28)
    # The ego at (0, 0) sits "on" spot 6 (upper row) or 20 (lower row), by its heading.
    upward = np.sin(b.heading) > 0
    assert not np.any(goal_spot[upward] == 6) and not np.any(
        goal_spot[~upward & (np.cos(b.heading) < 0.99)] == 20
    )
    others = np.delete(counts, [6, 20])
    assert others.min() > 100  # ~143 expected each
    parked = b.parked_spots
    assert np.all(parked != goal_spot[:, None])
    assert np.all(np.sort(parked, axis=1)[:, 1:] != np.sort(parked, axis=1)[:, :-1])
    np.testing.assert_array_equal(obs["desired_goal"][:, 2:4], 0.0)
    np.testing.assert_allclose(obs["desired_goal"][:, :2], b.goal[:, :2] / OBS_SCALES[:2])


# --------------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"reward_weights": (1, 0.3)}, ValueError, "reward_weights"),
        ({"reward_weights": (1, -0.3, 0, 0, 0, 0)}, ValueError, "reward_weights"),
        ({"success_goal_reward": 0}, ValueError, "success_goal_reward"),
        ({"success_goal_reward": "0.1"}, TypeError, "success_goal_reward"),
        ({"collision_reward": float("nan")}, ValueError, "collision_reward"),
        ({"steering_range": 2.0}, ValueError, "steering_range"),
        ({"acceleration_range": -1}, ValueError, "acceleration_range"),
        ({"simulation_frequency": 0}, ValueError, "simulation_frequency"),
        ({"policy_frequency": 2.5}, TypeError, "policy_frequency"),
        ({"simulation_frequency": 15, "policy_frequency": 4}, ValueError, "multiple of policy_frequency"),
        ({"duration": -1}, ValueError, "duration"),
        ({"add_walls": 1}, TypeError, "add_walls"),
        ({"vehicles_count": 27}, ValueError, "vehicles_count"),
        ({"vehicles_count": True}, TypeError, "vehicles_count"),
        ({"render_mode": "ansi"}, ValueError, "render_mode"),
        ({"controlled_vehicles": 2}, TypeError, "controlled_vehicles"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, error, name):
    with pytest.raises(error, match=name):
        ParkingEnv(**kwargs)


def test_bad_reset_options_and_actions():
    env = ParkingEnv()
    with pytest.raises(ValueError, match="ego_pose"):
        env.reset(options={"ego_pose": (1.0, 2.0)})
    with pytest.raises(ValueError, match="goal_pose"):
        env.reset(options={"goal_pose": (1e6, 0.0, 0.0)})
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"config": {}})
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3))
    vec = ParkingVectorEnv(num_envs=2)
    with pytest.raises(gym.error.ResetNeeded):
        vec.step(np.zeros((2, 2)))
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        vec.step(np.zeros(2))
    with pytest.raises(ValueError, match="num_envs"):
        ParkingVectorEnv(num_envs=0)
    with pytest.raises(ValueError, match="seed"):
        vec.reset(seed=[1, 2, 3])


# ------------------------------------------------------------------------------ geometry, render


def test_box_collision_on_simple_boxes():
    # Car (5 x 2) at the origin facing +x; obstacles: a 5 x 2 box overlapping it by 1 m, one 0.5 m
    # ahead of it that the car reaches this step, one far away.
    rx = -np.array([4.0, 5.5, 20.0])
    out = box_collision(
        rx,
        np.zeros(3),
        np.zeros(3),
        np.array([0.0, 1.0, 0.0]),
        np.ones(3),
        np.zeros(3),
        np.full(3, 2.5),
        np.ones(3),
    )
    intersecting, will, translation = out
    np.testing.assert_array_equal(intersecting, [True, False, False])
    np.testing.assert_array_equal(will, [True, True, False])
    np.testing.assert_allclose(translation, [[-1.0, 0.0], [-0.5, 0.0], [0.0, 0.0]], atol=1e-12)


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


def test_rgb_array_render_draws_the_scene():
    env = ParkingEnv(render_mode="rgb_array", vehicles_count=3)
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (400, 640, 3) and frame.dtype == np.uint8
    colours = {tuple(c) for c in frame.reshape(-1, 3)[::7]}
    assert {
        (50, 200, 0),
        (230, 80, 80),
        (100, 200, 255),
        (255, 255, 255),
    } <= colours  # ego, goal, parked, lines
    for _ in range(5):
        env.step(np.array([1.0, 0.5], np.float32))
    assert not np.array_equal(env.render(), frame)
    vec = ParkingVectorEnv(num_envs=2, render_mode="rgb_array")
    vec.reset(seed=0)
    frames = vec.render()
    assert len(frames) == 2 and frames[0].shape == (400, 640, 3)


def test_human_render_mode_listed_only_with_pygame():
    listed = "human" in ParkingEnv.metadata["render_modes"]
    assert listed == (importlib.util.find_spec("pygame") is not None)
    if listed:
        import os

        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        env = ParkingEnv(render_mode="human")
        env.reset(seed=0)
        env.step(np.zeros(2, np.float32))
        env.close()
