"""The checks of the env itself: its spaces and wrappers, its rollout, its seeding, its copies.

Each ``check_*`` function reads a :class:`~goalenvs.check.context.Context` and returns a
:data:`~goalenvs.check.report.Verdict`: a status and a message that says what is wrong, the likely
cause and the fix (or raises :class:`~goalenvs.check.report.Skip`). Which checks run, in which order
and after which others, is the table in :mod:`goalenvs.check.specs`.
"""

from __future__ import annotations

import copy
import inspect
import pickle
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs.check.context import Context
from goalenvs.check.contract import call
from goalenvs.check.report import Skip, Status, Verdict
from goalenvs.check.values import copy_info, copy_obs, describe_space, first_difference, fmt, same
from goalenvs.core import GoalEnvError, check_goal_space, locate_env_attribute

__all__ = [
    "check_achieved_goal_in_desired_space",
    "check_compute_reward_defined",
    "check_deepcopy",
    "check_desired_goal_fixed",
    "check_is_success",
    "check_observation_space",
    "check_observations_in_space",
    "check_observations_not_aliased",
    "check_pickle",
    "check_reset_seeding",
    "check_success_matches_reward",
    "check_rollout",
    "check_rollout_determinism",
    "check_wrapper_keeps_goals",
]


def check_observation_space(ctx: Context) -> Verdict:
    """Dict space with the three keys; achieved and desired goal spaces of equal shape and dtype."""
    try:
        check_goal_space(ctx.space)
    except GoalEnvError as err:
        goals = (
            [ctx.space.spaces.get(k) for k in ("achieved_goal", "desired_goal")]
            if isinstance(ctx.space, spaces.Dict)
            else []
        )
        if any(isinstance(g, (spaces.Dict, spaces.Tuple)) for g in goals):
            return "fail", (
                f"{err}. The goal checks are skipped. Fix: to train with HER, wrap the env so that each goal is "
                "one flat array (the entries concatenated in a fixed order) and give the wrapper a "
                "compute_reward that splits the arrays back before calling the env's."
            )
        return "fail", (
            f"{err}. HER reads the three entries of every observation, so nothing else can be checked. "
            "Fix: return {'observation': ..., 'achieved_goal': ..., 'desired_goal': ...} with a "
            "matching gymnasium.spaces.Dict, and keep observation-changing wrappers (e.g. "
            "FlattenObservation) off the env that HER sees."
        )
    ag = ctx.space["achieved_goal"]
    return "pass", (
        f"Dict space; observation {ctx.space['observation']}, goals {ag} (achieved and desired alike)."
    )


def check_wrapper_keeps_goals(ctx: Context) -> Verdict:
    """No wrapper above the layer that defines compute_reward changes the goals it is fed."""
    found = ctx.find("compute_reward")
    if found is None:
        raise Skip("the env defines no compute_reward")
    _, provider_name, p = found
    if p == 0:
        return (
            "pass",
            f"compute_reward comes from the outermost layer ({provider_name}); no wrapper sits above it.",
        )
    if p >= len(ctx.layers):  # a vector env's sub-env: compare what the batch shows with what it expects
        provider_space = getattr(found[0], "__self__", None)
        provider_space = getattr(provider_space, "observation_space", None)
        if provider_space is not None and provider_space != ctx.space:
            return "fail", (
                f"the vector env's observations ({describe_space(ctx.space)}) differ from what "
                f"{provider_name}, which defines compute_reward, produces "
                f"({describe_space(provider_space)}): a wrapper changes them. Fix: keep "
                "observation-changing wrappers off the env HER sees."
            )
        return (
            "pass",
            f"the vector env passes {provider_name}'s goals, which compute_reward expects, unchanged.",
        )
    provider = ctx.layers[p]
    above = ctx.layers[:p]
    changers = [w for w in above if getattr(w, "observation_space", None) != w.env.observation_space]
    fix = (
        "HER takes goals from the wrapped observation and passes them to compute_reward, which "
        f"expects {provider_name}'s goals, so every relabelled reward is computed on the wrong inputs "
        "(a known stable-baselines3 pitfall). Fix: apply such wrappers outside the goal env HER sees "
        "(e.g. let the policy flatten the Dict: SB3's MultiInputPolicy does), or give the wrapper "
        "a compute_reward that maps the goals back before calling the inner one."
    )
    if changers:
        names = ", ".join(type(w).__name__ for w in changers)
        return "fail", (
            f"wrapper {names} changes the observation space above {provider_name}, which defines "
            f"compute_reward: {describe_space(provider.observation_space)} becomes "
            f"{describe_space(ctx.layers[0].observation_space)}. " + fix
        )
    # A wrapper can rescale goals and keep the space: try its observation() on sampled observations.
    inner_space = copy.deepcopy(provider.observation_space)
    inner_space.seed(ctx.seed)
    for w in above:
        if not isinstance(w, gym.ObservationWrapper) or not isinstance(inner_space, spaces.Dict):
            continue
        for _ in range(3):
            sample = inner_space.sample()
            try:
                out = w.observation(copy_obs(sample))
            except Exception:  # an observation() that needs env state: rollout checks judge it
                continue
            for key in ("achieved_goal", "desired_goal"):
                if not isinstance(out, Mapping) or key not in out or not same(out[key], sample[key]):
                    got = out.get(key) if isinstance(out, Mapping) else out
                    return "fail", (
                        f"wrapper {type(w).__name__} changes {key} ({fmt(sample[key])} becomes {fmt(got)}) above "
                        f"{provider_name}, which defines compute_reward. " + fix
                    )
    names = ", ".join(type(w).__name__ for w in above)
    return (
        "pass",
        f"wrappers {names} above {provider_name} (which defines compute_reward) keep the goals as they are.",
    )


