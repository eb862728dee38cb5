"""Parking-v0: reward and relabelling, the vector env (both autoreset modes) and seeding, bad
arguments, rendering. The parity with highway-env is in test_parking_parity.py, the fast twins'
equality with their general versions in test_parking_twins.py."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import goalenvs.core
from goalenvs.envs.parking import ParkingEnv, ParkingVectorEnv
from goalenvs.envs.parking.collision import box_collision
from goalenvs.envs.parking.lot import OBS_SCALES, SPOT_CENTRE, SPOT_HEADING


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
    b = env._state
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


@pytest.mark.parametrize("vehicles_count", [0, 5])
def test_same_step_vector_env_equals_single_envs_through_autoresets(vehicles_count):
    """SAME_STEP: lot i restarts within the step, as single env i resetting after its last step does;
    the ended episode's last observation and info are item i of final_obs and the rows of final_info."""
    n, kwargs = 4, {"vehicles_count": vehicles_count, "duration": 6}  # 30-step episodes at most
    vec = ParkingVectorEnv(num_envs=n, autoreset_mode=AutoresetMode.SAME_STEP, **kwargs)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    obs_v, info_v = vec.reset(seed=20)
    singles = [ParkingEnv(**kwargs) for _ in range(n)]
    for i, env in enumerate(singles):
        obs, info = env.reset(seed=20 + i)
        for key in obs:
            np.testing.assert_array_equal(obs_v[key][i], obs[key])
        assert {key: info_v[key][i] for key in info} == info
    actions = np.random.default_rng(4).uniform(-1, 1, (150, n, 2)).astype(np.float32)
    ends, crashes = 0, 0
    for step_actions in actions:
        obs_v, reward_v, term_v, trunc_v, info_v = vec.step(step_actions)
        for i, env in enumerate(singles):
            obs, reward, term, trunc, info = env.step(step_actions[i])
            assert (reward_v[i], term_v[i], trunc_v[i]) == (reward, term, trunc)
            done = term or trunc
            assert ("final_obs" in info_v) == bool(term_v.any() or trunc_v.any())  # as in SyncVectorEnv
            if "final_obs" in info_v:
                assert info_v["_final_obs"][i] == done and info_v["_final_info"][i] == done
            if done:
                assert info_v["final_obs"][i].keys() == obs.keys()  # lot i's own observation dict
                for key in obs:
                    np.testing.assert_array_equal(info_v["final_obs"][i][key], obs[key])
                assert {key: info_v["final_info"][key][i] for key in info} == info
                ends += 1
                crashes += info["crashed"]
                obs, info = env.reset()  # continues the lot's seeded stream
            for key in obs:
                np.testing.assert_array_equal(obs_v[key][i], obs[key])
            assert {key: info_v[key][i] for key in info} == info
    assert ends >= 3 * n and crashes > 0, "the rollout should cover several autoresets and a crash"


def test_same_step_reset_options_and_make_vec():
    import goalenvs  # noqa: F401  (registers the ids)

    vec = gym.make_vec("goalenvs/Parking-v0", num_envs=2, vehicles_count=2, autoreset_mode="SameStep")
    assert vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    goal = np.array([SPOT_CENTRE[3, 0], SPOT_CENTRE[3, 1], SPOT_HEADING[3]])
    obs, _ = vec.reset(seed=0, options={"ego_pose": [[0.0, 0.0, 0.1], [5.0, 1.0, 0.2]], "goal_pose": goal})
    single, _ = ParkingEnv(vehicles_count=2).reset(
        seed=1, options={"ego_pose": (5.0, 1.0, 0.2), "goal_pose": goal}
    )
    for key in obs:
        np.testing.assert_array_equal(obs[key][1], single[key])


def test_bad_autoreset_mode():
    with pytest.raises(ValueError, match="autoreset_mode must be one of"):
        ParkingVectorEnv(num_envs=2, autoreset_mode="Sometimes")
    with pytest.raises(ValueError, match="autoreset_mode must be one of"):
        ParkingVectorEnv(num_envs=2, autoreset_mode=None)


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


def test_the_envs_spell_out_every_setting_with_the_config_defaults():
    import inspect

    from goalenvs.envs.parking import ParkingConfig

    config = inspect.signature(ParkingConfig).parameters
    for cls in (ParkingEnv, ParkingVectorEnv):
        params = inspect.signature(cls).parameters
        for name, param in config.items():
            assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, (cls, name)
            assert params[name].default == param.default, (cls, name)


def test_the_walls_only_broad_phase_keeps_a_superset_and_changes_no_bit():
    import copy

    from goalenvs.envs.parking import ParkingConfig
    from goalenvs.envs.parking.lot import MAX_SPEED
    from goalenvs.envs.parking.sim import ParkingBatch

    rng = np.random.default_rng(3)
    n = 500
    batch = ParkingBatch(ParkingConfig(), n)
    batch.reset([np.random.default_rng(s) for s in range(n)])
    batch.x[:], batch.y[:] = rng.uniform(-40, 40, n), rng.uniform(-25, 25, n)
    batch.heading[:], batch.speed[:] = rng.uniform(-4, 4, n), rng.uniform(-MAX_SPEED, MAX_SPEED, n)
    assert batch._walls_only
    reach = batch._reach_slope * np.abs(batch.speed) + batch._reach_base
    walls, general = batch._near_walls(reach), batch._near_obstacles(reach)
    assert np.all(walls >= general) and general.any() and not walls.all()
    # Simulated with either broad phase, every lot ends in the same state, crashes and pushes included.
    other = copy.deepcopy(batch)
    other._walls_only = False
    for _ in range(20):
        action = rng.uniform(-1.5, 1.5, (n, 2)).astype(rng.choice([np.float32, np.float64]))
        batch.simulate(action)
        other.simulate(action)
        for name in ("_ego", "crashed", "impact", "has_impact", "time"):
            assert getattr(batch, name).tobytes() == getattr(other, name).tobytes(), name
    assert batch.crashed.any()
