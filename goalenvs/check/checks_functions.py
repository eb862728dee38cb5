"""The checks of the goal functions: ``compute_reward`` agrees with ``step``, takes batches, is pure.

Each ``check_*`` function reads a :class:`~goalenvs.check.context.Context` and returns a
:data:`~goalenvs.check.report.Verdict` (or raises :class:`~goalenvs.check.report.Skip`); the table
in :mod:`goalenvs.check.specs` says when each runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from goalenvs._util import object_array
from goalenvs.check.context import GOAL_FUNCTIONS, Context
from goalenvs.check.contract import (
    ATOL,
    RTOL,
    batch_verdict,
    call,
    flag_agrees,
    reward_agrees,
    reward_lags,
    rewards_close,
)
from goalenvs.check.report import Skip, Verdict
from goalenvs.check.rollout import Transition
from goalenvs.check.values import QuietGoalFunctions, and_, copy_info, fmt, same

__all__ = [
    "BATCH_SIZES",
    "check_best_reward_at_goal",
    "check_compute_reward_pure",
    "check_compute_reward_vectorized",
    "check_compute_terminated",
    "check_compute_truncated",
    "check_empty_infos",
    "check_goal_dtypes",
    "check_reward_contract",
    "check_reward_depends_on_goals",
    "check_vector_batch_reward",
]

#: Batch sizes ``compute_reward`` & co. are called with (a vector env adds its ``num_envs``).
BATCH_SIZES: tuple[int, ...] = (1, 2, 7, 32)

_FIX_PURE = (
    "Fix: compute the result from the arguments alone (no self.goal, self.state, self.np_random, no "
    "counters or caches), reducing over the last axis only."
)


# Wrappers that pass observations and rewards through untouched.
_PASS_THROUGH = (
    gym.wrappers.TimeLimit, gym.wrappers.OrderEnforcing, gym.wrappers.PassiveEnvChecker,
    gym.wrappers.RecordEpisodeStatistics,
)  # fmt: skip


def _wrapper_hint(ctx: Context) -> str:
    found = ctx.find("compute_reward")
    if found is None or found[2] == 0 or found[2] >= len(ctx.layers):
        return ""
    suspects = [w for w in ctx.layers[: found[2]] if not isinstance(w, _PASS_THROUGH)]
    if not suspects:
        return ""
    names = ", ".join(type(w).__name__ for w in suspects)
    return (
        f" The env is wrapped by {names} above {found[1]}, which defines compute_reward: a wrapper that "
        "changes goals or rewards without its own compute_reward breaks the contract."
    )


def check_reward_contract(ctx: Context) -> Verdict:
    """``reward == compute_reward(next achieved goal, desired goal, info)`` at every step."""
    fn = ctx.fn("compute_reward")
    bad: list[tuple[Transition, np.ndarray]] = []
    for tr in ctx.transitions:
        reward = np.asarray(tr.reward, dtype=np.float64)
        if reward.size != 1 or not np.isfinite(reward).all():
            return "fail", (
                f"step {tr.step} returned reward {fmt(tr.reward)}; a reward must be one finite number. "
                "Fix: return a float (NaN usually comes from a division by a zero distance)."
            )
        try:
            value = call(fn, tr.ag, tr.dg, tr.info)
        except Exception as err:
            return "fail", (
                f"compute_reward(achieved_goal, desired_goal, info) raised {type(err).__name__}: {err} "
                f"when called with step {tr.step}'s next achieved goal, desired goal and info. Fix: make "
                "it accept exactly what step returns."
            )
        if not reward_agrees(value, reward):
            bad.append((tr, value))
    if not bad:
        return (
            "pass",
            f"reward == compute_reward(next achieved_goal, desired_goal, info) at all {len(ctx.transitions)} "
            "steps.",
        )
    tr, value = bad[0]
    cause = (
        " Likely cause: step adds a term compute_reward lacks (a collision or action penalty), or uses a "
        "goal other than the observation's."
    )
    if np.asarray(value).dtype == bool:
        cause = (
            " compute_reward returns booleans, which buffers store as 1.0 (True) and 0.0 (False), so "
            "relabelled rewards get another scale or sign than step's. Fix it first: return float rewards "
            "(e.g. -(distance > threshold).astype(np.float32))."
        )
    elif reward_lags(fn, tr.prev_ag, tr.dg, tr.info, tr.reward):
        cause = (
            " The step reward equals compute_reward of the achieved goal *before* the step: step "
            "computes the reward before applying the action, but r_t depends on s_{t+1}."
        )
    return "fail", (
        f"at {len(bad)} of {len(ctx.transitions)} steps the reward from step differs from compute_reward("
        f"obs['achieved_goal'], obs['desired_goal'], info); first at step {tr.step}: step gave "
        f"{fmt(tr.reward)}, compute_reward gives {fmt(value)}.{cause}{_wrapper_hint(ctx)} "
        "HER relabels with compute_reward, so it would learn from rewards the env never "
        "gives. Fix: have step return self.compute_reward(obs['achieved_goal'], obs['desired_goal'], info) "
        "and move any extra term into compute_reward (reading what it needs from info)."
    )


def _single_shape_note(fn_name: str, shapes: set[tuple[int, ...]]) -> Verdict | None:
    odd = shapes - {()}
    if not odd:
        return None
    if odd == {(1,)}:
        return "warn", (
            f"{fn_name} on a single transition returns shape (1,), not a scalar; code doing "
            f"float({fn_name}(...)) works, but the result does not follow the batch shape. Fix: return "
            "an array of shape achieved_goal.shape[:-1] (a 0-d array for one goal)."
        )
    return "fail", (
        f"{fn_name} on a single transition returns shape {sorted(odd)[0]}, not a scalar. Likely cause: "
        "no reduction over the goal axis. Fix: reduce over the last axis (axis=-1)."
    )


def _vectorized(
    ctx: Context, fn_name: str, goals: tuple[np.ndarray, np.ndarray], infos: list[Any]
) -> Verdict:
    """Batches of several sizes give shape (B,) and equal the one-at-a-time results."""
    fn = ctx.fn(fn_name)
    ag, dg = goals
    # Scalar (Discrete) goals come as (B, 1), the way SB3's buffer stores them; one goal is the scalar
    # step returns, and a batch may also be read as (B,) (goalenvs' own buffers pass that).
    scalar = ctx.scalar_goals()
    singles, shapes = [], set()
    for k in range(len(ag)):
        try:
            value = call(fn, ag[k, 0], dg[k, 0], infos[k]) if scalar else call(fn, ag[k], dg[k], infos[k])
        except Exception as err:
            return "fail", f"{fn_name} raised {type(err).__name__}: {err} on a single transition."
        shapes.add(value.shape)
        singles.append(value.reshape(-1)[0] if value.size == 1 else np.nan)
    note = _single_shape_note(fn_name, shapes)
    if note is not None and note[0] == "fail":
        return note
    ref = np.asarray(singles)
    sizes = sorted(set(BATCH_SIZES) | ({ctx.num_envs} if ctx.vector else set()))
    warn = note[1] if note is not None else None
    for b in sizes:
        for form, batch_infos in (("a list", list(infos[:b])), ("an object array", object_array(infos[:b]))):
            where = f"a batch of {b} (goals of shape {ag[:b].shape}, infos as {form} of {b} dicts)"
            try:
                value = call(fn, ag[:b], dg[:b], batch_infos)
                if (
                    scalar
                    and batch_verdict(value.reshape(-1) if value.shape == (b, 1) else value, ref[:b]) != "ok"
                ):
                    value = call(fn, ag[:b, 0], dg[:b, 0], batch_infos)  # the (B,) reading of the batch
                elif scalar and value.shape == (b, 1):
                    value = value.reshape(b)  # (B, 1) goals of shape (): the batch shape is (B, 1)
            except Exception as err:
                return "fail", (
                    f"{fn_name} raised {type(err).__name__}: {err} on {where}. HER calls it on batches of "
                    "stored transitions. Likely cause: code written for one goal (float(), bool(), "
                    "indexing goal[0], reading info['key'] directly). Fix: use array operations over the "
                    "last axis and read infos as a batch (goalenvs.info_values does)."
                )
            verdict = batch_verdict(value, ref[:b])
            if verdict == "ok":
                continue
            if verdict == "values":
                i = int(np.flatnonzero(~np.isclose(value.astype(float), ref[:b].astype(float)))[0])
                return "fail", (
                    f"{fn_name} on {where} differs from one-at-a-time calls at row {i}: {fmt(value[i])} "
                    f"vs {fmt(ref[i])}. Likely cause: a reduction that mixes rows (norm/sum without "
                    "axis=-1) or state kept between rows. Fix: reduce over axis=-1 only."
                )
            if verdict == "broadcasts":
                warn = warn or (
                    f"{fn_name} on {where} returns shape {value.shape} instead of ({b},); the values "
                    "broadcast to the right ones, but code that indexes the result breaks. Fix: return "
                    "np.broadcast_to(result, batch_shape) (e.g. np.zeros(batch_shape, dtype=bool))."
                )
                continue
            return "fail", (
                f"{fn_name} on {where} returns shape {value.shape} instead of ({b},)"
                f"{'' if value.size != b else ' with wrong values'}. Likely cause: a reduction over all "
                "axes (np.linalg.norm without axis=-1, bool()/float() of an array) or a reshape that "
                "assumes one goal. Fix: reduce over the last axis and return shape achieved_goal.shape[:-1]."
            )
    if warn is not None:
        return "warn", warn
    return "pass", (
        f"{fn_name} on batches of {sizes} (infos as lists and arrays of dicts) has shape (B,) and equals "
        "one-at-a-time calls."
    )


def check_compute_reward_vectorized(ctx: Context) -> Verdict:
    """compute_reward on batches has shape (B,) and equals one-at-a-time calls."""
    probe = ctx.probe()
    return _vectorized(ctx, "compute_reward", (probe["ag"], probe["mixed"]), probe["infos"])


def _dtype_variants(emitted: np.dtype, space_dtype: np.dtype | None) -> list[np.dtype]:
    """The goal dtypes buffers store besides the one emitted: float32 and float64 (and the space's) for
    float goals; the space's for integer ones."""
    if np.issubdtype(emitted, np.inexact) or (
        space_dtype is not None and np.issubdtype(space_dtype, np.inexact)
    ):
        wanted: list[np.dtype] = [np.dtype(np.float32), np.dtype(np.float64)]
    else:
        wanted = []
    if space_dtype is not None:
        wanted.append(space_dtype)
    out: list[np.dtype] = []
    for dtype in wanted:
        if dtype != emitted and dtype not in out:
            out.append(dtype)
    return out


def _rows_agree(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, whether two results of a goal function agree (booleans exactly, numbers within RTOL/ATOL)."""
    if a.dtype == bool or b.dtype == bool:
        return np.asarray(a.astype(bool) == b.astype(bool))
    return np.isclose(a.astype(np.float64), b.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True)


def check_goal_dtypes(ctx: Context) -> Verdict:
    """The goal functions give the same results on goals in the dtypes buffers store them in."""
    probe = ctx.probe()
    ag, dg, infos = probe["ag"], probe["mixed"], list(probe["infos"])
    if ctx.scalar_goals():  # Discrete goals: a batch of scalars
        ag, dg = ag[:, 0], dg[:, 0]
    space_dtype = getattr(ctx.space["desired_goal"], "dtype", None)
    space_dtype = None if space_dtype is None else np.dtype(space_dtype)
    emitted = ag.dtype
    if emitted.kind not in "biuf":
        raise Skip("the goals are not numeric arrays")
    variants = _dtype_variants(emitted, space_dtype)
    if not variants:
        return "pass", f"the goals are emitted in the space's dtype ({emitted}), the only one buffers store."
    names = [n for n in GOAL_FUNCTIONS if ctx.find(n)]
    for name in names:
        fn = ctx.fn(name)
        with QuietGoalFunctions():
            try:
                ref = call(fn, ag, dg, infos)
                again = call(fn, ag, dg, infos)
            except Exception as err:  # on the emitted dtype itself: compute_reward_vectorized's to report
                raise Skip(f"{name} raised {type(err).__name__} on the goals as emitted") from err
            if again.shape != ref.shape or not _rows_agree(again, ref).all():
                raise Skip(f"{name} gives other results on a second call (compute_reward_pure says why)")
            for dtype in variants:
                a, d = ag.astype(dtype), dg.astype(dtype)
                how = f"{dtype} copies of the goals (the env emits {emitted})"
                try:
                    got = call(fn, a, d, infos)
                except Exception as err:
                    return "fail", (
                        f"{name} raised {type(err).__name__}: {' '.join(str(err).split())} on {how}. Replay "
                        "buffers store goals in the space's dtype or in float32 and relabel with those, so "
                        "training would stop at the first sample. Likely cause: reading the goals' bytes "
                        "(.view, np.frombuffer) or code for one dtype. Fix: convert the goals first "
                        "(np.asarray(goal, dtype=np.float64)) and compute on their values."
                    )
                if got.shape != ref.shape:
                    return "fail", (
                        f"{name} returns shape {got.shape} on {how}, but {ref.shape} on the goals as emitted. "
                        "Fix: convert the goals first (np.asarray(goal, dtype=np.float64))."
                    )
                agree = _rows_agree(got, ref).reshape(-1)
                if agree.all():
                    continue
                # A lossy cast moves goals that sit on a decision boundary (a distance within rounding
                # of the success threshold) across it: the function itself is then right. Such rows
                # agree with the function on the rounded values in the emitted dtype.
                if not np.can_cast(emitted, dtype, casting="safe"):
                    try:
                        rounded = call(fn, a.astype(emitted), d.astype(emitted), infos)
                        agree |= _rows_agree(got, rounded).reshape(-1)
                    except Exception:  # then no disagreement is explained
                        pass
                bad = np.flatnonzero(~agree)
                if bad.size == 0:
                    continue
                k = int(bad[0])
                return "fail", (
                    f"{name} on {dtype} copies of the goals disagrees with the goals as the env emits them "
                    f"({emitted}) at {bad.size} of {agree.size} rows, beyond what rounding the goals "
                    f"explains; first at row {k}: {fmt(got.reshape(-1)[k])} vs {fmt(ref.reshape(-1)[k])}. "
                    "Replay buffers store goals in the space's dtype or in float32 and relabel with those, "
                    "so HER would learn from wrong relabelled results. Likely cause: arithmetic that loses "
                    "precision in a smaller dtype (a large offset, a distance in expanded form), a branch "
                    "on the dtype, or reading the goals' bytes (.view). Fix: compute in float64 inside "
                    f"{name} (np.asarray(goal, dtype=np.float64))."
                )
    tried = ", ".join(str(d) for d in variants)
    return "pass", (
        f"{and_(names)} give the same results on {tried} copies of the goals as on the emitted {emitted} "
        "(up to goals that rounding moves across a threshold)."
    )


def check_vector_batch_reward(ctx: Context) -> Verdict:
    """On a vector env's step batch, compute_reward has shape (num_envs,) and equals the rewards."""
    fn = ctx.fn("compute_reward")
    n = ctx.num_envs
    for k, ev in enumerate(e for e in ctx.events if e.kind == "step"):
        if ev.valid is None or not ev.valid.any():
            continue  # no sub-env made a transition (or the rollout could not read its goals)
        try:
            value = call(fn, ev.obs["achieved_goal"], ev.obs["desired_goal"], ev.info)
        except Exception as err:
            return "fail", (
                f"compute_reward raised {type(err).__name__}: {err} on the vector env's step batch "
                f"(goals of shape {np.shape(ev.obs['achieved_goal'])}, info as the vector env's dict of "
                "arrays). Fix: read infos with goalenvs.info_values, which accepts that form."
            )
        if value.shape != (n,):
            return "fail", (
                f"compute_reward on the vector env's step batch (goals of shape "
                f"{np.shape(ev.obs['achieved_goal'])}) returns shape {value.shape}, not ({n},). Likely "
                "cause: a reduction over all axes (np.linalg.norm without axis=-1). Fix: reduce over the "
                "last axis only."
            )
        mask = ev.valid
        if not rewards_close(value[mask], np.asarray(ev.reward).reshape(n)[mask]):
            return "fail", (
                f"at vector step {k}, compute_reward on the batch gives {fmt(value)} but step returned "
                f"{fmt(ev.reward)}. Fix: have step return compute_reward of its own observation batch."
            )
    return "pass", f"compute_reward on each ({n},) step batch equals the vector env's rewards."


def check_compute_reward_pure(ctx: Context) -> Verdict:
    """Calls with random goals change neither its later answers, its arguments, nor the env's transitions."""
    fn = ctx.fn("compute_reward")
    probe = ctx.probe()
    ag, dg, infos = probe["ag"][:8], probe["mixed"][:8], probe["infos"][:8]
    try:
        before = [call(fn, ag[k], dg[k], infos[k]) for k in range(len(ag))]
        ag_in, dg_in, infos_in = ag.copy(), dg.copy(), copy_info(list(infos))
        fn(ag_in, dg_in, infos_in)
        for _ in range(3):
            g1, g2 = ctx.random_goals(len(ag)), ctx.random_goals(len(ag))
            fn(g1, g2, list(infos))
            fn(g1[0], g2[0], infos[0])
        after = [call(fn, ag[k], dg[k], infos[k]) for k in range(len(ag))]
    except Exception as err:
        raise Skip(
            f"compute_reward raised {type(err).__name__}; see the other compute_reward checks"
        ) from err
    if not (same(ag_in, ag) and same(dg_in, dg)):
        return "fail", (
            "compute_reward writes into its achieved_goal/desired_goal arguments. HER passes views of "
            "its storage, so stored goals get corrupted. Likely cause: in-place operations such as "
            "achieved_goal -= desired_goal. Fix: work on new arrays (d = achieved_goal - desired_goal)."
        )
    if not same(infos_in, list(infos)):
        return "fail", (
            "compute_reward modifies the info dicts it is given; HER passes stored infos, so they get "
            "corrupted. Fix: read infos, never write them."
        )
    for k in range(len(ag)):
        if not same(before[k], after[k]):
            return "fail", (
                f"compute_reward gave {fmt(before[k])} for the same arguments before and {fmt(after[k])} "
                "after being called with random goals: its answers depend on earlier calls. Likely cause: "
                "it caches or updates state (a counter, self.goal, a running normaliser). " + _FIX_PURE
            )
    diff = ctx.replay(interleave=True)
    if diff is None:
        return "pass", (
            "calls with random goals changed neither compute_reward's later answers, its arguments, nor "
            "the env's transitions (replayed from the same seed)."
        )
    if ctx.replay(interleave=False) is not None:
        return "warn", (
            "could not tell whether calling compute_reward changes the env: the env does not replay the "
            "same transitions from the same seed and actions (see rollout_determinism)."
        )
    return "fail", (
        "calling compute_reward/compute_terminated/compute_truncated between steps, with random goals and "
        f"with reached goals, changed the env's transitions (replayed from the same seed and actions; first "
        f"difference at {diff}). A replay buffer calls these between env steps, so the env would behave "
        "differently under HER. Likely cause: they set env state (self.goal = desired_goal, a new target "
        "when a goal counts as reached, a list of tasks done) or draw from self.np_random. " + _FIX_PURE
    )


def check_reward_depends_on_goals(ctx: Context) -> Verdict:
    """compute_reward reads its goal arguments (and not the env's own goal or state)."""
    fn = ctx.fn("compute_reward")
    p = ctx.probe()
    ag, dg, infos = p["ag"], p["dg"], p["infos"]

    def rewards(a: np.ndarray, d: np.ndarray) -> np.ndarray:
        return np.asarray([float(call(fn, a[k], d[k], infos[k]).reshape(-1)[0]) for k in range(len(a))])

    try:
        base = rewards(ag, dg)
        dg_variants = [rewards(ag, ag), rewards(ag, p["other"]), rewards(ag, p["random"])]
        ag_variants = [rewards(dg, dg), rewards(p["random"], dg)]
    except Exception as err:
        raise Skip(
            f"compute_reward raised {type(err).__name__}; see the other compute_reward checks"
        ) from err
    for arg, variants in (("desired_goal", dg_variants), ("achieved_goal", ag_variants)):
        if all(np.array_equal(base, v) for v in variants):
            return "fail", (
                f"compute_reward gives the same rewards whatever {arg} it is passed (checked on "
                f"{len(base)} rollout transitions with the goal replaced by itself, other achieved goals and "
                "random goals). HER's relabelled goals then change nothing. Likely cause: it reads the env's "
                "own goal or state (self.goal, self.state) instead of its arguments, or is constant. Fix: "
                "compute the reward from the achieved_goal and desired_goal arguments."
            )
    return "pass", "compute_reward responds to both its achieved_goal and desired_goal arguments."


def check_best_reward_at_goal(ctx: Context) -> Verdict:
    """The reward for achieved_goal == desired_goal is the best reward (advice)."""
    fn = ctx.fn("compute_reward")
    p = ctx.probe()
    ag, infos = p["ag"], p["infos"]
    try:
        at_goal = np.asarray([float(call(fn, ag[k], ag[k], infos[k]).reshape(-1)[0]) for k in range(len(ag))])
        others = np.asarray(
            [
                [float(call(fn, ag[k], d[k], infos[k]).reshape(-1)[0]) for k in range(len(ag))]
                for d in (p["dg"], p["other"], p["random"])
            ]
        )
    except Exception as err:
        raise Skip(
            f"compute_reward raised {type(err).__name__}; see the other compute_reward checks"
        ) from err
    worse = np.flatnonzero(at_goal + ATOL < others.max(axis=0))
    if worse.size:
        k = int(worse[0])
        return "warn", (
            f"compute_reward(g, g) = {at_goal[k]:.4g} is lower than the {others[:, k].max():.4g} it gives "
            "the "
            f"same achieved goal with another desired goal; reaching the goal should be the best outcome "
            "(HER labels transitions whose achieved goal equals the goal as successes). Likely cause: a "
            "reward measured as a distance (higher is worse) or a flipped sign. Fix: reward = -distance."
        )
    return "pass", "achieving the desired goal gives the highest reward seen."


def _flag_check(ctx: Context, fn_name: str, flag: Literal["terminated", "truncated"]) -> Verdict:
    """Where ``fn_name`` is defined: it agrees with step's ``flag`` at every step and is vectorized."""
    found = ctx.find(fn_name)
    if found is None and flag == "terminated":
        return _terminated_undefined(ctx)
    if found is None:
        return "pass", f"not defined (optional); step's {flag} flags are taken as they are."
    fn = found[0]
    limit = ctx.max_episode_steps() if flag == "truncated" else None
    for tr in ctx.transitions:
        stepped = tr.terminated if flag == "terminated" else tr.truncated
        try:
            value = call(fn, tr.ag, tr.dg, tr.info)
        except Exception as err:
            return "fail", (
                f"{fn_name} raised {type(err).__name__}: {err} when called with step {tr.step}'s next "
                "achieved goal, desired goal and info. Fix: make it accept what step returns."
            )
        if value.size != 1:
            return "fail", f"{fn_name} on a single transition returns shape {value.shape}, not a scalar."
        if flag_agrees(value, stepped, flag, tr.t, limit):
            continue
        return "fail", (
            f"at step {tr.step} (step {tr.t} of its episode) step returned {flag}={stepped} but {fn_name} "
            f"gives {bool(value.reshape(-1)[0])}. Buffers that recompute {flag} for relabelled goals would disagree with the "
            f"env. Fix: have step return self.{fn_name}(obs['achieved_goal'], obs['desired_goal'], info)."
        )
    probe = ctx.probe()
    verdict = _vectorized(ctx, fn_name, (probe["ag"], probe["mixed"]), probe["infos"])
    if verdict[0] != "pass":
        return verdict
    return "pass", f"{fn_name} agrees with step's {flag} at every step and is vectorized ({verdict[1]})"


def _terminated_undefined(ctx: Context) -> Verdict:
    """No compute_terminated: fine unless step ends episodes on reaching the goal (SB3 issue 627)."""
    ended = [tr for tr in ctx.transitions if tr.terminated]
    at_goal = [tr for tr in ended if ctx.reached(tr.ag, tr.dg, tr.info, tr.reward)]
    if not at_goal:
        seen = (
            f"none of the {len(ended)} terminations in the rollout came with the goal reached"
            if ended
            else "no step of the rollout terminated"
        )
        if not any(ctx.reached(tr.ag, tr.dg, tr.info, tr.reward) for tr in ctx.transitions):
            seen += (
                ", but no step reached its goal either, so whether reaching it ends the episode is not "
                "verified (raise n_steps, or check an env that starts near its goal)"
            )
        return (
            "pass",
            f"not defined (optional); {seen}. An env that ends episodes on reaching the goal needs one.",
        )
    tr = at_goal[0]
    return "fail", (
        f"step ends episodes when the goal is reached ({len(at_goal)} of {len(ended)} terminations in the "
        f"rollout, first at step {tr.step}, came with the goal reached), but the env defines no "
        "compute_terminated, so a buffer cannot recompute the flag for a relabelled goal: a transition "
        "that reached its original goal stays terminal under the new goal (its value is cut off), and one "
        "that reaches the new goal is not terminal (stable-baselines3 issue 627: HER keeps the stored done "
        "flags). HER then learns wrong values. Fix: define compute_terminated(achieved_goal, desired_goal, "
        "info), vectorized like compute_reward, and return it from step (goalenvs.her recomputes it for "
        "relabelled goals); or end episodes only by the time limit (truncated), as the Fetch tasks do."
    )


def check_compute_terminated(ctx: Context) -> Verdict:
    """Where defined, compute_terminated agrees with step's terminated flags and takes batches."""
    return _flag_check(ctx, "compute_terminated", "terminated")


def check_compute_truncated(ctx: Context) -> Verdict:
    """Where defined, compute_truncated agrees with step's truncated flags and takes batches."""
    return _flag_check(ctx, "compute_truncated", "truncated")


# What stable-baselines3's HerReplayBuffer passes as infos unless copy_info_dict=True (its
# _get_virtual_samples: `infos = [{} for _ in range(len(batch_indices))]`).
_SB3_DEFAULT_INFOS = (
    "a list of empty dicts, what stable-baselines3's HerReplayBuffer passes unless copy_info_dict=True"
)


def _needed_info_keys(
    fn: Callable[..., Any], ag: np.ndarray, dg: np.ndarray, infos: list[Any], err: Exception
) -> list[str]:
    """The info keys ``fn`` cannot do without: those whose removal from the step infos makes it raise.

    Falls back on the quoted names in ``err`` (a ``KeyError`` names its key) when the step infos do
    not help, e.g. because ``fn`` raises on them too.
    """
    dicts = [info for info in infos if isinstance(info, Mapping)]
    keys = sorted({key for info in dicts for key in info if isinstance(key, str)})
    needed: list[str] = []
    if len(dicts) == len(infos) and keys:
        with QuietGoalFunctions():
            try:
                call(fn, ag, dg, list(infos))
                works = True
            except Exception:  # then the step infos cannot tell which keys matter
                works = False
            for key in keys if works else ():
                try:
                    call(fn, ag, dg, [{k: v for k, v in info.items() if k != key} for info in dicts])
                except Exception:
                    needed.append(key)
    if not needed:
        if isinstance(err, KeyError) and err.args and isinstance(err.args[0], str) and " " not in err.args[0]:
            needed = [err.args[0]]  # info["key"] on a dict that lacks it
        else:  # a message that quotes the key, e.g. goalenvs.info_values' "... has no 'key' entry"
            needed = sorted(set(re.findall(r"'([^']+)'", str(err))) & set(keys))
    return needed


def check_empty_infos(ctx: Context) -> Verdict:
    """compute_* accept the infos stable-baselines3's HerReplayBuffer passes by default (empty dicts)."""
    probe = ctx.probe()
    ag, dg, step_infos = probe["ag"], probe["mixed"], probe["infos"]
    empty: list[dict[str, Any]] = [{} for _ in range(len(ag))]
    raised: list[tuple[str, Exception, list[str]]] = []
    warned: list[tuple[str, str]] = []
    names = [n for n in GOAL_FUNCTIONS if ctx.find(n)]
    for name in names:
        fn = ctx.fn(name)
        with QuietGoalFunctions() as caught:
            try:
                call(fn, ag, dg, empty)
            except Exception as err:
                raised.append((name, err, _needed_info_keys(fn, ag, dg, step_infos, err)))
                continue
        if caught:
            warned.append((name, str(caught[0].message)))
    if raised:
        first, first_err, _ = raised[0]
        keys = sorted({key for _, _, needed in raised for key in needed})
        which = [name for name, _, _ in raised]
        they = "it needs" if len(which) == 1 else "they need"
        need = (
            f"{they.capitalize()} the info key(s) {keys}." if keys else f"Which info keys {they} is unclear."
        )
        effects = []
        if "compute_reward" in which:
            effects.append("training with that buffer stops at its first sample")
        if len(which) > ("compute_reward" in which):
            effects.append("a buffer that recomputes episode ends for relabelled goals fails the same way")
        return "warn", (
            f"{and_(which)} raised on {_SB3_DEFAULT_INFOS}: {first} raised {type(first_err).__name__}: {first_err}. {need} "
            f"So {' and '.join(effects)}. Fix: read each info key with a default where it is missing "
            "(goalenvs.info_values(info, key, batch_shape, default=...)) and warn once that its term is "
            "lost in relabelling; or tell users to pass replay_buffer_kwargs=dict(copy_info_dict=True)."
        )
    message = f"{and_(names)} accept {_SB3_DEFAULT_INFOS}."
    if warned:
        text = " ".join(warned[0][1].split())
        text = text if len(text) <= 300 else text[:297] + "..."
        message += f" {and_([name for name, _ in warned])} warned then; the first: {text}"
    other = _other_info_layouts(ctx, names, ag, dg, step_infos)
    if other is not None:
        return "warn", other
    return "pass", message + " They also accept info=None and one dict of arrays for the batch."


def _other_info_layouts(
    ctx: Context, names: list[str], ag: np.ndarray, dg: np.ndarray, infos: list[Any]
) -> str | None:
    """What goes wrong when the goal functions get a batch's info as None (what stable-baselines 2 passed)
    or as one dict of arrays (OpenAI baselines' layout, and a vector env's), or None if nothing does."""
    layouts: list[tuple[str, Any]] = [("info=None (what stable-baselines 2's HER passed)", None)]
    keys = {frozenset(info) for info in infos if isinstance(info, Mapping)}
    if len(keys) == 1 and all(isinstance(info, Mapping) for info in infos):
        try:
            columns = {k: np.asarray([info[k] for info in infos]) for k in next(iter(keys))}
            layouts.append(("one dict of arrays for the batch (OpenAI baselines' layout)", columns))
        except Exception:  # entries numpy cannot stack: no such layout to try
            pass
    layouts.append(("one empty dict for the whole batch (what tianshou's HER buffer passes)", {}))
    for name in names:
        fn = ctx.fn(name)
        with QuietGoalFunctions():
            try:
                want = call(fn, ag, dg, list(infos))
                if not rewards_close(call(fn, ag, dg, list(infos)), want):
                    continue  # an impure function: compute_reward_pure says so
            except Exception:  # a raise on the step infos themselves is compute_reward_vectorized's
                continue
            for label, info in layouts:
                try:
                    got = call(fn, ag, dg, info)
                except Exception as err:
                    return (
                        f"{name} raised {type(err).__name__}: {err} on {label}. Buffers that pass infos that "
                        "way stop at their first sample. Fix: read infos through goalenvs.info_values, "
                        "which accepts None, one dict (of arrays) and a list or array of dicts."
                    )
                if info not in (None, {}) and not rewards_close(got, want):
                    return (
                        f"{name} gives other values on {label} than on the same infos as a list of dicts "
                        f"({fmt(got)} vs {fmt(want)}); a buffer using that layout would learn from them. Fix: "
                        "read infos through goalenvs.info_values."
                    )
    return None
