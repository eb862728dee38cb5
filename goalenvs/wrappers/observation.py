"""Observation transforms that keep HER's relabelling right: normalisation, a time feature, a flat view.

An ordinary observation wrapper breaks HER silently: the buffer stores the wrapped goals, relabels
with them and hands them to the *inner* ``compute_reward``, which expects raw goals (SB3 issues
#854, #1015). These wrappers map goals back to the wrapped env's form inside ``compute_reward`` /
``compute_terminated`` / ``compute_truncated``, or leave the goals alone.

Why the normaliser's statistics are frozen
------------------------------------------
A replay buffer stores normalised goals now and calls ``compute_reward`` on them much later. If
the statistics moved in between, de-normalising a stored goal with the *new* statistics gives a
different raw goal than the one observed, so a relabelled reward is computed for a goal nobody
reached (and even the stored transition's own reward no longer equals ``compute_reward``:
``compute_reward`` stops being a pure function). No wrapper-side trick fixes this for data already
in the buffer. Two sound designs remain, and goalenvs supports both:

* freeze the statistics before any transition is stored: :class:`NormalizeGoalObservation` takes
  an immutable :class:`GoalStats`, fixed by hand, from the space's bounds, or estimated as running
  statistics over a warm-up rollout (:meth:`GoalStats.from_rollout`, :class:`RunningGoalStats`);
* or normalise at the algorithm's input and store raw observations, as the HER paper's normaliser
  and SB3's ``VecNormalize`` do (SB3's ``HerReplayBuffer`` computes rewards on the raw goals, then
  normalises): the statistics may then keep moving during training.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs._util import check_int, time_limit
from goalenvs.core import GOAL_KEYS, check_goal_space
from goalenvs.wrappers._base import GoalWrapper, goal_batch_shape, single_env_space

__all__ = [
    "FlattenGoalObservation",
    "GoalStats",
    "NormalizeGoalObservation",
    "RunningGoalStats",
    "TimeFeature",
]

#: Largest ``Discrete`` space the flat view one-hot encodes (a bigger one-hot is no input for a network).
MAX_ONE_HOT = 4096


# ---------------------------------------------------------------------------------------------------
# Statistics


def _finite_constant(x: Any, name: str) -> np.ndarray:
    """A read-only float64 copy of ``x``, refused (naming ``name``) unless finite."""
    a = np.array(x, dtype=np.float64)  # a copy: the caller cannot change it later either
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite, got {x!r}")
    a.setflags(write=False)
    return a


_NumericSpace = spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete


def _numeric(space: gym.Space, what: str) -> _NumericSpace:
    """``space`` if it is one the normaliser handles (Box, MultiBinary, MultiDiscrete), else a ValueError."""
    if isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)):
        return space
    raise ValueError(
        f"cannot normalise a {type(space).__name__} {what} space; NormalizeGoalObservation handles Box, "
        "MultiBinary and MultiDiscrete (a Discrete code is a category, not a magnitude: one-hot it with "
        "FlattenGoalObservation instead)"
    )


def _moments(space: gym.Space, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean and scale mapping a bounded space onto [-1, 1] per element."""
    space = _numeric(space, what)
    if isinstance(space, spaces.MultiBinary):
        return np.full(space.shape, 0.5), np.full(space.shape, 0.5)
    if isinstance(space, spaces.MultiDiscrete):
        span = (space.nvec - 1).astype(np.float64)
        return space.start + span / 2, np.maximum(span / 2, 0.5)
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError(
            f"the {what} space {space} is unbounded, so its bounds give no statistics; use "
            "GoalStats.from_rollout(env) (running statistics of a warm-up rollout) or give mean and std"
        )
    half = (high - low) / 2
    return low + half, np.where(half > 0, half, 1.0)


