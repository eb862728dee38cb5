"""Record golden Shadow hand trajectories from Gymnasium-Robotics' ``HandReach-v3`` and
``HandManipulate*-v1`` envs, for tests/envs/test_hand_golden.py.

Run it from the repository root with the MuJoCo the goldens are for; on MuJoCo >= 3.12, where
Gymnasium-Robotics 1.4.2 cannot build the hand by itself, it goes through the test-only shim in
``gr_mujoco_shim.py`` (plain-int joint enums; the physics are MuJoCo's own)::

    python tests/data/record_hand_golden.py LABEL

The 3.11 goldens came from the separate virtual environment of ``record_fetch_golden.py`` (``MJ311``)
with the same packages::

    "$MJ311"/bin/python tests/data/record_hand_golden.py LABEL

``LABEL`` names the class of OpenBLAS kernel it ran with (below).

It writes ``tests/data/hand_golden_mujoco-<version>-<label>.npz`` (about 1.2 MB), with, for each task (named by
Gymnasium-Robotics' sparse id: ``HandReach-v3`` and the ``HandManipulate*-v1`` ids ours map to; its
``...Full`` ids are aliases of the plain ones, same class and kwargs, so ``HandManipulateBlock-v1``
stands for ``HandManipulateBlockFull-v1`` too, listed in ``{task}/aliases``):

* ``{task}/reset_seeds``, ``{task}/reset_obs``, ``{task}/reset_achieved``, ``{task}/reset_desired``:
  ``reset(seed=s)`` for 12 seeds (HandReach: enough to draw every meeting finger and the
  return-to-start goal) or 6 (manipulation), one after the other in one fresh env;
* ``{task}/ep_seeds``, ``{task}/ep_actions`` (2, T, 20), ``{task}/ep_action_f32`` (2,), ``{task}/ep_obs``
  (2, T + 1, D), ``{task}/ep_achieved`` / ``{task}/ep_desired`` (2, T + 1, G), ``{task}/ep_reward`` /
  ``{task}/ep_success`` (2, T): two consecutive T-step episodes (HandReach 50, manipulation 100) from
  seeded resets in another fresh env (a reset keeps the controls and the solver's warm start, so the
  second episode starts from what the first left). Episode 0 uses float32 actions in the action box;
  episode 1 float64 actions over [-1.2, 1.2], so clipping and the float64 path are covered too;
* ``{task}/ep_reward_dense``: the rewards of the ``...Dense`` twin, which ran the same episodes in a
  fresh env of its own; the recorder checks that its observations, goals and successes were those of
  the sparse env bit for bit (the twins differ in the reward only);

``meta/versions`` (the mujoco, gymnasium-robotics, gymnasium and numpy versions it ran with), and
``meta/norm_values``: ``np.linalg.norm`` of 512 fixed 3- and 4-vectors (``norm_probe``) as this numpy
computed them. Our envs draw random numbers in the same order, so the same seeds
must give the same episodes.

One file per MuJoCo and per class of OpenBLAS kernel: ``np.linalg.norm`` of a vector is a BLAS dot
product, whose last bit depends on the kernel OpenBLAS picks for the CPU (its AVX-512 kernels and its
AVX2 ones differ; ``OPENBLAS_CORETYPE`` forces one). Both libraries normalise quaternions and axes with
it, and the settling of a reset amplifies a flipped last bit to ~4e-7 (the Egg tasks' resets).
The tests use the file whose norms this numpy reproduces. Each MuJoCo's two files were recorded with
(``"$MJ311"/bin/python`` for 3.11.0; SkylakeX's kernels need AVX-512)::

    OPENBLAS_CORETYPE=SkylakeX python tests/data/record_hand_golden.py avx512
    OPENBLAS_CORETYPE=Haswell python tests/data/record_hand_golden.py avx2
"""

from __future__ import annotations

import sys
import time
from importlib.metadata import version
from pathlib import Path

import gymnasium as gym
import numpy as np

# Gymnasium-Robotics' sparse ids: HandReach-v3, then the HandManipulate*-v1 tasks of goalenvs. Its
# ...Full ids are aliases (same class, same kwargs) of the plain ones, recorded once under the plain id.
TASKS = (
    "HandReach-v3",
    *(
        f"HandManipulate{name}-v1"
        for name in (
            "Block",
            "BlockRotateZ",
            "BlockRotateParallel",
            "BlockRotateXYZ",
            "Egg",
            "EggRotate",
            "Pen",
            "PenRotate",
        )
    ),
)
ALIASES = {f"HandManipulate{o}-v1": f"HandManipulate{o}Full-v1" for o in ("Block", "Egg", "Pen")}
EPISODE_SEEDS = [100, 101]


def reset_seeds(task: str) -> list[int]:
    return list(range(12 if task.startswith("HandReach") else 6))


def steps(task: str) -> int:
    return 50 if task.startswith("HandReach") else 100


def dense_id(task: str) -> str:
    """HandReach-v3 -> HandReachDense-v3."""
    name, v = task.rsplit("-", 1)
    return f"{name}Dense-{v}"


