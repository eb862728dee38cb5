"""Tests of the Fetch tasks: API, fidelity with Gymnasium-Robotics v4, determinism, pickling, kwargs.

Fidelity is tested two ways:

* against golden trajectories recorded from Gymnasium-Robotics 1.4.2 on MuJoCo 3.11
  (``tests/data/record_fetch_golden.py``): on the MuJoCo they were recorded with, everything must match
  to 1e-6; on another MuJoCo the physics themselves differ slightly, so there the random streams
  (goal and object offsets) must still match exactly and the physics within the tolerances below;
* against Gymnasium-Robotics itself on the installed MuJoCo, where it is made to run on MuJoCo >= 3.12
  by a test-only shim (its ``mujoco_utils`` compares numpy joint/equality types with MuJoCo enums,
  which fails since 3.12; the shim hands it plain ints): there everything must match to 1e-9.
"""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

# Import our module before mujoco: it picks a headless OpenGL backend (MUJOCO_GL) if none is set,
# which MuJoCo reads when it is first imported.
pytest.importorskip("goalenvs.envs.fetch", reason="the Fetch tasks need mujoco (pip install goalenvs[fetch])")
mujoco = pytest.importorskip("mujoco")
if __import__("importlib").util.find_spec("gymnasium_robotics") is None:
    pytest.skip(
        "the Fetch tasks use gymnasium-robotics' assets (pip install goalenvs[fetch])",
        allow_module_level=True,
    )

import goalenvs  # noqa: E402
import goalenvs.core  # noqa: E402
from goalenvs.envs.fetch import TASKS, FetchEnv, fetch_reward, goal_distance, mat2euler  # noqa: E402
from tests.data.gr_mujoco_shim import register_shimmed_gymnasium_robotics  # noqa: E402
from tests.envs.mujoco_checks import assert_ids_truncate_themselves  # noqa: E402

DATA = Path(__file__).parents[1] / "data"
# Goldens recorded on the installed MuJoCo where there are some (tests/data/record_fetch_golden.py,
# through the shim on >= 3.12), else the 3.11 ones, against which the tolerances below were measured.
_OWN = DATA / f"fetch_golden_mujoco-{mujoco.__version__}.npz"
GOLDEN = np.load(_OWN if _OWN.exists() else DATA / "fetch_golden_mujoco-3.11.0.npz")
GOLDEN_MUJOCO = str(GOLDEN["meta/versions"][0]).split("==")[1]
SAME_MUJOCO = mujoco.__version__ == GOLDEN_MUJOCO
FETCH_IDS = [e.id for e in goalenvs.ENVS if e.name.startswith("Fetch")]
TITLES = {"reach": "Reach", "push": "Push", "slide": "Slide", "pick_and_place": "PickAndPlace"}

# Same MuJoCo as the golden data: bit-for-bit in practice (measured <= 1e-17), the issue asks 1e-6.
TOL_SAME = 1e-6
# Another MuJoCo (measured on 4.0.0 against the 3.11 goldens):
# * start state: 2.8e-4. The 10 set-up steps (200 substeps of the weld dragging the arm) integrate
#   differently (4.0.0 changed the sparse factorisation the Newton solver uses; 4.0.1 fixes a bug in it);
TOL_OTHER_RESET = 1e-3
# * one step from the same state: gripper position 1.4e-4 in every task; all entries 4e-5 (reach),
#   1.1e-3 (push), 2.1e-3 (pick and place). Slide's puck (a cylinder on a slippery table) differs by up
#   to 0.29 in angles and angular velocity: MuJoCo 4.0 changed cylinder contacts (4.0.1 fixes cylinder
#   edge multicontact), so for slide only the gripper entries are compared;
TOL_OTHER_STEP = {"reach": 1e-3, "push": 1e-2, "pick_and_place": 1e-2, "slide": None}
TOL_OTHER_GRIPPER = 1e-3
# * whole reach episodes (no contacts): 3.4e-5. With contacts the start difference grows chaotically
#   (a block nudged at another instant ends elsewhere), so object tasks are compared step by step only.
TOL_OTHER_REACH_EPISODE = 1e-3


