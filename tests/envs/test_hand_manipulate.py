"""Tests of the in-hand manipulation tasks (HandManipulate*: block, egg, pen): registration, fidelity
with Gymnasium-Robotics' ``HandManipulate*-v1``, the goal functions, the vector env, the checker.

Fidelity is tested two ways:

* against golden trajectories recorded from Gymnasium-Robotics 1.4.2 on MuJoCo 3.11.0 and 4.0.0
  (``tests/data/record_hand_golden.py``), in ``tests/envs/test_hand_golden.py``;
* here, against Gymnasium-Robotics itself on the installed MuJoCo, made to run on MuJoCo >= 3.12 by
  the test-only shim of ``tests/data/gr_mujoco_shim.py``: same seeds, full 100-step episodes of seeded
  random actions, observations, rewards, successes, goals, controls and ``qpos`` equal to 1e-9 (in
  practice bit for bit).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

# Import our module before mujoco: it picks a headless OpenGL backend (MUJOCO_GL) if none is set.
pytest.importorskip("goalenvs.envs.hand", reason="the hand tasks need mujoco (pip install goalenvs[fetch])")
if __import__("importlib").util.find_spec("gymnasium_robotics") is None:
    pytest.skip(
        "the hand tasks use gymnasium-robotics' assets (pip install goalenvs[fetch])", allow_module_level=True
    )

import goalenvs
from goalenvs.envs.hand import HandManipulateEnv, HandManipulateVectorEnv, manipulate_distances
from goalenvs.registration import MANIPULATE_VARIANTS
from tests.data.gr_mujoco_shim import register_shimmed_gymnasium_robotics
from tests.envs.mujoco_checks import assert_ids_truncate_themselves

MANIPULATE_IDS = [e.id for e in goalenvs.ENVS if e.name.startswith("HandManipulate")]
TOL = 1e-9
EPISODE = 100


def their_id(our_id: str, touch: str = "") -> str:
    """Gymnasium-Robotics' id of ours: goalenvs/HandManipulateBlockDense-v0 -> HandManipulateBlock{touch}Dense-v1."""
    name = our_id.removeprefix("goalenvs/").removesuffix("-v0")
    dense = name.endswith("Dense")
    return f"{name.removesuffix('Dense')}{touch}{'Dense' if dense else ''}-v1"


@pytest.fixture
def gymnasium_robotics(monkeypatch: pytest.MonkeyPatch):
    """Gymnasium-Robotics' maker, shimmed (test-only) to run on MuJoCo >= 3.12."""
    register_shimmed_gymnasium_robotics(monkeypatch)

    def make(env_id: str):
        return gym.make(env_id).unwrapped  # their class has no time limit of its own

    return make


def ours(env_id: str, **kwargs) -> HandManipulateEnv:
    return gym.make(env_id, check_goal_contract=False, max_steps=None, **kwargs).unwrapped


def test_manipulate_ids_registered_with_gymnasium_robotics_settings(gymnasium_robotics) -> None:
    expected = {
        f"goalenvs/HandManipulate{v[0]}{dense}-v0" for v in MANIPULATE_VARIANTS for dense in ("", "Dense")
    }
    assert set(MANIPULATE_IDS) == expected and len(expected) == 22
    assert_ids_truncate_themselves(MANIPULATE_IDS, after=100)
    for env_id in MANIPULATE_IDS:
        theirs = gym.spec(their_id(env_id))
        mine = gym.spec(env_id)
        assert theirs.max_episode_steps == gym.make(env_id).unwrapped.max_steps == 100
        for key in ("target_position", "target_rotation", "reward_type"):
            assert mine.kwargs[key] == theirs.kwargs.get(key, "sparse"), (env_id, key)
        assert mine.kwargs["object"] in theirs.entry_point.lower()


