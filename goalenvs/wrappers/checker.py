"""A passive GoalEnv contract check, cheap enough for ``gym.make`` to apply to every goalenvs id.

Like Gymnasium's ``PassiveEnvChecker`` it watches the first steps and then gets out of the way.
It checks what HER silently depends on: ``reward == compute_reward(obs["achieved_goal"],
obs["desired_goal"], info)`` (and the same for ``terminated`` / ``truncated`` where the env defines
``compute_terminated`` / ``compute_truncated``), and that ``compute_reward`` takes a batch. Each kind of
breach warns once, with its likely cause. Each step is judged by the same rules and tolerances as in
``goalenvs.check_goal_env`` (:mod:`goalenvs.check.contract`), which is the thorough check.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from goalenvs._util import check_int, time_limit
from goalenvs.check.contract import call, flag_agrees, goal, reward_agrees, reward_lags
from goalenvs.wrappers._base import find_goal_function

__all__ = ["GoalContractChecker", "GoalContractWarning"]


class GoalContractWarning(UserWarning):
    """A goal env breaks the GoalEnv contract Hindsight Experience Replay relies on."""


class GoalContractChecker(gym.Wrapper):
    """Warn once per kind of breach if the first ``n_steps`` steps break the GoalEnv contract.

    Passes everything through unchanged. ``gym.make`` puts it directly around every goalenvs env
    unless ``gym.make(id, check_goal_contract=False)`` (see ``goalenvs.registration.make_env``).

    Args:
        env: the env to watch.
        n_steps: how many steps (after construction, across episodes) to check; int >= 1.
    """

    def __init__(self, env: gym.Env, n_steps: int = 10) -> None:
        steps = check_int("n_steps", n_steps, 1)
        gym.Wrapper.__init__(self, env)
        self.steps_left = steps
        self._warned: set[str] = set()
        self._prev_ag: Any = None
        self._batch_checked = False

    @property
    def spec(self) -> Any:  # type: ignore[override]  # gymnasium.Env declares spec an attribute
        """The wrapped env's spec: like Gymnasium's PassiveEnvChecker, the checker is not a recorded wrapper.

        The entry point adds it (``check_goal_contract``, kept in the spec's kwargs), so remaking an
        env from its spec adds it again.
        """
        return self.env.spec

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        if self.steps_left:
            self._prev_ag = goal(obs, "achieved_goal")
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        result = self.env.step(action)
        if self.steps_left:  # after the first steps the cost is this one test
            self.steps_left -= 1
            self._check(*result)
        return result

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            name = type(self.env.unwrapped).__name__
            warnings.warn(f"{name}: {message}", GoalContractWarning, stacklevel=4)

    def _check(self, obs: Any, reward: Any, terminated: Any, truncated: Any, info: Any) -> None:
        ag, dg = goal(obs, "achieved_goal"), goal(obs, "desired_goal")
        prev_ag, self._prev_ag = self._prev_ag, ag
        if ag is None or dg is None:
            self.steps_left = 0
            self._warn(
                "space",
                "observations are not dicts with 'achieved_goal' and 'desired_goal'; HER cannot use this env.",
            )
            return
        fn = find_goal_function(self.env, "compute_reward")
        if fn is None:
            self.steps_left = 0
            self._warn(
                "missing",
                "defines no compute_reward(achieved_goal, desired_goal, info); HER needs it to relabel.",
            )
            return
        value = self._call("compute_reward", fn, ag, dg, info)
        if value is not None and not reward_agrees(value, reward):
            cause = "step adds a term compute_reward lacks, or uses another goal than the observation's"
            if prev_ag is not None and reward_lags(fn, prev_ag, dg, info, reward):
                cause = "step computes the reward from the achieved goal *before* the action; r_t depends on s_{t+1}"
            self._warn(
                "reward",
                f"step returned reward {_show(reward)} but compute_reward(obs['achieved_goal'], "
                f"obs['desired_goal'], info) gives {_show(value)}. Likely cause: {cause}. HER relabels with "
                "compute_reward, so it would learn from rewards the env never gives. Fix: return "
                "self.compute_reward(...) of the new observation from step.",
            )
        # The step count and limit of a TimeLimit between us and the env, whose truncations are its own.
        t, limit = time_limit(self.env) or (0, None)
        flags: tuple[tuple[Literal["terminated", "truncated"], Any], ...] = (
            ("terminated", terminated),
            ("truncated", truncated),
        )
        for kind, flag in flags:
            name = f"compute_{kind}"
            other = find_goal_function(self.env, name)
            if other is None:
                continue
            got = self._call(name, other, ag, dg, info)
            if got is not None and got.size == 1 and not flag_agrees(got, flag, kind, t, limit):
                self._warn(
                    name,
                    f"step returned {kind}={bool(flag)} but {name}(...) gives "
                    f"{bool(got.reshape(-1)[0])}. Fix: return {name} of the new observation from step.",
                )
        if not self._batch_checked:
            self._batch_checked = True
            batch = self._call("compute_reward", fn, np.stack([ag, ag]), np.stack([dg, dg]), [info, info])
            if batch is not None and batch.shape != (2,):
                self._warn(
                    "batch",
                    f"compute_reward on a batch of 2 goals returns shape {np.shape(batch)}, not (2,). HER calls "
                    "it on batches. Fix: reduce over the last axis only, or wrap the env in "
                    "goalenvs.wrappers.VectorizedComputeReward.",
                )

    def _call(self, name: str, fn: Any, ag: Any, dg: Any, info: Any) -> np.ndarray | None:
        try:
            return call(fn, ag, dg, info)
        except Exception as err:  # any error of the env's function is the finding
            self._warn(
                name + "-raises",
                f"{name} raised {type(err).__name__}: {err} on a step's own goals and info.",
            )
            return None


def _show(x: Any) -> str:
    a = np.asarray(x)
    return f"{float(a.reshape(-1)[0]) + 0.0:.6g}" if a.size == 1 else f"an array of shape {a.shape}"