def check_compute_reward_defined(ctx: Context) -> Verdict:
    """The env or one of its wrappers defines compute_reward (found as ``get_wrapper_attr`` finds it)."""
    found = ctx.find("compute_reward")
    if found is None and ctx.vector and not ctx.sub_envs():
        return "fail", (
            f"{type(ctx.layers[-1]).__name__} defines no compute_reward and its sub-envs are out of reach (another "
            "process, as with AsyncVectorEnv); HER must call compute_reward in-process on batches. Fix: "
            "give the vector env a compute_reward (a native vector env, as goalenvs' are), or check a "
            "SyncVectorEnv / a single env instead."
        )
    if found is None:
        return "fail", (
            "neither the env nor any of its wrappers defines compute_reward(achieved_goal, desired_goal, "
            "info); HER recomputes the reward of every relabelled transition with it. Fix: add the method "
            "to the env and make step return its result."
        )
    names = _odd_parameter_names(ctx)
    if names:
        return "warn", (
            f"compute_reward found on {found[1]}, but {names}; the GoalEnv API names the goals achieved_goal "
            "and desired_goal, and buffers that pass them by keyword (OpenAI baselines' HER does) raise "
            "TypeError. Fix: rename the parameters."
        )
    return "pass", f"compute_reward found on {found[1]}."


def _odd_parameter_names(ctx: Context) -> str:
    """Which goal functions name their first three parameters other than the GoalEnv API does."""
    odd = []
    for name in ("compute_reward", "compute_terminated", "compute_truncated"):
        found = ctx.find(name)
        if found is None:
            continue
        try:
            params = list(inspect.signature(found[0]).parameters.values())
        except (TypeError, ValueError):  # a builtin or C function: no signature to read
            continue
        if any(p.kind is p.VAR_KEYWORD for p in params):
            continue
        first = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)][:3]
        if first[:2] != ["achieved_goal", "desired_goal"]:  # an info parameter named _info is common
            odd.append(f"{name}'s parameters are named ({', '.join(first)})")
    return "; ".join(odd)


def check_rollout(ctx: Context) -> Verdict:
    """Record the rollout every later check reads (reset with the seed, then n_steps random actions)."""
    try:
        ctx.record()
    except Skip:
        raise
    except Exception as err:  # any error of the env itself is the verdict
        return "fail", (
            f"reset/step raised {type(err).__name__}: {err}. Fix the env so that reset(seed=...) and "
            f"step(action_space.sample()) run; nothing else can be checked before that."
        )
    episodes = len({tr.episode for tr in ctx.transitions})
    unit = "vector steps" if ctx.vector else "steps"
    return "pass", (
        f"reset(seed={ctx.seed}) and {ctx.n_steps} {unit} with random actions ran "
        f"({len(ctx.transitions)} transitions, {episodes} episode(s))."
    )


