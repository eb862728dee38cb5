"""The checks of what HER's relabelling assumes about episodes and goals, beyond single steps.

Episodes must end (HER relabels within one) and last more than one step; a time limit must read as
``truncated``; resets must draw varied goals that are not reached already; and the observation must
not carry the desired goal (a relabelled observation would still point at the old one). Each
``check_*`` function reads a :class:`~goalenvs.check.context.Context` and returns a
:data:`~goalenvs.check.report.Verdict` (or raises :class:`~goalenvs.check.report.Skip`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from goalenvs.check.context import Context
from goalenvs.check.report import Skip, Verdict
from goalenvs.check.values import fmt

__all__ = ["check_episode_ends", "check_goal_not_in_observation", "check_reset_goals"]

#: goal_not_in_observation fits observations on goals of at most this many entries (not on image goals).
MAX_FIT_GOAL = 64
#: More than this share of resets starting at their goal is a warning (chance is far lower for a real task).
AT_GOAL_SHARE = 0.2


def _lengths(ctx: Context) -> tuple[list[int], list[bool], list[bool], list[bool]]:
    """Every finished episode of the rollout: its length, whether it ended terminated, truncated, at its goal."""
    lengths, terminated, truncated, success = [], [], [], []
    for tr in ctx.transitions:
        if tr.terminated or tr.truncated:
            lengths.append(tr.t)
            terminated.append(tr.terminated)
            truncated.append(tr.truncated)
            success.append(ctx.reached(tr.ag, tr.dg, tr.info, tr.reward))
    return lengths, terminated, truncated, success


def check_episode_ends(ctx: Context) -> Verdict:
    """Episodes end, last more than one step, and a time limit is reported as truncated (advice)."""
    lengths, terminated, truncated, success = _lengths(ctx)
    limit = ctx.max_episode_steps()
    if not lengths:
        if limit is not None:
            return (
                "pass",
                f"no episode ended within {ctx.n_steps} steps; the TimeLimit of {limit} steps ends them.",
            )
        return "warn", (
            f"no episode ended within the rollout's {ctx.n_steps} steps and the env has no TimeLimit. HER "
            "relabels with goals achieved later in the same episode, so an episode-based buffer never "
            "samples until an episode ends (stable-baselines3's HerReplayBuffer waits for the first one). "
            "Fix: register the env with max_episode_steps (or wrap it in gymnasium.wrappers.TimeLimit)."
        )
    if max(lengths) == 1 and len(lengths) >= 2:
        return "warn", (
            f"all {len(lengths)} episodes of the rollout last one step. HER's 'future' and 'final' strategies "
            "relabel with goals achieved later in the episode, so there is nothing to relabel with: training "
            "is plain off-policy RL. Fix: let episodes run several steps (a TimeLimit), or relabel with "
            "goals from other episodes."
        )
    timeouts = [n for n, term, s in zip(lengths, terminated, success, strict=True) if term and not s]
    if len(timeouts) >= 2 and len(set(timeouts)) == 1 and not any(truncated):
        return "warn", (
            f"{len(timeouts)} episodes ended with terminated=True at the same length ({timeouts[0]} steps) "
            "without reaching their goal, and none was truncated: a time limit reported as terminated. "
            "Learners then stop bootstrapping at every timeout, for real and relabelled goals, and learn "
            "values that fall towards the episode's end. Fix: return truncated=True at the time limit "
            "(gymnasium.wrappers.TimeLimit does), terminated only for a true end."
        )
    return "pass", (
        f"{len(lengths)} episode(s) ended within the rollout (lengths {min(lengths)}..{max(lengths)} steps); "
        "time limits read as truncated."
    )


def check_reset_goals(ctx: Context) -> Verdict:
    """Resets rarely draw a desired goal that is reached already (advice); one goal for all is said."""
    starts = ctx.reset_observations()
    goals = np.stack([np.asarray(obs["desired_goal"]) for obs in starts])
    n = len(goals)
    distinct = len(np.unique(goals.reshape(n, -1), axis=0))
    # One goal for every reset is a single-goal task (SB3's BitFlippingEnv) or a cached / re-seeded goal
    # (JaxGCRL issue 53): the code cannot tell which, so it is said, not warned about.
    single = ""
    if distinct == 1 and n >= 3 and not _single_point(ctx.space["desired_goal"]):
        single = (
            f" Every reset drew the same desired goal {fmt(goals[0])}: right for a single-goal task; if goals "
            "should vary, the goal generator is re-seeded at every reset or cached (draw goals from "
            "self.np_random, seeded only by reset(seed=...))."
        )
    at_goal = [obs for obs in starts if ctx.reached(obs["achieved_goal"], obs["desired_goal"], {})]
    if len(at_goal) > AT_GOAL_SHARE * n:
        return "warn", (
            f"{len(at_goal)} of {n} resets start with the desired goal already reached (compute_reward gives "
            "the at-goal reward before any step). Those episodes are free successes: they inflate the "
            "success rate and teach that doing nothing pays. Likely cause: goals sampled without a "
            "minimum distance from the start, or a success threshold large against the goal range. Fix: "
            "resample a goal that is reached at the start."
        )
    return (
        "pass",
        f"{n} resets drew {distinct} distinct desired goal(s); {len(at_goal)} started at their goal.{single}",
    )


def _single_point(space: Any) -> bool:
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    return low is not None and high is not None and bool(np.all(low == high))


def _independent(basis: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``basis`` with each of ``columns`` appended that is not a linear combination of those before it."""
    for j in range(columns.shape[1]):
        grown = np.concatenate([basis, columns[:, j : j + 1]], axis=1)
        if np.linalg.matrix_rank(grown) == grown.shape[1]:
            basis = grown
    return basis


