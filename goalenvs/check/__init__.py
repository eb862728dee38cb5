"""``check_goal_env``: does an environment keep the GoalEnv contract that Hindsight Experience Replay needs?

HER stores a transition once and later asks the environment what its reward *would* have been for
another goal. That only works when the environment keeps a handful of promises: the observation is a
``Dict`` with ``observation`` / ``achieved_goal`` / ``desired_goal``; ``step`` returns exactly
``compute_reward(next_achieved_goal, desired_goal, info)``; ``compute_reward`` is a pure function
vectorized over a leading batch axis; the desired goal stays put within an episode; and so on.
Breaking one of them rarely crashes anything: the agent just learns from wrong rewards. This package
finds those breaches before a week of training does.

The checker is a flat list of small ``check_*`` functions (:mod:`~goalenvs.check.checks_env`,
:mod:`~goalenvs.check.checks_functions`), each reading a shared
:class:`~goalenvs.check.context.Context` (the env, the functions found on it, one recorded
:mod:`~goalenvs.check.rollout`) and returning a status and a message that says what is wrong, the
likely cause and the fix. :data:`CHECKS` (:mod:`~goalenvs.check.specs`) says, as data, where each
applies and what must pass before it; :func:`check_goal_env` (:mod:`~goalenvs.check.runner`) runs
that table. Contract breaches are failures, advice is a warning. Any Gymnasium env works, wrapped or
not, and so does a ``gymnasium.vector.VectorEnv`` (``gym.make_vec``): nothing needs to inherit from
:class:`goalenvs.GoalEnv`. The per-step rules are shared with the passive
``goalenvs.wrappers.GoalContractChecker`` (:mod:`~goalenvs.check.contract`).
"""

from goalenvs.check.checks_functions import BATCH_SIZES
from goalenvs.check.contract import ATOL, RTOL
from goalenvs.check.report import CheckReport, CheckResult
from goalenvs.check.runner import check_goal_env
from goalenvs.check.specs import CHECKS, Check, checks_markdown

__all__ = [
    "ATOL",
    "BATCH_SIZES",
    "CHECKS",
    "RTOL",
    "Check",
    "CheckReport",
    "CheckResult",
    "check_goal_env",
    "checks_markdown",
]