def check_observations_in_space(ctx: Context) -> Verdict:
    """Every observation reset and step returned lies in the observation space."""
    space = ctx.env.observation_space
    for k, ev in enumerate(ctx.events):
        if space.contains(ev.obs):
            continue
        where = "reset" if ev.kind == "reset" else "step"
        n_step = sum(e.kind == "step" for e in ctx.events[: k + 1])
        detail = "it is not a dict with the space's keys"
        if isinstance(ev.obs, Mapping) and isinstance(space, spaces.Dict):
            for key, sub in space.spaces.items():
                if key not in ev.obs:
                    detail = f"key {key!r} is missing"
                    break
                if not sub.contains(ev.obs[key]):
                    detail = _outside(key, sub, ev.obs[key])
                    break
            else:
                extra = sorted(set(ev.obs) - set(space.spaces))
                detail = f"it has keys {extra} the space does not"
        return "fail", (
            f"the observation returned by {where} (after {n_step} step(s)) is not in the observation space: "
            f"{detail}. Likely cause: a wrong dtype (e.g. float64 values for a float32 Box), a missing "
            "clip, or bounds too tight. Fix: cast/clip the observation or widen the space."
        )
    return "pass", f"all {len(ctx.events)} reset/step observations lie in the observation space."


def _outside(key: str, space: gym.Space, x: Any) -> str:
    """Why ``x`` (``obs[key]``) is not in ``space``: the first entry out of a Box's bounds, with its index."""
    value = x
    if not isinstance(x, np.ndarray):  # what Box.contains does with a list or a number
        try:
            value = np.asarray(x, dtype=getattr(space, "dtype", None))
        except (ValueError, TypeError, OverflowError):
            value = np.asarray(x, dtype=object)
    where = f"{key!r} = {fmt(value)} (shape {value.shape}, dtype {value.dtype})"
    if not isinstance(space, spaces.Box) or value.shape != space.shape:
        return f"{where} is outside {describe_space(space)}"
    if not np.can_cast(value.dtype, space.dtype):
        return f"{where} has dtype {value.dtype}, which the space's {space.dtype} cannot hold"
    bad = ~((value >= space.low) & (value <= space.high))
    if not bad.any():
        return f"{where} is outside {describe_space(space)}"
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    at = ", ".join(map(str, index))
    return (
        f"{key}[{at}] = {fmt(value[index])} is outside its bounds [{fmt(space.low[index])}, "
        f"{fmt(space.high[index])}] ({int(bad.sum())} of {bad.size} entries of {key!r} are out of bounds)"
    )


def check_observations_not_aliased(ctx: Context) -> Verdict:
    """Observations once returned never change (they are not views of the env's state)."""
    for k, ev in enumerate(ctx.events):
        if not same(ev.obs_ref, ev.obs):
            n_step = sum(e.kind == "step" for e in ctx.events[: k + 1])
            return "fail", (
                f"the observation returned after {n_step} step(s) changed later: "
                f"{first_difference(ev.obs, ev.obs_ref)}. The env returns views of its own state "
                "(e.g. {'achieved_goal': self.pos}), so a buffer that keeps the returned arrays (HER "
                "episode storage does) sees stored goals move. Fix: return copies (self.pos.copy())."
            )
    changed = _changed_info(ctx)
    if changed is not None:
        return changed
    return "pass", "observations and infos, once returned, are never modified by later steps."


def _changed_info(ctx: Context) -> Verdict | None:
    """An info entry that changed after its step returned it (a live list or array of the env's).

    Single envs only: a vector env builds its batched infos afresh at every step.
    """
    if ctx.vector:
        return None
    for k, ev in enumerate(ctx.events):
        if not isinstance(ev.info_ref, Mapping) or not isinstance(ev.info, Mapping):
            continue
        for key, value in ev.info_ref.items():
            try:
                if key not in ev.info or not same(copy_info(value), value) or same(ev.info[key], value):
                    continue  # unchanged, or compared by identity (a copy tells nothing)
            except Exception:  # values that cannot be compared (object arrays of arrays)
                continue
            n_step = sum(e.kind == "step" for e in ctx.events[: k + 1])
            status: Status = "warn"
            effect = "A buffer or recorder that keeps infos without a deep copy would store changing data."
            fn = ctx.find("compute_reward")
            tr = next((t for t in ctx.transitions if t.step == n_step - 1), None)
            if fn is not None and tr is not None and ev.kind == "step":
                try:
                    if not same(fn[0](tr.ag, tr.dg, ev.info), fn[0](tr.ag, tr.dg, ev.info_ref)):
                        status = "fail"
                        effect = (
                            "compute_reward reads it, so relabelled rewards would come from changed data."
                        )
                except Exception:  # a raising compute_reward is reported by its own checks
                    pass
            return status, (
                f"info[{key!r}] returned after {n_step} step(s) changed later: {first_difference(ev.info[key], value)}. "
                f"The env returns a live object of its own (a list it appends to, an array it updates). {effect} "
                "Fix: return copies (list(self.tasks_done), self.array.copy())."
            )
    return None