def run_both(theirs, mine: HandManipulateEnv, seeds: range, rng: np.random.Generator) -> dict[str, float]:
    """Episodes of ``EPISODE`` seeded random steps in both envs, everything compared; the worst differences."""
    worst: dict[str, float] = {}

    def compare(name: str, a, b) -> None:
        diff = float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))
        worst[name] = max(worst.get(name, 0.0), diff)
        assert diff <= TOL, f"{name}: {diff}"

    for seed in seeds:
        a, _ = theirs.reset(seed=seed)
        b, _ = mine.reset(seed=seed)
        for key in a:
            compare(key, a[key], b[key])
        # float32 actions (what a policy gives), partly outside the box; every other seed float64.
        dtype = np.float32 if seed % 2 == 0 else np.float64
        for _ in range(EPISODE):
            act = rng.uniform(-1.2, 1.2, 20).astype(dtype)
            a, ra, ta, tra, ia = theirs.step(act)
            b, rb, tb, trb, ib = mine.step(act)
            for key in a:
                compare(key, a[key], b[key])
            compare("reward", ra, rb)
            compare("is_success", ia["is_success"], ib["is_success"])
            compare("compute_reward", theirs.compute_reward(a["achieved_goal"], a["desired_goal"], ia), rb)
            assert (ta, tra) == (tb, trb) == (False, False)
            compare("ctrl", theirs.data.ctrl, mine.data.ctrl)
            compare("qpos", theirs.data.qpos, mine.data.qpos)
    return worst


@pytest.mark.parametrize("env_id", MANIPULATE_IDS)
def test_matches_gymnasium_robotics(env_id: str, gymnasium_robotics) -> None:
    # Two episodes one after the other: the second starts from what the first left (controls, warm start).
    worst = run_both(gymnasium_robotics(their_id(env_id)), ours(env_id), range(2), np.random.default_rng(7))
    print(f"\n{env_id}: max abs differences over 2 episodes of {EPISODE} steps: {worst}")


@pytest.mark.parametrize(
    ("env_id", "touch", "touch_get_obs"),
    [
        ("goalenvs/HandManipulateBlockRotateZ-v0", "_BooleanTouchSensors", "boolean"),
        ("goalenvs/HandManipulateEggDense-v0", "_ContinuousTouchSensors", "sensordata"),
        ("goalenvs/HandManipulatePenRotate-v0", "_BooleanTouchSensors", "boolean"),
        ("goalenvs/HandManipulateBlockRotateParallelDense-v0", "_ContinuousTouchSensors", "sensordata"),
    ],
)
def test_touch_sensors_match_gymnasium_robotics(
    env_id: str, touch: str, touch_get_obs: str, gymnasium_robotics
) -> None:
    mine = ours(env_id, touch_get_obs=touch_get_obs)
    assert mine.observation_space["observation"].shape == (61 + 92,)
    run_both(gymnasium_robotics(their_id(env_id, touch)), mine, range(2), np.random.default_rng(3))


@pytest.mark.slow
@pytest.mark.parametrize("env_id", MANIPULATE_IDS)
def test_matches_gymnasium_robotics_long(env_id: str, gymnasium_robotics) -> None:
    worst = run_both(gymnasium_robotics(their_id(env_id)), ours(env_id), range(12), np.random.default_rng(11))
    print(f"\n{env_id}: max abs differences over 12 episodes of {EPISODE} steps: {worst}")


def test_starts_that_drop_the_object_are_drawn_again_as_gymnasium_robotics_does(gymnasium_robotics) -> None:
    # The object starts at the palm's edge (6 cm along x), so that some starts fall off and are drawn
    # again. Gymnasium-Robotics' initial_qpos argument cannot be used (its set-up calls an MjData method
    # the mujoco bindings lack), so its start state is edited in place.
    start = [1.06, 0.87, 0.2, 1.0, 0.0, 0.0, 0.0]
    theirs = gymnasium_robotics("HandManipulateBlock-v1")
    adr = theirs.model.joint("object:joint").qposadr[0]
    theirs.initial_qpos[adr : adr + 7] = start
    mine = ours("goalenvs/HandManipulateBlock-v0", initial_qpos={"object:joint": start})
    run_both(theirs, mine, range(6), np.random.default_rng(5))
    assert mine.redrawn_starts >= 1