def golden_actions(task: str, k: int) -> np.ndarray:
    acts = GOLDEN[f"{task}/ep_actions"][k]
    return acts.astype(np.float32) if GOLDEN[f"{task}/ep_action_f32"][k] else acts


@pytest.fixture(scope="module")
def envs() -> dict[str, FetchEnv]:
    return {task: FetchEnv(task) for task in TASKS}


# --- registration and API --------------------------------------------------------------------------


def test_import_goalenvs_does_not_import_mujoco() -> None:
    code = (
        "import sys, goalenvs; assert 'mujoco' not in sys.modules and 'gymnasium_robotics' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_eight_ids_registered() -> None:
    expected = {f"goalenvs/Fetch{t}{d}-v0" for t in TITLES.values() for d in ("", "Dense")}
    assert set(FETCH_IDS) == expected
    assert_ids_truncate_themselves(FETCH_IDS, after=50)


@pytest.mark.parametrize("env_id", FETCH_IDS)
def test_gymnasium_check_env(env_id: str) -> None:
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    # Unbounded observation boxes are Gymnasium-Robotics' spaces too (positions and velocities have
    # no hard limits); the checker's advice about them is the only warning allowed.
    assert not [str(w.message) for w in caught if "infinity" not in str(w.message)]
    obs, _ = env.reset(seed=0)
    truncated = False
    for _ in range(50):
        assert not truncated
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert reward == env.unwrapped.compute_reward(obs["achieved_goal"], obs["desired_goal"], info)
        assert not terminated
    assert truncated  # the registry's 50-step limit
    env.close()


def test_spaces_and_exposed_state(envs: dict[str, FetchEnv]) -> None:
    for task, env in envs.items():
        assert isinstance(env.model, mujoco.MjModel) and isinstance(env.data, mujoco.MjData)
        assert env.action_space == gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        assert env.observation_space["observation"].shape == ((25,) if TASKS[task].has_object else (10,))
        obs, _ = env.reset(seed=1)
        np.testing.assert_array_equal(obs["desired_goal"], env.goal)
        assert obs["desired_goal"] is not env.goal  # a copy: the caller may mutate it
        # Setting the goal is how users and tools steer the task: the next reward follows it.
        env.goal = obs["achieved_goal"].copy()
        _, reward, *_ = env.step(np.zeros(4, np.float32))
        assert reward == 0.0


# --- fidelity with the golden trajectories ---------------------------------------------------------


@pytest.mark.skipif(
    os.environ.get("CI") != "true", reason="only CI must compare against its own MuJoCo's goldens"
)
def test_ci_compares_against_goldens_of_its_own_mujoco() -> None:
    # Against another MuJoCo's goldens only loose tolerances hold, loose enough to miss a swapped
    # velocity component: CI must have goldens of the MuJoCo it installs.
    assert SAME_MUJOCO, (
        f"no Fetch goldens for MuJoCo {mujoco.__version__} (only {GOLDEN_MUJOCO}): record them with "
        "`python tests/data/record_fetch_golden.py` and commit the file"
    )


@pytest.mark.parametrize("task", list(TASKS))
def test_golden_random_streams_exact(task: str, envs: dict[str, FetchEnv]) -> None:
    """Goal and object offsets come from np_random in Gymnasium-Robotics' order, on any MuJoCo."""
    env = envs[task]
    start_g = GOLDEN[f"{task}/initial_gripper_xpos"]
    for i, seed in enumerate(GOLDEN[f"{task}/reset_seeds"]):
        obs, _ = env.reset(seed=int(seed))
        want, got = (
            GOLDEN[f"{task}/reset_desired"][i] - start_g,
            obs["desired_goal"] - env.initial_gripper_xpos,
        )
        if env.has_object:  # the goal's height is relative to the object's resting height instead
            want[2] = GOLDEN[f"{task}/reset_desired"][i][2] - GOLDEN[f"{task}/height_offset"]
            got[2] = obs["desired_goal"][2] - env.height_offset
            np.testing.assert_allclose(
                obs["observation"][3:5] - env.initial_gripper_xpos[:2],
                GOLDEN[f"{task}/reset_obs"][i][3:5] - start_g[:2],
                rtol=0,
                atol=1e-9,
                err_msg="object start offset",
            )
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9, err_msg=f"goal offset, seed {seed}")


