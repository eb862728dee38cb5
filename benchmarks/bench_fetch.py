"""Fetch step speed: ours against Gymnasium-Robotics v4 and against the raw physics bound.

For each task, in one run, interleaved over repeats:

* **ours**: ``gym.make("goalenvs/Fetch<Task>-v0")`` (with Gymnasium's wrappers, as users run it), and
  the bare env (``.unwrapped``), over full 50-step episodes (reset included) under fixed random actions;
* **Gymnasium-Robotics v4**: ``gym.make("Fetch<Task>-v4")``, same episodes. Gymnasium-Robotics
  1.4.2 crashes on MuJoCo >= 3.12 (``set_joint_qpos`` asserts); then the row says n/a and why.
  Measure it in a MuJoCo 3.11 virtual environment ``$MJ311``, made as in
  ``tests/data/record_fetch_golden.py``: ``PYTHONPATH=. "$MJ311"/bin/python -m benchmarks --only bench_fetch``;
* **raw physics bound**: ``mj_step(model, data, nstep=n_substeps)`` on the same model, replaying the
  mocap targets and finger controls our env set in the same episodes (so contacts and solver work
  match), with nothing else per step. No env can step faster than this.

Rows: steps/s (higher is better). For the bound row ``ours/peer`` is below 1: its inverse is our step
time as a multiple of the bound. A third row per task gives the cost of a step beyond ``mj_step``
(``mj_step`` stubbed out, minimum over repeats), ours against Gymnasium-Robotics': the part of the
step an implementation controls, and a figure that load from other processes barely moves.
"""

from __future__ import annotations

import time
import types
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from benchmarks.common import Row

TASKS = (("reach", "Reach"), ("push", "Push"), ("slide", "Slide"), ("pick_and_place", "PickAndPlace"))
STEPS = 50


def _episode(env: gym.Env, actions: np.ndarray, seed: int) -> None:
    env.reset(seed=seed)
    for t in range(STEPS):
        env.step(actions[t])


def _gymnasium_robotics_env(title: str) -> tuple[gym.Env | None, str]:
    """Gymnasium-Robotics' v4 env, or None and the reason it cannot run here."""
    try:
        import mujoco

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import gymnasium_robotics

            gym.register_envs(gymnasium_robotics)
            env = gym.make(f"Fetch{title}-v4")
            env.reset(seed=0)
            env.step(env.action_space.sample())
        return env, f"gymnasium-robotics {gymnasium_robotics.__version__}"
    except ImportError as exc:
        return None, f"gymnasium-robotics v4: n/a (not importable: {exc})"
    except Exception as exc:  # any failure to run is reported, not raised
        where = ""
        tb = exc.__traceback__
        while tb is not None:
            where = tb.tb_frame.f_code.co_name
            tb = tb.tb_next
        return None, (
            f"gymnasium-robotics v4: n/a ({type(exc).__name__} in {where} on mujoco {mujoco.__version__})"
        )


def _record_controls(env: gym.Env, actions: np.ndarray, seed: int) -> tuple[np.ndarray, ...]:
    """One episode's start state and the mocap pose / ctrl our env set before each physics step."""
    base = env.unwrapped
    data = base.data
    base.reset(seed=seed)
    start = (data.qpos.copy(), data.qvel.copy(), float(data.time))
    mocap_pos, mocap_quat, ctrl = [], [], []
    for t in range(STEPS):
        base.step(actions[t])
        # What the step wrote before integrating is still in place after it (mj_step leaves mocap
        # and ctrl alone), so read it back here.
        mocap_pos.append(data.mocap_pos.copy())
        mocap_quat.append(data.mocap_quat.copy())
        ctrl.append(data.ctrl.copy())
    return (*start, np.array(mocap_pos), np.array(mocap_quat), np.array(ctrl))


def _physics_bound(env: gym.Env, episode: tuple[np.ndarray, ...]) -> None:
    """The same episode as bare mj_step calls: set the recorded mocap/ctrl, step, repeat."""
    import mujoco

    base = env.unwrapped
    m, d, nstep = base.model, base.data, base.n_substeps
    step = mujoco.mj_step
    mocap_pos, mocap_quat, ctrl = d.mocap_pos, d.mocap_quat, d.ctrl
    # Pinned fingers (block_gripper) are part of the trajectory, not of the env's overhead: without
    # them the replayed physics would be a different (cheaper or dearer) episode.
    fingers = base._views.finger_q if base.block_gripper else None
    qpos, qvel, time0, mpos, mquat, ctl = episode
    mujoco.mj_resetData(m, d)
    d.qpos[:] = qpos
    d.qvel[:] = qvel
    d.time = time0
    mujoco.mj_forward(m, d)
    for t in range(STEPS):
        mocap_pos[:] = mpos[t]
        mocap_quat[:] = mquat[t]
        ctrl[:] = ctl[t]
        step(m, d, nstep)
        if fingers is not None:
            fingers[:] = 0.0


