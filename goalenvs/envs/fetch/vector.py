"""FetchVectorEnv: N Fetch envs on one MuJoCo model, their physics stepped in parallel threads.

``mj_step`` releases the GIL, so a persistent pool of threads, each stepping a contiguous chunk of the
envs through all their substeps (and then observing them), runs the physics of the chunks in
parallel; the Python work per env (setting the action, reading the observation) is small beside the
physics and overlaps with the other threads' physics. Each env is the very per-env code a
:class:`~goalenvs.envs.fetch.env.FetchEnv` runs (:class:`~goalenvs.envs.fetch.sim.FetchSim`'s
operations on its own ``MjData``), so env ``i`` reset with seed ``s + i`` is that single env, bit for
bit, whatever the number of threads.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import mujoco
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode

from goalenvs._util import check_int, check_render_mode
from goalenvs.envs._checks import check_finite_action
from goalenvs.envs.fetch.assets import make_renderer
from goalenvs.envs.fetch.env import ENV_DOC, FetchGoalFunctions, fetch_spaces
from goalenvs.envs.fetch.sim import FetchSim, FetchViews
from goalenvs.envs.fetch.task import POS_ACTION_SCALE, fetch_settings, fetch_success
from goalenvs.vector import NativeVectorEnv

__all__ = ["FetchVectorEnv"]

# The keys of FetchEnv.step's info (its reset info is empty).
_STEP_INFO_KEYS = ("is_success", "elapsed_steps")

_VECTOR_DOC = """
    ## Vector specifics
    * ``num_envs`` (int >= 1). ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list seeds each
      env), so env ``i`` replays exactly what ``FetchEnv`` reset with seed ``s + i`` does (observation,
      reward, flags and info, bit for bit). Every other argument is ``FetchEnv``'s, for all envs.
    * ``num_threads`` (int >= 1, default ``os.cpu_count()``, capped at ``num_envs``): threads that step
      the physics, each a contiguous chunk of envs. With 1 no thread pool is made. The results do not
      depend on it.
    * ``autoreset_mode``: ``AutoresetMode.NEXT_STEP`` (default; Gymnasium's) or ``SAME_STEP``
      (declared in ``metadata["autoreset_mode"]``). With ``SAME_STEP``, in a step that ends an
      episode, ``info["final_obs"]`` is an object array holding each ended env's last observation
      dict (None elsewhere) and ``info["final_info"]`` their last infos (a dict of arrays with its
      own masks), as in a ``SyncVectorEnv`` of ``FetchEnv``.
    * ``batched_final_obs`` (opt-in, ``SAME_STEP`` only): ``info["final_obs"]`` is one dict of
      ``(num_envs, ...)`` arrays instead, rows valid where ``info["_final_obs"]``.
    * ``info`` holds ``is_success`` (float32) and ``elapsed_steps`` (int64) arrays of shape
      ``(num_envs,)``. ``FetchEnv.reset`` returns an empty info, so an env whose episode has just
      started (at ``reset``, or by an autoreset) reports none: its ``"_is_success"`` and
      ``"_elapsed_steps"`` masks are False (its entries 0), and where no env has stepped in its
      episode the keys are left out, as in a ``SyncVectorEnv`` of ``FetchEnv``.
    * ``compute_reward`` / ``compute_terminated`` / ``compute_truncated`` are the single env's, on the
      batches this env returns.
    * ``render()`` (``render_mode="rgb_array"``) returns a tuple of ``num_envs`` frames, as
      Gymnasium's vector envs do; ``data[i]`` is env ``i``'s ``MjData`` (one ``model`` for all) and
      ``goal[i]`` its goal.
    * ``close()`` ends the thread pool; ``reset``, ``step`` and ``render`` then raise
      ``ClosedVectorEnvError`` (a ``RuntimeError`` and Gymnasium's ``ClosedEnvironmentError``), and
      ``close()`` again does nothing. The env pickles (and deep-copies): MuJoCo's model and data and
      each env's random stream are kept, the thread pool and renderer are made anew.
    * One env, one thread: ``reset`` / ``step`` / ``render`` / ``close`` called while another thread
      is inside one of them raise ``ConcurrentUseError`` (a ``RuntimeError``) at once; two threads
      stepping the same ``MjData`` would crash MuJoCo. Give each thread its own env.
    * Actions with NaN or infinite entries raise ``ValueError`` before any env moves (see ``FetchEnv``).
"""


class FetchVectorEnv(FetchGoalFunctions, NativeVectorEnv):
    __doc__ = (
        "N Fetch envs stepped as one batch (``gym.make_vec('goalenvs/FetchPush-v0', num_envs=N)``).\n"
        + ENV_DOC
        + _VECTOR_DOC
    )

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        num_envs: int = 1,
        task: str = "reach",
        reward_type: str = "sparse",
        *,
        render_mode: str | None = None,
        num_threads: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        batched_final_obs: bool = False,
        **kwargs: Any,
    ) -> None:
        """``kwargs``: any other keyword argument of :class:`FetchEnv` (``distance_threshold``,
        ``max_steps``, ``width``, ...), validated by the same :func:`fetch_settings`, for every env."""
        n = check_int("num_envs", num_envs, 1)
        threads = (os.cpu_count() or 1) if num_threads is None else check_int("num_threads", num_threads, 1)
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        settings = fetch_settings(task, reward_type, **kwargs)
        self._sim = sim = FetchSim(settings)
        self._apply_settings(settings, sim)
        observation_space, action_space = fetch_spaces(sim)
        self._init_vector(n, observation_space, action_space, autoreset_mode, batched_final_obs)
        self.metadata["render_fps"] = int(np.round(1.0 / self.dt))
        self._act_low, self._act_high = action_space.low.copy(), action_space.high.copy()
        # Env 0 goes on in the MjData the start state was computed in, as a FetchEnv does.
        self.data = (sim.data, *(mujoco.MjData(sim.model) for _ in range(n - 1)))
        self._views = [FetchViews(sim, d) for d in self.data]
        self._rngs: list[np.random.Generator] = [np.random.default_rng(0)] * n  # replaced by _seed
        self.goal = np.zeros((n, 3))
        self._obs = np.zeros((n, sim.obs_dim))
        self._steps = np.zeros(n, dtype=np.int64)
        self.num_threads = min(threads, n)
        bounds = np.linspace(0, n, self.num_threads + 1).round().astype(int).tolist()
        self._chunks = list(zip(bounds[:-1], bounds[1:], strict=True))
        self._pool: ThreadPoolExecutor | None = None
        self._renderer: Any = None
        self._camera: Any = None
        self._start_pool()

    def _start_pool(self) -> None:
        # The calling thread steps the first chunk itself: the pool holds the other threads.
        if self.num_threads > 1:
            self._pool = ThreadPoolExecutor(self.num_threads - 1, thread_name_prefix="fetch-physics")

    # ---- the family's part of NativeVectorEnv ------------------------------------------------------

    def _seed(self, seeds: np.ndarray, envs: np.ndarray) -> None:
        for seed, i in zip(seeds.tolist(), envs.tolist(), strict=True):
            self._rngs[i] = seeding.np_random(seed)[0]  # what gym.Env.reset(seed=seed) makes

    def _restart(self, envs: np.ndarray, options: dict[str, Any] | None) -> None:
        # options are accepted and ignored, as by FetchEnv.reset.
        sim = self._sim
        for i in envs.tolist():
            v, rng = self._views[i], self._rngs[i]
            sim.restart(v, rng, self.obj_range)
            self.goal[i] = sim.sample_goal(rng, self.target_range, self.target_offset, self.target_in_the_air)
            self._obs[i] = sim.observation(v)
        self._steps[envs] = 0

    def _advance(self, actions: Any, skip: np.ndarray) -> None:
        a = np.asarray(actions)
        if a.shape != (self.num_envs, 4):
            raise ValueError(
                f"actions must have shape (num_envs, 4) = ({self.num_envs}, 4) (dx, dy, dz, gripper per env), "
                f"got shape {a.shape}"
            )
        check_finite_action("actions", a, "4 numbers per env: dx, dy, dz, gripper, clipped to [-1, 1]")
        # FetchEnv.step's clipping and scaling, row by row the same elementwise operations.
        a = np.minimum(np.maximum(a, self._act_low), self._act_high)
        delta = a[:, :3] * POS_ACTION_SCALE
        grips = [0.0] * self.num_envs if self.block_gripper else a[:, 3].tolist()
        active = None
        if skip.size:
            active = np.ones(self.num_envs, dtype=bool)
            active[skip] = False
        self._steps += 1
        chunks = self._chunks
        futures: list[Future[None]] = []
        if self._pool is not None:
            futures = [
                self._pool.submit(self._step_chunk, lo, hi, delta, grips, active) for lo, hi in chunks[1:]
            ]
        try:
            self._step_chunk(*chunks[0], delta, grips, active)
        finally:
            for future in futures:
                future.result()

    def _step_chunk(
        self, lo: int, hi: int, delta: np.ndarray, grips: list[float], active: np.ndarray | None
    ) -> None:
        """Envs ``lo`` to ``hi - 1``: act, integrate, observe (in a pool thread, or the caller's)."""
        sim, views, obs, block = self._sim, self._views, self._obs, self.block_gripper
        for i in range(lo, hi):
            if active is not None and not active[i]:
                continue
            v = views[i]
            sim.act(v, delta[i], grips[i])
            sim.advance(v, block)
            obs[i] = sim.observation(v)

    def _observe(self) -> dict[str, np.ndarray]:
        obs = self._obs.copy()
        return {
            "observation": obs,
            "achieved_goal": obs[:, self._sim.achieved].copy(),
            "desired_goal": self.goal.copy(),
        }

    def _info(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        success = fetch_success(obs["achieved_goal"], obs["desired_goal"], self.distance_threshold)
        success[self._steps == 0] = 0.0  # no info for an episode just started (masked by _masked)
        return {"is_success": success, "elapsed_steps": self._steps.copy()}

    def _masked(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` with Gymnasium's ``"_" + key`` masks, a ``SyncVectorEnv`` of ``FetchEnv`` would give.

        ``FetchEnv.reset``'s info is empty, so ``is_success`` and ``elapsed_steps`` count only for the
        envs that have stepped in their episode, and are left out when none has (at ``reset``, or when
        every env has just autoreset); any other key counts for every env.
        """
        stepped = self._steps > 0
        every = np.ones(self.num_envs, dtype=bool)
        for key in [key for key in info if not key.startswith("_")]:
            if key not in _STEP_INFO_KEYS:
                info["_" + key] = every
            elif stepped.any():
                info["_" + key] = stepped.copy()
            else:
                del info[key]
        return info

    # ---- rendering, closing, pickling --------------------------------------------------------------

    def _render(self) -> tuple[np.ndarray, ...] | None:
        """One RGB frame (height, width, 3) uint8 per env, as ``FetchEnv.render`` draws it; None without a render_mode."""
        if self.render_mode is None:
            return None
        if self._renderer is None:
            self._renderer, self._camera = make_renderer(self.model, self.height, self.width)
        return tuple(
            self._sim.draw(self._renderer, self._camera, v, goal)
            for v, goal in zip(self._views, self.goal, strict=True)
        )

    def close_extras(self, **kwargs: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_pool": None, "_renderer": None, "_camera": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if not self.closed:
            self._start_pool()