#: Goals recomputed every step (through a change of frame, any float transform) differ by rounding:
#: differences up to this many machine epsilons of the goals' scale are rounding, not a new goal.
GOAL_ROUNDING_EPS = 64
#: ... and up to this share of the env's success threshold (``distance_threshold``), where it has one.
GOAL_THRESHOLD_SHARE = 1e-6


def success_threshold(ctx: Context) -> float | None:
    """The env's success threshold (a positive ``distance_threshold`` on the env or a wrapper), or None."""
    found = locate_env_attribute(ctx.env, "distance_threshold", functions_only=False)
    if found is None:
        return None
    try:
        value = float(found[0])
    except (TypeError, ValueError):
        return None
    return value if np.isfinite(value) and value > 0 else None


def goal_tolerance(ctx: Context) -> tuple[float, float]:
    """``(rtol, atol)`` within which two desired goals count as one: rounding of the goal dtype relative
    to the goals' scale (the goal space's finite bounds), and a millionth of the success threshold."""
    space = ctx.space["desired_goal"]
    dtype = np.dtype(getattr(space, "dtype", None) or np.float64)
    if not np.issubdtype(dtype, np.inexact):
        return 0.0, 0.0  # integer goals: exact
    rtol = GOAL_ROUNDING_EPS * float(np.finfo(dtype).eps)
    bounds = [np.asarray(getattr(space, k, np.nan), dtype=np.float64) for k in ("low", "high")]
    finite = np.concatenate([b[np.isfinite(b)].reshape(-1) for b in bounds])
    atol = rtol * (float(np.abs(finite).max()) if finite.size else 0.0)
    threshold = success_threshold(ctx)
    if threshold is not None:
        atol = max(atol, GOAL_THRESHOLD_SHARE * threshold)
    return rtol, atol


def _goal_moved(a: Any, b: Any, rtol: float, atol: float) -> float | None:
    """How far goal ``b`` is from ``a`` (max abs difference), or None when they differ beyond the
    tolerance (or in shape, dtype kind or NaN pattern)."""
    xa, xb = np.asarray(a), np.asarray(b)
    if same(xa, xb):
        return 0.0
    if rtol == 0.0 and atol == 0.0 or xa.shape != xb.shape or xa.dtype == object or xb.dtype == object:
        return None
    try:
        fa, fb = xa.astype(np.float64), xb.astype(np.float64)
    except (TypeError, ValueError):
        return None
    if not np.array_equal(np.isfinite(fa), np.isfinite(fb)) or not np.array_equal(
        fa[~np.isfinite(fa)], fb[~np.isfinite(fb)]
    ):
        return None
    finite = np.isfinite(fa)
    diff = np.abs(fa[finite] - fb[finite])
    scale = np.maximum(np.abs(fa[finite]), np.abs(fb[finite]))
    if np.any(diff > atol + rtol * scale):
        return None
    return float(diff.max()) if diff.size else 0.0


