"""Tests of the Shadow hand tasks (HandReach, HandManipulate*) against golden trajectories.

The goldens were recorded from Gymnasium-Robotics 1.4.2 ``HandReach-v3`` and ``HandManipulate*-v1`` by
``tests/data/record_hand_golden.py``: on MuJoCo 3.11 as shipped, on MuJoCo >= 3.12 through the
test-only shim of ``tests/data/gr_mujoco_shim.py``, one file per MuJoCo and class of OpenBLAS kernel
(numpy's norms, which both libraries take of quaternions, differ in the last bit between the classes;
the recorder says more). The tests read the installed MuJoCo's file whose recorded norms this numpy
reproduces. On the MuJoCo (and kernel) they were recorded with, each of our 24 ids
reproduces every recorded array to 1e-9 (seeded resets, and two consecutive episodes of seeded random
actions: observations, goals, rewards, its own sparse or dense ones, and successes). On another MuJoCo
the physics differ (the settled object, contacts), so only the goal draws are compared there; those
are compared against every golden file, whatever its MuJoCo.
"""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

# Import our module before mujoco: it picks a headless OpenGL backend (MUJOCO_GL) if none is set.
pytest.importorskip("goalenvs.envs.hand", reason="the hand tasks need mujoco (pip install goalenvs[fetch])")
mujoco = pytest.importorskip("mujoco")
if __import__("importlib").util.find_spec("gymnasium_robotics") is None:
    pytest.skip(
        "the hand tasks use gymnasium-robotics' assets (pip install goalenvs[fetch])", allow_module_level=True
    )

import goalenvs  # noqa: E402
from tests.data.record_hand_golden import norm_probe  # noqa: E402

DATA = Path(__file__).parents[1] / "data"
FILES = sorted(DATA.glob("hand_golden_mujoco-*.npz"))


def own_golden() -> Path | None:
    """The installed MuJoCo's goldens recorded with this numpy's norms, or None."""
    norms = norm_probe()
    for path in sorted(DATA.glob(f"hand_golden_mujoco-{mujoco.__version__}-*.npz")):
        if np.array_equal(np.load(path)["meta/norm_values"], norms):
            return path
    return None


OWN = own_golden()
GOLDEN = np.load(OWN or FILES[0])  # else another's, for the goal draws and the tasks' names
SAME_MUJOCO = OWN is not None
OTHER_MUJOCO = (
    f"no goldens of the installed MuJoCo {mujoco.__version__} recorded with this numpy's norms (OpenBLAS "
    "kernel), and other MuJoCos' physics differ: only the goal draws are compared (test_golden_goal_draws)"
)
TOL = 1e-9
HAND_IDS = [e.id for e in goalenvs.ENVS if e.name.startswith("Hand")]
SPARSE_IDS = [i for i in HAND_IDS if "Dense" not in i]


def tasks(golden) -> list[str]:
    return sorted({key.split("/")[0] for key in golden.files} - {"meta"})


def golden_task(env_id: str) -> tuple[str, bool]:
    """The golden task an id of ours is compared with, and whether the id is the dense twin:
    goalenvs/HandManipulateEggFullDense-v0 -> (HandManipulateEgg-v1, True) (EggFull is Egg's alias)."""
    name = env_id.removeprefix("goalenvs/").removesuffix("-v0")
    dense = name.endswith("Dense")
    name = name.removesuffix("Dense")
    theirs = f"{name}-v3" if name == "HandReach" else f"{name}-v1"
    for task in tasks(GOLDEN):
        aliases = GOLDEN[f"{task}/aliases"] if f"{task}/aliases" in GOLDEN.files else []
        if theirs in (task, *aliases):
            return task, dense
    raise KeyError(f"no golden task for {env_id} ({theirs})")


def ours(env_id: str):
    return gym.make(env_id, max_steps=None, check_goal_contract=False).unwrapped


def golden_actions(task: str, k: int) -> np.ndarray:
    acts = GOLDEN[f"{task}/ep_actions"][k]
    return acts.astype(np.float32) if GOLDEN[f"{task}/ep_action_f32"][k] else acts


