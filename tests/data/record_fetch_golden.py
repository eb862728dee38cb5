"""Record golden Fetch trajectories from Gymnasium-Robotics' v4 envs, for tests/envs/test_fetch.py.

Run it from the repository root with the MuJoCo the goldens are for; on MuJoCo >= 3.12, where
Gymnasium-Robotics 1.4.2 cannot build Fetch by itself, it goes through the test-only shim in
``gr_mujoco_shim.py`` (plain-int joint enums; the physics are MuJoCo's own)::

    python tests/data/record_fetch_golden.py

The 3.11 goldens came from a separate virtual environment (``MJ311`` names any folder outside the
clone, e.g. ``~/venvs/mujoco-3.11``)::

    python -m venv "$MJ311"
    "$MJ311"/bin/pip install mujoco==3.11.0 gymnasium-robotics==1.4.2 gymnasium==1.4.0 numpy
    "$MJ311"/bin/python tests/data/record_fetch_golden.py

It writes ``tests/data/fetch_golden_mujoco-<version>.npz`` (about 200 KB), with, for each task:

* ``{task}/reset_seeds``, ``{task}/reset_obs``, ``{task}/reset_desired``: ``reset(seed=s)`` for 20
  seeds (the observation and the desired goal after a seeded reset);
* ``{task}/ep_seeds``, ``{task}/ep_actions`` (E, 50, 4), ``{task}/ep_action_f32`` (E,),
  ``{task}/ep_obs`` (E, 51, D),
  ``{task}/ep_achieved`` / ``{task}/ep_desired`` (E, 51, 3), ``{task}/ep_reward`` /
  ``{task}/ep_success`` (E, 50): full 50-step episodes from a seeded reset under fixed random
  actions. Episodes 0-2 use float32 actions in the action box (what ``action_space.sample()`` and
  most policies give); episode 3 uses float64 actions spread over [-1.5, 1.5], so clipping and the
  float64 path are covered too.

* ``{task}/initial_gripper_xpos``, ``{task}/height_offset``: the start state the goals are drawn around;
* ``{task}/state_{time,qpos,qvel,qacc_warmstart,gripper_xpos,gripper_xquat}`` (2, 50, ...): for
  episodes 0 and 3, what each step reads (MuJoCo's state before the step, and the gripper body's
  pose as last computed, where the mocap is re-anchored). On another MuJoCo version, whose physics
  differ slightly, the tests put each step in exactly that state and compare one step at a time;

and ``meta/versions`` (the mujoco, gymnasium-robotics, gymnasium and numpy versions it ran with).
Our envs draw random numbers in the same order, so the same seed must give the same episode.
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

import gymnasium as gym
import numpy as np

TASKS = {
    "reach": "FetchReach-v4",
    "push": "FetchPush-v4",
    "slide": "FetchSlide-v4",
    "pick_and_place": "FetchPickAndPlace-v4",
}
RESET_SEEDS = list(range(20))
EPISODE_SEEDS = [100, 101, 102, 103]
STEPS = 50
STATE_EPISODES = [0, 3]  # episodes whose pre-step MuJoCo state is stored too
STATE_KEYS = ("time", "qpos", "qvel", "qacc_warmstart", "gripper_xpos", "gripper_xquat")


def episode_actions(task_index: int, episode: int) -> np.ndarray:
    """The fixed action sequence of one episode (a function of task and episode number only)."""
    rng = np.random.default_rng(1_000 * task_index + episode)
    if episode < 3:
        return rng.uniform(-1.0, 1.0, size=(STEPS, 4)).astype(np.float32)
    return rng.uniform(-1.5, 1.5, size=(STEPS, 4))  # float64, partly outside the box: clipping


def record(task_index: int, task: str, env_id: str) -> dict[str, np.ndarray]:
    env = gym.make(env_id).unwrapped  # no wrappers: the raw v4 env
    out: dict[str, np.ndarray] = {}
    obs_list, desired_list = [], []
    for seed in RESET_SEEDS:
        obs, _ = env.reset(seed=seed)
        obs_list.append(obs["observation"])
        desired_list.append(obs["desired_goal"])
    out[f"{task}/reset_seeds"] = np.array(RESET_SEEDS)
    out[f"{task}/reset_obs"] = np.array(obs_list)
    out[f"{task}/reset_desired"] = np.array(desired_list)

    out[f"{task}/initial_gripper_xpos"] = env.initial_gripper_xpos.copy()
    out[f"{task}/height_offset"] = np.float64(getattr(env, "height_offset", 0.0))

    gripper_body = env._model_names.body_name2id["robot0:gripper_link"]
    data = env.data
    actions, ep_obs, ep_ach, ep_des, ep_rew, ep_succ = [], [], [], [], [], []
    states: dict[str, list] = {key: [] for key in STATE_KEYS}
    for k, seed in enumerate(EPISODE_SEEDS):
        acts = episode_actions(task_index, k)
        obs, _ = env.reset(seed=seed)
        o, ach, des, rew, succ = [obs["observation"]], [obs["achieved_goal"]], [obs["desired_goal"]], [], []
        ep_states: dict[str, list] = {key: [] for key in STATE_KEYS}
        for t in range(STEPS):
            if k in STATE_EPISODES:
                # Everything a step reads: the state MuJoCo integrates, plus the gripper pose as last
                # computed (the mocap is re-anchored there; after mj_step it lags one substep).
                ep_states["time"].append(data.time)
                ep_states["qpos"].append(data.qpos.copy())
                ep_states["qvel"].append(data.qvel.copy())
                ep_states["qacc_warmstart"].append(data.qacc_warmstart.copy())
                ep_states["gripper_xpos"].append(data.xpos[gripper_body].copy())
                ep_states["gripper_xquat"].append(data.xquat[gripper_body].copy())
            obs, r, _, _, info = env.step(acts[t])
            o.append(obs["observation"])
            ach.append(obs["achieved_goal"])
            des.append(obs["desired_goal"])
            rew.append(r)
            succ.append(info["is_success"])
        actions.append(acts.astype(np.float64))
        ep_obs.append(o)
        ep_ach.append(ach)
        ep_des.append(des)
        ep_rew.append(rew)
        ep_succ.append(succ)
        if k in STATE_EPISODES:
            for key in STATE_KEYS:
                states[key].append(ep_states[key])
    for key in STATE_KEYS:
        out[f"{task}/state_{key}"] = np.array(states[key])
    out[f"{task}/state_episodes"] = np.array(STATE_EPISODES)
    out[f"{task}/ep_seeds"] = np.array(EPISODE_SEEDS)
    # Stored as float64 (exact for the float32 ones); ep_action_f32 says which episodes were float32.
    out[f"{task}/ep_actions"] = np.array(actions)
    out[f"{task}/ep_action_f32"] = np.array(
        [episode_actions(task_index, k).dtype == np.float32 for k in range(len(EPISODE_SEEDS))]
    )
    out[f"{task}/ep_obs"] = np.array(ep_obs)
    out[f"{task}/ep_achieved"] = np.array(ep_ach)
    out[f"{task}/ep_desired"] = np.array(ep_des)
    out[f"{task}/ep_reward"] = np.array(ep_rew, dtype=np.float64)
    out[f"{task}/ep_success"] = np.array(ep_succ, dtype=np.float64)
    env.close()
    return out


def main() -> int:
    import gymnasium_robotics
    import mujoco
    from gr_mujoco_shim import int_enum_mujoco
    from gymnasium_robotics.utils import mujoco_utils

    mujoco_utils.mujoco = int_enum_mujoco()  # a no-op on MuJoCo <= 3.11, needed on >= 3.12
    gym.register_envs(gymnasium_robotics)
    out = Path(__file__).with_name(f"fetch_golden_mujoco-{mujoco.__version__}.npz")
    data: dict[str, np.ndarray] = {}
    for i, (task, env_id) in enumerate(TASKS.items()):
        data.update(record(i, task, env_id))
        print(f"recorded {env_id}", file=sys.stderr)
    versions = {p: version(p) for p in ("mujoco", "gymnasium-robotics", "gymnasium", "numpy")}
    data["meta/versions"] = np.array([f"{k}=={v}" for k, v in versions.items()])
    np.savez_compressed(out, **data)
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KB) with {versions}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