def check_goal_not_in_observation(ctx: Context) -> Verdict:
    """No entry of obs['observation'] is a linear function of the desired goal (relabelling leaves it stale)."""
    rows = [
        (
            np.asarray(obs["observation"], dtype=np.float64).reshape(-1),
            obs["achieved_goal"],
            obs["desired_goal"],
        )
        for obs in ctx.reset_observations() + [ev_obs for ev_obs in ctx.step_observations()]
    ]
    obs = np.stack([r[0] for r in rows])
    ag = np.stack([np.asarray(r[1], dtype=np.float64).reshape(-1) for r in rows])
    dg = np.stack([np.asarray(r[2], dtype=np.float64).reshape(-1) for r in rows])
    if not (np.isfinite(obs).all() and np.isfinite(ag).all() and np.isfinite(dg).all()):
        raise Skip("observations or goals hold non-finite values (see observations_in_space)")
    if ag.shape[1] > MAX_FIT_GOAL:
        raise Skip(f"goals of {ag.shape[1]} entries (images?) are too large for the linear fit")
    # A basis of [1, achieved goal, desired goal]: a coordinate that never varies (a table's height) or
    # that follows others (a parking spot's heading and row) adds nothing, so it is left out.
    known = _independent(np.ones((len(rows), 1)), ag)
    design = _independent(known, dg)
    g = known.shape[1]
    if design.shape[1] == g:
        raise Skip("the desired goals do not vary apart from the achieved goals")
    coef, *_ = np.linalg.lstsq(design, obs, rcond=None)
    residual = obs - design @ coef
    scale = np.maximum(np.abs(obs).max(axis=0), 1.0)
    exact = np.abs(residual).max(axis=0) <= 1e-7 * scale
    weights_all = coef[g:]
    stale = np.flatnonzero(exact & (np.abs(weights_all).max(axis=0) > 1e-6) & (obs.std(axis=0) > 0))
    if stale.size:
        i = int(stale[0])
        weights = weights_all[:, i]
        return "fail", (
            f"observation entr{'y' if stale.size == 1 else 'ies'} {stale.tolist()} "
            f"{'is a linear function' if stale.size == 1 else 'are linear functions'} of the desired goal "
            f"(entry {i} = {fmt(weights, 80)} . (the varying desired_goal entries) + ..., exactly, over "
            f"{len(rows)} observations). "
            "HER replaces desired_goal with another goal but leaves obs['observation'] as it was, so a "
            "relabelled observation still points at the old goal: the policy learns from inputs that "
            "contradict each other. Fix: keep goal-derived features (goal minus position, distance to the "
            "goal) out of obs['observation']; the policy computes them from desired_goal."
        )
    return (
        "pass",
        f"no entry of obs['observation'] is a linear function of the desired goal ({len(rows)} observations).",
    )
