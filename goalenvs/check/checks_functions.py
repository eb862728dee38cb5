"""``check_goal_env``: does an environment keep the GoalEnv contract that Hindsight Experience Replay needs?

HER stores a transition once and later asks the environment what its reward *would* have been for
another goal. That only works when the environment keeps a handful of promises: the observation is a
``Dict`` with ``observation`` / ``achieved_goal`` / ``desired_goal``; ``step`` returns exactly
``compute_reward(next_achieved_goal, desired_goal, info)``; ``compute_reward`` is a pure function
vectorized over a leading batch axis; the desired goal stays put within an episode; and so on.
Breaking one of them rarely crashes anything: the agent just learns from wrong rewards. This module
finds those breaches before a week of training does.

The checker is a flat list of small ``check_*`` functions. Each reads a shared :class:`_Context`
(the env, the functions found on it, one recorded rollout) and returns a status and a message that
says what is wrong, the likely cause and the fix. Contract breaches are failures, advice is a
warning. Any Gymnasium env works, wrapped or not, and so does a ``gymnasium.vector.VectorEnv``
(``gym.make_vec``): nothing needs to inherit from :class:`goalenvs.GoalEnv`.
"""

from __future__ import annotations

import copy
import pickle
import re
import textwrap
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs.core import GoalEnvError, check_goal_space

__all__ = ["CHECKS", "CheckReport", "CheckResult", "check_goal_env"]

Status = Literal["pass", "warn", "fail"]

# Rewards recomputed from the same inputs are usually bit-identical, but a batched reduction may
# sum in a different order than the one-at-a-time one; these tolerances absorb that and nothing more.
RTOL = 1e-5
ATOL = 1e-6
#: Batch sizes ``compute_reward`` & co. are called with (a vector env adds its ``num_envs``).
BATCH_SIZES: tuple[int, ...] = (1, 2, 7, 32)
# How many (achieved goal, desired goal, info) rows of the rollout the function checks look at.
_N_PROBE = 32


class _Skip(Exception):
    """A check cannot run because something it needs is missing (an earlier check says why)."""