@pytest.mark.parametrize("task", list(TASKS))
def test_golden_resets(task: str, envs: dict[str, FetchEnv]) -> None:
    env = envs[task]
    tol = TOL_SAME if SAME_MUJOCO else TOL_OTHER_RESET
    for i, seed in enumerate(GOLDEN[f"{task}/reset_seeds"]):
        obs, _ = env.reset(seed=int(seed))
        np.testing.assert_allclose(obs["observation"], GOLDEN[f"{task}/reset_obs"][i], rtol=0, atol=tol)
        np.testing.assert_allclose(obs["desired_goal"], GOLDEN[f"{task}/reset_desired"][i], rtol=0, atol=tol)


def _run_episode(env: FetchEnv, seed: int, actions: np.ndarray) -> dict[str, np.ndarray]:
    obs, _ = env.reset(seed=seed)
    out: dict[str, list] = {"obs": [obs["observation"]], "achieved": [obs["achieved_goal"]],
                            "desired": [obs["desired_goal"]], "reward": [], "success": []}  # fmt: skip
    for a in actions:
        obs, reward, _, _, info = env.step(a)
        out["obs"].append(obs["observation"])
        out["achieved"].append(obs["achieved_goal"])
        out["desired"].append(obs["desired_goal"])
        out["reward"].append(reward)
        out["success"].append(info["is_success"])
    return {k: np.array(v) for k, v in out.items()}


# Whole contact-rich episodes are compared only on the recording MuJoCo (see TOL_OTHER_REACH_EPISODE);
# on another one test_golden_single_steps covers those tasks.
@pytest.mark.parametrize("task", list(TASKS) if SAME_MUJOCO else ["reach"])
def test_golden_episodes(task: str, envs: dict[str, FetchEnv]) -> None:
    """Same seed and actions -> the same 50-step episode."""
    env = envs[task]
    tol = TOL_SAME if SAME_MUJOCO else TOL_OTHER_REACH_EPISODE
    for k, seed in enumerate(GOLDEN[f"{task}/ep_seeds"]):
        ep = _run_episode(env, int(seed), golden_actions(task, k))
        for key, golden_key in (("obs", "ep_obs"), ("achieved", "ep_achieved"), ("desired", "ep_desired")):
            np.testing.assert_allclose(ep[key], GOLDEN[f"{task}/{golden_key}"][k], rtol=0, atol=tol,
                                       err_msg=f"{key}, episode {k}")  # fmt: skip
        if SAME_MUJOCO:
            np.testing.assert_array_equal(ep["reward"], GOLDEN[f"{task}/ep_reward"][k])
            np.testing.assert_array_equal(ep["success"], GOLDEN[f"{task}/ep_success"][k])


@pytest.mark.parametrize("task", list(TASKS))
def test_golden_single_steps(task: str) -> None:
    """From the recorded state, each recorded action gives the recorded next observation."""
    env = FetchEnv(task)
    env.reset(seed=0)
    m, d = env.model, env.data
    worst = np.zeros(env.observation_space["observation"].shape)
    for j, k in enumerate(GOLDEN[f"{task}/state_episodes"]):
        actions = golden_actions(task, k)
        for t in range(actions.shape[0]):
            d.time = GOLDEN[f"{task}/state_time"][j, t]
            d.qpos[:] = GOLDEN[f"{task}/state_qpos"][j, t]
            d.qvel[:] = GOLDEN[f"{task}/state_qvel"][j, t]
            d.qacc_warmstart[:] = GOLDEN[f"{task}/state_qacc_warmstart"][j, t]
            mujoco.mj_forward(m, d)
            # The mocap is re-anchored on the gripper pose as last computed, one substep old after mj_step.
            d.xpos[env._welded_body] = GOLDEN[f"{task}/state_gripper_xpos"][j, t]
            d.xquat[env._welded_body] = GOLDEN[f"{task}/state_gripper_xquat"][j, t]
            env.goal = GOLDEN[f"{task}/ep_desired"][k, t].copy()
            obs, *_ = env.step(actions[t])
            worst = np.maximum(worst, np.abs(obs["observation"] - GOLDEN[f"{task}/ep_obs"][k, t + 1]))
    if SAME_MUJOCO:
        assert worst.max() <= TOL_SAME, worst
        return
    assert worst[0:3].max() <= TOL_OTHER_GRIPPER, worst  # gripper position
    if TOL_OTHER_STEP[task] is not None:
        assert worst.max() <= TOL_OTHER_STEP[task], worst


