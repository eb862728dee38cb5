"""goalenvs: goal-conditioned Gymnasium environments that keep the GoalEnv contract HER relies on.

``import goalenvs`` registers every environment, so ``gym.make("goalenvs/BitFlip-v0")`` works
(``gym.register_envs(goalenvs)`` keeps linters from calling the import unused). Importing it is light:
neither MuJoCo, torch nor stable-baselines3 is imported here.
"""

from goalenvs._version import __version__
from goalenvs.check import CheckReport, CheckResult, check_goal_env
from goalenvs.core import GOAL_KEYS, GoalEnv, GoalEnvError, check_goal_space, info_values
from goalenvs.registration import ENVS, register_envs

__all__ = [
    "ENVS",
    "CheckReport",
    "CheckResult",
    "GOAL_KEYS",
    "GoalEnv",
    "GoalEnvError",
    "__version__",
    "check_goal_env",
    "check_goal_space",
    "info_values",
]

register_envs()