@pytest.mark.skipif(
    os.environ.get("CI") != "true", reason="only CI must compare against its own MuJoCo's goldens"
)
def test_ci_compares_against_goldens_of_its_own_mujoco() -> None:
    # Against another MuJoCo's goldens only the goal draws are compared: CI must have goldens of the
    # MuJoCo it installs.
    assert SAME_MUJOCO, (
        f"no hand goldens for MuJoCo {mujoco.__version__} and this numpy's OpenBLAS kernel: record them "
        "with `python tests/data/record_hand_golden.py LABEL` and commit the file"
    )


def test_goldens_cover_every_hand_id() -> None:
    assert len(HAND_IDS) == 24
    covered = {golden_task(env_id) for env_id in HAND_IDS}
    assert {task for task, _ in covered} == set(tasks(GOLDEN))
    assert {dense for _, dense in covered} == {False, True}
    assert len(covered) == 2 * len(tasks(GOLDEN))  # each task's sparse and dense rewards are compared


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_goal_draws(path: Path) -> None:
    """The goals come from np_random in Gymnasium-Robotics' order, on any MuJoCo: HandReach's from the
    start pose's fingertips (kinematics only); the manipulated object's target rotation, and its
    target position's offset from the settled object (the settling itself is physics). A start that
    fell off the palm on one MuJoCo and not on the other would be drawn again and shift the draws; none
    does at these seeds on 3.11.0 and 4.0.0."""
    golden = np.load(path)
    for task in tasks(golden):
        env = ours(f"goalenvs/{task.rsplit('-', 1)[0]}-v0")
        for i, seed in enumerate(golden[f"{task}/reset_seeds"]):
            obs, _ = env.reset(seed=int(seed))
            want, got = golden[f"{task}/reset_desired"][i], obs["desired_goal"]
            if task.startswith("HandManipulate"):
                want = np.concatenate([want[:3] - golden[f"{task}/reset_achieved"][i][:3], want[3:]])
                got = np.concatenate([got[:3] - obs["achieved_goal"][:3], got[3:]])
            np.testing.assert_allclose(got, want, rtol=0, atol=TOL, err_msg=f"{task}, seed {seed}")


@pytest.mark.skipif(not SAME_MUJOCO, reason=OTHER_MUJOCO)
@pytest.mark.parametrize("env_id", SPARSE_IDS)
def test_golden_resets(env_id: str) -> None:
    task, _ = golden_task(env_id)
    env = ours(env_id)  # a fresh env, as recorded: a reset keeps the warm start of the one before
    for i, seed in enumerate(GOLDEN[f"{task}/reset_seeds"]):
        obs, _ = env.reset(seed=int(seed))
        for key, name in (("observation", "obs"), ("achieved_goal", "achieved"), ("desired_goal", "desired")):
            np.testing.assert_allclose(
                obs[key], GOLDEN[f"{task}/reset_{name}"][i], rtol=0, atol=TOL, err_msg=f"{key}, seed {seed}"
            )


@pytest.mark.skipif(not SAME_MUJOCO, reason=OTHER_MUJOCO)
@pytest.mark.parametrize("env_id", HAND_IDS)
def test_golden_episodes(env_id: str) -> None:
    """Same seeds and actions -> the same two consecutive episodes, the second starting from the
    controls and warm start the first left."""
    task, dense = golden_task(env_id)
    env = ours(env_id)
    for k, seed in enumerate(GOLDEN[f"{task}/ep_seeds"]):
        obs, _ = env.reset(seed=int(seed))
        got: dict[str, list] = {"obs": [obs["observation"]], "achieved": [obs["achieved_goal"]],
                                "desired": [obs["desired_goal"]], "reward": [], "success": []}  # fmt: skip
        for action in golden_actions(task, k):
            obs, reward, terminated, truncated, info = env.step(action)
            assert not (terminated or truncated)
            got["obs"].append(obs["observation"])
            got["achieved"].append(obs["achieved_goal"])
            got["desired"].append(obs["desired_goal"])
            got["reward"].append(reward)
            got["success"].append(info["is_success"])
        rewards = "ep_reward_dense" if dense else "ep_reward"
        for key, golden_key in (("obs", "ep_obs"), ("achieved", "ep_achieved"), ("desired", "ep_desired"),
                                ("reward", rewards), ("success", "ep_success")):  # fmt: skip
            np.testing.assert_allclose(
                np.array(got[key], dtype=np.float64), GOLDEN[f"{task}/{golden_key}"][k], rtol=0, atol=TOL,
                err_msg=f"{key}, episode {k}",
            )  # fmt: skip