def test_a_start_state_off_the_palm_raises_instead_of_drawing_forever() -> None:
    # The pen started beside the hand falls to the floor, 20 cm below the palm, every time.
    env = HandManipulateEnv("pen", initial_qpos={"object:joint": [1.3, 0.87, 0.2, 1.0, 0.0, 0.0, 0.0]})
    with pytest.raises(RuntimeError, match="fell off the palm in 100 start draws"):
        env.reset(seed=0)


def random_pose_goals(rng: np.random.Generator, shape: tuple[int, ...], around: np.ndarray) -> np.ndarray:
    """Pose goals near ``around``: positions within centimetres, unit quaternions of either sign, some
    equal to the exact reference orientation."""
    goals = np.empty((*shape, 7))
    goals[..., :3] = around[:3] + rng.normal(scale=0.02, size=(*shape, 3))
    quat = around[3:] + rng.normal(scale=0.1, size=(*shape, 4))
    goals[..., 3:] = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
    flat = goals.reshape(-1, 7)
    flat[::5, 3:] = around[3:]
    flat[1::7, 3:] *= -1.0
    return goals


@pytest.mark.parametrize("env_id", MANIPULATE_IDS)
def test_compute_reward_batched_equals_gymnasium_robotics_per_transition(
    env_id: str, gymnasium_robotics
) -> None:
    theirs = gymnasium_robotics(their_id(env_id))
    mine = ours(env_id)
    obs, _ = mine.reset(seed=0)
    rng = np.random.default_rng(1)
    achieved = random_pose_goals(rng, (4, 6), obs["achieved_goal"])
    desired = random_pose_goals(rng, (4, 6), obs["desired_goal"])
    desired[0, :3] = achieved[0, :3] + rng.normal(scale=0.003, size=(3, 7))  # three poses near: successes
    batched = mine.compute_reward(achieved, desired, None)
    assert batched.shape == (4, 6)
    flat_a, flat_d = achieved.reshape(-1, 7), desired.reshape(-1, 7)
    per_row = np.array([theirs.compute_reward(a, d, None) for a, d in zip(flat_a, flat_d, strict=True)])
    np.testing.assert_allclose(batched.reshape(-1), per_row, rtol=0, atol=TOL)
    assert batched.dtype == (np.float64 if "Dense" in env_id else np.float32)
    if "Dense" not in env_id:
        assert set(np.unique(batched)) <= {-1.0, 0.0} and (batched == 0.0).any()
    if "Pen" in env_id:  # Gymnasium-Robotics' batches are wrong there (the deviation docs/envs.md states)
        with pytest.raises(IndexError):
            theirs.compute_reward(flat_a[:1], flat_d[:1], None)
        d_rot = manipulate_distances(flat_a, flat_d, use_position=True, use_rotation=True, ignore_z=True)[1]
        their_rot = theirs._goal_distance(flat_a, flat_d)[1]
        assert not np.allclose(their_rot, d_rot)
    else:
        np.testing.assert_allclose(theirs.compute_reward(flat_a, flat_d, None), per_row, rtol=0, atol=TOL)


def test_pen_ignores_rotation_about_its_axis_in_every_row() -> None:
    env = HandManipulateEnv("pen", "dense", target_position="ignore")
    obs, _ = env.reset(seed=2)
    goal = obs["desired_goal"]
    rng = np.random.default_rng(0)
    angles = rng.uniform(-np.pi, np.pi, 5)
    from goalenvs.envs.hand.goals import euler2quat, quat2euler

    euler = quat2euler(goal[3:])
    achieved = np.tile(goal, (5, 1))
    # The goal turned about the z Euler angle only: no rotation distance left once z is ignored.
    achieved[:, 3:] = euler2quat(np.column_stack([np.full(5, euler[0]), np.full(5, euler[1]), angles]))
    np.testing.assert_allclose(env.compute_reward(achieved, np.tile(goal, (5, 1)), None), 0.0, atol=1e-7)
    env.ignore_z_target_rotation = False
    assert (env.compute_reward(achieved, np.tile(goal, (5, 1)), None) < -1e-3).all()