@dataclass(frozen=True)
class GoalStats:
    """Frozen normalisation statistics: ``(x - mean) / std`` per element.

    The goal statistics serve both ``achieved_goal`` and ``desired_goal``: HER moves achieved goals
    into the desired-goal slot, so both slots must be normalised alike. ``observation_mean`` /
    ``observation_std`` may be None to leave ``observation`` as it is. The arrays are read-only
    copies, so the statistics cannot drift after transitions were stored (see the module docstring).
    """

    goal_mean: np.ndarray
    goal_std: np.ndarray
    observation_mean: np.ndarray | None = None
    observation_std: np.ndarray | None = None

    def __post_init__(self) -> None:
        if (self.observation_mean is None) != (self.observation_std is None):
            raise ValueError("give both observation_mean and observation_std, or neither")
        for name in ("goal_mean", "goal_std", "observation_mean", "observation_std"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _finite_constant(value, name))
        for name in ("goal_std", "observation_std"):
            value = getattr(self, name)
            if value is not None and not np.all(value > 0):
                raise ValueError(f"{name} must be > 0 everywhere, got {value}")

    @classmethod
    def from_space(cls, observation_space: gym.Space, normalize_observation: bool = True) -> GoalStats:
        """Statistics that map the bounds of a goal env's (single) observation space onto [-1, 1]."""
        space = check_goal_space(observation_space)
        goal_mean, goal_std = _moments(space["desired_goal"], "desired_goal")
        if not normalize_observation:
            return cls(goal_mean, goal_std)
        obs_mean, obs_std = _moments(space["observation"], "observation")
        return cls(goal_mean, goal_std, obs_mean, obs_std)

    @classmethod
    def from_rollout(
        cls,
        env: gym.Env | gym.vector.VectorEnv,
        n_steps: int = 1000,
        seed: int = 0,
        normalize_observation: bool = True,
        min_std: float = 1e-2,
    ) -> GoalStats:
        """Running statistics of a random-action warm-up rollout of ``env``, then frozen.

        Resets ``env`` with ``seed`` and takes ``n_steps`` steps (vector steps for a vector env),
        starting new episodes as they end; do this before training, on the env or a copy of it.
        """
        check_int("n_steps", n_steps, 1)
        if isinstance(env, gym.vector.VectorEnv):
            vector, space = True, env.single_observation_space
        else:
            vector, space = False, env.observation_space
        running = RunningGoalStats(space, normalize_observation)
        actions = copy.deepcopy(env.action_space)
        actions.seed(seed)
        obs, _ = env.reset(seed=seed)
        running.update(obs)
        for _ in range(n_steps):
            obs, _, terminated, truncated, _ = env.step(actions.sample())
            running.update(obs)  # a vector env's autoreset observations are real starts: count them too
            if not vector and (terminated or truncated):
                obs, _ = env.reset()
                running.update(obs)
        return running.freeze(min_std)