def check_desired_goal_fixed(ctx: Context) -> Verdict:
    """The desired goal stays the same within each episode (HER relabels within one), up to rounding."""
    rtol, atol = goal_tolerance(ctx)
    drift = 0.0
    for tr in ctx.transitions:
        moved = _goal_moved(tr.prev_dg, tr.dg, rtol, atol)
        if moved is not None:
            drift = max(drift, moved)
            continue
        sub = f" of sub-env {tr.env_index}" if ctx.vector else ""
        if ctx.vector and (tr.terminated or tr.truncated) and ctx.autoreset == "NextStep":
            return "fail", (
                f"desired_goal{sub} changed at its step {tr.t}, the step that ended its episode "
                f"({fmt(tr.prev_dg)} -> {fmt(tr.dg)}): the vector env resets sub-envs in the same step, "
                "but its metadata['autoreset_mode'] says NextStep (or is missing), so the last transition "
                "of every episode pairs the next episode's first observation and goal with the action. "
                "Fix: set metadata['autoreset_mode'] to gymnasium.vector.AutoresetMode.SAME_STEP and put "
                "the real last observation in info['final_obs'], or reset on the next step."
            )
        return "fail", (
            f"desired_goal changed within an episode{sub} at its step {tr.t} without a reset "
            f"({fmt(tr.prev_dg)} -> {fmt(tr.dg)}, {first_difference(tr.prev_dg, tr.dg)}). HER assumes one "
            "goal per episode: it relabels with goals achieved later in the same episode. Likely cause: "
            "the goal is resampled when reached (a continuing task) or drifts with the state. Fix: keep "
            "the goal until reset, or end the episode (terminated=True) when a new goal is drawn."
        )
    episodes = len({(tr.env_index, tr.episode) for tr in ctx.transitions})
    note = ""
    if drift > 0.0:
        note = (
            f" Note: it moved by at most {drift:.2g} from step to step, float rounding of a goal "
            "recomputed each step (below the checker's rounding tolerance); rewards and HER's "
            "relabelling are unaffected."
        )
    return "pass", f"desired_goal stayed fixed within each of the {episodes} episode(s).{note}"


def check_is_success(ctx: Context) -> Verdict:
    """Every step's info has a boolean ``is_success`` (advice: success rates are read from it)."""
    infos = [tr.info for tr in ctx.transitions]
    have = [isinstance(i, Mapping) and "is_success" in i for i in infos]
    if all(have):
        bad = [i["is_success"] for i in infos if np.asarray(i["is_success"]).astype(float) not in (0.0, 1.0)]
        if bad:
            return "warn", (
                f"info['is_success'] is not boolean (e.g. {fmt(bad[0])}); success rates averaged from "
                "it are meaningless. Fix: store bool(success)."
            )
        return "pass", "every step's info has a boolean 'is_success'."
    keys = sorted({k for i in infos if isinstance(i, Mapping) for k in i})
    similar = [k for k in keys if "success" in k.lower()]
    hint = f" (it has {similar}: rename it)" if similar else ""
    count = f"{len(have) - sum(have)} of {len(have)} step infos lack" if any(have) else "no step info has"
    return "warn", (
        f"{count} 'is_success'{hint}; info keys seen: {keys}. SB3 and most HER tooling "
        "report the success rate from info['is_success']. Fix: set info['is_success'] = bool(success) "
        "in step."
    )


def check_success_matches_reward(ctx: Context) -> Verdict:
    """Where the reward is sparse, ``info["is_success"]`` says what the reward says (advice)."""
    found = ctx.find("compute_reward")
    infos = [tr.info for tr in ctx.transitions]
    if found is None or not all(isinstance(i, Mapping) and "is_success" in i for i in infos):
        raise Skip("not every step's info has 'is_success' (see is_success)")
    rows = []
    for (
        tr
    ) in ctx.transitions:  # compute_reward's own values: a step reward that disagrees is reward_contract's
        try:
            reward = float(call(found[0], tr.ag, tr.dg, tr.info).reshape(-1)[0])
            at_goal = float(call(found[0], tr.ag, tr.ag, tr.info).reshape(-1)[0])
        except Exception as err:  # a raising compute_reward is reported by its own checks
            raise Skip(
                f"compute_reward raised {type(err).__name__}; see the other compute_reward checks"
            ) from err
        rows.append((tr, reward, at_goal))
    if len({r for _, r, _ in rows} | {g for _, _, g in rows}) > 2:
        return (
            "pass",
            "the reward is dense: reaching the goal is not one reward value to compare is_success with.",
        )
    bad = [(tr, r) for tr, r, g in rows if bool(tr.info["is_success"]) != (r == g)]
    if not bad:
        reached = sum(r == g for _, r, g in rows)
        return (
            "pass",
            f"info['is_success'] says what the sparse reward says at all {len(rows)} steps ({reached} at the goal).",
        )
    tr, reward = bad[0]
    return "warn", (
        f"info['is_success'] and the reward disagree at {len(bad)} of {len(rows)} steps; first at step "
        f"{tr.step}: is_success={bool(tr.info['is_success'])} with reward {fmt(reward)}. The success rate you "
        "monitor then measures another task than the one HER optimises. Likely cause: two thresholds "
        "(< in one, <= in the other) or two distances. Fix: compute is_success with the reward's own test."
    )


