"""One base for goalenvs' native vector envs: seeding, the autoreset modes and the info masks.

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
  ``info["final_info"]``) or ``DISABLED`` (Gymnasium 1.1's: no autoreset; the caller resets the
  ended envs with ``reset(options={"reset_mask": mask})``, which resets only the envs of the mask
  (an int seed ``s`` still seeds env ``i`` with ``s + i``) and reports only their info, as
  Gymnasium's vector envs do; torchrl's ``GymWrapper`` works this way).
* **infos**: exactly what Gymnasium's ``SyncVectorEnv`` of the single envs returns (tested key for
  key): a dict of arrays with ``"_" + key`` masks (by default every env reports every key); with
  ``SAME_STEP``, and only in a step that ends an episode, ``info["final_obs"]`` is an object array
  of shape ``(num_envs,)`` holding each ended env's last observation (a dict of single-env arrays)
  and None elsewhere, ``info["final_info"]`` the ended envs' last infos as a dict of arrays with
  their own masks (zeros where no episode ended), and ``info["_final_obs"]`` /
  ``info["_final_info"]`` the ended envs. ``batched_final_obs=True`` (opt-in) makes
  ``info["final_obs"]`` one dict of ``(num_envs, ...)`` arrays instead (rows valid where
  ``info["_final_obs"]``): no Python object per ended env, for loops that read the batch whole.
* **the contract**: reward, terminated and truncated come from the task's ``score``, the task's
  ``compute_reward`` / ``compute_terminated`` / ``compute_truncated`` on the step's batch, which are
  also the env's.
* **misuse**: one vector env is not thread-safe (Fetch steps MuJoCo data that two threads would
  corrupt: a segfault), so ``reset`` / ``step`` / ``render`` / ``close`` entered while another
  thread is inside one of them raise :class:`ConcurrentUseError` at once instead of waiting or
  crashing; after ``close()`` they raise :class:`ClosedVectorEnvError` (Gymnasium's
  ``AsyncVectorEnv`` raises its ``ClosedEnvironmentError`` the same way); ``close()`` twice is a no-op.

A family's vector env subclasses :class:`NativeVectorEnv` and calls
:meth:`NativeVectorEnv._init_vector` with the family's :class:`~goalenvs.task.Task`, the one its single
env (:class:`~goalenvs.task.TaskEnv`) is built from (gymnax's ``Environment.step`` owns autoreset the
same way, with the task supplying ``step_env`` / ``reset_env``).
"""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from goalenvs._util import available_memory, check_bool, check_int, check_render_mode
from goalenvs.core import ConcurrentUseError  # defined with the contract: her raises it too
from goalenvs.task import (
    SEED_LIMIT_U64,
    Task,
    TaskGoalFunctions,
    as_actions,
    check_reset_options,
    seed_array,
)

__all__ = [
    "AUTORESET_MODES",
    "ClosedVectorEnvError",
    "ConcurrentUseError",
    "NativeVectorEnv",
    "NumEnvsMemoryError",
    "SeedError",
    "check_autoreset_mode",
    "env_seeds",
]

#: The autoreset modes every native vector env offers (``DISABLED``: no autoreset; the caller resets
#: ended envs with ``reset(options={"reset_mask": mask})``, as torchrl's ``GymWrapper`` does).
AUTORESET_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED)

Obs = dict[str, np.ndarray]


class ClosedVectorEnvError(gym.error.ClosedEnvironmentError, RuntimeError):
    """A native vector env was used after ``close()``.

    Both Gymnasium's ``ClosedEnvironmentError`` (what ``AsyncVectorEnv`` raises) and a ``RuntimeError``,
    so either ``except`` catches it.
    """


def check_autoreset_mode(mode: Any) -> AutoresetMode:
    """``mode`` as an ``AutoresetMode`` (the enum or its value), or a one-line error listing the choices."""
    try:
        parsed = AutoresetMode(mode)
    except ValueError:
        parsed = None
    if parsed not in AUTORESET_MODES:
        raise ValueError(f"autoreset_mode must be one of {[m.value for m in AUTORESET_MODES]}, got {mode!r}")
    return parsed


class NumEnvsMemoryError(MemoryError, ValueError):
    """A ``num_envs`` whose arrays cannot fit in the memory available: a ``MemoryError`` and, as the
    argument's error, a ``ValueError``."""


def check_num_envs_memory(name: str, num_envs: int, bytes_per_env: int) -> None:
    """Refuse, in one line and before anything is allocated, ``num_envs`` envs of at least
    ``bytes_per_env`` bytes each when they exceed the memory available (nothing when it cannot be told)."""
    needed, available = num_envs * bytes_per_env, available_memory()
    if available is None or needed <= available:
        return
    raise NumEnvsMemoryError(
        f"{name}(num_envs={num_envs}) needs at least {needed:,} bytes ({needed / 2**30:,.1f} GiB: "
        f"{bytes_per_env:,} bytes per env), more than the {available:,} bytes ({available / 2**30:,.1f} "
        f"GiB) of memory available; lower num_envs (at most about {available // bytes_per_env:,} fit)"
    )


