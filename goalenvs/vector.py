"""One base for goalenvs' native vector envs: seeding, both autoreset modes and the info masks.

A native vector env steps N copies of a task as one batch of arrays. What differs between tasks is
how an episode starts, how the state advances and what is observed; what is the same is everything
Gymnasium's vector API asks around that, and it lives here, once:

* **seeding**: ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list seeds each env), so env ``i``
  replays exactly the single env reset with that seed; ``reset()`` before any seed draws the N seeds
  from fresh entropy; ``reset()`` afterwards goes on with each env's own random stream.
* **autoreset**: ``NEXT_STEP`` (Gymnasium's default: the step after an episode ends starts the next
  one, ignores that env's action and returns its first observation with reward 0, terminated and
  truncated False) or ``SAME_STEP`` (the ended env restarts within the step and reports its new
  episode's reset info; its last observation and info are in ``info["final_obs"]`` /
  ``info["final_info"]``).
* **infos**: exactly what Gymnasium's ``SyncVectorEnv`` of the single envs returns (tested key for
  key): a dict of arrays with ``"_" + key`` masks (by default every env reports every key); with
  ``SAME_STEP``, and only in a step that ends an episode, ``info["final_obs"]`` is an object array
  of shape ``(num_envs,)`` holding each ended env's last observation (a dict of single-env arrays)
  and None elsewhere, ``info["final_info"]`` the ended envs' last infos as a dict of arrays with
  their own masks (zeros where no episode ended), and ``info["_final_obs"]`` /
  ``info["_final_info"]`` the ended envs. ``batched_final_obs=True`` (opt-in) makes
  ``info["final_obs"]`` one dict of ``(num_envs, ...)`` arrays instead (rows valid where
  ``info["_final_obs"]``): no Python object per ended env, for loops that read the batch whole.
* **the contract**: reward, terminated and truncated come from the family's ``_score``, which by
  default calls the env's own ``compute_reward`` / ``compute_terminated`` / ``compute_truncated``.
* **misuse**: one vector env is not thread-safe (Fetch steps MuJoCo data that two threads would
  corrupt: a segfault), so ``reset`` / ``step`` / ``render`` / ``close`` entered while another
  thread is inside one of them raise :class:`ConcurrentUseError` at once instead of waiting or
  crashing; after ``close()`` they raise :class:`ClosedVectorEnvError` (Gymnasium's
  ``AsyncVectorEnv`` raises its ``ClosedEnvironmentError`` the same way); ``close()`` twice is a no-op.

A family subclasses :class:`NativeVectorEnv`, calls :meth:`NativeVectorEnv._init_vector` in its
``__init__`` and supplies ``_seed``, ``_restart``, ``_advance``, ``_observe`` and ``_info`` (gymnax's
``Environment.step`` owns autoreset the same way, with the task supplying ``step_env`` /
``reset_env``).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from goalenvs._util import check_bool, check_int

__all__ = [
    "AUTORESET_MODES",
    "ClosedVectorEnvError",
    "ConcurrentUseError",
    "NativeVectorEnv",
    "check_autoreset_mode",
    "env_seeds",
]

#: The autoreset modes every native vector env offers.
AUTORESET_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)

Obs = dict[str, np.ndarray]


class ClosedVectorEnvError(gym.error.ClosedEnvironmentError, RuntimeError):
    """A native vector env was used after ``close()``.

    Both Gymnasium's ``ClosedEnvironmentError`` (what ``AsyncVectorEnv`` raises) and a ``RuntimeError``,
    so either ``except`` catches it.
    """


class ConcurrentUseError(RuntimeError):
    """An env (a native vector env, or a ``FetchEnv``) was entered from a second thread while another
    thread was inside it."""


def check_autoreset_mode(mode: Any) -> AutoresetMode:
    """``mode`` as an ``AutoresetMode`` (the enum or its value), or a one-line error listing the choices."""
    try:
        parsed = AutoresetMode(mode)
    except ValueError:
        parsed = None
    if parsed not in AUTORESET_MODES:
        raise ValueError(f"autoreset_mode must be one of {[m.value for m in AUTORESET_MODES]}, got {mode!r}")
    return parsed


def env_seeds(seed: Any, num_envs: int) -> np.ndarray | None:
    """The per-env seeds ``reset(seed=...)`` asks for: an int ``s`` gives ``s, s + 1, ...``, a list gives
    itself, None gives None (int64 array of shape ``(num_envs,)``)."""
    if seed is None:
        return None
    if isinstance(seed, (list, tuple, np.ndarray)):
        if len(seed) != num_envs:
            raise ValueError(f"seed as a list must hold {num_envs} ints >= 0, got {seed!r}")
        return np.array([check_int(f"seed[{i}]", s, 0) for i, s in enumerate(seed)], dtype=np.int64)
    first = check_int("seed", seed, 0)
    return first + np.arange(num_envs, dtype=np.int64)


class NativeVectorEnv(VectorEnv, ABC):
    """N envs of one task stepped as arrays, with Gymnasium's vector API around them.

    Subclasses supply:

    * ``_seed(seeds, envs)``: give the envs of index array ``envs`` the random streams a single env
      reset with ``seeds`` (int64, one per env) would draw from;
    * ``_restart(envs, options)``: start new episodes in ``envs``, drawing from their own streams
      (``options`` is ``reset``'s, or None on an autoreset);
    * ``_advance(actions, skip)``: one step of every env except those of index array ``skip`` (the
      envs restarting under NEXT_STEP autoreset, whose action is ignored);
    * ``_observe()``: the batch observation, a dict of arrays with a leading ``num_envs`` axis,
      made anew by each call (never views of the env's state: the caller keeps them);
    * ``_info(obs)``: the batch info as arrays of shape ``(num_envs, ...)`` (no masks);
    * ``compute_reward`` / ``compute_terminated`` / ``compute_truncated``, and optionally a faster
      ``_score(obs)`` that returns the info and the same three arrays from shared intermediate results;
    * optionally ``_masked(info)``, where not every env reports every key (Fetch: an env that has
      just started an episode reports no step info, as its single env's ``reset`` does);
    * optionally ``_render()``, the frames ``render()`` returns (``render`` itself is the base's, so
      that it is guarded like ``step``).
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    # The goal functions every family defines, ``fn(achieved_goal, desired_goal, info)``: declared, not
    # defined, so that a family lacking one still has none (``find_goal_function`` answers None).
    compute_reward: Callable[..., np.ndarray]
    compute_terminated: Callable[..., np.ndarray]
    compute_truncated: Callable[..., np.ndarray]

    # ---- set up by the family's __init__ ------------------------------------------------------------

    def _init_vector(
        self,
        num_envs: Any,
        single_observation_space: gym.spaces.Dict,
        single_action_space: gym.Space,
        autoreset_mode: Any = AutoresetMode.NEXT_STEP,
        batched_final_obs: Any = False,
    ) -> None:
        """Validate ``num_envs``, ``autoreset_mode`` and ``batched_final_obs`` and build the batched spaces."""
        self.num_envs = check_int("num_envs", num_envs, 1)
        mode = check_autoreset_mode(autoreset_mode)
        self.batched_final_obs = check_bool("batched_final_obs", batched_final_obs)
        if self.batched_final_obs and mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                "batched_final_obs=True needs autoreset_mode='SameStep' (only same-step autoreset "
                f"returns final observations), got autoreset_mode={mode.value!r}"
            )
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.observation_space = batch_space(single_observation_space, self.num_envs)
        self.action_space = batch_space(single_action_space, self.num_envs)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._all_envs = np.arange(self.num_envs)
        self._seeded = False
        self._busy = threading.Lock()
        self._busy_in = ""  # the method the thread holding _busy is in (for the error message)

    # ---- what a family supplies --------------------------------------------------------------------

    @abstractmethod
    def _seed(self, seeds: np.ndarray, envs: np.ndarray) -> None: ...

    @abstractmethod
    def _restart(self, envs: np.ndarray, options: dict[str, Any] | None) -> None: ...

    @abstractmethod
    def _advance(self, actions: Any, skip: np.ndarray) -> None: ...

    @abstractmethod
    def _observe(self) -> Obs: ...

    @abstractmethod
    def _info(self, obs: Obs) -> dict[str, np.ndarray]: ...

    def _score(self, obs: Obs) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray]:
        """A step's info, reward, terminated and truncated: ``_info`` and the env's own ``compute_*``."""
        info = self._info(obs)
        ag, dg = obs["achieved_goal"], obs["desired_goal"]
        return (
            info,
            np.asarray(self.compute_reward(ag, dg, info)),
            np.asarray(self.compute_terminated(ag, dg, info)),
            np.asarray(self.compute_truncated(ag, dg, info)),
        )

    # ---- one thread at a time, and not after close ---------------------------------------------------

    def _enter(self, method: str) -> None:
        """Claim the env for ``method`` (release with ``self._busy.release()``), or raise at once.

        A non-blocking lock rather than a waiting one: two threads stepping one env is a bug in the
        caller (their episodes would interleave), so it is reported, not serialised. ~0.2 us a call.
        """
        if not self._busy.acquire(False):
            raise self._concurrent_use(method)
        if self.closed:
            self._busy.release()
            raise ClosedVectorEnvError(f"{type(self).__name__}.{method} called after close(); make a new one")
        self._busy_in = method

    def _concurrent_use(self, method: str) -> ConcurrentUseError:
        name = type(self).__name__
        return ConcurrentUseError(
            f"{name}.{method} called from two threads at once (another thread is in "
            f"{name}.{self._busy_in or method}); one vector env is not thread-safe: give each thread its own"
        )

    def close(self, **kwargs: Any) -> None:
        """Release the env's resources (``close_extras``); a second call does nothing (Gymnasium's rule).

        Closing while another thread steps the env raises :class:`ConcurrentUseError` (the step would
        go on with its thread pool or renderer gone).
        """
        if self.closed:
            return
        if not self._busy.acquire(False):
            raise self._concurrent_use("close")
        try:
            if not self.closed:  # another thread may have closed it since the check above
                self._busy_in = "close"
                super().close(**kwargs)
        finally:
            self._busy.release()

    def render(self) -> tuple[Any, ...] | None:
        """The family's frames (see its ``_render``); guarded like ``step``."""
        self._enter("render")
        try:
            return self._render()
        finally:
            self._busy.release()

    def _render(self) -> tuple[Any, ...] | None:
        """The family's ``render``: None unless it draws."""
        return None

    def __getstate__(self) -> dict[str, Any]:
        # A lock does not pickle; the copy gets its own, free (a pickle is never taken mid-step).
        return {key: value for key, value in self.__dict__.items() if key != "_busy"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._busy = threading.Lock()

    # ---- Gymnasium's vector API --------------------------------------------------------------------

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        self._enter("reset")
        try:
            return self._reset(seed, options)
        finally:
            self._busy.release()

    def step(self, actions: Any) -> tuple[Obs, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        self._enter("step")
        try:
            return self._step(actions)
        finally:
            self._busy.release()

    def _reset(self, seed: Any, options: dict[str, Any] | None) -> tuple[Obs, dict[str, Any]]:
        seeds = env_seeds(seed, self.num_envs)
        if seeds is None and not self._seeded:  # first reset without a seed: fresh entropy
            super().reset()
            seeds = self.np_random.integers(0, 2**63, size=self.num_envs, dtype=np.int64)
        elif seeds is not None:
            super().reset(seed=int(seeds[0]))
        if seeds is not None:
            self._seed(seeds, self._all_envs)
            self._seeded = True
        self._restart(self._all_envs, options)
        self._autoreset[:] = False
        obs = self._observe()
        return obs, self._masked(self._info(obs))

    def _step(self, actions: Any) -> tuple[Obs, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._seeded:
            raise gym.error.ResetNeeded("call reset() before step()")
        restart = self._autoreset.nonzero()[0]
        self._advance(actions, restart)
        if restart.size:  # NEXT_STEP: the envs that ended last step start over and ignore their action
            self._restart(restart, None)
        obs = self._observe()
        info, reward, terminated, truncated = self._score(obs)
        if restart.size:
            reward[restart], terminated[restart], truncated[restart] = 0, False, False
        done = terminated | truncated
        if self.metadata["autoreset_mode"] != AutoresetMode.SAME_STEP:
            self._autoreset = done
            return obs, reward, terminated, truncated, self._masked(info)
        ended = np.flatnonzero(done)
        if not ended.size:  # as in a SyncVectorEnv, the final_* keys come only with an ended episode
            return obs, reward, terminated, truncated, self._masked(info)
        final_obs, final_info = self._final_obs(obs, ended), self._final_info(info, done)
        self._restart(ended, None)
        obs = self._observe()
        fresh = self._info(obs)  # an ended env reports its new episode's reset info, as in Gymnasium
        for key, value in fresh.items():
            info[key][ended] = value[ended]
        info = self._masked(info)
        info["final_obs"], info["_final_obs"] = final_obs, done
        info["final_info"], info["_final_info"] = final_info, done.copy()
        return obs, reward, terminated, truncated, info

    def _final_obs(self, obs: Obs, ended: np.ndarray) -> np.ndarray | Obs:
        """``info["final_obs"]`` from the ending step's batch ``obs`` and the index array ``ended``.

        Gymnasium's layout: an object array of shape ``(num_envs,)`` holding env ``i``'s last
        observation (a dict of arrays of the single observation space's shapes) for each ``i`` of
        ``ended`` and None elsewhere. The ended rows are copied once, together, and each env's dict
        holds views of its row: keeping one keeps only the ended rows alive, not the batch. About
        1 us per ended env (its dict and arrays), which ``batched_final_obs=True`` saves by returning
        ``obs`` itself (the env's own, as ``_observe`` makes it anew each call).
        """
        if self.batched_final_obs:
            return obs
        rows = {key: value[ended] for key, value in obs.items()}
        final = np.full(self.num_envs, None, dtype=object)
        for j, i in enumerate(ended.tolist()):
            final[i] = {key: value[j] for key, value in rows.items()}
        return final

    def _final_info(self, info: dict[str, np.ndarray], done: np.ndarray) -> dict[str, np.ndarray]:
        """``info["final_info"]``: the ending step's ``info`` (unmasked, ``(num_envs, ...)`` arrays) as
        ``SyncVectorEnv`` gathers the ended envs' infos: each key's values where an ended env reports it
        (its ``"_" + key`` mask), zeros elsewhere, and no key that no ended env reports."""
        reported = self._masked(dict(info))
        final: dict[str, np.ndarray] = {}
        for key, value in info.items():
            mask = reported.get("_" + key)
            if mask is None:
                continue
            mask = mask & done
            if mask.any():
                final[key] = np.zeros_like(value)
                final[key][mask] = value[mask]
                final["_" + key] = mask
        return final

    def _masked(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` with Gymnasium's ``"_" + key`` mask for each key: by default every env reports every key."""
        every = np.empty(self.num_envs, dtype=bool)
        every.fill(True)
        for key in [key for key in info if not key.startswith("_")]:
            info["_" + key] = every
        return info