class RunningGoalStats:
    """Running mean and variance of a goal env's observations (Chan et al.'s parallel update, float64).

    Feed it observations with :meth:`update` (single ones or batches, e.g. from demonstrations or a
    warm-up), then :meth:`freeze` it into the :class:`GoalStats` that :class:`NormalizeGoalObservation`
    takes. Both goal entries update one goal statistic.
    """

    def __init__(self, observation_space: gym.Space, normalize_observation: bool = True) -> None:
        space = check_goal_space(observation_space)
        self._goal_shape = _numeric(space["desired_goal"], "desired_goal").shape
        self._obs_shape = (
            _numeric(space["observation"], "observation").shape if normalize_observation else None
        )
        self._stats: dict[str, list[Any]] = {"goal": [0, 0.0, 0.0]}
        if self._obs_shape is not None:
            self._stats["observation"] = [0, 0.0, 0.0]

    def _merge(self, which: str, x: np.ndarray) -> None:
        count, mean, m2 = self._stats[which]
        n = len(x)
        if n == 0:
            return
        batch_mean = x.mean(axis=0)
        batch_m2 = np.square(x - batch_mean).sum(axis=0)
        total = count + n
        delta = batch_mean - mean
        self._stats[which] = [
            total,
            mean + delta * (n / total),
            m2 + batch_m2 + np.square(delta) * (count * n / total),
        ]

    def update(self, obs: Any) -> None:
        """Add one observation or a batch of them (a dict of arrays with a leading batch axis)."""
        goals = []
        for key in ("achieved_goal", "desired_goal"):
            g = np.asarray(obs[key], dtype=np.float64)
            batch = goal_batch_shape(g, self._goal_shape, key)
            goals.append(g.reshape((int(np.prod(batch)),) + self._goal_shape))
        self._merge("goal", np.concatenate(goals))
        if self._obs_shape is not None:
            o = np.asarray(obs["observation"], dtype=np.float64)
            batch = goal_batch_shape(o, self._obs_shape, "observation")
            self._merge("observation", o.reshape((int(np.prod(batch)),) + self._obs_shape))

    @property
    def count(self) -> int:
        """How many goals (achieved and desired together) have been seen."""
        return int(self._stats["goal"][0])

    def freeze(self, min_std: float = 1e-2) -> GoalStats:
        """The statistics so far as an immutable :class:`GoalStats`; std is at least ``min_std``.

        The floor keeps an element that never changed (a constant joint, a bit the rollout never
        flipped) from being divided by ~0.
        """
        if not (isinstance(min_std, (int, float)) and min_std > 0):
            raise ValueError(f"min_std must be a number > 0, got {min_std!r}")
        if self.count < 2:
            raise ValueError(f"freeze needs at least 2 goals seen, got {self.count}; call update() first")
        out = {}
        for which, (count, mean, m2) in self._stats.items():
            out[which] = (np.asarray(mean), np.maximum(np.sqrt(np.asarray(m2) / count), min_std))
        obs = out.get("observation", (None, None))
        return GoalStats(out["goal"][0], out["goal"][1], obs[0], obs[1])


# ---------------------------------------------------------------------------------------------------
# Normalisation


def _float_dtype(space: gym.Space) -> np.dtype:
    # float64 inputs stay float64: de-normalising then gives back the raw goal to ~1e-16, so
    # compute_reward of a normalised goal matches the env's own reward within any tolerance.
    return np.dtype(np.float64) if space.dtype == np.float64 else np.dtype(np.float32)


def _normalised_box(space: _NumericSpace, mean: np.ndarray, std: np.ndarray, dtype: np.dtype) -> spaces.Box:
    if isinstance(space, spaces.Box):
        low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    elif isinstance(space, spaces.MultiBinary):
        low, high = np.zeros(space.shape), np.ones(space.shape)
    else:
        low = np.broadcast_to(np.asarray(space.start, np.float64), space.shape)
        high = low + space.nvec - 1
    # Rounding is monotone, so (x - mean) / std of any x in [low, high] lands in these bounds.
    shape = space.shape
    return spaces.Box(((low - mean) / std).astype(dtype), ((high - mean) / std).astype(dtype), shape, dtype)


class NormalizeLogic:
    stats: GoalStats

    def _setup(self, space: spaces.Dict) -> spaces.Dict:
        stats = self.stats
        goal_space = space["desired_goal"]
        keyed = [
            ("achieved_goal", stats.goal_mean, stats.goal_std),
            ("desired_goal", stats.goal_mean, stats.goal_std),
        ]
        if stats.observation_mean is not None and stats.observation_std is not None:  # both or neither
            keyed.append(("observation", stats.observation_mean, stats.observation_std))
        new = dict(space.spaces)
        self._params: dict[str, tuple[np.ndarray, np.ndarray, np.dtype]] = {}
        for key, mean, std in keyed:
            sub = _numeric(space[key], key)
            for name, arr in (("mean", mean), ("std", std)):
                try:
                    np.broadcast_to(arr, sub.shape)
                except ValueError:
                    raise ValueError(
                        f"the {key} {name} has shape {arr.shape}, which does not broadcast to the {key} "
                        f"shape {sub.shape}"
                    ) from None
            dtype = _float_dtype(sub)
            m, s = np.broadcast_to(mean, sub.shape), np.broadcast_to(std, sub.shape)
            self._params[key] = (m, s, dtype)
            new[key] = _normalised_box(sub, m, s, dtype)
        self._inner_goal_space = goal_space
        self._integral = np.issubdtype(goal_space.dtype, np.integer) or goal_space.dtype == np.bool_
        return spaces.Dict(new)

    def observation(self, obs: Any) -> Any:
        out = dict(obs)
        for key, (mean, std, dtype) in self._params.items():
            out[key] = ((np.asarray(obs[key], dtype=np.float64) - mean) / std).astype(dtype)
        return out

    def goal_to_inner(self, goal: Any) -> np.ndarray:
        """De-normalise goals (any batch shape) back to the wrapped env's goal space and dtype."""
        mean, std, _ = self._params["desired_goal"]
        raw = np.asarray(goal, dtype=np.float64) * std + mean
        if self._integral:  # bits and integer codes: undo the rounding error exactly
            raw = np.rint(raw)
        return raw.astype(self._inner_goal_space.dtype)


