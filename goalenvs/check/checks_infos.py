"""The check of which info keys ``compute_reward`` reads, against what the env declares.

A reward that reads an info entry (Parking's crash penalty reads ``info["crashed"]``) keeps that term
in relabelling only if the replay buffer stores the entry beside the goals. An env says which entries
its ``compute_reward`` reads in ``reward_info_keys`` (a tuple of str on the env, ``()`` by default);
buffers that honour it (``her.HerReplayBuffer``, ``her.HerStorage``) store those entries as columns and
pass them back, without copying whole info dicts. The check finds the keys ``compute_reward`` really
reads by changing one entry at a time in the rollout's infos, and compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from goalenvs.check.context import Context
from goalenvs.check.contract import call, rewards_close
from goalenvs.check.report import Skip, Verdict
from goalenvs.check.values import QuietGoalFunctions
from goalenvs.core import locate_env_attribute

__all__ = ["ATTRIBUTE", "check_reward_info_keys", "check_reward_reads_goal_info"]

#: The env attribute that declares the info keys ``compute_reward`` reads.
ATTRIBUTE = "reward_info_keys"


def _declared(ctx: Context) -> tuple[Any, str] | None:
    """``(value, provider name)`` of the first layer (outermost first, then a vector env's sub-env 0)
    that has :data:`ATTRIBUTE`, or None."""
    found = locate_env_attribute(ctx.env, ATTRIBUTE, functions_only=False)
    return None if found is None else (found[0], type(found[1]).__name__)


def _changed(value: Any) -> Any:
    """A value of the same type and shape that differs from ``value`` everywhere, or None if there is
    no obvious one (strings, objects)."""
    if isinstance(value, (bool, np.bool_)):
        return not value
    if isinstance(value, (int, float, np.number)):
        return value + 1
    if isinstance(value, np.ndarray) and value.dtype == bool:
        return ~value
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.number):
        return value + 1
    return None


def _keys_read(
    fn: Any, ag: np.ndarray, dg: np.ndarray, infos: list[Mapping[str, Any]], want: Any
) -> list[str]:
    """The info keys whose change (in every info of the batch at once) changes ``fn``'s values."""
    keys = sorted({key for info in infos for key in info if isinstance(key, str)})
    read = []
    for key in keys:
        changed = [dict(info) for info in infos]
        for info in changed:
            if key in info and (new := _changed(info[key])) is not None:
                info[key] = new
        try:
            got = call(fn, ag, dg, changed)
        except Exception:  # a value it cannot take: it reads the key
            read.append(key)
            continue
        if not rewards_close(got, want):
            read.append(key)
    return read


def _probe_keys_read(ctx: Context) -> tuple[Any, Any, Any, list[Any], Any, list[str]]:
    """``compute_reward`` on the probe's goals and step infos: ``(fn, ag, dg, infos, rewards, the info
    keys it reads)``; Skip where the infos are no dicts or the function raises or is not pure."""
    fn = ctx.fn("compute_reward")
    probe = ctx.probe()
    ag, dg, infos = probe["ag"], probe["mixed"], probe["infos"]
    if not infos or not all(isinstance(info, Mapping) for info in infos):
        raise Skip("the step infos are not dicts")
    with QuietGoalFunctions():
        try:
            want = call(fn, ag, dg, list(infos))
        except Exception as err:
            raise Skip(f"compute_reward raised on the step infos ({type(err).__name__})") from None
        if not rewards_close(call(fn, ag, dg, list(infos)), want):
            raise Skip("compute_reward gives other rewards on a second call (compute_reward_pure says why)")
        return fn, ag, dg, infos, want, _keys_read(fn, ag, dg, list(infos), want)


def check_reward_info_keys(ctx: Context) -> Verdict:
    """``compute_reward`` reads no info key beyond the env's ``reward_info_keys``."""
    fn, ag, dg, infos, want, read = _probe_keys_read(ctx)
    found = _declared(ctx)
    declared: Any = found[0] if found else ()
    where = f"{found[1]}.{ATTRIBUTE}" if found else ATTRIBUTE
    if isinstance(declared, str) or not all(isinstance(k, str) for k in np.atleast_1d(declared).tolist()):
        return "fail", f'{where} is {declared!r}; it must be a tuple of info keys (str), e.g. ("crashed",).'
    declared = tuple(declared)
    with QuietGoalFunctions():
        kept = [{k: info[k] for k in declared if k in info} for info in infos]
        try:
            same_on_declared = rewards_close(call(fn, ag, dg, kept), want)
        except Exception:
            same_on_declared = False
    missing = [k for k in declared if not any(k in info for info in infos)]
    if missing:
        return "fail", (
            f"{where} declares {missing}, but no info of the rollout's steps has {'it' if len(missing) == 1 else 'them'}: "
            "a buffer that stores the declared keys finds nothing to store. Fix: put the key in every "
            f"step's info, or take it out of {ATTRIBUTE}."
        )
    undeclared = [k for k in read if k not in declared]
    if declared and (undeclared or not same_on_declared):
        what = f"also reads {undeclared}" if undeclared else "gives other rewards on infos holding only them"
        return "fail", (
            f"{where} declares {list(declared)}, but compute_reward {what}. A buffer that stores only the "
            f"declared keys (her.HerReplayBuffer, her.HerStorage) relabels with those terms lost. Fix: "
            f"declare every info key compute_reward reads: {ATTRIBUTE} = {tuple(sorted({*declared, *undeclared}))!r}."
        )
    if undeclared:
        return "warn", (
            f"compute_reward reads the info key(s) {undeclared} (changing them changes the rewards), and the "
            f"env declares no {ATTRIBUTE}: buffers that keep no infos (stable-baselines3's by default) "
            f"relabel with those terms lost. Fix: declare {ATTRIBUTE} = {tuple(undeclared)!r} on the env; "
            "her.HerReplayBuffer and her.HerStorage then store those entries and pass them back."
        )
    if declared:
        return "pass", f"compute_reward reads no info key beyond {where} {list(declared)}."
    return (
        "pass",
        "compute_reward reads no info key (changing any entry of the step infos leaves its rewards).",
    )


def _goal_derived(values: np.ndarray, distance: np.ndarray) -> str | None:
    """How an info entry follows the distance between the goals over the rollout, or None if it does not:
    a flag true exactly below some distance (a success test), or a number monotone in the distance."""
    if values.dtype == bool or set(np.unique(values).tolist()) <= {0, 1}:
        flags = values.astype(bool)
        if flags.all() or not flags.any():
            return None
        if distance[flags].max() < distance[~flags].min():
            return "true exactly where the achieved goal is within a distance of the desired goal"
        return None
    if len(np.unique(values)) < 5:
        return None
    ordered = values[np.argsort(distance, kind="stable")]
    steps = np.diff(ordered)
    if np.all(steps >= 0) or np.all(steps <= 0):
        return "a monotone function of the distance between the achieved and the desired goal"
    return None


def check_reward_reads_goal_info(ctx: Context) -> Verdict:
    """``compute_reward`` reads no info entry that step computed from the desired goal (is_success, a
    distance): relabelling would keep the original goal's value."""
    read = _probe_keys_read(ctx)[-1]
    transitions = [tr for tr in ctx.transitions if isinstance(tr.info, Mapping)]
    if not read or not transitions:
        return "pass", "compute_reward reads no info entry, so none that depends on the desired goal."
    distance = np.asarray(
        [np.linalg.norm(np.asarray(tr.ag, np.float64) - np.asarray(tr.dg, np.float64)) for tr in transitions]
    )
    for key in read:
        try:
            values = np.asarray([tr.info[key] for tr in transitions])
        except (KeyError, ValueError, TypeError):
            continue
        if values.ndim != 1 or values.dtype.kind not in "biuf" or not np.isfinite(values.astype(float)).all():
            continue
        how = _goal_derived(values, distance)
        if how is None:
            continue
        return "fail", (
            f"compute_reward reads info[{key!r}], which step computed for the original desired goal: over "
            f"the rollout's {len(transitions)} steps it is {how}. HER recomputes rewards for other goals "
            "with the stored infos, so every relabelled reward keeps the original goal's term (a success "
            "bonus where the new goal is missed, none where it is reached). Fix: compute that term in "
            "compute_reward from its achieved_goal and desired_goal arguments; keep in info only what "
            "does not depend on the goal."
        )
    return "pass", (
        f"compute_reward reads info {read}, none of which follows the goals' distance (not computed from "
        "the desired goal)."
    )
