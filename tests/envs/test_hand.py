"""Tests of HandReach: registration, fidelity with Gymnasium-Robotics' ``HandReach-v3``, the checker.

Fidelity is tested two ways:

* against golden trajectories recorded from Gymnasium-Robotics 1.4.2 on MuJoCo 3.11.0 and 4.0.0
  (``tests/data/record_hand_golden.py``), in ``tests/envs/test_hand_golden.py``;
* here, against Gymnasium-Robotics itself on the installed MuJoCo, made to run on MuJoCo >= 3.12 by
  the test-only shim of ``tests/data/gr_mujoco_shim.py`` (its ``mujoco_utils`` compares numpy joint
  types with MuJoCo enums, which fails since 3.12; the shim hands it plain ints): same seeds, full
  50-step episodes of seeded random actions, everything equal to 1e-9.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

# Import our module before mujoco: it picks a headless OpenGL backend (MUJOCO_GL) if none is set.
pytest.importorskip("goalenvs.envs.hand", reason="the hand tasks need mujoco (pip install goalenvs[fetch])")
if __import__("importlib").util.find_spec("gymnasium_robotics") is None:
    pytest.skip(
        "the hand tasks use gymnasium-robotics' assets (pip install goalenvs[fetch])", allow_module_level=True
    )

import goalenvs
from goalenvs.envs.hand import REACH_INITIAL_QPOS, HandReachEnv
from tests.data.gr_mujoco_shim import register_shimmed_gymnasium_robotics
from tests.envs.mujoco_checks import assert_ids_truncate_themselves

HAND_IDS = [e.id for e in goalenvs.ENVS if e.name.startswith("HandReach")]
TOL = 1e-9
N_SEEDS = 12  # enough to draw every meeting finger and the return-to-start goal (seeds 0..11 do)


def test_hand_reach_ids_registered() -> None:
    assert set(HAND_IDS) == {"goalenvs/HandReach-v0", "goalenvs/HandReachDense-v0"}
    assert_ids_truncate_themselves(HAND_IDS, after=50)


@pytest.fixture
def gymnasium_robotics_hand(monkeypatch: pytest.MonkeyPatch):
    """Gymnasium-Robotics' HandReach maker, shimmed (test-only) to run on MuJoCo >= 3.12."""
    register_shimmed_gymnasium_robotics(monkeypatch)

    def make(**kwargs):
        return gym.make("HandReach-v3", **kwargs).unwrapped  # their class has no time limit of its own

    return make


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"reward_type": "dense"},
        {"distance_threshold": 0.05},
        {
            "reward_type": "dense",
            "initial_qpos": {**REACH_INITIAL_QPOS, "robot0:FFJ2": 0.9, "robot0:THJ0": -0.3},
        },
    ],
    ids=lambda kw: ",".join(kw) or "defaults",
)
def test_matches_gymnasium_robotics_on_installed_mujoco(kwargs: dict, gymnasium_robotics_hand) -> None:
    theirs = gymnasium_robotics_hand(**kwargs)
    ours = HandReachEnv(max_steps=None, **kwargs)
    np.testing.assert_array_equal(ours.initial_goal, theirs.initial_goal)
    np.testing.assert_array_equal(ours.palm_xpos, theirs.palm_xpos)
    rng = np.random.default_rng(7)
    worst: dict[str, float] = {}
    returned_to_start = 0

    def compare(name: str, a, b) -> None:
        diff = float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))
        worst[name] = max(worst.get(name, 0.0), diff)
        assert diff <= TOL, f"{name}: {diff}"

    for seed in range(N_SEEDS):
        a, _ = theirs.reset(seed=seed)
        b, _ = ours.reset(seed=seed)
        for key in a:
            compare(key, a[key], b[key])
        returned_to_start += bool(np.array_equal(b["desired_goal"], ours.initial_goal))
        # float32 actions (what a policy gives), partly outside the box; every other seed float64.
        dtype = np.float32 if seed % 2 == 0 else np.float64
        for _ in range(50):
            act = rng.uniform(-1.2, 1.2, 20).astype(dtype)
            a, ra, ta, tra, ia = theirs.step(act)
            b, rb, tb, trb, ib = ours.step(act)
            for key in a:
                compare(key, a[key], b[key])
            compare("reward", ra, rb)
            compare("is_success", ia["is_success"], ib["is_success"])
            compare("compute_reward", theirs.compute_reward(a["achieved_goal"], a["desired_goal"], ia), rb)
            assert (ta, tra) == (tb, trb) == (False, False)
            compare("ctrl", theirs.data.ctrl, ours.data.ctrl)
            compare("qpos", theirs.data.qpos, ours.data.qpos)
    assert returned_to_start >= 1  # the 10% branch of the goal was drawn and matched
    print(f"\nmax abs differences over {N_SEEDS} episodes of 50 steps: {worst}")