def check_achieved_goal_in_desired_space(ctx: Context) -> Verdict:
    """HER writes achieved goals into the desired_goal slot, so they must fit its space."""
    dg_space = ctx.space["desired_goal"]

    def inside(goal: np.ndarray) -> bool:
        if isinstance(dg_space, spaces.Box):  # bounds matter here; a wrong dtype is observations_in_space's
            return goal.shape == dg_space.shape and bool(
                np.all((goal >= dg_space.low) & (goal <= dg_space.high))
            )
        return dg_space.contains(goal)

    for tr in ctx.transitions:
        if not inside(tr.ag):
            return "warn", (
                f"achieved goal {fmt(tr.ag)} (step {tr.step}) lies outside the desired_goal space "
                f"{dg_space}. HER puts achieved goals where desired goals go, so relabelled observations "
                "leave the space (a policy normalising by its bounds sees out-of-range inputs). Fix: make "
                "the desired_goal space cover every achievable goal."
            )
    return "pass", "every achieved goal also lies in the desired_goal space (HER relabels with them)."


def check_reset_seeding(ctx: Context) -> Verdict:
    """reset(seed=s) twice gives the same observation (and the one the rollout started from)."""
    try:
        first, _ = ctx.env.reset(seed=ctx.seed)
        first = copy_obs(first)
        second, _ = ctx.env.reset(seed=ctx.seed)
    except Exception as err:
        return "fail", f"reset(seed={ctx.seed}) raised {type(err).__name__}: {err}."
    for a, b in ((first, second), (ctx.events[0].obs, first)):
        if not same(a, b):
            return "fail", (
                f"reset(seed={ctx.seed}) gave different observations on two calls: "
                f"{first_difference(a, b)}. Likely cause: reset does not pass the seed on "
                "(super().reset(seed=seed)) or draws from global np.random / an unseeded generator. Fix: "
                "call super().reset(seed=seed) first and draw every random number from self.np_random."
            )
    return "pass", f"reset(seed={ctx.seed}) gives the same observation every time."


def check_rollout_determinism(ctx: Context) -> Verdict:
    """The same seed and actions replay the same transitions (advice: HER experiments stay reproducible)."""
    # A replay that matched with compute_* calls interleaved proves determinism too; only replay again if not.
    diff = ctx.replay(interleave=True) if ctx.replayed(interleave=True) else "not replayed"
    if diff is not None:
        diff = ctx.replay(interleave=False)
    if diff is None:
        return "pass", f"replaying the same actions after reset(seed={ctx.seed}) gives identical transitions."
    return "warn", (
        f"replaying the same actions after reset(seed={ctx.seed}) gives different transitions (first at "
        f"{diff}). Runs cannot be reproduced, and the verdicts of checks that read the rollout may change "
        "from run to run. Likely cause: randomness drawn from global np.random/random, time, or a generator "
        "re-seeded from the OS at reset; or simulator state that reset does not clear (a physics engine's "
        "contact cache). Fix: draw every random number from self.np_random and reset the simulator's state "
        "fully in reset."
    )


def _copy_check(ctx: Context, how: str, clone: Callable[[Any], Any], recipe_status: Status) -> Verdict:
    """The copy steps exactly like the original: as a snapshot, or else from the same seeded reset.

    A copy that cannot be made or that differs is a warning: HER training never copies an env (a
    panda-gym env, whose copies share one pybullet client, trains fine), but saving and forking do.

    ``gymnasium.utils.EzPickle`` (used by Gymnasium-Robotics and others) pickles an env as its
    constructor arguments, so the copy is a fresh env that needs a reset: a recipe, not a snapshot.
    Single envs only: a vector env is rebuilt from env functions, not copied.
    """
    env = ctx.env
    space = copy.deepcopy(ctx.action_space)
    space.seed(ctx.seed + 2)
    try:
        env.reset(seed=ctx.seed)
        for _ in range(2):
            terminated, truncated = env.step(space.sample())[2:4]
            if np.any(np.logical_or(terminated, truncated)):
                env.reset()
    except Exception as err:  # an earlier copy check left it broken, and said so
        raise Skip(f"the env no longer steps ({type(err).__name__}: {err})") from err
    try:
        twin = clone(env)
    except Exception as err:
        return "warn", (
            f"{how} raised {type(err).__name__}: {err}. HER training does not copy envs, but saving, "
            "forking (SubprocVecEnv) and snapshotting an env for reproducible experiments do. Likely "
            "cause: an attribute holding a lambda, an open file, a lock or a live simulator handle. Fix: keep such things out of the env or "
            "implement __getstate__/__setstate__ (or __deepcopy__)."
        )
    _keep_with(env, twin)
    return _compare_copy(env, twin, how, space.sample(), ctx.seed + 3, recipe_status)