class _NotApplicable(_Skip):
    """A check that does not apply to this kind of env (left out of the report)."""


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one check: ``status`` is ``"pass"``, ``"warn"`` or ``"fail"``."""

    name: str
    status: Status
    message: str


@dataclass
class CheckReport:
    """All verdicts of :func:`check_goal_env` on one environment.

    ``results`` holds one :class:`CheckResult` per check that ran; ``skipped`` names the checks that
    could not run (because an earlier one failed) and why.
    """

    env_id: str
    results: list[CheckResult]
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no check failed (warnings allowed)."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "fail"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "warn"]

    def result(self, name: str) -> CheckResult:
        """The result of the check called ``name`` (e.g. ``"reward_contract"``)."""
        for r in self.results:
            if r.name == name:
                return r
        ran = [r.name for r in self.results]
        skipped = [s for s, _ in self.skipped]
        raise KeyError(f"no result named {name!r}; checks that ran: {ran}; skipped: {skipped}")

    def raise_if_failed(self) -> None:
        """Raise :class:`goalenvs.GoalEnvError` listing every failed check (do nothing if none failed)."""
        if self.passed:
            return
        lines = [f"{self.env_id} breaks the GoalEnv contract ({len(self.failures)} failed check(s)):"]
        lines += [f"- {r.name}: {r.message}" for r in self.failures]
        raise GoalEnvError("\n".join(lines))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form printed by ``goalenvs check --json``."""
        return {
            "env_id": self.env_id,
            "passed": self.passed,
            "results": [{"name": r.name, "status": r.status, "message": r.message} for r in self.results],
            "skipped": [{"name": n, "reason": why} for n, why in self.skipped],
        }

    def summary(self) -> str:
        """One line: counts per status and the verdict."""
        counts = {s: sum(r.status == s for r in self.results) for s in ("pass", "warn", "fail")}
        parts = [f"{counts['pass']} passed", f"{counts['warn']} warning(s)", f"{counts['fail']} failed"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        verdict = "PASSED" if self.passed else "FAILED"
        return f"{self.env_id}: {', '.join(parts)} -> {verdict}"

    def format(self, width: int = 100) -> str:
        """A readable table: one row per check, its message wrapped under it, and a summary line."""
        name_w = max([len(r.name) for r in self.results] + [len(n) for n, _ in self.skipped] + [5])
        indent = " " * (6 + name_w + 2)
        lines = []
        for r in self.results:
            head = f"{r.status.upper():<4}  {r.name:<{name_w}}  "
            body = textwrap.wrap(r.message, width=max(40, width - len(indent))) or [""]
            lines.append(head + body[0])
            lines.extend(indent + b for b in body[1:])
        reasons: dict[str, list[str]] = {}
        for name, why in self.skipped:
            reasons.setdefault(why, []).append(name)
        for why, names in reasons.items():
            body = textwrap.wrap(f"{', '.join(names)} not run: {why}", width=max(40, width - len(indent)))
            lines.append(
                f"{'SKIP':<4}  {'(' + str(len(names)) + ' check' + 's' * (len(names) > 1) + ')':<{name_w}}  "
                + body[0]
            )
            lines.extend(indent + b for b in body[1:])
        lines.append("")
        lines.append(self.summary())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


# --------------------------------------------------------------------------------------------------
# Small helpers


def _fmt(x: Any, limit: int = 60) -> str:
    """A short one-line rendering of a value for messages."""
    if isinstance(x, (np.ndarray, np.number, float, int)) and np.size(x) == 1 and not isinstance(x, bool):
        value = np.asarray(x).reshape(())
        if np.issubdtype(value.dtype, np.number):
            return f"{value.item() + 0:.6g}"  # + 0 turns -0.0 into 0.0
    if isinstance(x, np.ndarray) or np.isscalar(x):
        text = np.array2string(np.asarray(x), precision=4, threshold=8, edgeitems=3, separator=", ")
    else:
        text = repr(x)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _and(names: Sequence[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _describe_space(space: Any) -> str:
    """A short rendering of a space (a Box's full bound arrays would swamp a message)."""
    if isinstance(space, spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {_describe_space(v)}" for k, v in space.spaces.items()) + ")"
    if isinstance(space, spaces.Box):
        low, high = np.unique(space.low), np.unique(space.high)
        bounds = f"{low[0]:g}..{high[0]:g}, " if low.size == 1 and high.size == 1 else ""
        return f"Box({bounds}shape {space.shape}, {space.dtype})"
    return str(space)


def _same(a: Any, b: Any) -> bool:
    """Exact structural equality of observations / rewards (NaN equals NaN)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        xa, xb = np.asarray(a), np.asarray(b)
    except Exception:  # noqa: BLE001 - anything numpy cannot hold is compared with ==
        return bool(a == b)
    if xa.dtype == object or xb.dtype == object:
        return bool(np.all(xa == xb)) if xa.shape == xb.shape else False
    if xa.shape != xb.shape:
        return False
    if np.issubdtype(xa.dtype, np.inexact) or np.issubdtype(xb.dtype, np.inexact):
        return bool(np.array_equal(xa, xb, equal_nan=True))
    return bool(np.array_equal(xa, xb))


def _first_difference(a: Any, b: Any) -> str:
    """Which part of two observations / step results differs, for messages."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in a:
            if k not in b or not _same(a[k], b[k]):
                return f"{k!r} ({_fmt(a[k])} vs {_fmt(b.get(k))})"
    return f"{_fmt(a)} vs {_fmt(b)}"


def _close(a: Any, b: Any) -> bool:
    xa, xb = np.asarray(a), np.asarray(b)
    if xa.dtype == bool or xb.dtype == bool:
        return bool(np.array_equal(xa.astype(bool), xb.astype(bool)))
    return bool(
        np.allclose(xa.astype(np.float64), xb.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True)
    )


def _copy_obs(obs: Any) -> Any:
    if isinstance(obs, Mapping):
        return {k: _copy_obs(v) for k, v in obs.items()}
    if isinstance(obs, np.ndarray):
        return obs.copy()
    return copy.deepcopy(obs)


def _copy_info(info: Any) -> Any:
    try:
        return copy.deepcopy(info)
    except Exception:  # noqa: BLE001 - an uncopyable entry: keep a shallow copy rather than give up
        return dict(info) if isinstance(info, Mapping) else info


def _object_array(items: Sequence[Any]) -> np.ndarray:
    """A 1-d object array of dicts (``np.array(list_of_dicts)`` would too, but this never broadcasts)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def _layers(env: Any) -> list[Any]:
    """The wrapper chain, outermost first, ending with the bare env."""
    chain = [env]
    while isinstance(chain[-1], (gym.Wrapper, gym.vector.VectorWrapper)):
        inner = chain[-1].env
        if inner is chain[-1]:
            break
        chain.append(inner)
    return chain


def _name(layer: Any) -> str:
    return type(layer).__name__


def _call(fn: Callable[..., Any], ag: Any, dg: Any, info: Any) -> np.ndarray:
    # Inputs are copied so that a compute_* that writes into its arguments cannot corrupt the
    # rollout the other checks read (check_compute_reward_pure looks for such writes on purpose).
    return np.asarray(fn(np.array(ag, copy=True), np.array(dg, copy=True), info))


class _QuietGoalFunctions:
    """Catch what goal functions warn during a probe call, without spending goalenvs' warn-once slots."""

    def __enter__(self) -> list[warnings.WarningMessage]:
        from goalenvs import core

        self._saved = set(core._WARNED)
        self._catch = warnings.catch_warnings(record=True)
        caught = self._catch.__enter__()
        warnings.simplefilter("always")
        return caught  # type: ignore[return-value]

    def __exit__(self, *exc: object) -> None:
        from goalenvs import core

        self._catch.__exit__(*exc)
        core._WARNED.clear()
        core._WARNED.update(self._saved)


@dataclass
class _Event:
    """One raw ``reset`` or ``step`` return, as recorded (``obs`` is a copy, ``obs_ref`` what came back)."""

    kind: Literal["reset", "step"]
    obs: Any
    obs_ref: Any
    info: Any
    reward: Any = None
    terminated: Any = None
    truncated: Any = None
    valid: np.ndarray | None = None  # vector env: which sub-envs made a real transition at this step


@dataclass
class _Transition:
    """One (sub-)env transition s_t -> s_{t+1}, with the goals HER would store for it."""

    step: int  # index of the env.step call that produced it
    env_index: int
    episode: int
    t: int  # 1-based step count within its episode
    ag: np.ndarray  # achieved goal of the *next* observation: r_t depends on s_{t+1}
    dg: np.ndarray
    prev_ag: np.ndarray
    prev_dg: np.ndarray
    reward: Any
    terminated: bool
    truncated: bool
    info: Any


class _Context:
    """Everything the checks share: the env, the functions found on it, one recorded rollout."""

    def __init__(self, env: Any, n_steps: int, seed: int) -> None:
        self.env = env
        self.n_steps = n_steps
        self.seed = seed
        self.vector = isinstance(env, gym.vector.VectorEnv)
        self.num_envs = int(env.num_envs) if self.vector else 1
        self.layers = _layers(env)
        self.space = env.single_observation_space if self.vector else env.observation_space
        self.rng = np.random.default_rng(seed)
        self.action_space = copy.deepcopy(env.action_space)  # never reseed the user's own space
        self.action_space.seed(seed)
        self.autoreset = "NextStep"
        if self.vector:
            mode = env.metadata.get("autoreset_mode", "NextStep")
            self.autoreset = str(getattr(mode, "value", mode))
        self.actions: list[Any] = []
        self.events: list[_Event] | None = None
        self.transitions: list[_Transition] = []
        self._fns: dict[str, tuple[Callable[..., Any], str, int] | None] = {}
        self._replays: dict[bool, str | None] = {}
        self._probe: dict[str, Any] | None = None
        self._goal_space: gym.Space | None = None

    # ---- looking things up -------------------------------------------------------------------------

    def find(self, name: str) -> tuple[Callable[..., Any], str, int] | None:
        """``(function, provider name, layer index)`` the way ``get_wrapper_attr`` resolves it, or None.

        The layer index says where in :attr:`layers` the function lives (``len(layers)`` for a
        vector env's sub-env 0, where SB3's ``env_method(..., indices=[0])`` would find it).
        """
        if name not in self._fns:
            found = None
            for i, layer in enumerate(self.layers):
                fn = getattr(layer, name, None)
                if callable(fn):
                    found = (fn, _name(layer), i)
                    break
            sub_envs = getattr(self.layers[-1], "envs", None)
            if found is None and self.vector and sub_envs:
                for layer in _layers(sub_envs[0]):
                    fn = getattr(layer, name, None)
                    if callable(fn):
                        found = (fn, f"{_name(layer)} (sub-env 0)", len(self.layers))
                        break
            self._fns[name] = found
        return self._fns[name]

    def fn(self, name: str) -> Callable[..., Any]:
        found = self.find(name)
        if found is None:
            raise _Skip(f"the env defines no {name}")
        return found[0]

    @property
    def goal_space(self) -> gym.Space:
        if self._goal_space is None:
            self._goal_space = copy.deepcopy(self.space["desired_goal"])
            self._goal_space.seed(self.seed + 1)
        return self._goal_space

    def random_goals(self, n: int) -> np.ndarray:
        return np.asarray([self.goal_space.sample() for _ in range(n)])

    def max_episode_steps(self) -> int | None:
        """The step limit of a ``TimeLimit`` wrapper (on the env or a vector env's sub-envs), if any."""
        chains = [self.layers]
        sub_envs = getattr(self.layers[-1], "envs", None)
        if sub_envs:
            chains.append(_layers(sub_envs[0]))
        for chain in chains:
            for layer in chain:
                if isinstance(layer, gym.wrappers.TimeLimit):
                    return int(layer._max_episode_steps)
        spec = getattr(self.env, "spec", None)
        return getattr(spec, "max_episode_steps", None) if self.vector else None

    # ---- running the env ---------------------------------------------------------------------------

    def _run(self, actions: Sequence[Any] | None, on_step: Callable[[int, Any], None] | None) -> list[_Event]:
        """Reset with the seed and take ``n_steps`` steps; a new episode starts whenever one ends.

        With ``actions=None`` new actions are sampled (and kept in :attr:`actions`); otherwise the
        given ones are replayed. ``on_step(k, last_info)`` runs just before the k-th step.
        """
        env = self.env
        obs, info = env.reset(seed=self.seed)
        events = [_Event("reset", _copy_obs(obs), obs, _copy_info(info))]
        for k in range(self.n_steps):
            if actions is None:
                action = self.action_space.sample()
                self.actions.append(action)
            else:
                action = actions[k]
            if on_step is not None:
                on_step(k, events[-1].info)
            obs, reward, terminated, truncated, info = env.step(action)
            events.append(
                _Event("step", _copy_obs(obs), obs, _copy_info(info), np.copy(reward), terminated, truncated)
            )
            done = np.logical_or(terminated, truncated)
            # A single env must be reset by hand; so must a vector env that does not autoreset.
            if np.any(done) and (not self.vector or self.autoreset == "Disabled"):
                obs, info = env.reset()
                events.append(_Event("reset", _copy_obs(obs), obs, _copy_info(info)))
        return events

    def record(self) -> None:
        self.events = self._run(None, None)
        self.transitions = self._vector_transitions() if self.vector else self._single_transitions()

    def replay(self, interleave: bool) -> str | None:
        """Replay the recorded actions from the same seed; describe the first difference, or None.

        With ``interleave`` the goal functions are called on random goals before every step, the
        way a replay buffer calls them between environment steps.
        """
        if interleave not in self._replays:
            assert self.events is not None
            hook = self._interleave if interleave else None
            events = self._run(self.actions, hook)
            self._replays[interleave] = None
            for i, (want, got) in enumerate(zip(self.events, events, strict=True)):
                what = None
                if not _same(want.obs, got.obs):
                    what = f"observation key {_first_difference(want.obs, got.obs)}"
                elif want.kind == "step" and not _same(want.reward, got.reward):
                    what = f"reward ({_fmt(want.reward)} vs {_fmt(got.reward)})"
                elif want.kind == "step" and not (
                    _same(want.terminated, got.terminated) and _same(want.truncated, got.truncated)
                ):
                    what = "terminated/truncated flags"
                if what is not None:
                    k = sum(e.kind == "step" for e in self.events[: i + 1])
                    where = f"the reset after step {k}" if want.kind == "reset" else f"step {k}"
                    if i == 0:
                        where = "the first reset"
                    self._replays[interleave] = f"{where}: {what}"
                    break
        return self._replays[interleave]

    def _interleave(self, k: int, last_info: Any) -> None:
        n = 4
        ag, dg = self.random_goals(n), self.random_goals(n)
        infos = [last_info] * n
        for name in ("compute_reward", "compute_terminated", "compute_truncated"):
            found = self.find(name)
            if found is None:
                continue
            # last_info may be a reset's info, which goal functions need not understand: no warnings.
            with _QuietGoalFunctions():
                for args in ((ag, dg, infos), (ag[0], dg[0], last_info)):
                    try:
                        found[0](*args)
                    except Exception:  # noqa: BLE001, S112 - a raising function is reported by its own check
                        continue

    # ---- turning raw events into transitions -------------------------------------------------------

    def _single_transitions(self) -> list[_Transition]:
        assert self.events is not None
        out: list[_Transition] = []
        episode, t, step, prev = -1, 0, -1, None
        for ev in self.events:
            if ev.kind == "reset":
                episode, t, prev = episode + 1, 0, ev.obs
                continue
            step, t = step + 1, t + 1
            out.append(
                _Transition(
                    step, 0, episode, t, _goal(ev.obs, "achieved_goal"), _goal(ev.obs, "desired_goal"),
                    _goal(prev, "achieved_goal"), _goal(prev, "desired_goal"), ev.reward,
                    bool(ev.terminated), bool(ev.truncated), ev.info,
                )
            )  # fmt: skip
            prev = ev.obs
        return out

    def _vector_transitions(self) -> list[_Transition]:
        """Split a vector rollout into per-sub-env transitions, leaving out the autoreset steps.

        In ``NextStep`` mode (Gymnasium's default) the step after a sub-env ends only resets it: its
        reward is 0 and its observation is a reset observation, so it is no transition. In
        ``SameStep`` mode the step that ends an episode returns the reset observation and puts the
        real next observation and info in ``info["final_obs"]`` / ``info["final_info"]``.
        """
        assert self.events is not None
        n = self.num_envs
        out: list[_Transition] = []
        next_episode = 0
        episode = [0] * n
        t = [0] * n
        prev: list[Any] = [None] * n
        pending = np.zeros(n, dtype=bool)
        step = -1

        def new_episode(i: int, obs_i: Any) -> None:
            nonlocal next_episode
            episode[i], t[i], prev[i] = next_episode, 0, obs_i
            next_episode += 1

        for ev in self.events:
            if ev.kind == "reset":
                for i in range(n):
                    new_episode(i, _slice_obs(ev.obs, i))
                pending[:] = False
                continue
            step += 1
            terminated = np.asarray(ev.terminated, dtype=bool).reshape(n)
            truncated = np.asarray(ev.truncated, dtype=bool).reshape(n)
            rewards = np.asarray(ev.reward).reshape(n)
            valid = np.ones(n, dtype=bool)
            for i in range(n):
                obs_i = _slice_obs(ev.obs, i)
                if self.autoreset == "NextStep" and pending[i]:
                    valid[i] = False
                    pending[i] = False
                    new_episode(i, obs_i)
                    continue
                done = bool(terminated[i] or truncated[i])
                info_i = _slice_info(ev.info, i)
                next_obs = obs_i
                if self.autoreset == "SameStep" and done:
                    valid[i] = False  # the batch holds the reset observation, not s_{t+1}
                    # SyncVectorEnv gives an object array of dicts; a native vector env may give a dict
                    # of batched arrays (BitFlipVectorEnv does): _slice_obs reads both.
                    next_obs = _slice_obs(ev.info["final_obs"], i)
                    info_i = _slice_info(ev.info.get("final_info", {}), i)
                t[i] += 1
                out.append(
                    _Transition(
                        step, i, episode[i], t[i], _goal(next_obs, "achieved_goal"),
                        _goal(next_obs, "desired_goal"), _goal(prev[i], "achieved_goal"),
                        _goal(prev[i], "desired_goal"), rewards[i], bool(terminated[i]),
                        bool(truncated[i]), info_i,
                    )
                )  # fmt: skip
                prev[i] = next_obs
                if done and self.autoreset == "SameStep":
                    new_episode(i, obs_i)
                pending[i] = done
            ev.valid = valid
        return out

    # ---- the probe batch the function checks share -------------------------------------------------

    def probe(self) -> dict[str, Any]:
        """Rows of (achieved goal, desired goal, info) drawn from the rollout, HER-style.

        Row k pairs a recorded next achieved goal with, by ``k % 4``: its own desired goal, itself
        (a success), another recorded achieved goal (what the "future" strategy relabels with),
        or a random goal from the desired_goal space.
        """
        if self._probe is None:
            if not self.transitions:
                raise _Skip("the rollout has no transitions")
            size = max(_N_PROBE, self.num_envs)
            idx = self.rng.integers(0, len(self.transitions), size=size)
            other = self.rng.integers(0, len(self.transitions), size=size)
            ag = np.stack([self.transitions[i].ag for i in idx])
            dg = np.stack([self.transitions[i].dg for i in idx])
            other_ag = np.stack([self.transitions[i].ag for i in other])
            random = self.random_goals(size).astype(dg.dtype, copy=False).reshape(dg.shape)
            kind = np.arange(size) % 4
            mixed = dg.copy()
            for k, source in ((1, ag), (2, other_ag), (3, random)):
                mixed[kind == k] = source[kind == k]
            self._probe = {
                "ag": ag, "dg": dg, "other": other_ag, "random": random, "mixed": mixed,
                "infos": [self.transitions[i].info for i in idx],
            }  # fmt: skip
        return self._probe


def _goal(obs: Any, key: str) -> np.ndarray:
    if not isinstance(obs, Mapping) or key not in obs:
        raise _Skip(f"observations have no {key!r} entry")
    return np.asarray(obs[key])


def _slice_obs(obs: Any, i: int) -> Any:
    if isinstance(obs, Mapping):
        return {k: _slice_obs(v, i) for k, v in obs.items()}
    return np.asarray(obs)[i]


def _slice_info(infos: Any, i: int) -> dict[str, Any]:
    """Sub-env ``i``'s info from a vector env's dict of arrays (each key masked by ``"_" + key``)."""
    out: dict[str, Any] = {}
    if not isinstance(infos, Mapping):
        return out
    for key, value in infos.items():
        if key.startswith("_") or key in ("final_obs", "final_info"):
            continue
        mask = infos.get("_" + key)
        if mask is not None and not np.asarray(mask)[i]:
            continue
        if isinstance(value, Mapping):
            out[key] = _slice_info(value, i)
        else:
            try:
                out[key] = value[i]
            except (TypeError, IndexError, KeyError):
                out[key] = value
    return out


# --------------------------------------------------------------------------------------------------
# The checks. Each returns (status, message); the name is the function's without "check_".

Verdict = tuple[Status, str]

_FIX_PURE = (
    "Fix: compute the result from the arguments alone (no self.goal, self.state, self.np_random, no "
    "counters or caches), reducing over the last axis only."
)


def check_observation_space(ctx: _Context) -> Verdict:
    """Dict space with the three keys; achieved and desired goal spaces of equal shape and dtype."""
    try:
        check_goal_space(ctx.space)
    except GoalEnvError as err:
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


def check_wrapper_keeps_goals(ctx: _Context) -> Verdict:
    """No wrapper above the layer that defines compute_reward changes the goals it is fed."""
    found = ctx.find("compute_reward")
    if found is None:
        raise _Skip("the env defines no compute_reward")
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
                f"the vector env's observations ({_describe_space(ctx.space)}) differ from what "
                f"{provider_name}, which defines compute_reward, produces "
                f"({_describe_space(provider_space)}): a wrapper changes them. Fix: keep "
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
        names = ", ".join(_name(w) for w in changers)
        return "fail", (
            f"wrapper {names} changes the observation space above {provider_name}, which defines "
            f"compute_reward: {_describe_space(provider.observation_space)} becomes "
            f"{_describe_space(ctx.layers[0].observation_space)}. " + fix
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
                out = w.observation(_copy_obs(sample))
            except Exception:  # noqa: BLE001, S112 - an observation() that needs env state: rollout checks judge it
                continue
            for key in ("achieved_goal", "desired_goal"):
                if not isinstance(out, Mapping) or key not in out or not _same(out[key], sample[key]):
                    got = out.get(key) if isinstance(out, Mapping) else out
                    return "fail", (
                        f"wrapper {_name(w)} changes {key} ({_fmt(sample[key])} becomes {_fmt(got)}) above "
                        f"{provider_name}, which defines compute_reward. " + fix
                    )
    names = ", ".join(_name(w) for w in above)
    return (
        "pass",
        f"wrappers {names} above {provider_name} (which defines compute_reward) keep the goals as they are.",
    )


def check_compute_reward_defined(ctx: _Context) -> Verdict:
    found = ctx.find("compute_reward")
    if found is None and ctx.vector and not getattr(ctx.layers[-1], "envs", None):
        return "fail", (
            f"{_name(ctx.layers[-1])} defines no compute_reward and its sub-envs are out of reach (another "
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
    return "pass", f"compute_reward found on {found[1]}."


def check_rollout(ctx: _Context) -> Verdict:
    """Record the rollout every later check reads (reset with the seed, then n_steps random actions)."""
    try:
        ctx.record()
    except _Skip:
        raise
    except Exception as err:  # noqa: BLE001 - any error of the env itself is the verdict
        return "fail", (
            f"reset/step raised {type(err).__name__}: {err}. Fix the env so that reset(seed=...) and "
            f"step(action_space.sample()) run; nothing else can be checked before that."
        )
    episodes = len({(tr.episode) for tr in ctx.transitions})
    unit = "vector steps" if ctx.vector else "steps"
    return "pass", (
        f"reset(seed={ctx.seed}) and {ctx.n_steps} {unit} with random actions ran "
        f"({len(ctx.transitions)} transitions, {episodes} episode(s))."
    )


def check_observations_in_space(ctx: _Context) -> Verdict:
    assert ctx.events is not None
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
                value = np.asarray(ev.obs[key])
                if not sub.contains(ev.obs[key]):
                    detail = (
                        f"{key!r} = {_fmt(value)} (shape {value.shape}, dtype {value.dtype}) is outside {sub}"
                    )
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


def check_observations_not_aliased(ctx: _Context) -> Verdict:
    """Observations once returned never change (they are not views of the env's state)."""
    assert ctx.events is not None
    for k, ev in enumerate(ctx.events):
        if not _same(ev.obs_ref, ev.obs):
            n_step = sum(e.kind == "step" for e in ctx.events[: k + 1])
            return "fail", (
                f"the observation returned after {n_step} step(s) changed later: "
                f"{_first_difference(ev.obs, ev.obs_ref)}. The env returns views of its own state "
                "(e.g. {'achieved_goal': self.pos}), so a buffer that keeps the returned arrays (HER "
                "episode storage does) sees stored goals move. Fix: return copies (self.pos.copy())."
            )
    return "pass", "observations, once returned, are never modified by later steps."


def check_desired_goal_fixed(ctx: _Context) -> Verdict:
    for tr in ctx.transitions:
        if not _same(tr.dg, tr.prev_dg):
            sub = f" of sub-env {tr.env_index}" if ctx.vector else ""
            return "fail", (
                f"desired_goal changed within an episode{sub} at its step {tr.t} without a reset "
                f"({_fmt(tr.prev_dg)} -> {_fmt(tr.dg)}). HER assumes one goal per episode: it relabels "
                "with goals achieved later in the same episode. Likely cause: the goal is resampled "
                "when reached (a continuing task) or drifts with the state. Fix: keep the goal until "
                "reset, or end the episode (terminated=True) when a new goal is drawn."
            )
    episodes = len({(tr.env_index, tr.episode) for tr in ctx.transitions})
    return "pass", f"desired_goal stayed fixed within each of the {episodes} episode(s)."


def check_is_success(ctx: _Context) -> Verdict:
    infos = [tr.info for tr in ctx.transitions]
    have = [isinstance(i, Mapping) and "is_success" in i for i in infos]
    if all(have):
        bad = [i["is_success"] for i in infos if np.asarray(i["is_success"]).astype(float) not in (0.0, 1.0)]
        if bad:
            return "warn", (
                f"info['is_success'] is not boolean (e.g. {_fmt(bad[0])}); success rates averaged from "
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


def check_achieved_goal_in_desired_space(ctx: _Context) -> Verdict:
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
                f"achieved goal {_fmt(tr.ag)} (step {tr.step}) lies outside the desired_goal space "
                f"{dg_space}. HER puts achieved goals where desired goals go, so relabelled observations "
                "leave the space (a policy normalising by its bounds sees out-of-range inputs). Fix: make "
                "the desired_goal space cover every achievable goal."
            )
    return "pass", "every achieved goal also lies in the desired_goal space (HER relabels with them)."


# Wrappers that pass observations and rewards through untouched.
_PASS_THROUGH = (
    gym.wrappers.TimeLimit, gym.wrappers.OrderEnforcing, gym.wrappers.PassiveEnvChecker,
    gym.wrappers.RecordEpisodeStatistics,
)  # fmt: skip


def _wrapper_hint(ctx: _Context) -> str:
    found = ctx.find("compute_reward")
    if found is None or found[2] == 0 or found[2] >= len(ctx.layers):
        return ""
    suspects = [w for w in ctx.layers[: found[2]] if not isinstance(w, _PASS_THROUGH)]
    if not suspects:
        return ""
    names = ", ".join(_name(w) for w in suspects)
    return (
        f" The env is wrapped by {names} above {found[1]}, which defines compute_reward: a wrapper that "
        "changes goals or rewards without its own compute_reward breaks the contract."
    )


def check_reward_contract(ctx: _Context) -> Verdict:
    """``reward == compute_reward(next achieved goal, desired goal, info)`` at every step."""
    fn = ctx.fn("compute_reward")
    bad: list[tuple[_Transition, float]] = []
    for tr in ctx.transitions:
        reward = np.asarray(tr.reward, dtype=np.float64)
        if reward.size != 1 or not np.isfinite(reward).all():
            return "fail", (
                f"step {tr.step} returned reward {_fmt(tr.reward)}; a reward must be one finite number. "
                "Fix: return a float (NaN usually comes from a division by a zero distance)."
            )
        try:
            value = _call(fn, tr.ag, tr.dg, tr.info)
        except Exception as err:  # noqa: BLE001
            return "fail", (
                f"compute_reward(achieved_goal, desired_goal, info) raised {type(err).__name__}: {err} "
                f"when called with step {tr.step}'s next achieved goal, desired goal and info. Fix: make "
                "it accept exactly what step returns."
            )
        if value.size != 1 or not _close(value.reshape(()), reward.reshape(())):
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
    try:
        before = _call(fn, tr.prev_ag, tr.dg, tr.info)
        if before.size == 1 and _close(before.reshape(()), np.asarray(tr.reward, dtype=np.float64)):
            cause = (
                " The step reward equals compute_reward of the achieved goal *before* the step: step "
                "computes the reward before applying the action, but r_t depends on s_{t+1}."
            )
    except Exception:  # noqa: BLE001 - the better cause is optional
        pass
    return "fail", (
        f"at {len(bad)} of {len(ctx.transitions)} steps the reward from step differs from compute_reward("
        f"obs['achieved_goal'], obs['desired_goal'], info); first at step {tr.step}: step gave "
        f"{_fmt(tr.reward)}, compute_reward gives {_fmt(value)}.{cause}{_wrapper_hint(ctx)} "
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
    ctx: _Context, fn_name: str, goals: tuple[np.ndarray, np.ndarray], infos: list[Any]
) -> Verdict:
    """Batches of several sizes give shape (B,) and equal the one-at-a-time results."""
    fn = ctx.fn(fn_name)
    ag, dg = goals
    singles, shapes = [], set()
    for k in range(len(ag)):
        try:
            value = _call(fn, ag[k], dg[k], infos[k])
        except Exception as err:  # noqa: BLE001
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
        for form, batch_infos in (("a list", list(infos[:b])), ("an object array", _object_array(infos[:b]))):
            where = f"a batch of {b} (goals of shape {ag[:b].shape}, infos as {form} of {b} dicts)"
            try:
                value = _call(fn, ag[:b], dg[:b], batch_infos)
            except Exception as err:  # noqa: BLE001
                return "fail", (
                    f"{fn_name} raised {type(err).__name__}: {err} on {where}. HER calls it on batches of "
                    "stored transitions. Likely cause: code written for one goal (float(), bool(), "
                    "indexing goal[0], reading info['key'] directly). Fix: use array operations over the "
                    "last axis and read infos as a batch (goalenvs.info_values does)."
                )
            if value.shape == (b,):
                if not _close(value, ref[:b]):
                    i = int(np.flatnonzero(~np.isclose(value.astype(float), ref[:b].astype(float)))[0])
                    return "fail", (
                        f"{fn_name} on {where} differs from one-at-a-time calls at row {i}: {_fmt(value[i])} "
                        f"vs {_fmt(ref[i])}. Likely cause: a reduction that mixes rows (norm/sum without "
                        "axis=-1) or state kept between rows. Fix: reduce over axis=-1 only."
                    )
                continue
            try:
                broadcast_ok = _close(np.broadcast_to(value, (b,)), ref[:b])
            except ValueError:
                broadcast_ok = False
            if broadcast_ok:
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


def check_compute_reward_vectorized(ctx: _Context) -> Verdict:
    probe = ctx.probe()
    return _vectorized(ctx, "compute_reward", (probe["ag"], probe["mixed"]), probe["infos"])


def check_vector_batch_reward(ctx: _Context) -> Verdict:
    """On a vector env's step batch, compute_reward has shape (num_envs,) and equals the rewards."""
    if not ctx.vector:
        raise _NotApplicable("only for vector envs")
    fn = ctx.fn("compute_reward")
    assert ctx.events is not None
    n = ctx.num_envs
    for k, ev in enumerate(e for e in ctx.events if e.kind == "step"):
        if ev.valid is None or not ev.valid.any():
            continue
        try:
            value = _call(fn, _goal(ev.obs, "achieved_goal"), _goal(ev.obs, "desired_goal"), ev.info)
        except Exception as err:  # noqa: BLE001
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
        if not _close(value[mask], np.asarray(ev.reward).reshape(n)[mask]):
            return "fail", (
                f"at vector step {k}, compute_reward on the batch gives {_fmt(value)} but step returned "
                f"{_fmt(ev.reward)}. Fix: have step return compute_reward of its own observation batch."
            )
    return "pass", f"compute_reward on each ({n},) step batch equals the vector env's rewards."


def check_compute_reward_pure(ctx: _Context) -> Verdict:
    """Calls with random goals change neither its later answers, its arguments, nor the env's transitions."""
    fn = ctx.fn("compute_reward")
    probe = ctx.probe()
    ag, dg, infos = probe["ag"][:8], probe["mixed"][:8], probe["infos"][:8]
    try:
        before = [_call(fn, ag[k], dg[k], infos[k]) for k in range(len(ag))]
        ag_in, dg_in, infos_in = ag.copy(), dg.copy(), _copy_info(list(infos))
        fn(ag_in, dg_in, infos_in)
        for _ in range(3):
            g1, g2 = ctx.random_goals(len(ag)), ctx.random_goals(len(ag))
            fn(g1, g2, list(infos))
            fn(g1[0], g2[0], infos[0])
        after = [_call(fn, ag[k], dg[k], infos[k]) for k in range(len(ag))]
    except Exception as err:  # noqa: BLE001
        raise _Skip(
            f"compute_reward raised {type(err).__name__}; see the other compute_reward checks"
        ) from err
    if not (_same(ag_in, ag) and _same(dg_in, dg)):
        return "fail", (
            "compute_reward writes into its achieved_goal/desired_goal arguments. HER passes views of "
            "its storage, so stored goals get corrupted. Likely cause: in-place operations such as "
            "achieved_goal -= desired_goal. Fix: work on new arrays (d = achieved_goal - desired_goal)."
        )
    if not _same(infos_in, list(infos)):
        return "fail", (
            "compute_reward modifies the info dicts it is given; HER passes stored infos, so they get "
            "corrupted. Fix: read infos, never write them."
        )
    for k in range(len(ag)):
        if not _same(before[k], after[k]):
            return "fail", (
                f"compute_reward gave {_fmt(before[k])} for the same arguments before and {_fmt(after[k])} "
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
        f"calling compute_reward/compute_terminated/compute_truncated with random goals between steps "
        "changed "
        f"the env's transitions (replayed from the same seed and actions; first difference at {diff}). A "
        "replay buffer calls these between env steps, so the env would behave differently under HER. Likely "
        "cause: they set env state (self.goal = desired_goal) or draw from self.np_random. " + _FIX_PURE
    )


def check_reward_depends_on_goals(ctx: _Context) -> Verdict:
    """compute_reward reads its goal arguments (and not the env's own goal or state)."""
    fn = ctx.fn("compute_reward")
    p = ctx.probe()
    ag, dg, infos = p["ag"], p["dg"], p["infos"]

    def rewards(a: np.ndarray, d: np.ndarray) -> np.ndarray:
        return np.asarray([float(_call(fn, a[k], d[k], infos[k]).reshape(-1)[0]) for k in range(len(a))])

    try:
        base = rewards(ag, dg)
        dg_variants = [rewards(ag, ag), rewards(ag, p["other"]), rewards(ag, p["random"])]
        ag_variants = [rewards(dg, dg), rewards(p["random"], dg)]
    except Exception as err:  # noqa: BLE001
        raise _Skip(
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


def check_best_reward_at_goal(ctx: _Context) -> Verdict:
    """The reward for achieved_goal == desired_goal is the best reward (advice)."""
    fn = ctx.fn("compute_reward")
    p = ctx.probe()
    ag, infos = p["ag"], p["infos"]
    try:
        at_goal = np.asarray(
            [float(_call(fn, ag[k], ag[k], infos[k]).reshape(-1)[0]) for k in range(len(ag))]
        )
        others = np.asarray(
            [
                [float(_call(fn, ag[k], d[k], infos[k]).reshape(-1)[0]) for k in range(len(ag))]
                for d in (p["dg"], p["other"], p["random"])
            ]
        )
    except Exception as err:  # noqa: BLE001
        raise _Skip(
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


def _flag_check(ctx: _Context, fn_name: str, flag: Literal["terminated", "truncated"]) -> Verdict:
    found = ctx.find(fn_name)
    if found is None:
        return "pass", f"not defined (optional); step's {flag} flags are taken as they are."
    fn = found[0]
    limit = ctx.max_episode_steps() if flag == "truncated" else None
    for tr in ctx.transitions:
        stepped = tr.terminated if flag == "terminated" else tr.truncated
        try:
            value = _call(fn, tr.ag, tr.dg, tr.info)
        except Exception as err:  # noqa: BLE001
            return "fail", (
                f"{fn_name} raised {type(err).__name__}: {err} when called with step {tr.step}'s next "
                "achieved goal, desired goal and info. Fix: make it accept what step returns."
            )
        if value.size != 1:
            return "fail", f"{fn_name} on a single transition returns shape {value.shape}, not a scalar."
        computed = bool(value.reshape(-1)[0])
        if computed == stepped:
            continue
        if flag == "truncated" and stepped and limit is not None and tr.t >= limit:
            continue  # a TimeLimit wrapper truncated it; compute_truncated cannot know about wrappers
        return "fail", (
            f"at step {tr.step} (step {tr.t} of its episode) step returned {flag}={stepped} but {fn_name} "
            f"gives {computed}. Buffers that recompute {flag} for relabelled goals would disagree with the "
            f"env. Fix: have step return self.{fn_name}(obs['achieved_goal'], obs['desired_goal'], info)."
        )
    probe = ctx.probe()
    verdict = _vectorized(ctx, fn_name, (probe["ag"], probe["mixed"]), probe["infos"])
    if verdict[0] != "pass":
        return verdict
    return "pass", f"{fn_name} agrees with step's {flag} at every step and is vectorized ({verdict[1]})"


def check_compute_terminated(ctx: _Context) -> Verdict:
    return _flag_check(ctx, "compute_terminated", "terminated")


def check_compute_truncated(ctx: _Context) -> Verdict:
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
        with _QuietGoalFunctions():
            try:
                _call(fn, ag, dg, list(infos))
                works = True
            except Exception:  # noqa: BLE001 - then the step infos cannot tell which keys matter
                works = False
            for key in keys if works else ():
                try:
                    _call(fn, ag, dg, [{k: v for k, v in info.items() if k != key} for info in dicts])
                except Exception:  # noqa: BLE001
                    needed.append(key)
    if not needed:
        if isinstance(err, KeyError) and err.args and isinstance(err.args[0], str) and " " not in err.args[0]:
            needed = [err.args[0]]  # info["key"] on a dict that lacks it
        else:  # a message that quotes the key, e.g. goalenvs.info_values' "... has no 'key' entry"
            needed = sorted(set(re.findall(r"'([^']+)'", str(err))) & set(keys))
    return needed


def check_empty_infos(ctx: _Context) -> Verdict:
    """compute_* accept the infos stable-baselines3's HerReplayBuffer passes by default (empty dicts)."""
    probe = ctx.probe()
    ag, dg, step_infos = probe["ag"], probe["mixed"], probe["infos"]
    empty = [{} for _ in range(len(ag))]
    raised: list[tuple[str, Exception, list[str]]] = []
    warned: list[tuple[str, str]] = []
    names = [n for n in ("compute_reward", "compute_terminated", "compute_truncated") if ctx.find(n)]
    for name in names:
        fn = ctx.fn(name)
        with _QuietGoalFunctions() as caught:
            try:
                _call(fn, ag, dg, empty)
            except Exception as err:  # noqa: BLE001
                raised.append((name, err, _needed_info_keys(fn, ag, dg, step_infos, err)))
                continue
        if caught:
            warned.append((name, str(caught[0].message)))
    if raised:
        first, err, _ = raised[0]
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
            f"{_and(which)} raised on {_SB3_DEFAULT_INFOS}: {first} raised {type(err).__name__}: {err}. {need} "
            f"So {' and '.join(effects)}. Fix: read each info key with a default where it is missing "
            "(goalenvs.info_values(info, key, batch_shape, default=...)) and warn once that its term is "
            "lost in relabelling; or tell users to pass replay_buffer_kwargs=dict(copy_info_dict=True)."
        )
    message = f"{_and(names)} accept {_SB3_DEFAULT_INFOS}."
    if warned:
        text = " ".join(warned[0][1].split())
        text = text if len(text) <= 300 else text[:297] + "..."
        message += f" {_and([name for name, _ in warned])} warned then; the first: {text}"
    return "pass", message


def check_reset_seeding(ctx: _Context) -> Verdict:
    """reset(seed=s) twice gives the same observation (and the one the rollout started from)."""
    assert ctx.events is not None
    try:
        first, _ = ctx.env.reset(seed=ctx.seed)
        first = _copy_obs(first)
        second, _ = ctx.env.reset(seed=ctx.seed)
    except Exception as err:  # noqa: BLE001
        return "fail", f"reset(seed={ctx.seed}) raised {type(err).__name__}: {err}."
    for a, b in ((first, second), (ctx.events[0].obs, first)):
        if not _same(a, b):
            return "fail", (
                f"reset(seed={ctx.seed}) gave different observations on two calls: "
                f"{_first_difference(a, b)}. Likely cause: reset does not pass the seed on "
                "(super().reset(seed=seed)) or draws from global np.random / an unseeded generator. Fix: "
                "call super().reset(seed=seed) first and draw every random number from self.np_random."
            )
    return "pass", f"reset(seed={ctx.seed}) gives the same observation every time."


def check_rollout_determinism(ctx: _Context) -> Verdict:
    """The same seed and actions replay the same transitions (advice: HER experiments stay reproducible)."""
    # A replay that matched with compute_* calls interleaved proves determinism too; only replay again if not.
    diff = ctx._replays.get(True, "unknown")
    if diff is not None:
        diff = ctx.replay(interleave=False)
    if diff is None:
        return "pass", f"replaying the same actions after reset(seed={ctx.seed}) gives identical transitions."
    return "warn", (
        f"replaying the same actions after reset(seed={ctx.seed}) gives different transitions (first at "
        f"{diff}). Runs cannot be reproduced. Likely cause: randomness drawn from global np.random/random, "
        "time, or an unseeded generator. Fix: draw every random number from self.np_random."
    )


def _copy_check(ctx: _Context, how: str, clone: Callable[[Any], Any], recipe_status: Status) -> Verdict:
    """The copy steps exactly like the original: as a snapshot, or else from the same seeded reset.

    ``gymnasium.utils.EzPickle`` (used by Gymnasium-Robotics and others) pickles an env as its
    constructor arguments, so the copy is a fresh env that needs a reset: a recipe, not a snapshot.
    """
    env = ctx.env
    env.reset(seed=ctx.seed)
    space = copy.deepcopy(ctx.action_space)
    space.seed(ctx.seed + 2)
    for _ in range(2):
        done = env.step(space.sample())[2:4]
        if np.any(np.logical_or(*done)) and (not ctx.vector or ctx.autoreset == "Disabled"):
            env.reset()
    try:
        twin = clone(env)
    except Exception as err:  # noqa: BLE001
        return "fail", (
            f"{how} raised {type(err).__name__}: {err}. Saving, forking (SubprocVecEnv) and snapshotting "
            "an env for reproducible experiments need it. Likely cause: an attribute holding a lambda, "
            "an open file, a lock or a live simulator handle. Fix: keep such things out of the env or "
            "implement __getstate__/__setstate__ (or __deepcopy__)."
        )
    action = space.sample()
    want = env.step(action)
    try:
        got = twin.step(action)
        snapshot_diff = _step_difference(want, got)
    except Exception as err:  # noqa: BLE001
        snapshot_diff = f"the copy cannot step before a reset ({type(err).__name__}: {err})"
    if snapshot_diff is None:
        return "pass", f"{how} gives an independent snapshot that steps exactly like the original."
    try:
        first = env.reset(seed=ctx.seed + 3)[0]
        second = twin.reset(seed=ctx.seed + 3)[0]
        recipe_diff = (
            None if _same(first, second) else f"reset observation {_first_difference(first, second)}"
        )
        recipe_diff = recipe_diff or _step_difference(env.step(action), twin.step(action))
    except Exception as err:  # noqa: BLE001
        recipe_diff = f"{type(err).__name__}: {err}"
    if recipe_diff is None:
        return recipe_status, (
            f"{how} is not a snapshot of the env's state ({snapshot_diff}) but a fresh env that, after "
            "the same reset(seed=...), steps exactly like the original (as gymnasium.utils.EzPickle "
            "makes it). Enough to save or fork an env; to snapshot one mid-episode, implement "
            "__getstate__/__setstate__ (or __deepcopy__) that copy the simulator state."
        )
    return "fail", (
        f"after {how}, the copy and the original disagree: as a snapshot, {snapshot_diff}; after the same "
        f"seeded reset, {recipe_diff}. Likely cause: the copy shares mutable state with the original (a "
        "simulator handle, a random generator) or loses part of it. Fix: make every piece of state "
        "copyable, or implement __deepcopy__/__getstate__ that copies it."
    )


def _step_difference(want: Sequence[Any], got: Sequence[Any]) -> str | None:
    labels = ("observation", "reward", "terminated", "truncated")
    for label, a, b in zip(labels, want[:4], got[:4], strict=True):
        if not _same(a, b):
            return f"different {label}s for the same action: {_first_difference(a, b)}"
    return None


def check_deepcopy(ctx: _Context) -> Verdict:
    if ctx.vector:
        raise _NotApplicable("vector envs are rebuilt from env functions; check a single env")
    return _copy_check(ctx, "copy.deepcopy(env)", copy.deepcopy, "warn")


def check_pickle(ctx: _Context) -> Verdict:
    if ctx.vector:
        raise _NotApplicable("vector envs are rebuilt from env functions; check a single env")
    return _copy_check(
        ctx, "pickle.loads(pickle.dumps(env))", lambda e: pickle.loads(pickle.dumps(e)), "pass"
    )


#: Every check, in the order it runs. Checks before ``check_rollout`` need no env steps.
CHECKS: tuple[Callable[[_Context], Verdict], ...] = (
    check_observation_space,
    check_wrapper_keeps_goals,
    check_compute_reward_defined,
    check_rollout,
    check_observations_in_space,
    check_observations_not_aliased,
    check_desired_goal_fixed,
    check_is_success,
    check_achieved_goal_in_desired_space,
    check_reward_contract,
    check_compute_reward_vectorized,
    check_vector_batch_reward,
    check_compute_reward_pure,
    check_reward_depends_on_goals,
    check_best_reward_at_goal,
    check_compute_terminated,
    check_compute_truncated,
    check_empty_infos,
    check_reset_seeding,
    check_rollout_determinism,
    check_deepcopy,
    check_pickle,
)

# The checks that can still say something useful when the observation space is not a goal space.
_WITHOUT_GOAL_SPACE = (check_wrapper_keeps_goals, check_compute_reward_defined)
_NEED_COMPUTE_REWARD = (
    check_reward_contract, check_compute_reward_vectorized, check_vector_batch_reward,
    check_compute_reward_pure, check_reward_depends_on_goals, check_best_reward_at_goal, check_empty_infos,
)  # fmt: skip


def _env_id(env: Any) -> str:
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    return _name(getattr(env, "unwrapped", env))


def check_goal_env(env: gym.Env | gym.vector.VectorEnv, *, n_steps: int = 200, seed: int = 0) -> CheckReport:
    """Check that ``env`` keeps the GoalEnv contract Hindsight Experience Replay relies on.

    Runs every function of :data:`CHECKS` on one recorded rollout of ``n_steps`` random actions
    from ``reset(seed=seed)`` (plus one replay of it and a few steps for the copy checks) and
    collects their verdicts. The env may be wrapped, need not inherit from
    :class:`goalenvs.GoalEnv`, and may be a ``gymnasium.vector.VectorEnv``. It is left usable:
    the last thing done to it is ``reset(seed=seed)``; it is not closed.

    Args:
        env: the environment to check.
        n_steps: how many steps (vector steps for a vector env) the rollout takes; at least 1.
        seed: seeds the env's resets, the random actions and the random goals.

    Returns:
        A :class:`CheckReport`; ``report.passed`` is False when a check failed, and
        ``report.raise_if_failed()`` turns that into a :class:`goalenvs.GoalEnvError`.
    """
    if not isinstance(env, (gym.Env, gym.vector.VectorEnv)):
        raise TypeError(
            f"env must be a gymnasium.Env or gymnasium.vector.VectorEnv, got {type(env).__name__}"
        )
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be an int >= 1, got {n_steps!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    ctx = _Context(env, int(n_steps), int(seed))
    report = CheckReport(env_id=_env_id(env), results=[])
    blocked: dict[Callable[[_Context], Verdict], str] = {}
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        if (check is check_vector_batch_reward and not ctx.vector) or (
            check in (check_deepcopy, check_pickle) and ctx.vector
        ):
            continue  # not applicable to this kind of env: leave it out of the report
        if check in blocked:
            report.skipped.append((name, blocked[check]))
            continue
        try:
            status, message = check(ctx)
        except _NotApplicable:
            continue
        except _Skip as why:
            report.skipped.append((name, str(why)))
            continue
        except Exception as err:  # noqa: BLE001 - the env raised somewhere the check did not expect
            status, message = "fail", f"the check stopped on {type(err).__name__}: {err} (raised by the env)."
        report.results.append(CheckResult(name, status, message))
        if status != "fail":
            continue
        if check is check_observation_space:
            for c in CHECKS:
                if c not in _WITHOUT_GOAL_SPACE and c is not check:
                    blocked.setdefault(c, "the observation space is not a goal space")
        elif check is check_compute_reward_defined:
            for c in _NEED_COMPUTE_REWARD:
                blocked.setdefault(c, "the env defines no compute_reward")
        elif check is check_rollout:
            for c in CHECKS[CHECKS.index(check_rollout) + 1 :]:
                blocked.setdefault(c, "the rollout failed")
    try:
        env.reset(seed=int(seed))
    except Exception:  # noqa: BLE001, S110 - a failing reset has been reported above
        pass
    return report