class SeedError(gym.error.Error, ValueError):
    """A negative seed: refused as Gymnasium refuses it (its ``gym.error.Error``), and a ``ValueError``."""


def _check_seed(name: str, seed: Any) -> int:
    """``seed`` as an int >= 0 of any size (what ``np.random.SeedSequence`` takes), or a one-line error."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name} must be an int >= 0, got {type(seed).__name__} ({seed!r})")
    if seed < 0:
        raise SeedError(f"{name} must be >= 0 (Gymnasium's rule), got {seed}")
    return int(seed)


def env_seeds(seed: Any, num_envs: int) -> np.ndarray | None:
    """The per-env seeds ``reset(seed=...)`` asks for: an int ``s`` gives ``s, s + 1, ...``, a list gives
    itself, None gives None (shape ``(num_envs,)``: uint64, or an object array of Python ints when one
    is >= 2**64, see :func:`goalenvs.task.seed_array`). Any int >= 0 is a seed, as in Gymnasium."""
    if seed is None:
        return None
    if isinstance(seed, (list, tuple, np.ndarray)):
        if len(seed) != num_envs:
            raise ValueError(f"seed as a list must hold {num_envs} ints >= 0, got {seed!r}")
        return seed_array([_check_seed(f"seed[{i}]", s) for i, s in enumerate(seed)])
    first = _check_seed("seed", seed)
    if first + num_envs <= SEED_LIMIT_U64:  # the common case, without a Python int per env
        return np.arange(num_envs, dtype=np.uint64) + np.uint64(first)
    return seed_array([first + i for i in range(num_envs)])


class NativeVectorEnv(TaskGoalFunctions, VectorEnv):
    """N envs of one task stepped as arrays, with Gymnasium's vector API around them.

    A family's vector env class sets ``metadata`` and its docstring, and its ``__init__`` validates
    its own arguments into the family's :class:`~goalenvs.task.Task` (the very task its single env is
    built from) and calls :meth:`_init_vector`. Everything else is here: the task's functions on a
    state of ``num_envs`` envs, its ``compute_*`` as the env's, seeding, autoreset and info masks.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """The autoreset mode, as an attribute as on Gymnasium's own vector envs (torchrl reads it
        there); the same as ``metadata["autoreset_mode"]``."""
        return self.metadata["autoreset_mode"]

    # ---- set up by the family's __init__ ------------------------------------------------------------

    def _init_vector(
        self,
        task: Task,
        num_envs: Any,
        render_mode: str | None = None,
        autoreset_mode: Any = AutoresetMode.NEXT_STEP,
        batched_final_obs: Any = False,
    ) -> None:
        """Validate ``num_envs``, ``render_mode``, ``autoreset_mode`` and ``batched_final_obs``, build
        the batched spaces and the task's state of ``num_envs`` envs."""
        self.num_envs = check_int("num_envs", num_envs, 1)
        check_num_envs_memory(type(self).__name__, self.num_envs, task.min_bytes_per_env())
        self.render_mode = check_render_mode(render_mode, type(self).metadata.get("render_modes", []))
        mode = check_autoreset_mode(autoreset_mode)
        self.batched_final_obs = check_bool("batched_final_obs", batched_final_obs)
        if self.batched_final_obs and mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                "batched_final_obs=True needs autoreset_mode='SameStep' (only same-step autoreset "
                f"returns final observations), got autoreset_mode={mode.value!r}"
            )
        self._task = task
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.single_observation_space = task.observation_space
        self.single_action_space = task.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._state = task.new_state(self.num_envs)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        # The envs whose episode has just started (no step yet): they report no step-only info key.
        self._fresh = np.ones(self.num_envs, dtype=bool)
        self._all_envs = np.arange(self.num_envs)
        self._seeded = False
        self._busy = threading.Lock()
        self._busy_in = ""  # the method the thread holding _busy is in (for the error message)

    # ---- one thread at a time, and not after close ---------------------------------------------------

    def _enter(self, method: str) -> None:
        """Claim the env for ``method`` (release with ``self._busy.release()``), or raise at once.

        A non-blocking lock rather than a waiting one: two threads stepping one env is a bug in the
        caller (their episodes would interleave), so it is reported, not serialised.
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
        """A tuple of ``num_envs`` frames, each as the single env renders it (None without a render
        mode); guarded like ``step``."""
        self._enter("render")
        try:
            if self.render_mode is None:
                return self._task.render(self._state, 0, None)  # None, with the task's warning if any
            return tuple(self._task.render(self._state, i, self.render_mode) for i in range(self.num_envs))
        finally:
            self._busy.release()

    def close_extras(self, **kwargs: Any) -> None:
        self._task.close(self._state)

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
        task, state = self._task, self._state
        mask, options = self._reset_mask(options)
        check_reset_options(options, task.reset_option_keys)  # before anything changes
        seeds = env_seeds(seed, self.num_envs)
        if not self._seeded and (seeds is None or mask is not None):  # first reset: fresh entropy
            super().reset()
            task.seed(
                state, self.np_random.integers(0, 2**63, size=self.num_envs, dtype=np.int64), self._all_envs
            )
            self._seeded = True
        if seeds is not None:
            super().reset(seed=int(seeds[0]))
        envs = self._all_envs if mask is None else np.flatnonzero(mask)
        if seeds is not None:
            task.seed(state, seeds if mask is None else seeds[mask], envs)
            self._seeded = True
        task.reset(state, envs, options)
        self._autoreset[envs] = False
        self._fresh[envs] = True
        obs = task.observe(state)
        info = self._masked(task.score(state, obs)[0])
        if mask is not None:  # as Gymnasium's vector envs: only the envs reset report their info
            for key in [key for key in info if not key.startswith("_")]:
                value = info[key] = info[key].copy()
                value[~mask] = 0
                info["_" + key] = info["_" + key] & mask
        return obs, info

    def _reset_mask(self, options: dict[str, Any] | None) -> tuple[np.ndarray | None, dict[str, Any] | None]:
        """``options["reset_mask"]`` (Gymnasium's: a bool array of shape ``(num_envs,)``, some True: the
        envs to reset) checked as Gymnasium checks it, and the other options (the caller's dict is
        left as it is)."""
        if not isinstance(options, dict) or "reset_mask" not in options:
            return None, options
        options = dict(options)
        mask = options.pop("reset_mask")
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
            got = (
                f"{type(mask).__name__} of shape {mask.shape} and dtype {mask.dtype}"
                if isinstance(mask, np.ndarray)
                else type(mask).__name__
            )
            raise ValueError(
                f"options['reset_mask'] must be a bool numpy array of shape ({self.num_envs},), got {got}"
            )
        if not mask.any():
            raise ValueError("options['reset_mask'] must have at least one True entry (the envs to reset)")
        return mask.copy(), options or None

    def _step(self, actions: Any) -> tuple[Obs, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._seeded:
            raise gym.error.ResetNeeded("call reset() before step()")
        task, state = self._task, self._state
        restart = self._autoreset.nonzero()[0]
        task.step(state, as_actions(task, actions, self.single_action_space.shape, self.num_envs), restart)
        fresh = self._fresh
        if task.step_only_info_keys:  # _masked reads which envs are fresh only for those keys
            fresh[:] = False
        if restart.size:  # NEXT_STEP: the envs that ended last step start over and ignore their action
            task.reset(state, restart, None)
            fresh[restart] = True
        obs = task.observe(state)
        info, reward, terminated, truncated = task.score(state, obs)
        if restart.size:
            reward[restart], terminated[restart], truncated[restart] = 0, False, False
        done = terminated | truncated
        mode = self.metadata["autoreset_mode"]
        if mode == AutoresetMode.DISABLED:  # the caller resets ended envs (reset_mask)
            return obs, reward, terminated, truncated, self._masked(info)
        if mode != AutoresetMode.SAME_STEP:
            self._autoreset = done
            return obs, reward, terminated, truncated, self._masked(info)
        ended = np.flatnonzero(done)
        if not ended.size:  # as in a SyncVectorEnv, the final_* keys come only with an ended episode
            return obs, reward, terminated, truncated, self._masked(info)
        final_obs, final_info = self._final_obs(obs, ended), self._final_info(info, done)
        task.reset(state, ended, None)
        fresh[ended] = True
        obs = task.observe(state)
        # An ended env reports its new episode's info, as in Gymnasium (the score of a fresh episode).
        for key, value in task.score(state, obs)[0].items():
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
        holds views of its row: keeping one keeps only the ended rows alive, not the batch. A dict and
        its arrays per ended env, which ``batched_final_obs=True`` saves by returning ``obs`` itself (the env's own, as the task's ``observe`` makes it anew each call).
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
        """``info`` with Gymnasium's ``"_" + key`` mask for each key, as a ``SyncVectorEnv`` of the single
        envs gives: every env reports every key, except that an env whose episode has just started
        reports none of the task's ``step_only_info_keys`` (its entries read 0), and a key no env
        reports is left out."""
        every = np.empty(self.num_envs, dtype=bool)
        every.fill(True)
        step_only = self._task.step_only_info_keys
        for key in [key for key in info if not key.startswith("_")]:
            if key not in step_only:
                info["_" + key] = every
                continue
            stepped = ~self._fresh
            if not stepped.any():
                del info[key]
                continue
            value = info[key] = info[key].copy()
            value[self._fresh] = 0
            info["_" + key] = stepped
        return info