class NormalizeGoalObservation(NormalizeLogic, GoalWrapper):
    """Normalise goals (and the observation) with frozen statistics; ``compute_reward`` de-normalises.

    ``achieved_goal`` and ``desired_goal`` (and ``observation`` unless the stats leave it out) become
    ``(x - mean) / std`` in a Box (float32; float64 when the wrapped space is float64). Goals are
    never clipped, so every normalised goal maps back to exactly the goal observed (integer goals
    are rounded back). The step reward is the wrapped env's, which equals ``compute_reward`` of the
    normalised goals.

    Args:
        env: a goal env with Box / MultiBinary / MultiDiscrete goals.
        stats: a :class:`GoalStats` (immutable; see the module docstring for why), or ``"bounds"``
            for :meth:`GoalStats.from_space` (map the space's bounds onto [-1, 1]).
    """

    def __init__(self, env: gym.Env, stats: GoalStats | str = "bounds") -> None:
        gym.utils.RecordConstructorArgs.__init__(self, stats=stats)
        self.stats = check_stats(stats, single_env_space(env))
        super().__init__(env)


def check_stats(stats: Any, space: gym.Space) -> GoalStats:
    if isinstance(stats, str):
        if stats != "bounds":
            raise ValueError(f"stats must be a GoalStats or 'bounds', got {stats!r}")
        return GoalStats.from_space(space)
    if isinstance(stats, RunningGoalStats):
        raise TypeError(
            "stats must be frozen: pass running_stats.freeze(), not the RunningGoalStats itself. Statistics "
            "that keep moving would de-normalise stored goals differently from how they were normalised, "
            "and HER would relabel with rewards for goals never reached"
        )
    if not isinstance(stats, GoalStats):
        raise TypeError(f"stats must be a GoalStats or 'bounds', got {type(stats).__name__}")
    return stats


# ---------------------------------------------------------------------------------------------------
# Time feature


def _episode_limit(env: Any) -> int | None:
    """An episode step limit found on ``env``: a TimeLimit, the spec, or ``max_steps`` of a goalenvs env (or its task or config)."""
    limit = time_limit(env)
    if limit is not None:
        return limit[1]
    spec_steps = getattr(getattr(env, "spec", None), "max_episode_steps", None)
    if spec_steps:
        return int(spec_steps)
    base = getattr(env, "unwrapped", None)
    for holder in (base, getattr(base, "task", None), getattr(base, "config", None)):
        steps = getattr(holder, "max_steps", None)  # goalenvs envs that truncate themselves say it here
        if isinstance(steps, (int, np.integer)) and not isinstance(steps, bool):
            return int(steps)
    return None


