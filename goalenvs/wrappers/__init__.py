"""Goal-aware wrappers: transform goal envs without breaking Hindsight Experience Replay's relabelling.

An ordinary Gymnasium wrapper that rescales or flattens observations silently breaks HER: the
buffer relabels with goals in the wrapped form but calls the inner env's ``compute_reward``, which
expects raw goals. Every wrapper here that changes goals or rewards changes ``compute_reward`` /
``compute_terminated`` / ``compute_truncated`` consistently, so ``goalenvs.check_goal_env`` passes
on the wrapped env.

* Reward switches: :class:`SparseReward`, :class:`DenseReward`, and :class:`SuccessInfo` (fills
  ``info["is_success"]``).
* Observation transforms: :class:`NormalizeGoalObservation` (frozen :class:`GoalStats`, from the
  bounds or from :class:`RunningGoalStats` of a warm-up), :class:`TimeFeature`,
  :class:`FlattenGoalObservation`.
* Adapters for third-party envs: :class:`VectorizedComputeReward`, :class:`LegacyGoalEnv`.
* :class:`GoalContractChecker`: the passive check ``gym.make`` applies to goalenvs ids.

The same wrappers for vector envs live in :mod:`goalenvs.wrappers.vector`.
"""

from goalenvs.wrappers import vector
from goalenvs.wrappers._base import GoalWrapper, VectorGoalWrapper, find_goal_function
from goalenvs.wrappers.adapters import LegacyGoalEnv, VectorizedComputeReward
from goalenvs.wrappers.checker import GoalContractChecker, GoalContractWarning
from goalenvs.wrappers.observation import (
    FlattenGoalObservation,
    GoalStats,
    NormalizeGoalObservation,
    RunningGoalStats,
    TimeFeature,
)
from goalenvs.wrappers.reward import (
    DenseReward,
    EuclideanDistance,
    SparseReward,
    SuccessInfo,
    euclidean_distance,
)

__all__ = [
    "DenseReward",
    "EuclideanDistance",
    "FlattenGoalObservation",
    "GoalContractChecker",
    "GoalContractWarning",
    "GoalStats",
    "GoalWrapper",
    "LegacyGoalEnv",
    "NormalizeGoalObservation",
    "RunningGoalStats",
    "SparseReward",
    "SuccessInfo",
    "TimeFeature",
    "VectorGoalWrapper",
    "VectorizedComputeReward",
    "euclidean_distance",
    "find_goal_function",
    "vector",
]