# --- fidelity with Gymnasium-Robotics on the installed MuJoCo --------------------------------------


@pytest.fixture
def gymnasium_robotics_v4(monkeypatch: pytest.MonkeyPatch):
    """Gymnasium-Robotics' env maker, shimmed (test-only) to run on MuJoCo >= 3.12."""
    register_shimmed_gymnasium_robotics(monkeypatch)

    def make(task: str, **attrs):
        env = gym.make(f"Fetch{TITLES[task]}-v4").unwrapped
        for key, value in attrs.items():  # their kwargs are fixed per class; set the post-init ones
            setattr(env, key, value)
        return env

    return make


@pytest.mark.parametrize(
    ("task", "kwargs"),
    [
        ("reach", {}),
        ("push", {}),
        ("slide", {}),
        ("pick_and_place", {}),
        ("reach", {"reward_type": "dense", "target_range": 0.3, "distance_threshold": 0.1}),
        (
            "push",
            {"target_in_the_air": True, "obj_range": 0.2, "target_offset": np.array([0.05, -0.02, 0.0])},
        ),
        ("pick_and_place", {"block_gripper": True, "reward_type": "dense", "target_in_the_air": False}),
    ],
    ids=lambda x: x if isinstance(x, str) else ",".join(x) or "defaults",
)
def test_matches_gymnasium_robotics_on_installed_mujoco(
    task: str, kwargs: dict, gymnasium_robotics_v4
) -> None:
    theirs = gymnasium_robotics_v4(task, **kwargs)
    ours = FetchEnv(task, max_steps=None, **kwargs)  # their class has no time limit of its own
    rng = np.random.default_rng(7)
    for seed in (3, 4):
        a, _ = theirs.reset(seed=seed)
        b, _ = ours.reset(seed=seed)
        for key in a:
            np.testing.assert_allclose(b[key], a[key], rtol=0, atol=1e-9)
        for _ in range(50):
            act = rng.uniform(-1.2, 1.2, 4).astype(np.float32)
            a, ra, ta, tra, ia = theirs.step(act)
            b, rb, tb, trb, ib = ours.step(act)
            for key in a:
                np.testing.assert_allclose(b[key], a[key], rtol=0, atol=1e-9, err_msg=key)
            assert abs(float(ra) - float(rb)) <= 1e-9 and ia["is_success"] == ib["is_success"]
            assert (ta, tra) == (tb, trb)


# --- determinism, pickling -------------------------------------------------------------------------


@pytest.mark.parametrize("task", list(TASKS))
def test_same_seed_same_episode_exactly(task: str) -> None:
    actions = np.random.default_rng(0).uniform(-1, 1, (20, 4)).astype(np.float32)
    a = _run_episode(FetchEnv(task), 11, actions)
    b = _run_episode(FetchEnv(task), 11, actions)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    c = _run_episode(FetchEnv(task), 12, actions)
    assert not np.array_equal(a["desired"], c["desired"])