def check_alias(task: str, alias: str) -> None:
    """``alias`` (and its dense twin) make exactly the env ``task`` (and its twin) makes."""
    for a, b in ((task, alias), (dense_id(task), dense_id(alias))):
        spec_a, spec_b = gym.spec(a), gym.spec(b)
        same = (spec_a.entry_point, spec_a.kwargs, spec_a.max_episode_steps) == (
            spec_b.entry_point,
            spec_b.kwargs,
            spec_b.max_episode_steps,
        )
        assert same, f"{b} is no alias of {a}"


def episode_actions(task_index: int, episode: int, n_steps: int) -> np.ndarray:
    """The fixed action sequence of one episode (a function of task and episode number only)."""
    rng = np.random.default_rng(1_000 * task_index + episode)
    if episode == 0:
        return rng.uniform(-1.0, 1.0, size=(n_steps, 20)).astype(np.float32)
    return rng.uniform(-1.2, 1.2, size=(n_steps, 20))  # float64, partly outside the box: clipping


def run_episodes(env_id: str, task_index: int) -> dict[str, np.ndarray]:
    env = gym.make(env_id).unwrapped  # no wrappers: the raw env, no time limit
    n_steps = steps(env_id)
    keys = ("obs", "achieved", "desired", "reward", "success")
    out: dict[str, list] = {key: [] for key in keys}
    for k, seed in enumerate(EPISODE_SEEDS):
        obs, _ = env.reset(seed=seed)
        ep: dict[str, list] = {"obs": [obs["observation"]], "achieved": [obs["achieved_goal"]],
                               "desired": [obs["desired_goal"]], "reward": [], "success": []}  # fmt: skip
        for action in episode_actions(task_index, k, n_steps):
            obs, reward, _, _, info = env.step(action)
            ep["obs"].append(obs["observation"])
            ep["achieved"].append(obs["achieved_goal"])
            ep["desired"].append(obs["desired_goal"])
            ep["reward"].append(reward)
            ep["success"].append(info["is_success"])
        for key in keys:
            out[key].append(ep[key])
    env.close()
    return {key: np.array(value, dtype=np.float64) for key, value in out.items()}


def record(task_index: int, task: str) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    env = gym.make(task).unwrapped
    seeds = reset_seeds(task)
    resets = [env.reset(seed=seed)[0] for seed in seeds]
    env.close()
    out[f"{task}/reset_seeds"] = np.array(seeds)
    for key, name in (("observation", "obs"), ("achieved_goal", "achieved"), ("desired_goal", "desired")):
        out[f"{task}/reset_{name}"] = np.array([obs[key] for obs in resets])

    sparse = run_episodes(task, task_index)
    dense = run_episodes(dense_id(task), task_index)
    for key in ("obs", "achieved", "desired", "success"):  # the twins differ in the reward only
        np.testing.assert_array_equal(dense[key], sparse[key], err_msg=f"{dense_id(task)}: {key}")
    actions = [episode_actions(task_index, k, steps(task)) for k in range(len(EPISODE_SEEDS))]
    out[f"{task}/ep_seeds"] = np.array(EPISODE_SEEDS)
    # Stored as float64 (exact for the float32 ones); ep_action_f32 says which episodes were float32.
    out[f"{task}/ep_actions"] = np.array(actions, dtype=np.float64)
    out[f"{task}/ep_action_f32"] = np.array([a.dtype == np.float32 for a in actions])
    for key in ("obs", "achieved", "desired", "reward", "success"):
        out[f"{task}/ep_{key}"] = sparse[key]
    out[f"{task}/ep_reward_dense"] = dense["reward"]
    if task in ALIASES:
        check_alias(task, ALIASES[task])
        out[f"{task}/aliases"] = np.array([ALIASES[task]])
    return out


def norm_probe() -> np.ndarray:
    """This numpy's norms of 512 fixed vectors (256 of 3 entries, 256 of 4), taken one vector at a
    time as the envs take them (a BLAS dot product each): equal where the OpenBLAS kernels agree."""
    vectors = np.random.default_rng(0).normal(size=(512, 4))
    return np.array([np.linalg.norm(v[:3] if i < 256 else v) for i, v in enumerate(vectors)])


def main(label: str) -> int:
    import gymnasium_robotics
    import mujoco
    from gr_mujoco_shim import int_enum_mujoco
    from gymnasium_robotics.utils import mujoco_utils

    mujoco_utils.mujoco = int_enum_mujoco()  # a no-op on MuJoCo <= 3.11, needed on >= 3.12
    gym.register_envs(gymnasium_robotics)
    out = Path(__file__).with_name(f"hand_golden_mujoco-{mujoco.__version__}-{label}.npz")
    data: dict[str, np.ndarray] = {}
    start = time.perf_counter()
    for i, task in enumerate(TASKS):
        data.update(record(i, task))
        print(f"recorded {task} and {dense_id(task)}", file=sys.stderr)
    versions = {p: version(p) for p in ("mujoco", "gymnasium-robotics", "gymnasium", "numpy")}
    data["meta/versions"] = np.array([f"{k}=={v}" for k, v in versions.items()])
    data["meta/norm_values"] = norm_probe()
    np.savez_compressed(out, **data)
    print(
        f"wrote {out} ({out.stat().st_size / 1024:.0f} KB) in {time.perf_counter() - start:.0f} s "
        f"with {versions}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(
            "usage: python tests/data/record_hand_golden.py LABEL (avx512 or avx2: the OpenBLAS kernels)"
        )
    raise SystemExit(main(sys.argv[1]))
