"""Step speed of a MuJoCo robotics env (Fetch, Shadow Hand): ours against Gymnasium-Robotics and against
the raw physics bound, for bench_fetch and bench_hand.

For one task, in one run, interleaved episode by episode over repeats:

* **ours**: ``gym.make(our_id)`` (with Gymnasium's wrappers, as users run it), and the bare env
  (``.unwrapped``), over full episodes (reset included) under fixed random actions;
* **Gymnasium-Robotics**: ``gym.make(their_id)``, same episodes. Gymnasium-Robotics 1.4.2 crashes
  on MuJoCo >= 3.12 (``set_joint_qpos`` asserts); then the row says n/a and why. Measure it in a
  MuJoCo 3.11 virtual environment ``$MJ311``, made as in ``tests/data/record_fetch_golden.py``:
  ``PYTHONPATH=. "$MJ311"/bin/python -m benchmarks --only bench_fetch bench_hand``;
* **raw physics bound**: ``mj_step(model, data, nstep=n_substeps)`` on the same model, replaying the
  physics our env ran in the same episodes, reset included (the manipulate tasks let the object settle
  for 10 steps at every reset): each ``mj_step`` call from the state it started in, with the mocap
  targets and controls our env set (so contacts and solver work match), with nothing else per step.
  No env can step faster than this.

Rows: steps/s (higher is better). For the bound row ``ours/peer`` is below 1: its inverse is our step
time as a multiple of the bound. A third row gives the cost of a step beyond ``mj_step``
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


def episode(env: gym.Env, actions: np.ndarray, seed: int) -> None:
    """One episode of ``len(actions)`` steps from ``reset(seed=seed)``."""
    env.reset(seed=seed)
    for action in actions:
        env.step(action)


def gymnasium_robotics_env(env_id: str) -> tuple[gym.Env | None, str]:
    """Gymnasium-Robotics' env ``env_id``, or None and the reason it cannot run here."""
    try:
        import mujoco

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import gymnasium_robotics

            gym.register_envs(gymnasium_robotics)
            env = gym.make(env_id)
            env.reset(seed=0)
            env.step(env.action_space.sample())
        return env, f"gymnasium-robotics {gymnasium_robotics.__version__}"
    except ImportError as exc:
        return None, f"gymnasium-robotics {env_id}: n/a (not importable: {exc})"
    except Exception as exc:  # any failure to run is reported, not raised
        where = ""
        tb = exc.__traceback__
        while tb is not None:
            where = tb.tb_frame.f_code.co_name
            tb = tb.tb_next
        return (
            None,
            f"gymnasium-robotics {env_id}: n/a ({type(exc).__name__} in {where} on mujoco {mujoco.__version__})",
        )


class RecordingMujoco(types.ModuleType):
    """The mujoco module with each ``mj_step`` call recorded before it runs: the physics of a reset."""

    def __init__(self) -> None:
        import mujoco

        super().__init__("mujoco_recording_mj_step")
        self._real = mujoco
        self.calls: list[tuple[Any, ...]] = []
        self._after: tuple[np.ndarray, np.ndarray] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def mj_step(self, m: Any, d: Any, nstep: int = 1) -> None:
        # A call that does not start where the previous one ended follows state the env wrote (a new
        # start drawn): the replay restores it first.
        restore = self._after is None or not (
            np.array_equal(self._after[0], d.qpos) and np.array_equal(self._after[1], d.qvel)
        )
        state = (d.qpos.copy(), d.qvel.copy(), float(d.time), d.mocap_pos.copy(), d.mocap_quat.copy())
        self.calls.append((*state, d.ctrl.copy(), nstep, restore))
        self._real.mj_step(m, d, nstep)
        self._after = (d.qpos.copy(), d.qvel.copy())


def record_controls(env: gym.Env, actions: np.ndarray, seed: int, sim_module: Any) -> tuple[Any, ...]:
    """One episode's physics: the ``mj_step`` calls of its reset (through ``sim_module``, the module
    whose ``mujoco`` the env calls), its start state, and the mocap pose / ctrl our env set before
    each step's physics."""
    base = env.unwrapped
    data = base.data
    recorder, saved = RecordingMujoco(), sim_module.mujoco
    sim_module.mujoco = recorder
    try:
        base.reset(seed=seed)
    finally:
        sim_module.mujoco = saved
    start = (data.qpos.copy(), data.qvel.copy(), float(data.time))
    mocap_pos, mocap_quat, ctrl = [], [], []
    for action in actions:
        base.step(action)
        # What the step wrote before integrating is still in place after it (mj_step leaves mocap
        # and ctrl alone), so read it back here.
        mocap_pos.append(data.mocap_pos.copy())
        mocap_quat.append(data.mocap_quat.copy())
        ctrl.append(data.ctrl.copy())
    return (recorder.calls, *start, np.array(mocap_pos), np.array(mocap_quat), np.array(ctrl))