@pytest.mark.parametrize("clone", [pickle.loads, copy.deepcopy], ids=["pickle", "deepcopy"])
def test_pickled_env_continues_identically(clone) -> None:
    env = FetchEnv("pick_and_place")
    env.reset(seed=5)
    actions = np.random.default_rng(1).uniform(-1, 1, (30, 4)).astype(np.float32)
    for a in actions[:10]:
        env.step(a)
    twin = clone(pickle.dumps(env)) if clone is pickle.loads else clone(env)
    assert twin.data is not env.data
    for a in actions[10:]:
        o1, r1, *_ = env.step(a)
        o2, r2, *_ = twin.step(a)
        for key in o1:
            np.testing.assert_array_equal(o1[key], o2[key])
        assert r1 == r2
    # The clone's random stream is the original's too: the next resets agree.
    np.testing.assert_array_equal(env.reset()[0]["desired_goal"], twin.reset()[0]["desired_goal"])


# --- rewards ---------------------------------------------------------------------------------------


def test_compute_reward_is_vectorized_and_pure(envs: dict[str, FetchEnv]) -> None:
    rng = np.random.default_rng(0)
    ag = rng.normal(size=(4, 5, 3)) * 0.05
    dg = rng.normal(size=(4, 5, 3)) * 0.05
    for reward_type in ("sparse", "dense"):
        env = FetchEnv("reach", reward_type=reward_type)
        batch = env.compute_reward(ag, dg, None)
        assert batch.shape == (4, 5)
        singles = np.array([[env.compute_reward(ag[i, j], dg[i, j], {}) for j in range(5)] for i in range(4)])
        # The single-goal fast path and the batch path give the same bits, and those of np.linalg.norm
        # (what Gymnasium-Robotics uses).
        np.testing.assert_array_equal(batch, singles)
        d = np.linalg.norm(ag - dg, axis=-1)
        want = -d if reward_type == "dense" else -(d > 0.05).astype(np.float32)
        np.testing.assert_array_equal(batch, want)
        assert isinstance(env.compute_reward(ag[0, 0], dg[0, 0], None), np.floating)
        assert env.compute_reward(ag[0].astype(np.float32), dg[0].astype(np.float32), None).shape == (5,)
        if reward_type == "sparse":
            assert batch.dtype == np.float32
        assert env.compute_terminated(ag, dg, None).shape == (4, 5)
        assert not env.compute_truncated(ag, dg, {"elapsed_steps": 49}).any()
        assert env.compute_truncated(ag, dg, [[{"elapsed_steps": 50}] * 5] * 4).all()
        assert not FetchEnv("reach", max_steps=None).compute_truncated(ag, dg, None).any()
    with pytest.raises(ValueError, match="goal shapes differ"):
        fetch_reward(np.zeros(3), np.zeros((2, 3)), 0.05, False)


def test_compute_truncated_without_elapsed_steps_is_false_and_warns_once(monkeypatch) -> None:
    # Truncation is a matter of the step count; a buffer that keeps no infos (stable-baselines3's
    # default) passes empty ones: those transitions count as not truncated, and the user is told once.
    monkeypatch.setattr(goalenvs.core, "_WARNED", set())
    env = FetchEnv("reach")
    ag = dg = np.zeros((4, 3))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert not env.compute_truncated(ag, dg, [{}] * 4).any()
        assert not env.compute_truncated(ag, dg, None).any()
        np.testing.assert_array_equal(
            env.compute_truncated(ag[:2], dg[:2], [{}, {"elapsed_steps": 50}]), [False, True]
        )
    assert len(record) == 1
    assert "Fetch's compute_truncated got an info without 'elapsed_steps'" in str(record[0].message)
    assert "copy_info_dict=True" in str(record[0].message)
    np.testing.assert_allclose(goal_distance(np.ones((2, 3)), np.zeros((2, 3))), np.sqrt(3.0))