# Copies made by the copy checks, kept as long as the env they copy: a copy that shares a live resource
# with the original (panda-gym's pybullet client) releases it when collected, which would leave the
# caller's env unusable (check_goal_env promises to leave it usable).
_KEPT: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def _keep_with(env: Any, twin: Any) -> None:
    try:
        _KEPT.setdefault(env, []).append(twin)
    except TypeError:  # an env that takes no weak references: its copies go when the check ends
        pass


def _compare_copy(env: Any, twin: Any, how: str, action: Any, seed: int, recipe_status: Status) -> Verdict:
    """How ``twin`` steps compared with ``env``: as a snapshot, or else after the same seeded reset."""
    try:
        want = env.step(action)
    except Exception as err:
        return "warn", (
            f"after {how}, the original env no longer steps: it raised {type(err).__name__}: {err}. The copy "
            "shares a live resource with the original (a simulator client or handle). HER training does not "
            "copy envs, but code that saves or forks one would break the env it copied. Fix: give each copy "
            "its own resource in __deepcopy__/__setstate__, or make copying raise a clear error."
        )
    try:
        got = twin.step(action)
        snapshot_diff = _step_difference(want, got)
    except Exception as err:
        snapshot_diff = f"the copy cannot step before a reset ({type(err).__name__}: {err})"
    if snapshot_diff is None:
        return "pass", f"{how} gives an independent snapshot that steps exactly like the original."
    try:
        first = env.reset(seed=seed)[0]
        second = twin.reset(seed=seed)[0]
        recipe_diff = None if same(first, second) else f"reset observation {first_difference(first, second)}"
        recipe_diff = recipe_diff or _step_difference(env.step(action), twin.step(action))
    except Exception as err:
        recipe_diff = f"{type(err).__name__}: {err}"
    if recipe_diff is None:
        return recipe_status, (
            f"{how} is not a snapshot of the env's state ({snapshot_diff}) but a fresh env that, after "
            "the same reset(seed=...), steps exactly like the original (as gymnasium.utils.EzPickle "
            "makes it). Enough to save or fork an env; to snapshot one mid-episode, implement "
            "__getstate__/__setstate__ (or __deepcopy__) that copy the simulator state."
        )
    return "warn", (
        f"after {how}, the copy and the original disagree: as a snapshot, {snapshot_diff}; after the same "
        f"seeded reset, {recipe_diff}. HER training does not copy envs, but code that snapshots or forks "
        "one would get an env that is not the original. Likely cause: the copy shares mutable state "
        "with the original (a simulator handle, a random generator) or loses part of it. Fix: make every piece of state "
        "copyable, or implement __deepcopy__/__getstate__ that copies it."
    )


def _step_difference(want: Sequence[Any], got: Sequence[Any]) -> str | None:
    labels = ("observation", "reward", "terminated", "truncated")
    for label, a, b in zip(labels, want[:4], got[:4], strict=True):
        if not same(a, b):
            return f"different {label}s for the same action: {first_difference(a, b)}"
    return None


def check_deepcopy(ctx: Context) -> Verdict:
    """A deep copy steps like the original (a fresh copy that needs the same seeded reset: a warning)."""
    return _copy_check(ctx, "copy.deepcopy(env)", copy.deepcopy, "warn")


def check_pickle(ctx: Context) -> Verdict:
    """An unpickled copy steps like the original, as a snapshot or after the same seeded reset."""
    return _copy_check(
        ctx, "pickle.loads(pickle.dumps(env))", lambda e: pickle.loads(pickle.dumps(e)), "pass"
    )