def test_hand_reach_goal_reward_functions_are_vectorized() -> None:
    env = HandReachEnv("dense")
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(0)
    achieved = obs["achieved_goal"] + rng.normal(scale=0.01, size=(4, 3, 15))
    desired = np.broadcast_to(obs["desired_goal"], achieved.shape)
    dense = env.compute_reward(achieved, desired, None)
    assert dense.shape == (4, 3)
    np.testing.assert_allclose(dense, -np.linalg.norm(achieved - desired, axis=-1), rtol=0, atol=1e-15)
    env.reward_type = "sparse"
    sparse = env.compute_reward(achieved, desired, None)
    assert sparse.dtype == np.float32
    np.testing.assert_array_equal(
        sparse, -(np.linalg.norm(achieved - desired, axis=-1) > 0.01).astype(np.float32)
    )


@pytest.mark.parametrize("env_id", HAND_IDS)
def test_goalenvs_check_passes(env_id: str) -> None:
    report = goalenvs.check_goal_env(gym.make(env_id), n_steps=120, seed=0)
    report.raise_if_failed()
    assert not [r for r in report.results if r.status != "pass"]


def test_vector_env_replays_single_envs() -> None:
    vec = gym.make_vec("goalenvs/HandReach-v0", num_envs=3, vectorization_mode="vector_entry_point")
    singles = [HandReachEnv() for _ in range(3)]
    obs, _ = vec.reset(seed=5)
    rng = np.random.default_rng(3)
    for i, env in enumerate(singles):
        o, _ = env.reset(seed=5 + i)
        np.testing.assert_array_equal(obs["desired_goal"][i], o["desired_goal"])
    for _ in range(10):
        acts = rng.uniform(-1, 1, (3, 20)).astype(np.float32)
        obs, rew, *_ = vec.step(acts)
        for i, env in enumerate(singles):
            o, r, *_ = env.step(acts[i])
            np.testing.assert_array_equal(obs["observation"][i], o["observation"])
            assert rew[i] == r


def test_vector_env_threads_do_not_change_the_results() -> None:
    from goalenvs.envs.hand import HandReachVectorEnv

    vecs = [HandReachVectorEnv(5, num_threads=t, max_steps=4) for t in (1, 3)]
    assert [v.num_threads for v in vecs] == [1, 3] and vecs[1]._state.chunks == [(0, 2), (2, 3), (3, 5)]
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


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"reward_type": "shaped"}, ValueError, "reward_type must be one of"),
        ({"distance_threshold": 0.0}, ValueError, "distance_threshold"),
        ({"n_substeps": 0}, ValueError, "n_substeps"),
        ({"relative_control": 1}, TypeError, "relative_control"),
        ({"initial_qpos": {"robot0:nope": 0.0}}, ValueError, "unknown joint 'robot0:nope'"),
        ({"initial_qpos": [0.0]}, TypeError, "initial_qpos must be a dict"),
        ({"max_steps": 0}, ValueError, "max_steps"),
    ],
)
def test_bad_arguments(kwargs: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        HandReachEnv(**kwargs)


def test_render_rgb_array_and_render_does_not_change_the_episode() -> None:
    from gymnasium import error

    shown = HandReachEnv(render_mode="rgb_array", width=64, height=48)
    plain = HandReachEnv()
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


def test_relative_control_centres_each_actuator_on_its_joints() -> None:
    # No reference to compare with: Gymnasium-Robotics' relative control calls MjData methods the
    # mujoco bindings lack. A zero action targets the current angles (J1 + J0 for the coupled fingers).
    env = HandReachEnv(relative_control=True)
    env.reset(seed=0)
    qpos = env.data.qpos.copy()
    env.step(np.zeros(20, dtype=np.float32))
    m = env.model
    for i in range(m.nu):
        name = m.actuator(i).name
        expected = qpos[m.joint(name.replace(":A_", ":")).qposadr[0]]
        finger = name.split(":A_")[1]
        if finger in ("FFJ1", "MFJ1", "RFJ1", "LFJ1"):
            expected += qpos[m.joint(f"robot0:{finger[:2]}J0").qposadr[0]]
        low, high = m.actuator_ctrlrange[i]
        assert env.data.ctrl[i] == np.clip(expected, low, high), name