def physics_bound(env: gym.Env, recorded: tuple[Any, ...], pinned: np.ndarray | None) -> None:
    """The same episode as bare mj_step calls: the reset's calls, then from the start state: set the
    recorded mocap/ctrl, step, repeat. ``pinned``: a view of joint positions the env holds at 0 after
    each step (Fetch's blocked gripper), else None."""
    import mujoco

    base = env.unwrapped
    m, d, nstep = base.model, base.data, base.n_substeps
    step = mujoco.mj_step
    mocap_pos, mocap_quat, ctrl = d.mocap_pos, d.mocap_quat, d.ctrl
    reset_calls, qpos, qvel, time0, mpos, mquat, ctl = recorded
    mujoco.mj_resetData(m, d)
    for qpos_r, qvel_r, time_r, mpos_r, mquat_r, ctl_r, nstep_r, restore in reset_calls:
        if restore:
            d.qpos[:] = qpos_r
            d.qvel[:] = qvel_r
            d.time = time_r
            mujoco.mj_forward(m, d)
        mocap_pos[:] = mpos_r
        mocap_quat[:] = mquat_r
        ctrl[:] = ctl_r
        step(m, d, nstep_r)
    d.qpos[:] = qpos
    d.qvel[:] = qvel
    d.time = time0
    mujoco.mj_forward(m, d)
    for t in range(len(ctl)):
        mocap_pos[:] = mpos[t]
        mocap_quat[:] = mquat[t]
        ctrl[:] = ctl[t]
        step(m, d, nstep)
        if pinned is not None:
            pinned[:] = 0.0


def seconds(fn: Callable[..., None], *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


class NoStepMujoco(types.ModuleType):
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


def overhead_us(env: gym.Env, sim_module: Any, actions: np.ndarray, repeats: int) -> float:
    """Microseconds per step of everything but mj_step (bare env, mj_step stubbed out in
    ``sim_module``, the module whose ``mujoco`` the env calls; None: Gymnasium-Robotics' env, which calls
    its own ``_mujoco``).

    The minimum over repeats: this measures intrinsic cost, and on a shared machine every other
    process only ever adds time.
    """
    base = env.unwrapped
    base.reset(seed=0)
    owner, name = (sim_module, "mujoco") if sim_module is not None else (base, "_mujoco")
    saved = getattr(owner, name)
    setattr(owner, name, NoStepMujoco())
    try:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for a in actions:
                base.step(a)
            times.append((time.perf_counter() - start) / len(actions))
    finally:
        setattr(owner, name, saved)
    return float(np.min(times)) * 1e6


def task_rows(
    family: str,
    title: str,
    ids: tuple[str, str],
    actions: np.ndarray,
    sim_module: Any,
    repeats: int,
    pinned: Callable[[gym.Env], np.ndarray | None] = lambda env: None,
) -> list[Row]:
    """The three rows of one task: ``ids`` (ours, Gymnasium-Robotics'), ``actions`` ``(episodes, steps,
    action_dim)``, ``pinned(env)``: what :func:`physics_bound` holds at 0."""
    n_episodes, steps = actions.shape[:2]
    ours = gym.make(ids[0])
    bare = gym.make(ids[0]).unwrapped
    bound_env = gym.make(ids[0])
    controls = [record_controls(bound_env, actions[e], e, sim_module) for e in range(n_episodes)]
    hold = pinned(bound_env)
    theirs, peer_name = gymnasium_robotics_env(ids[1])

    # Interleaved episode by episode, so that load from other processes hits every variant alike;
    # each repeat sums its episodes, and the rate is taken from the median repeat.
    timings: dict[str, list[float]] = {"ours": [], "bare": [], "bound": [], "theirs": []}
    for _ in range(repeats):
        total = dict.fromkeys(timings, 0.0)
        for e in range(n_episodes):
            total["ours"] += seconds(episode, ours, actions[e], e)
            total["bare"] += seconds(episode, bare, actions[e], e)
            total["bound"] += seconds(physics_bound, bound_env, controls[e], hold)
            if theirs is not None:
                total["theirs"] += seconds(episode, theirs, actions[e], e)
        for key in timings:
            timings[key].append(total[key])
    work = n_episodes * steps
    rate = {k: work / float(np.median(v)) for k, v in timings.items() if theirs is not None or k != "theirs"}
    flat = actions.reshape(-1, actions.shape[-1])
    substeps = bare.n_substeps  # type: ignore[attr-defined]
    return [
        Row(family, f"{title} gym.make, steps/s", "steps/s", rate["ours"], rate.get("theirs"), peer_name),
        Row(
            family,
            f"{title} bare env vs raw mj_step x{substeps}",
            "steps/s",
            rate["bare"],
            rate["bound"],
            "raw physics bound",
        ),
        Row(
            family,
            f"{title} overhead beyond mj_step, us/step",
            "us/step",
            overhead_us(bare, sim_module, flat, repeats),
            overhead_us(theirs, None, flat, repeats) if theirs is not None else None,
            peer_name,
            higher_is_better=False,
        ),
    ]
