"""What the checks share: the env, the goal functions found on it, its rollout, and a probe batch."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from goalenvs._util import time_limit
from goalenvs.check.contract import call, rewards_close
from goalenvs.check.report import Skip
from goalenvs.check.rollout import Event, Rollout, Transition, slice_obs
from goalenvs.check.values import QuietGoalFunctions, copy_obs
from goalenvs.core import GOAL_FUNCTIONS, env_layers, locate_env_attribute

__all__ = ["GOAL_FUNCTIONS", "Context"]

# The goal functions of the contract (only ``compute_reward`` is required) are named once, in her.
# How many (achieved goal, desired goal, info) rows of the rollout the function checks look at.
_N_PROBE = 32
#: Resets beyond the rollout's that the goal checks look at (after one seeded with ``seed + 4``).
EXTRA_RESETS = 10


class Context:
    """Everything the checks share about one env; built by ``check_goal_env`` and passed to each check.

    Args:
        env: a ``gymnasium.Env`` or ``gymnasium.vector.VectorEnv``, wrapped or not.
        n_steps: the rollout's length (vector steps for a vector env).
        seed: seeds the env's resets, the sampled actions, goals and probe rows.
    """

    def __init__(self, env: Any, n_steps: int, seed: int) -> None:
        self.env = env
        self.n_steps = n_steps
        self.seed = seed
        self.vector = isinstance(env, gym.vector.VectorEnv)
        self.num_envs = int(env.num_envs) if self.vector else 1
        self.layers = env_layers(env)  # outermost first, ending with the bare env
        self.space = env.single_observation_space if self.vector else env.observation_space
        self.rng = np.random.default_rng(seed)
        self.action_space = copy.deepcopy(env.action_space)  # never reseed the user's own space
        self.action_space.seed(seed)
        self.autoreset = "NextStep"
        if self.vector:
            mode = env.metadata.get("autoreset_mode", "NextStep")
            self.autoreset = str(getattr(mode, "value", mode))
        self.rollout = Rollout(env, n_steps, seed, self.action_space, self.autoreset if self.vector else None)
        self._fns: dict[str, tuple[Callable[..., Any], str, int] | None] = {}
        self._replays: dict[bool, str | None] = {}
        self._probe: dict[str, Any] | None = None
        self._resets: list[dict[str, Any]] | None = None
        self._goal_space: gym.Space | None = None

    @property
    def events(self) -> list[Event]:
        """The rollout's raw resets and steps (empty before the ``rollout`` check recorded it)."""
        return self.rollout.events

    @property
    def transitions(self) -> list[Transition]:
        """The rollout's (sub-)env transitions, autoreset steps left out."""
        return self.rollout.transitions

    def find(self, name: str) -> tuple[Callable[..., Any], str, int] | None:
        """``(function, provider name, layer index)``, found by :func:`goalenvs.core.locate_env_attribute`.

        The layer index says where in :attr:`layers` the function lives (``len(layers)`` for a
        vector env's sub-env 0, where SB3's ``env_method(..., indices=[0])`` would find it).
        """
        if name not in self._fns:
            found = locate_env_attribute(self.env, name)
            if found is not None:
                fn, provider, index = found
                sub_env = " (sub-env 0)" if index == len(self.layers) else ""
                found = (fn, f"{type(provider).__name__}{sub_env}", index)
            self._fns[name] = found
        return self._fns[name]

    def fn(self, name: str) -> Callable[..., Any]:
        """The goal function ``name``; raises :class:`Skip` when the env defines none."""
        found = self.find(name)
        if found is None:
            raise Skip(f"the env defines no {name}")
        return found[0]

    def sub_envs(self) -> Any:
        """A vector env's in-process sub-envs (``SyncVectorEnv.envs``), or None."""
        return getattr(self.layers[-1], "envs", None)

    def random_goals(self, n: int) -> np.ndarray:
        """``n`` goals sampled from the desired_goal space (seeded once, from ``seed + 1``)."""
        if self._goal_space is None:
            self._goal_space = copy.deepcopy(self.space["desired_goal"])
            self._goal_space.seed(self.seed + 1)
        return np.asarray([self._goal_space.sample() for _ in range(n)])

    def max_episode_steps(self) -> int | None:
        """The step limit of a ``TimeLimit`` wrapper (on the env or a vector env's sub-envs), if any."""
        sub_envs = self.sub_envs()
        for env in [self.env] + ([sub_envs[0]] if sub_envs else []):
            found = time_limit(env)
            if found is not None:
                return found[1]
        spec = getattr(self.env, "spec", None)
        return getattr(spec, "max_episode_steps", None) if self.vector else None

    def _split(self, obs: Any) -> list[Any]:
        return [slice_obs(obs, i) for i in range(self.num_envs)] if self.vector else [obs]

    def reset_observations(self) -> list[dict[str, Any]]:
        """The observations of the rollout's resets and of :data:`EXTRA_RESETS` more (one per sub-env of
        a vector env), as copies; the extra resets follow one ``reset(seed=seed + 4)``."""
        if self._resets is None:
            found = [o for ev in self.events if ev.kind == "reset" for o in self._split(ev.obs)]
            self.env.reset(seed=self.seed + 4)
            for _ in range(EXTRA_RESETS):
                found += self._split(copy_obs(self.env.reset()[0]))
            self._resets = found
        return self._resets

    def step_observations(self) -> list[dict[str, Any]]:
        """The rollout's step observations (one per sub-env, autoreset steps left out)."""
        found = []
        for ev in self.events:
            if ev.kind != "step":
                continue
            subs = self._split(ev.obs)
            valid = ev.valid if ev.valid is not None else np.ones(len(subs), dtype=bool)
            found += [o for o, ok in zip(subs, valid, strict=True) if ok]
        return found

    def reached(self, ag: Any, dg: Any, info: Any, reward: Any = None) -> bool:
        """Whether ``ag`` reaches ``dg``: a step's ``info["is_success"]`` where there is one, else
        ``compute_reward`` gives (``reward``, the step's, or its own for ``ag`` and ``dg``) the reward it
        gives the achieved goal itself. False where there is no ``compute_reward`` or it raises."""
        if reward is not None and isinstance(info, Mapping) and "is_success" in info:
            return bool(np.asarray(info["is_success"]).any())
        found = self.find("compute_reward")
        if found is None:
            return False
        try:
            with QuietGoalFunctions():
                value = call(found[0], ag, dg, info) if reward is None else np.asarray(reward)
                return rewards_close(value, call(found[0], ag, ag, info))
        except Exception:  # a raising compute_reward is reported by its own checks
            return False

    def record(self) -> None:
        """Record the rollout every later check reads."""
        self.rollout.record()

    def replay(self, interleave: bool) -> str | None:
        """Replay the rollout from the same seed (once per ``interleave``); the first difference, or None.

        With ``interleave`` the goal functions are called on random goals before every step, the
        way a replay buffer calls them between environment steps.
        """
        if interleave not in self._replays:
            self._replays[interleave] = self.rollout.replay(self._interleave if interleave else None)
        return self._replays[interleave]

    def replayed(self, interleave: bool) -> bool:
        """Whether :meth:`replay` with this ``interleave`` has run."""
        return interleave in self._replays

    def _interleave(self, k: int, last_info: Any) -> None:
        n = 4
        ag, dg = self.random_goals(n), self.random_goals(n)
        # Also goals that are reached (achieved goal = desired goal), as "future" relabelling makes them:
        # a function that acts on a reached goal (resets the target, counts a task done) shows then.
        reached = (self.probe()["ag"][:n] if self.transitions else ag).copy()
        infos = [last_info] * n
        for name in GOAL_FUNCTIONS:
            found = self.find(name)
            if found is None:
                continue
            # last_info may be a reset's info, which goal functions need not understand: no warnings.
            with QuietGoalFunctions():
                for args in (
                    (ag, dg, infos), (ag[0], dg[0], last_info),
                    (reached, reached, infos[: len(reached)]), (reached[0], reached[0], last_info),
                ):  # fmt: skip
                    try:
                        found[0](*args)
                    except Exception:  # a raising function is reported by its own check
                        continue

    def scalar_goals(self) -> bool:
        """Whether one goal is a scalar (a Discrete goal space): :meth:`probe` rows then have shape (B, 1)."""
        return bool(self.probe()["scalar"])

    def probe(self) -> dict[str, Any]:
        """Rows of (achieved goal, desired goal, info) drawn from the rollout, HER-style.

        Row k pairs a recorded next achieved goal with, by ``k % 4``: its own desired goal, itself
        (a success), another recorded achieved goal (what the "future" strategy relabels with),
        or a random goal from the desired_goal space. Keys: ``ag``, ``dg``, ``other``, ``random``,
        ``mixed`` (arrays of shape (rows, *goal_shape), or (rows, 1) for scalar goals, the way replay
        buffers store and batch them) and ``infos`` (the rows' infos, a list).
        """
        if self._probe is None:
            transitions = self.transitions
            if not transitions:
                raise Skip("the rollout has no transitions")
            size = max(_N_PROBE, self.num_envs)
            idx = self.rng.integers(0, len(transitions), size=size)
            other = self.rng.integers(0, len(transitions), size=size)
            ag = np.stack([transitions[i].ag for i in idx])
            dg = np.stack([transitions[i].dg for i in idx])
            other_ag = np.stack([transitions[i].ag for i in other])
            scalar = ag.ndim == 1
            if scalar:  # scalar goals (Discrete): buffers store them with shape (1,), as SB3's does
                ag, dg, other_ag = ag[:, None], dg[:, None], other_ag[:, None]
            random = self.random_goals(size).astype(dg.dtype, copy=False).reshape(dg.shape)
            kind = np.arange(size) % 4
            mixed = dg.copy()
            for k, source in ((1, ag), (2, other_ag), (3, random)):
                mixed[kind == k] = source[kind == k]
            self._probe = {
                "ag": ag, "dg": dg, "other": other_ag, "random": random, "mixed": mixed,
                "infos": [transitions[i].info for i in idx], "scalar": scalar,
            }  # fmt: skip
        return self._probe