def test_rotation_distance_is_gymnasium_robotics_formula_without_absolute_value() -> None:
    q = np.array([0.5, 0.5, 0.5, 0.5])
    a = np.concatenate([np.zeros(3), q])
    b = np.concatenate([np.zeros(3), -q])  # the same orientation, the other sign
    d_pos, d_rot = manipulate_distances(a, b, use_position=True, use_rotation=True, ignore_z=False)
    assert d_pos == 0.0 and d_rot == pytest.approx(2 * np.pi)
    assert manipulate_distances(a, a, use_position=True, use_rotation=True, ignore_z=False)[1] < 1e-7


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_env_replays_single_envs_over_autoresets(mode: AutoresetMode) -> None:
    kwargs = {"object": "egg", "target_rotation": "parallel", "touch_get_obs": "boolean", "max_steps": 4}
    vec = HandManipulateVectorEnv(3, autoreset_mode=mode, num_threads=2, **kwargs)
    singles = [HandManipulateEnv(**kwargs) for _ in range(3)]
    obs, _ = vec.reset(seed=5)
    single_obs = [env.reset(seed=5 + i)[0] for i, env in enumerate(singles)]
    rng = np.random.default_rng(3)
    for _ in range(10):  # past two autoresets
        acts = rng.uniform(-1, 1, (3, 20)).astype(np.float32)
        obs, rew, term, trunc, info = vec.step(acts)
        for i, env in enumerate(singles):
            if mode == AutoresetMode.NEXT_STEP and single_obs[i] is None:  # the vector env reset it
                o, _ = env.reset()
                r, t, tr, success = 0.0, False, False, 0.0
            else:
                o, r, t, tr, inf = env.step(acts[i])
                success = inf["is_success"]
                if mode == AutoresetMode.SAME_STEP and (t or tr):
                    final = info["final_obs"][i]
                    for key in o:
                        np.testing.assert_array_equal(final[key], o[key])
                    o, _ = env.reset()
            single_obs[i] = None if (mode == AutoresetMode.NEXT_STEP and (t or tr)) else o
            for key in o:
                np.testing.assert_array_equal(obs[key][i], o[key])
            assert (rew[i], term[i], trunc[i]) == (r, t, tr)
            assert info["is_success"][i] == success
    vec.close()


def test_vector_env_threads_do_not_change_the_results() -> None:
    vecs = [HandManipulateVectorEnv(5, "pen", num_threads=t, max_steps=4) for t in (1, 3)]
    assert [v.num_threads for v in vecs] == [1, 3]
    results = [v.reset(seed=7) for v in vecs]
    rng = np.random.default_rng(0)
    for _ in range(9):  # past two autoresets
        acts = rng.uniform(-1.5, 1.5, (5, 20)).astype(np.float32)
        results = [v.step(acts) for v in vecs]
        for key in ("observation", "achieved_goal", "desired_goal"):
            np.testing.assert_array_equal(results[0][0][key], results[1][0][key])
        for a, b in zip(results[0][1:4], results[1][1:4], strict=True):
            np.testing.assert_array_equal(a, b)
    for v in vecs:
        v.close()


def test_make_vec_returns_the_native_vector_env() -> None:
    vec = gym.make_vec(
        "goalenvs/HandManipulatePenRotateDense-v0", num_envs=2, vectorization_mode="vector_entry_point"
    )
    assert isinstance(vec, HandManipulateVectorEnv)
    assert (vec.object, vec.reward_type, vec.target_position, vec.distance_threshold) == (
        "pen",
        "dense",
        "ignore",
        0.05,
    )
    vec.close()


@pytest.mark.parametrize("env_id", MANIPULATE_IDS)
def test_goalenvs_check_passes(env_id: str) -> None:
    report = goalenvs.check_goal_env(gym.make(env_id), n_steps=120, seed=0)
    report.raise_if_failed()
    assert not [r for r in report.results if r.status != "pass"]


