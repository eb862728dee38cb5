"""Recording one rollout of random actions, splitting it into transitions, and replaying it.

Most checks read one rollout: ``reset(seed=seed)`` and ``n_steps`` steps with sampled actions, a new
episode started whenever one ends. Replaying the same actions from the same seed and comparing
step by step tells whether the env is deterministic, and whether calling its goal functions between
steps (as a replay buffer does) changes what it does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from goalenvs._util import env_info
from goalenvs.check import contract
from goalenvs.check.report import Skip
from goalenvs.check.values import copy_info, copy_obs, first_difference, fmt, same

__all__ = ["Event", "Rollout", "Transition", "slice_obs"]


@dataclass
class Event:
    """One raw ``reset`` or ``step`` return, as recorded (``obs`` and ``info`` are copies, ``obs_ref`` and
    ``info_ref`` what came back)."""

    kind: Literal["reset", "step"]
    obs: Any
    obs_ref: Any
    info: Any
    info_ref: Any = None
    reward: Any = None
    terminated: Any = None
    truncated: Any = None
    valid: np.ndarray | None = None  # vector env: which sub-envs made a real transition at this step


@dataclass
class Transition:
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


class Rollout:
    """One recorded rollout of ``env`` and its replays.

    Args:
        env: a ``gymnasium.Env``, or a ``VectorEnv`` when ``autoreset`` is given.
        n_steps: how many steps (vector steps) to take.
        seed: the seed of the first reset.
        action_space: where actions are sampled from (a seeded copy: the env's own is left alone).
        autoreset: a vector env's autoreset mode (``"NextStep"``, ``"SameStep"`` or ``"Disabled"``);
            None for a single env.
    """

    def __init__(self, env: Any, n_steps: int, seed: int, action_space: Any, autoreset: str | None) -> None:
        self.env = env
        self.n_steps = n_steps
        self.seed = seed
        self.action_space = action_space
        self.autoreset = autoreset
        self.vector = autoreset is not None
        self.num_envs = int(env.num_envs) if self.vector else 1
        self.actions: list[Any] = []
        self.events: list[Event] = []
        self.transitions: list[Transition] = []

    def record(self) -> None:
        """Run the rollout with new random actions; fill :attr:`events` and :attr:`transitions`.

        Raises :class:`Skip` when the observations have no goals (after :attr:`events` is filled).
        """
        self.events = self._run(None, None)
        self.transitions = self._vector_transitions() if self.vector else self._single_transitions()

    def replay(self, before_step: Callable[[int, Any], None] | None = None) -> str | None:
        """Replay the recorded actions from the same seed; describe the first difference, or None.

        ``before_step(k, last_info)`` runs just before the k-th step.
        """
        events = self._run(self.actions, before_step)
        for i, (want, got) in enumerate(zip(self.events, events, strict=True)):
            what = None
            if not same(want.obs, got.obs):
                what = f"observation key {first_difference(want.obs, got.obs)}"
            elif want.kind == "step" and not same(want.reward, got.reward):
                what = f"reward ({fmt(want.reward)} vs {fmt(got.reward)})"
            elif want.kind == "step" and not (
                same(want.terminated, got.terminated) and same(want.truncated, got.truncated)
            ):
                what = "terminated/truncated flags"
            if what is not None:
                k = sum(e.kind == "step" for e in self.events[: i + 1])
                where = f"the reset after step {k}" if want.kind == "reset" else f"step {k}"
                if i == 0:
                    where = "the first reset"
                return f"{where}: {what}"
        return None

    def _run(
        self, actions: Sequence[Any] | None, before_step: Callable[[int, Any], None] | None
    ) -> list[Event]:
        """Reset with the seed and take ``n_steps`` steps, sampling new actions when ``actions`` is None."""
        env = self.env
        obs, info = env.reset(seed=self.seed)
        events = [Event("reset", copy_obs(obs), obs, copy_info(info), info)]
        for k in range(self.n_steps):
            if actions is None:
                action = self.action_space.sample()
                self.actions.append(action)
            else:
                action = actions[k]
            if before_step is not None:
                before_step(k, events[-1].info)
            obs, reward, terminated, truncated, info = env.step(action)
            events.append(
                Event(
                    "step", copy_obs(obs), obs, copy_info(info), info, np.copy(reward), terminated, truncated
                )
            )
            done = np.logical_or(terminated, truncated)
            # A single env must be reset by hand; so must a vector env that does not autoreset.
            if np.any(done) and self.autoreset in (None, "Disabled"):
                obs, info = env.reset()
                events.append(Event("reset", copy_obs(obs), obs, copy_info(info), info))
        return events

    def _single_transitions(self) -> list[Transition]:
        out: list[Transition] = []
        episode, t, step, prev = -1, 0, -1, None
        for ev in self.events:
            if ev.kind == "reset":
                episode, t, prev = episode + 1, 0, ev.obs
                continue
            step, t = step + 1, t + 1
            out.append(
                Transition(
                    step, 0, episode, t, _goal(ev.obs, "achieved_goal"), _goal(ev.obs, "desired_goal"),
                    _goal(prev, "achieved_goal"), _goal(prev, "desired_goal"), ev.reward,
                    bool(ev.terminated), bool(ev.truncated), ev.info,
                )
            )  # fmt: skip
            prev = ev.obs
        return out

    def _vector_transitions(self) -> list[Transition]:
        """Split a vector rollout into per-sub-env transitions, leaving out the autoreset steps.

        In ``NextStep`` mode (Gymnasium's default) the step after a sub-env ends only resets it: its
        reward is 0 and its observation is a reset observation, so it is no transition. In
        ``SameStep`` mode the step that ends an episode returns the reset observation and puts the
        real next observation and info in ``info["final_obs"]`` / ``info["final_info"]``.
        """
        n = self.num_envs
        out: list[Transition] = []
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
                    new_episode(i, slice_obs(ev.obs, i))
                pending[:] = False
                continue
            step += 1
            terminated = np.asarray(ev.terminated, dtype=bool).reshape(n)
            truncated = np.asarray(ev.truncated, dtype=bool).reshape(n)
            rewards = np.asarray(ev.reward).reshape(n)
            valid = np.ones(n, dtype=bool)
            for i in range(n):
                obs_i = slice_obs(ev.obs, i)
                if self.autoreset == "NextStep" and pending[i]:
                    valid[i] = False
                    pending[i] = False
                    new_episode(i, obs_i)
                    continue
                done = bool(terminated[i] or truncated[i])
                info_i = _sub_env_info(ev.info, i)
                next_obs = obs_i
                if self.autoreset == "SameStep" and done:
                    valid[i] = False  # the batch holds the reset observation, not s_{t+1}
                    # Gymnasium's layout is an object array of per-env dicts; a native vector env made
                    # with batched_final_obs=True gives one dict of batched arrays: slice_obs reads both.
                    next_obs = slice_obs(ev.info["final_obs"], i)
                    info_i = _sub_env_info(ev.info.get("final_info", {}), i)
                t[i] += 1
                out.append(
                    Transition(
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


def _goal(obs: Any, key: str) -> np.ndarray:
    found = contract.goal(obs, key)
    if found is None:
        raise Skip(f"observations have no {key!r} entry")
    return found


def slice_obs(obs: Any, i: int) -> Any:
    """Sub-env ``i``'s observation from a vector env's batched one (a dict of batched arrays), or item
    ``i`` of an object array of per-env observations (Gymnasium's ``info["final_obs"]``)."""
    if isinstance(obs, Mapping):
        return {k: slice_obs(v, i) for k, v in obs.items()}
    return np.asarray(obs)[i]


def _sub_env_info(infos: Any, i: int) -> dict[str, Any]:
    """Sub-env ``i``'s info from a vector step's infos, without the autoreset's final observation/info."""
    if not isinstance(infos, Mapping):
        return {}
    return {k: v for k, v in env_info(infos, i).items() if k not in ("final_obs", "final_info")}