def _seconds(fn: Callable[..., None], *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


class _NoStepMujoco(types.ModuleType):
    """The mujoco module with mj_step stubbed out: what is left of a step is the env's own overhead."""

    def __init__(self) -> None:
        import mujoco

        super().__init__("mujoco_without_mj_step")
        self._real = mujoco

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    @staticmethod
    def mj_step(m: Any, d: Any, nstep: int = 1) -> None:
        return None


def _overhead_us(env: gym.Env, is_ours: bool, actions: np.ndarray, repeats: int) -> float:
    """Microseconds per step of everything but mj_step (bare env, mj_step stubbed out).

    The minimum over repeats: this measures intrinsic cost, and on a shared machine every other
    process only ever adds time.
    """
    import goalenvs.envs.fetch.sim as fetch_module  # where the env calls mj_step

    base = env.unwrapped
    base.reset(seed=0)
    stub = _NoStepMujoco()
    if is_ours:
        saved, fetch_module.mujoco = fetch_module.mujoco, stub
    else:
        saved, base._mujoco = base._mujoco, stub
    try:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for a in actions:
                base.step(a)
            times.append((time.perf_counter() - start) / len(actions))
    finally:
        if is_ours:
            fetch_module.mujoco = saved
        else:
            base._mujoco = saved
    return float(np.min(times)) * 1e6


def run(quick: bool) -> list[Row]:
    import goalenvs  # noqa: F401  (registers the ids)

    n_episodes = 2 if quick else 8
    repeats = 3 if quick else 9
    work = n_episodes * STEPS
    rows: list[Row] = []
    for i, (_task, title) in enumerate(TASKS):
        rng = np.random.default_rng(i)
        actions = rng.uniform(-1.0, 1.0, size=(n_episodes, STEPS, 4)).astype(np.float32)
        ours = gym.make(f"goalenvs/Fetch{title}-v0")
        bare = gym.make(f"goalenvs/Fetch{title}-v0").unwrapped
        bound_env = gym.make(f"goalenvs/Fetch{title}-v0")
        controls = [_record_controls(bound_env, actions[e], e) for e in range(n_episodes)]
        theirs, peer_name = _gymnasium_robotics_env(title)

        # Interleaved episode by episode, so that load from other processes hits every variant alike;
        # each repeat sums its episodes, and the rate is taken from the median repeat.
        timings: dict[str, list[float]] = {"ours": [], "bare": [], "bound": [], "theirs": []}
        for _ in range(repeats):
            total = dict.fromkeys(timings, 0.0)
            for e in range(n_episodes):
                total["ours"] += _seconds(_episode, ours, actions[e], e)
                total["bare"] += _seconds(_episode, bare, actions[e], e)
                total["bound"] += _seconds(_physics_bound, bound_env, controls[e])
                if theirs is not None:
                    total["theirs"] += _seconds(_episode, theirs, actions[e], e)
            for key in timings:
                timings[key].append(total[key])
        rate = {
            k: work / float(np.median(v)) for k, v in timings.items() if theirs is not None or k != "theirs"
        }
        rows.append(
            Row(
                "fetch",
                f"Fetch{title} gym.make, steps/s",
                "steps/s",
                rate["ours"],
                rate.get("theirs"),
                peer_name,
            )
        )
        rows.append(
            Row(
                "fetch",
                f"Fetch{title} bare env vs raw mj_step x{bare.n_substeps}",
                "steps/s",
                rate["bare"],
                rate["bound"],
                "raw physics bound",
            )
        )
        # Deterministic, load-insensitive view of the same thing: per-step cost beyond mj_step.
        flat = actions.reshape(-1, 4)
        ours_over = _overhead_us(bare, True, flat, repeats)
        theirs_over = _overhead_us(theirs, False, flat, repeats) if theirs is not None else None
        rows.append(
            Row(
                "fetch",
                f"Fetch{title} overhead beyond mj_step, us/step",
                "us/step",
                ours_over,
                theirs_over,
                peer_name,
                higher_is_better=False,
            )
        )
    return rows