class TimeLogic:
    max_steps: int

    def _init_time(self, env: Any, max_steps: int | None) -> None:
        if max_steps is None:
            max_steps = _episode_limit(env)
            if max_steps is None:
                raise ValueError(
                    "found no episode step limit on the env (no TimeLimit, spec.max_episode_steps or "
                    "max_steps on the env, its task or config); pass max_steps=..."
                )
        self.max_steps = check_int("max_steps", max_steps, 1)

    def _setup(self, space: spaces.Dict) -> spaces.Dict:
        sub = space["observation"]
        if not isinstance(sub, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)) or len(sub.shape) != 1:
            raise ValueError(
                f"TimeFeature appends to a 1-d observation (Box, MultiBinary or MultiDiscrete), got {sub}; "
                "flatten it first (FlattenGoalObservation)"
            )
        box = _normalised_box(sub, np.zeros(sub.shape), np.ones(sub.shape), np.dtype(np.float32))
        if isinstance(sub, spaces.Box) and sub.dtype == np.float64:
            box = spaces.Box(sub.low, sub.high, sub.shape, np.float64)
        self._obs_dtype = box.dtype
        new = dict(space.spaces)
        new["observation"] = spaces.Box(
            np.append(box.low, 0.0).astype(box.dtype), np.append(box.high, 1.0).astype(box.dtype),
            (sub.shape[0] + 1,), box.dtype,
        )  # fmt: skip
        return spaces.Dict(new)

    def _with_time(self, obs: Any, steps: Any) -> Any:
        """Append the remaining-time feature ``1 - steps / max_steps`` (clipped to [0, 1]) to ``observation``."""
        o = np.asarray(obs["observation"])
        feature = np.clip(1.0 - np.asarray(steps, dtype=np.float64) / self.max_steps, 0.0, 1.0)
        out = dict(obs)
        out["observation"] = np.concatenate(
            [
                o.astype(self._obs_dtype),
                np.broadcast_to(feature, o.shape[:-1])[..., None].astype(self._obs_dtype),
            ],
            axis=-1,
        )
        return out


