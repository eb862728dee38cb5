"""The checks table: every check as data (its function, its verdict when broken, where it applies, what
it needs first, what it verifies), in the order ``check_goal_env`` runs them.

The runner reads only this table, and :func:`checks_markdown` renders it for the docs
(``python -m goalenvs.check.table`` writes it there), so a new check is one function and one row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from goalenvs.check import checks_env as env
from goalenvs.check import checks_functions as fns
from goalenvs.check import checks_goals as goals
from goalenvs.check import checks_infos as infos
from goalenvs.check.context import EXTRA_RESETS, Context
from goalenvs.check.report import Verdict

__all__ = ["CHECKS", "Check", "checks_markdown"]


@dataclass(frozen=True)
class Check:
    """One row of the checks table.

    Attributes:
        name: the name in reports (``report.result(name)``).
        run: the check function: reads the shared context, returns ``(status, message)`` or raises
            ``Skip``.
        severity: its verdict when what it checks is broken: ``"fail"`` (HER learns from wrong data)
            or ``"warn"`` (advice). A ``"fail"`` check may warn about lesser flaws.
        verifies: what it verifies, as one line of Markdown (the docs' table shows it).
        envs: the envs it applies to (``"any"``, ``"single"`` or ``"vector"``); on others it is left
            out of the report.
        after: checks that must not fail first (each earlier in the table); when one fails, or was
            skipped for a failure, this one is skipped with that reason.
        skip_reason: the reason given to the checks listing this one in ``after`` when it fails.
    """

    name: str
    run: Callable[[Context], Verdict]
    severity: Literal["fail", "warn"]
    verifies: str
    envs: Literal["any", "single", "vector"] = "any"
    after: tuple[str, ...] = ()
    skip_reason: str | None = None

    def applies_to(self, vector: bool) -> bool:
        """Whether it runs on a vector env (``vector=True``) or a single env."""
        return self.envs == "any" or self.envs == ("vector" if vector else "single")


# What the checks need first, in the order those prerequisites run.
_GOAL_SPACE = ("observation_space",)
_ROLLOUT = ("observation_space", "rollout")
_REWARD = ("observation_space", "compute_reward_defined", "rollout")

#: Every check, in the order it runs. Checks before ``rollout`` need no env steps.
CHECKS: tuple[Check, ...] = (
    Check(
        "observation_space", env.check_observation_space, "fail",
        "`Dict` with `observation`, `achieved_goal`, `desired_goal`; goal spaces of equal shape and dtype",
        skip_reason="the observation space is not a goal space",
    ),
    Check(
        "wrapper_keeps_goals", env.check_wrapper_keeps_goals, "fail",
        "no wrapper above the layer defining `compute_reward` changes the goals (`FlattenObservation`, "
        "goal rescaling: a known stable-baselines3 pitfall)",
        skip_reason="a wrapper changes the goals",
    ),
    Check(
        "compute_reward_defined", env.check_compute_reward_defined, "fail",
        "`compute_reward` exists on the env or a wrapper (found as `get_wrapper_attr` finds it)",
        skip_reason="the env defines no compute_reward",
    ),
    Check(
        "rollout", env.check_rollout, "fail",
        "`reset(seed=...)` and `n_steps` steps with random actions run (the rollout the later checks read)",
        after=_GOAL_SPACE, skip_reason="the rollout failed",
    ),
    Check(
        "observations_in_space", env.check_observations_in_space, "fail",
        "every reset/step observation lies in the observation space",
        after=_ROLLOUT,
    ),
    Check(
        "observations_not_aliased", env.check_observations_not_aliased, "fail",
        "returned observations and infos never change afterwards (no views of the env's state; a changed "
        "info is a failure only where `compute_reward` reads it)",
        after=_ROLLOUT,
    ),
    Check(
        "desired_goal_fixed", env.check_desired_goal_fixed, "fail",
        "the desired goal stays fixed within an episode, up to float rounding (64 epsilons of the goals' "
        "scale, or a millionth of `distance_threshold`; such drift is only a note in the pass message)",
        after=_ROLLOUT,
    ),
    Check(
        "is_success", env.check_is_success, "warn",
        '`info["is_success"]` is present and boolean',
        after=_ROLLOUT,
    ),
    Check(
        "achieved_goal_in_desired_space", env.check_achieved_goal_in_desired_space, "warn",
        "achieved goals fit the desired_goal space (HER puts them there)",
        after=_ROLLOUT,
    ),
    Check(
        "episode_ends", goals.check_episode_ends, "warn",
        "episodes end (a `TimeLimit` or a termination) and last more than one step; a time limit reads as "
        "`truncated`, not `terminated`",
        after=_ROLLOUT,
    ),
    Check(
        "goal_not_in_observation", goals.check_goal_not_in_observation, "fail",
        "no entry of `obs['observation']` is a linear function of the desired goal (a relabelled "
        "observation would still point at the old goal)",
        after=_ROLLOUT,
    ),
    Check(
        "reward_contract", fns.check_reward_contract, "fail",
        "`reward == compute_reward(next achieved_goal, desired_goal, info)` at every step",
        after=_REWARD, skip_reason="step's rewards differ from compute_reward",
    ),
    Check(
        "compute_reward_vectorized", fns.check_compute_reward_vectorized, "fail",
        f"batches of {', '.join(map(str, fns.BATCH_SIZES))} (and `num_envs`) give shape `(B,)`, equal to "
        "one-at-a-time calls, with infos as a list or an object array of dicts",
        after=_REWARD,
    ),
    Check(
        "goal_dtypes", fns.check_goal_dtypes, "fail",
        "`compute_reward` / `compute_terminated` / `compute_truncated` give the same results on float32 and "
        "float64 copies of the goals (integer goals: the space's dtype) as on those emitted, what buffers "
        "store; rows that rounding the goals moves across a threshold are not counted",
        after=_REWARD,
    ),
    Check(
        "vector_batch_reward", fns.check_vector_batch_reward, "fail",
        "`compute_reward` on a step batch has shape `(num_envs,)` and equals the rewards",
        envs="vector", after=_REWARD,
    ),
    Check(
        "compute_reward_pure", fns.check_compute_reward_pure, "fail",
        "calls with random goals change neither its later answers, its arguments, nor the env's next "
        "transitions (replayed from the same seed)",
        after=_REWARD,
    ),
    Check(
        "reward_depends_on_goals", fns.check_reward_depends_on_goals, "fail",
        "it reads its goal arguments, not `self.goal`",
        after=_REWARD, skip_reason="compute_reward ignores a goal argument",
    ),
    Check(
        "best_reward_at_goal", fns.check_best_reward_at_goal, "warn",
        "`compute_reward(g, g)` is the best reward",
        after=_REWARD,
    ),
    Check(
        "reset_goals", goals.check_reset_goals, "warn",
        f"at most {goals.AT_GOAL_SHARE:.0%} of resets (the rollout's and {EXTRA_RESETS} more) start with "
        "the desired goal reached (one goal for every reset is reported, not warned about)",
        after=_REWARD + ("wrapper_keeps_goals", "reward_depends_on_goals"),
    ),
    Check(
        "success_matches_reward", env.check_success_matches_reward, "warn",
        "with a sparse reward, `info[\"is_success\"]` is true exactly where `compute_reward` gives the "
        "at-goal reward",
        after=_REWARD + ("wrapper_keeps_goals", "reward_contract", "reward_depends_on_goals"),
    ),
    Check(
        "compute_terminated", fns.check_compute_terminated, "fail",
        "where defined: `compute_terminated` agrees with `step`'s `terminated` and is vectorized",
        after=_ROLLOUT,
    ),
    Check(
        "compute_truncated", fns.check_compute_truncated, "fail",
        "where defined: `compute_truncated` agrees with `step`'s `truncated` (a `TimeLimit` may add "
        "truncations) and is vectorized",
        after=_ROLLOUT,
    ),
    Check(
        "empty_infos", fns.check_empty_infos, "warn",
        "`compute_reward` / `compute_terminated` / `compute_truncated` accept a list of empty dicts "
        "(what stable-baselines3's `HerReplayBuffer` passes by default; names the info keys they need), "
        "`info=None` and one dict of arrays, with the same values",
        after=_REWARD,
    ),
    Check(
        "reward_info_keys", infos.check_reward_info_keys, "fail",
        "`compute_reward` reads no info key beyond the env's `reward_info_keys` (what buffers store beside "
        "the goals to keep info terms in relabelling; found by changing each info entry); an undeclared "
        "read is a warning",
        after=_REWARD,
    ),
    Check(
        "reward_reads_goal_info", infos.check_reward_reads_goal_info, "fail",
        "`compute_reward` reads no info entry that `step` computed from the desired goal (`is_success`, a "
        "distance: a flag true exactly within a distance of the goal, or a number monotone in it over the "
        "rollout); relabelling would keep the original goal's value",
        after=_REWARD,
    ),
    Check(
        "reset_seeding", env.check_reset_seeding, "fail",
        "the same seed gives the same reset",
        after=_ROLLOUT,
    ),
    Check(
        "rollout_determinism", env.check_rollout_determinism, "warn",
        "the same seed and actions replay the same transitions",
        after=_ROLLOUT,
    ),
    Check(
        "deepcopy", env.check_deepcopy, "warn",
        "`copy.deepcopy(env)` steps exactly like the original, as a snapshot (HER never copies an env; "
        "saving and forking do)",
        envs="single", after=_ROLLOUT,
    ),
    Check(
        "pickle", env.check_pickle, "warn",
        "`pickle.loads(pickle.dumps(env))` steps exactly like the original, or like it after the same "
        "seeded reset (as `EzPickle` makes it; HER never pickles an env, `SubprocVecEnv` does)",
        envs="single", after=_ROLLOUT,
    ),
)  # fmt: skip


_WHERE = {"any": "", "single": "(single envs) ", "vector": "(vector envs) "}


def checks_markdown() -> str:
    """The checks table in Markdown: one row per check, in the order they run, ending with a newline."""
    rows = ["| check | verdict when broken | what HER needs |", "|---|---|---|"]
    for check in CHECKS:
        rows.append(f"| `{check.name}` | {check.severity} | {_WHERE[check.envs]}{check.verifies} |")
    return "\n".join(rows) + "\n"