def test_mat2euler_matches_scalar_path_and_roundtrips() -> None:
    from goalenvs.envs.goal_functions import euler_from_xmat

    rng = np.random.default_rng(0)
    for _ in range(50):
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)
        mat = np.zeros(9)
        mujoco.mju_quat2Mat(mat, quat)
        e = mat2euler(mat.reshape(3, 3))
        np.testing.assert_allclose(euler_from_xmat(mat.tolist()), e, rtol=0, atol=1e-12)
        # The angles rebuild the rotation as R = Rx(e0) @ Ry(e1) @ Rz(e2).
        ax, ay, az = e
        rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
        ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
        rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
        np.testing.assert_allclose((rx @ ry @ rz), mat.reshape(3, 3), atol=1e-12)
    assert mat2euler(np.tile(np.eye(3), (2, 1, 1))).shape == (2, 3)


# --- arguments -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"task": "stack"}, ValueError, "task must be one of"),
        ({"reward_type": "shaped"}, ValueError, "reward_type must be one of"),
        ({"distance_threshold": 0.0}, ValueError, "distance_threshold must be a finite number > 0"),
        ({"distance_threshold": "0.05"}, TypeError, "distance_threshold must be a number"),
        ({"distance_threshold": float("nan")}, ValueError, "distance_threshold must be a finite number"),
        ({"target_range": -0.1}, ValueError, "target_range must be a finite number >= 0"),
        ({"task": "push", "obj_range": 0.05}, ValueError, "obj_range must be >= 0.1"),
        ({"target_in_the_air": 1}, TypeError, "target_in_the_air must be True or False"),
        ({"block_gripper": "yes"}, TypeError, "block_gripper must be True or False"),
        ({"target_offset": (0.1, 0.2)}, ValueError, "target_offset must be"),
        ({"gripper_extra_height": None, "n_substeps": 0}, ValueError, "n_substeps must be >= 1"),
        ({"n_substeps": 2.5}, TypeError, "n_substeps must be an int"),
        ({"max_steps": 0}, ValueError, "max_steps must be >= 1"),
        ({"max_steps": True}, TypeError, "max_steps must be an int"),
        ({"initial_qpos": [("robot0:slide0", 0.4)]}, TypeError, "initial_qpos must be a dict"),
        ({"initial_qpos": {"robot0:nope": 0.4}}, ValueError, "unknown joint 'robot0:nope'"),
        ({"task": "push", "initial_qpos": {"object0:joint": [1.0, 2.0]}}, ValueError, "must have 7 value"),
        ({"render_mode": "human"}, ValueError, "render_mode must be None or one of"),
        ({"width": 0}, ValueError, "width must be >= 1"),
    ],
)
def test_bad_arguments(kwargs: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        FetchEnv(**kwargs)


def test_bad_action_shape(envs: dict[str, FetchEnv]) -> None:
    env = envs["reach"]
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must have shape \(4,\)"):
        env.step(np.zeros(3))


def test_actions_are_clipped() -> None:
    a, b = FetchEnv("push"), FetchEnv("push")
    a.reset(seed=0)
    b.reset(seed=0)
    for _ in range(5):
        oa, *_ = a.step(np.array([5.0, -3.0, 1.0, 9.0]))
        ob, *_ = b.step(np.array([1.0, -1.0, 1.0, 1.0]))
        np.testing.assert_array_equal(oa["observation"], ob["observation"])


def test_arguments_take_effect() -> None:
    base = FetchEnv("push")
    # distance_threshold sets both reward and success.
    loose = FetchEnv("push", distance_threshold=10.0)
    obs, _ = loose.reset(seed=0)
    _, reward, _, _, info = loose.step(np.zeros(4, np.float32))
    assert reward == 0.0 and info["is_success"] == 1.0
    # n_substeps sets dt (velocities are per step) and the render fps.
    fast = FetchEnv("reach", n_substeps=10)
    assert fast.dt == pytest.approx(0.02) and fast.metadata["render_fps"] == 50
    assert FetchEnv.metadata["render_fps"] == 25  # the class default is untouched
    # gripper_extra_height lifts the start of the gripper (10 set-up steps get it part of the way).
    high = FetchEnv("push", gripper_extra_height=0.1)
    assert high.initial_gripper_xpos[2] > base.initial_gripper_xpos[2] + 0.01
    # target_in_the_air lifts some goals off the table; target_offset shifts them.
    air = FetchEnv("push", target_in_the_air=True)
    heights = [air.reset(seed=s)[0]["desired_goal"][2] - air.height_offset for s in range(30)]
    assert min(heights) == 0.0 and 0.0 < max(heights) <= 0.45
    shifted = FetchEnv("push", target_offset=(0.1, 0.0, 0.0))
    dx = shifted.reset(seed=3)[0]["desired_goal"][0] - base.reset(seed=3)[0]["desired_goal"][0]
    assert dx == pytest.approx(0.1)
    # block_gripper=False on push leaves the fingers free (they are pinned at 0 otherwise).
    free = FetchEnv("push", block_gripper=False)
    free.reset(seed=0)
    base.reset(seed=0)
    for _ in range(10):
        fo, *_ = free.step(np.array([0, 0, 0.5, 1.0], np.float32))
        bo, *_ = base.step(np.array([0, 0, 0.5, 1.0], np.float32))
    assert np.all(bo["observation"][9:11] == 0.0) and np.any(fo["observation"][9:11] != 0.0)


# --- rendering -------------------------------------------------------------------------------------


def test_render_rgb_array_and_render_does_not_change_the_episode() -> None:
    from gymnasium import error

    env = FetchEnv("push", render_mode="rgb_array", width=64, height=48)
    env.reset(seed=0)
    try:
        frame = env.render()
    except error.DependencyNotInstalled as exc:
        pytest.skip(f"no OpenGL backend for offscreen rendering here: {exc}")
    assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8 and frame.std() > 0
    plain = FetchEnv("push")
    plain.reset(seed=0)
    for a in np.random.default_rng(0).uniform(-1, 1, (5, 4)).astype(np.float32):
        o1, *_ = env.step(a)
        env.render()
        o2, *_ = plain.step(a)
        np.testing.assert_array_equal(o1["observation"], o2["observation"])
    env.close()
    with pytest.warns(UserWarning, match="without a render_mode"):
        assert FetchEnv("reach").render() is None


def test_render_error_when_mujoco_chose_its_backend_before_goalenvs() -> None:
    # mujoco imported first, on a machine without a display and without MUJOCO_GL: it picks GLFW,
    # which cannot open a context; the MUJOCO_GL=egl goalenvs sets afterwards cannot change that.
    code = (
        "import mujoco\n"
        "import gymnasium as gym, goalenvs\n"
        "from goalenvs.envs.mujoco_assets import _mujoco_gl_choice\n"
        "env = gym.make('goalenvs/FetchReach-v0', render_mode='rgb_array', width=32, height=32)\n"
        "env.reset(seed=0)\n"
        "try:\n"
        "    env.render()\n"
        "    print('rendered')\n"
        "except gym.error.DependencyNotInstalled as err:\n"
        "    print(_mujoco_gl_choice()[0])\n"
        "    print(err)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL")}
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2, result.stdout + result.stderr
    backend, message = lines
    assert backend != "egl"
    assert message.startswith(
        f"MuJoCo could not create an offscreen OpenGL context with its {backend} backend: "
    )
    assert (
        f"mujoco chose {backend} when it was first imported, before goalenvs, with MUJOCO_GL unset; "
        "MUJOCO_GL='egl', which goalenvs sets on machines without a display, came after that choice and has "
        "no effect in this process. Fix: set MUJOCO_GL=egl (or MUJOCO_GL=osmesa) before anything imports "
        "mujoco" in message
    )


def test_render_error_names_the_backend_mujoco_read(monkeypatch) -> None:
    import goalenvs.envs.mujoco_assets as fetch

    backend, read = fetch._mujoco_gl_choice()
    monkeypatch.setattr(fetch, "_MUJOCO_IMPORTED_FIRST", False)
    message = fetch._no_gl_context_message(RuntimeError("no context"))
    assert message.startswith(
        f"MuJoCo could not create an offscreen OpenGL context with its {backend} backend: "
    )
    was = "unset" if not read else repr(read)
    assert f"mujoco chose it when first imported, with MUJOCO_GL {was}. Fix: set MUJOCO_GL=egl" in message