class TimeFeature(TimeLogic, GoalWrapper):
    """Append the remaining time ``1 - t / max_steps`` to ``observation``, leaving the goals alone.

    What sb3-contrib's ``TimeFeatureWrapper`` does for the RL Zoo's Fetch runs, made goal-aware:
    only ``observation`` changes (so HER's goals and ``compute_reward`` stay the wrapped env's),
    the wrapped env's observation space is not modified in place, ``max_steps`` comes from the
    env's own limit, and non-Box observations (MultiBinary bits) are accepted.

    Args:
        env: a goal env with a 1-d observation.
        max_steps: episode length; default: the env's TimeLimit, ``spec.max_episode_steps`` or
            ``max_steps`` of a goalenvs env (its task or config).
    """

    def __init__(self, env: gym.Env, max_steps: int | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, max_steps=max_steps)
        self._init_time(env, max_steps)
        super().__init__(env)
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._t = 0
        return self._with_time(obs, 0), info

    def step(self, action: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._t += 1
        return self._with_time(obs, self._t), reward, terminated, truncated, info


# ---------------------------------------------------------------------------------------------------
# Flat view


class _Flattener:
    """Batched flatten / unflatten of one sub-space to a 1-d Box (Discrete: one-hot)."""

    def __init__(self, key: str, space: gym.Space) -> None:
        self.space = space
        self.flat: spaces.Box
        self.shape: tuple[int, ...]
        if isinstance(space, spaces.Discrete):
            self.shape = ()
            if space.n > MAX_ONE_HOT:
                raise ValueError(
                    f"{key} is Discrete({space.n}); its one-hot would have {space.n} entries (at most "
                    f"{MAX_ONE_HOT} allowed). Use a bit-vector observation instead (e.g. BitFlip obs_type='bits')"
                )
            self.flat = spaces.Box(0, 1, (int(space.n),), np.int8)
            self._eye = np.eye(int(space.n), dtype=np.int8)
        elif isinstance(space, spaces.Box):
            self.shape = space.shape
            self.flat = spaces.Box(
                space.low.reshape(-1), space.high.reshape(-1), (int(np.prod(space.shape)),), space.dtype
            )
        elif isinstance(space, (spaces.MultiBinary, spaces.MultiDiscrete)):
            self.shape = space.shape
            low = (
                np.zeros(space.shape)
                if isinstance(space, spaces.MultiBinary)
                else np.broadcast_to(space.start, space.shape)
            )
            high = np.ones(space.shape) if isinstance(space, spaces.MultiBinary) else low + space.nvec - 1
            self.flat = spaces.Box(
                low.reshape(-1), high.reshape(-1), (int(np.prod(space.shape)),), space.dtype
            )
        else:
            raise ValueError(
                f"cannot flatten the {key} space {space}; FlattenGoalObservation handles Box, MultiBinary, "
                "MultiDiscrete and Discrete (one-hot)"
            )

    def flatten(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        if isinstance(self.space, spaces.Discrete):
            return self._eye[x - self.space.start]
        batch = goal_batch_shape(x, self.shape)
        return x.reshape(batch + (-1,)).astype(self.flat.dtype, copy=False)

    def unflatten(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        if isinstance(self.space, spaces.Discrete):
            return (np.argmax(x, axis=-1) + self.space.start).astype(self.space.dtype)
        flat = x.reshape(x.shape[:-1] + self.shape)
        if np.issubdtype(self.space.dtype, np.integer) and not np.issubdtype(x.dtype, np.integer):
            flat = np.rint(flat)  # a float copy of an integer goal (e.g. a float32 flat vector slice)
        return flat.astype(self.space.dtype, copy=False)


class FlattenLogic:
    def _setup(self, space: spaces.Dict) -> spaces.Dict:
        # The flat vector's order: observation, achieved_goal, desired_goal, then any other keys sorted.
        self.keys: tuple[str, ...] = GOAL_KEYS + tuple(sorted(k for k in space.spaces if k not in GOAL_KEYS))
        self._flatteners = {k: _Flattener(k, space[k]) for k in self.keys}
        start, self.slices = 0, {}
        for k in self.keys:
            size = self._flatteners[k].flat.shape[0]
            self.slices[k] = slice(start, start + size)
            start += size
        boxes = [self._flatteners[k].flat for k in self.keys]
        self.flat_observation_space = spaces.Box(
            np.concatenate([b.low.astype(np.float32) for b in boxes]),
            np.concatenate([b.high.astype(np.float32) for b in boxes]),
            (start,), np.float32,
        )  # fmt: skip
        return spaces.Dict({k: self._flatteners[k].flat for k in self.keys})

    def observation(self, obs: Any) -> Any:
        return {k: self._flatteners[k].flatten(obs[k]) for k in self.keys}

    def goal_to_inner(self, goal: Any) -> np.ndarray:
        return self._flatteners["desired_goal"].unflatten(goal)

    def flatten(self, obs: Any) -> np.ndarray:
        """This wrapper's Dict observation (single or a batch) as one float32 vector per observation.

        Call it at the algorithm's input, *after* relabelling: a flat vector stored in a buffer would
        keep the old desired goal when HER swaps in a new one.
        """
        return np.concatenate([np.asarray(obs[k], dtype=np.float32) for k in self.keys], axis=-1)

    def unflatten(self, flat: Any) -> dict[str, np.ndarray]:
        """The inverse of :meth:`flatten`: flat vectors back to this wrapper's Dict observation."""
        flat = np.asarray(flat)
        out = {}
        for k in self.keys:
            box = self._flatteners[k].flat
            part = flat[..., self.slices[k]]
            if np.issubdtype(box.dtype, np.integer):
                part = np.rint(part)
            out[k] = part.astype(box.dtype)
        return out


class FlattenGoalObservation(FlattenLogic, GoalWrapper):
    """A flat view of a goal env that HER can still relabel.

    Each entry of the Dict becomes a 1-d Box (images and other arrays are raveled, ``Discrete`` is
    one-hot encoded), and the Dict stays, so HER keeps finding ``achieved_goal`` and
    ``desired_goal``; ``compute_reward`` takes goals in this flat form and unflattens them for the
    wrapped env. For an algorithm that needs one vector, :meth:`flatten` concatenates the entries
    (``observation``, ``achieved_goal``, ``desired_goal``, then any other keys) into a float32
    vector of ``flat_observation_space``, and :attr:`slices` says where each entry lies in it.
    ``gymnasium.wrappers.FlattenObservation`` instead flattens on the env side: the goal entries
    disappear and HER has nothing to relabel.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        super().__init__(env)