@pytest.mark.parametrize("touch_get_obs", ["sensordata", "log"])
def test_goalenvs_check_passes_with_touch_sensors(touch_get_obs: str) -> None:
    env = gym.make("goalenvs/HandManipulateEggRotate-v0", touch_get_obs=touch_get_obs)
    report = goalenvs.check_goal_env(env, n_steps=120, seed=0)
    report.raise_if_failed()
    assert not [r for r in report.results if r.status != "pass"]


def test_fixed_and_ignored_targets_keep_the_settled_pose() -> None:
    # Gymnasium-Robotics raises drawing these goals (it calls an MjData method the bindings lack).
    env = HandManipulateEnv(target_position="fixed", target_rotation="fixed")
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        np.testing.assert_array_equal(obs["desired_goal"][:3], obs["achieved_goal"][:3])
        np.testing.assert_allclose(obs["desired_goal"][3:], obs["achieved_goal"][3:], rtol=0, atol=1e-12)
    env = HandManipulateEnv(target_position="ignore", target_rotation="ignore", reward_type="dense")
    obs, _ = env.reset(seed=0)
    assert env.step(env.action_space.sample())[1] == 0.0  # nothing is scored


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"object": "cube"}, ValueError, r"object must be one of \['block', 'egg', 'pen'\], got 'cube'"),
        ({"reward_type": "shaped"}, ValueError, "reward_type must be one of"),
        ({"target_position": "free"}, ValueError, "target_position must be one of"),
        ({"target_rotation": "y"}, ValueError, "target_rotation must be one of"),
        ({"touch_get_obs": "on"}, ValueError, r"touch_get_obs must be one of \[None, 'boolean'"),
        ({"distance_threshold": 0.0}, ValueError, "distance_threshold"),
        ({"rotation_threshold": -1.0}, ValueError, "rotation_threshold"),
        ({"randomize_initial_position": 1}, TypeError, "randomize_initial_position"),
        ({"randomize_initial_rotation": "yes"}, TypeError, "randomize_initial_rotation"),
        ({"ignore_z_target_rotation": 0}, TypeError, "ignore_z_target_rotation"),
        ({"n_substeps": 0}, ValueError, "n_substeps"),
        ({"initial_qpos": {"robot0:nope": 0.0}}, ValueError, "unknown joint 'robot0:nope'"),
        ({"initial_qpos": {"object:joint": [1.0, 0.9]}}, ValueError, "must have 7 value"),
        ({"max_steps": 0}, ValueError, "max_steps"),
    ],
)
def test_bad_arguments(kwargs: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        HandManipulateEnv(**kwargs)


def test_object_defaults_and_settable_scoring() -> None:
    pen = HandManipulateEnv("pen")
    assert (pen.distance_threshold, pen.randomize_initial_rotation, pen.ignore_z_target_rotation) == (
        0.05,
        False,
        True,
    )
    block = HandManipulateEnv("block", distance_threshold=0.02)
    assert (block.distance_threshold, block.randomize_initial_rotation, block.ignore_z_target_rotation) == (
        0.02,
        True,
        False,
    )
    block.rotation_threshold = 0.3
    assert block.settings.rotation_threshold == 0.3
    with pytest.raises(ValueError, match="rotation_threshold"):
        block.rotation_threshold = 0.0
    with pytest.raises(AttributeError):
        block.object = "egg"  # the model is built for one object


def test_render_rgb_array_and_render_does_not_change_the_episode() -> None:
    from gymnasium import error

    shown = HandManipulateEnv(target_position="ignore", render_mode="rgb_array", width=64, height=48)
    plain = HandManipulateEnv(target_position="ignore")
    shown.reset(seed=3)
    plain.reset(seed=3)
    rng = np.random.default_rng(0)
    for t in range(10):
        act = rng.uniform(-1, 1, 20).astype(np.float32)
        a, b = shown.step(act)[0], plain.step(act)[0]
        if t % 3 == 0:
            try:
                frame = shown.render()
            except error.DependencyNotInstalled as exc:  # no OpenGL backend on this machine
                pytest.skip(str(exc))
            assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8
        np.testing.assert_array_equal(a["observation"], b["observation"])
        np.testing.assert_array_equal(shown.data.qpos, plain.data.qpos)


def test_quaternion_functions_are_gymnasium_robotics_bit_for_bit(gymnasium_robotics) -> None:
    from gymnasium_robotics.utils import rotations

    from goalenvs.envs.hand import goals

    rng = np.random.default_rng(0)
    q = rng.normal(size=(500, 4))
    q[:250] /= np.linalg.norm(q[:250], axis=-1, keepdims=True)
    q[0], q[1] = 0.0, [np.sqrt(0.5), 0.0, np.sqrt(0.5), 0.0]  # a zero quaternion; gimbal lock
    p = rng.normal(size=(500, 4))
    np.testing.assert_array_equal(goals.quat_mul(q, p), rotations.quat_mul(q, p))
    with np.errstate(divide="ignore", invalid="ignore"):  # theirs warns on the zero quaternion
        their_euler = rotations.quat2euler(q)
    np.testing.assert_array_equal(goals.quat2euler(q), their_euler)
    np.testing.assert_array_equal(goals.euler2quat(p[:, :3]), rotations.euler2quat(p[:, :3]))
    parallel = np.array([rotations.euler2quat(r) for r in rotations.get_parallel_rotations()])
    np.testing.assert_array_equal(goals.parallel_quats(), parallel)
    # The rotation distance, summed as a dot product here, is theirs bit for bit, pen or not.
    a, b = rng.normal(size=(200, 7)), rng.normal(size=(200, 7))
    a[:, 3:] /= np.linalg.norm(a[:, 3:], axis=-1, keepdims=True)
    b[:, 3:] /= np.linalg.norm(b[:, 3:], axis=-1, keepdims=True)
    for env_id in ("HandManipulateBlock-v1", "HandManipulatePen-v1"):
        theirs = gymnasium_robotics(env_id)
        pen = "Pen" in env_id
        d_rot = manipulate_distances(a, b, use_position=True, use_rotation=True, ignore_z=pen)[1]
        np.testing.assert_array_equal(
            d_rot, [theirs._goal_distance(x, y)[1] for x, y in zip(a, b, strict=True)]
        )


def test_pen_rotation_distance_of_a_few_goals_is_the_batch_path_bit_for_bit() -> None:
    """A step's goals (up to FEW_GOALS) take the goal-by-goal path; a batch the array path: the same
    numbers to the last bit, near gimbal lock, for zero, unnormalised and non-finite quaternions too (those
    count as the identity rotation, as in Gymnasium-Robotics)."""
    from goalenvs.envs.hand.goals import FEW_GOALS

    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(4000, 7)), rng.normal(size=(4000, 7))
    a[:2000, 3:] /= np.linalg.norm(a[:2000, 3:], axis=-1, keepdims=True)
    b[:3000, 3:] /= np.linalg.norm(b[:3000, 3:], axis=-1, keepdims=True)
    a[0, 3:] = b[1, 3:] = [np.sqrt(0.5), 0.0, np.sqrt(0.5), 0.0]  # gimbal lock
    a[2, 3:] = b[3, 3:] = 0.0
    a[4, 3:], b[5, 3:] = np.nan, np.inf
    b[6] = a[6]  # the same pose: the angle is near 0 or, for the other sign, 2 pi
    kwargs = {"use_position": True, "use_rotation": True, "ignore_z": True}
    with np.errstate(all="ignore"):
        batch = manipulate_distances(a, b, **kwargs)[1]
        singles = [manipulate_distances(x, y, **kwargs)[1] for x, y in zip(a, b, strict=True)]
        fours = manipulate_distances(a.reshape(-1, FEW_GOALS, 7), b.reshape(-1, FEW_GOALS, 7), **kwargs)[1]
    np.testing.assert_array_equal(np.array(singles), batch)
    np.testing.assert_array_equal(fours.reshape(-1), batch)
    assert min(batch[6], 2 * np.pi - batch[6]) < 1e-7 and np.isnan(batch[5])
    assert np.array(singles[0]).shape == ()
