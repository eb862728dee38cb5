"""The goal-aware wrappers for vector envs (``gym.make_vec``), named as their single-env versions.

Each shares its logic with the single-env wrapper of the same name (the logic is vectorized over a
leading batch axis); :class:`goalenvs.wrappers._base.VectorGoalWrapper` adds the autoreset handling.
As in Gymnasium, there is no vector version of the passive checker (``check_goal_env`` checks
vector envs) nor of :class:`goalenvs.wrappers.LegacyGoalEnv` (legacy envs are single envs).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from goalenvs._util import object_array
from goalenvs.wrappers._base import VectorGoalWrapper, vector_env_space
from goalenvs.wrappers.adapters import VectorizeLogic
from goalenvs.wrappers.observation import (
    FlattenLogic,
    GoalStats,
    NormalizeLogic,
    TimeLogic,
    check_stats,
)
from goalenvs.wrappers.reward import DenseLogic, Distance, SparseLogic, SuccessLogic

__all__ = [
    "DenseReward",
    "FlattenGoalObservation",
    "NormalizeGoalObservation",
    "SparseReward",
    "SuccessInfo",
    "TimeFeature",
    "VectorizedComputeReward",
]


class SparseReward(SparseLogic, VectorGoalWrapper):
    """:class:`goalenvs.wrappers.SparseReward` for a vector env."""

    def __init__(self, env: VectorEnv, threshold: float, distance: Distance | None = None) -> None:
        self._init_sparse(vector_env_space(env), threshold, distance)
        super().__init__(env)


class DenseReward(DenseLogic, VectorGoalWrapper):
    """:class:`goalenvs.wrappers.DenseReward` for a vector env."""

    def __init__(self, env: VectorEnv, distance: Distance | None = None) -> None:
        self._init_dense(vector_env_space(env), distance)
        super().__init__(env)


class SuccessInfo(SuccessLogic, VectorGoalWrapper):
    """:class:`goalenvs.wrappers.SuccessInfo` for a vector env: ``info["is_success"]`` and its ``"_is_success"`` mask.

    Rows that a ``NEXT_STEP`` autoreset only reset are not successes. With ``SAME_STEP`` the ended
    rows' ``info["final_info"]`` gets ``is_success`` too.
    """

    def __init__(
        self, env: VectorEnv, threshold: float | None = None, distance: Distance | None = None
    ) -> None:
        self._init_success(vector_env_space(env), threshold, distance)
        super().__init__(env)

    def _fill_info(
        self,
        obs: Any,
        info: dict[str, Any],
        terminated: np.ndarray,
        ended: np.ndarray,
        reset_rows: np.ndarray,
    ) -> dict[str, Any]:
        if "is_success" in info:
            return info
        if self.threshold is None:
            success = terminated.copy()
        else:
            success = self.is_success(*self._transition_goals(obs, info, ended))
        success &= ~reset_rows
        info = dict(info)
        if (
            ended.any()
            and isinstance(info.get("final_info"), dict)
            and "is_success" not in info["final_info"]
        ):
            final = dict(info["final_info"])
            # Gymnasium's final_info layout: the ended rows' values, False elsewhere, masked by ended.
            final["is_success"], final["_is_success"] = success & ended, ended.copy()
            info["final_info"] = final
        success[ended] = False  # the returned observation of an ended row starts a new episode
        info["is_success"], info["_is_success"] = success, np.ones_like(success)
        return info


class NormalizeGoalObservation(NormalizeLogic, VectorGoalWrapper):
    """:class:`goalenvs.wrappers.NormalizeGoalObservation` for a vector env (the same frozen statistics)."""

    def __init__(self, env: VectorEnv, stats: GoalStats | str = "bounds") -> None:
        self.stats = check_stats(stats, vector_env_space(env))
        super().__init__(env)


class TimeFeature(TimeLogic, VectorGoalWrapper):
    """:class:`goalenvs.wrappers.TimeFeature` for a vector env: one step counter per sub-env."""

    def __init__(self, env: VectorEnv, max_steps: int | None = None) -> None:
        self._init_time(env, max_steps)
        super().__init__(env)
        self._t = np.zeros(env.num_envs, dtype=np.int64)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        # VectorEnv.reset is annotated seed: int | None, but Sync/Async and native vector envs take a list.
        obs, info = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]
        self._autoreset[:] = False
        self._t[:] = 0
        return self._with_time(obs, self._t), info

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        done = np.logical_or(terminated, truncated)
        self._t += 1
        self._t[self._autoreset] = 0  # NEXT_STEP: these rows were just reset
        if self._mode == AutoresetMode.SAME_STEP:
            if "final_obs" in info:
                info = dict(info)
                final = info["final_obs"]
                if isinstance(final, dict):  # a native env's batched_final_obs=True
                    info["final_obs"] = self._with_time(final, self._t)
                else:
                    info["final_obs"] = object_array(
                        [
                            None if item is None else self._with_time(item, t)
                            for item, t in zip(final, self._t, strict=True)
                        ]
                    )
            self._t[done] = 0  # the returned observation of an ended row is a reset one
        else:
            self._autoreset = done.copy()
        return self._with_time(obs, self._t), rewards, terminated, truncated, info


class FlattenGoalObservation(FlattenLogic, VectorGoalWrapper):
    """:class:`goalenvs.wrappers.FlattenGoalObservation` for a vector env."""


class VectorizedComputeReward(VectorizeLogic, VectorGoalWrapper):
    """:class:`goalenvs.wrappers.VectorizedComputeReward` for a vector env (e.g. a SyncVectorEnv of third-party envs)."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        if self._inner_fns["compute_reward"] is None:
            raise ValueError(f"{env} defines no compute_reward to vectorize")
        self._init_vectorize(vector_env_space(env))
