"""Goal envs for testing the checker: one good Fetch-sized reach task and variants that each break one rule.

Importing this module registers ``CheckerReach-v0`` (good) and a few broken ids, so the CLI can be
tested with ``"tests.check.checker_envs:CheckerReach-v0"`` ids (importable when the repository root is
on ``sys.path``, as it is under pytest).

``ReachEnv`` is shaped like Gymnasium-Robotics' FetchReach (observation 25, goals 3, 4 actions,
sparse reward, no termination, a 50-step ``TimeLimit``) but needs no MuJoCo. ``substeps`` adds
integration work per step, to emulate a simulator's cost in benchmarks.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs.core import info_values

THRESHOLD = 0.05


class ReachEnv(gym.Env):
    """Move a point in the unit cube to a goal; a correct goal env that HER can use.

    Subclasses below each break one rule of the GoalEnv contract; the checker must catch it.
    """

    metadata = {"render_modes": []}

    def __init__(self, terminate_on_success: bool = False, substeps: int = 0) -> None:
        if substeps < 0:
            raise ValueError(f"substeps must be >= 0, got {substeps}")
        self.terminate_on_success = terminate_on_success
        self.substeps = substeps
        goal = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float64)
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-np.inf, np.inf, shape=(25,), dtype=np.float64),
                "achieved_goal": goal,
                "desired_goal": goal,
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self._mix = np.linspace(0.5, 2.0, 19 * 6).reshape(19, 6)
        self.pos = np.zeros(3)
        self.vel = np.zeros(3)
        self.goal = np.zeros(3)

    # The task functions: pure and vectorized over a leading batch shape.
    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return -(distance > THRESHOLD).astype(np.float64)

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return (distance <= THRESHOLD) & self.terminate_on_success

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return np.zeros(np.shape(achieved_goal)[:-1], dtype=bool)

    def _obs(self) -> dict[str, np.ndarray]:
        state = np.concatenate([self.pos, self.vel])
        features = np.tanh(self._mix @ state)
        return {
            "observation": np.concatenate([state, features]),
            "achieved_goal": self.pos.copy(),
            "desired_goal": self.goal.copy(),
        }

    def _move(self, action: np.ndarray) -> None:
        delta = 0.05 * np.clip(np.asarray(action, dtype=np.float64)[:3], -1.0, 1.0)
        for _ in range(self.substeps):  # emulated simulator work; it does not change the result
            delta = 0.5 * (delta + np.clip(delta, -0.05, 0.05))
        self.vel = delta
        self.pos = np.clip(self.pos + delta, -1.0, 1.0)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.goal = self.np_random.uniform(-0.3, 0.3, size=3)
        # Start near the goal, but not at it, so that random actions reach it now and then: the checker
        # then sees successes as well as failures (as it would with a trained policy).
        direction = self.np_random.normal(size=3)
        self.pos = self.goal + 0.06 * direction / np.linalg.norm(direction)
        self.vel = np.zeros(3)
        return self._obs(), {}

    def _info(self, obs: dict[str, np.ndarray]) -> dict[str, Any]:
        return {"is_success": bool(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"]) <= THRESHOLD)}

    def step(self, action: np.ndarray):
        self._move(action)
        obs = self._obs()
        info = self._info(obs)
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
        terminated = bool(self.compute_terminated(obs["achieved_goal"], obs["desired_goal"], info))
        truncated = bool(self.compute_truncated(obs["achieved_goal"], obs["desired_goal"], info))
        return obs, reward, terminated, truncated, info


# ---- broken variants: each breaks one rule ---------------------------------------------------------


class NotDictEnv(ReachEnv):
    """Observation space is a flat Box."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(31,), dtype=np.float64)


class GoalShapeMismatchEnv(ReachEnv):
    """desired_goal space has another shape than achieved_goal's."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = spaces.Dict(
            {
                "observation": self.observation_space["observation"],
                "achieved_goal": spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float64),
                "desired_goal": spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float64),
            }
        )


class Float32SpaceEnv(ReachEnv):
    """Declares float32 goals but returns float64 ones: observations fall outside the space."""

    def __init__(self) -> None:
        super().__init__()
        goal = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        self.observation_space = spaces.Dict(
            {
                "observation": self.observation_space["observation"],
                "achieved_goal": goal,
                "desired_goal": goal,
            }
        )


class ActionPenaltyEnv(ReachEnv):
    """step adds an action penalty that compute_reward does not know about."""

    def step(self, action: np.ndarray):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward - 0.01 * float(np.sum(np.square(action))), terminated, truncated, info


class RewardBeforeMoveEnv(ReachEnv):
    """step computes the reward from the achieved goal before the action is applied."""

    def step(self, action: np.ndarray):
        before = self.pos.copy()
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float(self.compute_reward(before, self.goal, info)), terminated, truncated, info


class NotVectorizedEnv(ReachEnv):
    """compute_reward takes the norm over the whole batch (no axis=-1)."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return -np.asarray(
            np.linalg.norm(np.asarray(achieved_goal) - desired_goal) > THRESHOLD, dtype=np.float64
        )


class InfoNotBatchedEnv(ReachEnv):
    """compute_reward reads info['scale'] as from one dict; a batch of infos breaks it."""

    def _info(self, obs: dict[str, np.ndarray]) -> dict[str, Any]:
        return {**super()._info(obs), "scale": 2.0}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        scale = info["scale"]  # one dict only: a list of infos breaks it
        return scale * super().compute_reward(achieved_goal, desired_goal, info)


class BatchedInfoEnv(InfoNotBatchedEnv):
    """The fixed version: reads the info batch with goalenvs.info_values, and declares the key (a correct env)."""

    reward_info_keys = ("scale",)

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        batch_shape = np.shape(achieved_goal)[:-1]
        scale = info_values(info, "scale", batch_shape, default=1.0)
        return scale * ReachEnv.compute_reward(self, achieved_goal, desired_goal, info)


class RngInRewardEnv(ReachEnv):
    """compute_reward draws from the env's generator, so calling it changes the next reset."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        jitter = 0.0 * self.np_random.random()  # zero, but the generator moves on
        return super().compute_reward(achieved_goal, desired_goal, info) + jitter


class AnnealingRewardEnv(ReachEnv):
    """compute_reward rescales by how many batches it has seen: its answers depend on earlier calls."""

    def __init__(self) -> None:
        super().__init__()
        self.batch_calls = 0

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        scale = 1.0 / (1.0 + 0.1 * self.batch_calls)
        if np.ndim(achieved_goal) > 1:
            self.batch_calls += 1
        return scale * super().compute_reward(achieved_goal, desired_goal, info)


class InPlaceRewardEnv(ReachEnv):
    """compute_reward subtracts in place, overwriting the caller's achieved goals."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        achieved_goal = np.asarray(achieved_goal)
        achieved_goal -= desired_goal
        return -(np.linalg.norm(achieved_goal, axis=-1) > THRESHOLD).astype(np.float64)


class SelfGoalRewardEnv(ReachEnv):
    """compute_reward reads self.goal instead of its desired_goal argument."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return super().compute_reward(achieved_goal, self.goal, info)


class DistanceRewardEnv(ReachEnv):
    """The reward is the distance (higher is worse): being at the goal is the worst outcome."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)


class MovingGoalEnv(ReachEnv):
    """The goal is redrawn every 10 steps without ending the episode."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.t = 0
        return super().reset(seed=seed, options=options)

    def step(self, action: np.ndarray):
        self.t += 1
        if self.t % 10 == 0:
            self.goal = self.np_random.uniform(-0.3, 0.3, size=3)
        return super().step(action)


class RotatedGoalEnv(ReachEnv):
    """A correct env whose desired goal is recomputed at every step through a change of frame (into a
    base frame that turns with the arm and back), so it differs from the reset's by rounding (~1e-17)."""

    def _obs(self) -> dict[str, np.ndarray]:
        obs = super()._obs()
        angle = 7.0 * float(self.pos[0])
        c, s = np.cos(angle), np.sin(angle)
        rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        obs["desired_goal"] = rotation.T @ (rotation @ self.goal)
        return obs


class DriftingGoalEnv(ReachEnv):
    """The desired goal drifts by 1e-3 per step (a goal tracked with a slipping estimate): a real drift,
    far above rounding though below the 0.05 success threshold."""

    def step(self, action: np.ndarray):
        self.goal = self.goal + 1e-3
        return super().step(action)


class WorldFrameRewardEnv(ReachEnv):
    """compute_reward measures the distance in a world frame 1000 units away, in the expanded form
    |a|^2 - 2 a.d + |d|^2 and in the goals' own dtype: exact enough in float64, which the env emits, but
    float32 copies (what many buffers store) cancel to noise far above the threshold."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        a = np.asarray(achieved_goal) + 1000.0
        d = np.asarray(desired_goal) + 1000.0
        squared = (a * a).sum(-1) - 2 * (a * d).sum(-1) + (d * d).sum(-1)
        return -(squared > THRESHOLD**2).astype(np.float64)


class ByteViewRewardEnv(ReachEnv):
    """compute_reward reads the goals' bytes as float64 (``.view``), right only for the dtype emitted."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        a = np.ascontiguousarray(achieved_goal).view(np.float64)
        d = np.ascontiguousarray(desired_goal).view(np.float64)
        return -(np.linalg.norm(a - d, axis=-1) > THRESHOLD).astype(np.float64)


class OnThresholdEnv(ReachEnv):
    """A correct env whose arm rests at the success threshold from the goal (the distance is 0.05 up to
    float64 rounding): float32 copies of the goals put about half those rows on the other side."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = super().reset(seed=seed, options=options)
        direction = self.np_random.normal(size=3)
        self.pos = self.goal + THRESHOLD * direction / np.linalg.norm(direction)
        return self._obs(), info

    def _move(self, action: np.ndarray) -> None:
        self.vel = np.zeros(3)


class SuccessBonusRewardEnv(ReachEnv):
    """compute_reward adds a bonus read from info['is_success'] (declared in reward_info_keys), which step
    computed for the original desired goal: a relabelled transition keeps the original goal's bonus."""

    reward_info_keys = ("is_success",)

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        success = info_values(info, "is_success", distance.shape, default=False)
        return -distance + np.asarray(success, dtype=np.float64)


class NoSuccessInfoEnv(ReachEnv):
    """info has no 'is_success' (only 'success')."""

    def step(self, action: np.ndarray):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {"success": info["is_success"]}


class GlobalRandomEnv(ReachEnv):
    """reset draws from global np.random, so the seed does not fix the start."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.goal = self.np_random.uniform(-0.3, 0.3, size=3)
        self.pos = np.random.uniform(-0.5, 0.5, size=3)  # noqa: NPY002 - the bug under test
        self.vel = np.zeros(3)
        return self._obs(), {}


class UnpicklableEnv(ReachEnv):
    """Holds a lambda, which pickle cannot serialise (deepcopy can)."""

    def __init__(self) -> None:
        super().__init__()
        self.shaping = lambda x: x


class SharedStateCopyEnv(ReachEnv):
    """__deepcopy__ makes a shallow copy whose state arrays are shared and updated in place."""

    def _move(self, action: np.ndarray) -> None:
        delta = 0.05 * np.clip(np.asarray(action, dtype=np.float64)[:3], -1.0, 1.0)
        self.vel[:] = delta
        self.pos[:] = np.clip(self.pos + delta, -1.0, 1.0)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        gym.Env.reset(self, seed=seed)
        self.goal = self.np_random.uniform(-0.3, 0.3, size=3)
        direction = self.np_random.normal(size=3)
        self.pos[:] = self.goal + 0.06 * direction / np.linalg.norm(direction)
        self.vel[:] = 0.0
        return self._obs(), {}

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedStateCopyEnv:
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        return clone


_CLIENTS: dict[int, dict[str, Any]] = {}  # client id -> its simulation, as pybullet keeps its clients


class SharedClientEnv(ReachEnv):
    """Keeps its position in a simulator client that its copies share by id and disconnect when deleted
    (as panda-gym's pybullet envs do): stepping a copy moves the original."""

    def __init__(self) -> None:
        self.client = len(_CLIENTS)
        _CLIENTS[self.client] = {"connected": True, "pos": np.zeros(3)}
        super().__init__()

    @property  # type: ignore[override]
    def pos(self) -> np.ndarray:
        return _CLIENTS[self.client]["pos"]

    @pos.setter
    def pos(self, value: np.ndarray) -> None:
        _CLIENTS[self.client]["pos"] = value

    def __del__(self) -> None:
        _CLIENTS[self.client]["connected"] = False

    def step(self, action: np.ndarray):
        if not _CLIENTS[self.client]["connected"]:
            raise RuntimeError("Not connected to physics server.")
        return super().step(action)


class AliasedObsEnv(ReachEnv):
    """Returns its own position array as the achieved goal and updates it in place."""

    def _obs(self) -> dict[str, np.ndarray]:
        obs = super()._obs()
        obs["achieved_goal"] = self.pos
        return obs

    def _move(self, action: np.ndarray) -> None:
        delta = 0.05 * np.clip(np.asarray(action, dtype=np.float64)[:3], -1.0, 1.0)
        self.vel = delta
        np.clip(self.pos + delta, -1.0, 1.0, out=self.pos)


class TerminationMismatchEnv(ReachEnv):
    """step ends the episode on success but compute_terminated says it never ends."""

    def step(self, action: np.ndarray):
        obs, reward, _, truncated, info = super().step(action)
        return obs, reward, bool(info["is_success"]), truncated, info


class TerminatesWithoutComputeTerminatedEnv(ReachEnv):
    """step ends the episode on success, and the env has no compute_terminated to say so for other goals
    (stable-baselines3's BitFlippingEnv and highway-env's parking do this; SB3 issue 627)."""

    compute_terminated = None  # type: ignore[assignment]

    def step(self, action: np.ndarray):
        self._move(action)
        obs = self._obs()
        info = self._info(obs)
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
        return obs, reward, info["is_success"], False, info


class OneEntryOutOfBoundsEnv(ReachEnv):
    """One entry of the observation (index 7 of 25) lies outside the space's bounds."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space["observation"] = spaces.Box(-1.0, 1.0, shape=(25,), dtype=np.float64)

    def _obs(self) -> dict[str, np.ndarray]:
        obs = super()._obs()
        obs["observation"][7] = 2.0
        return obs


class DictGoalEnv(ReachEnv):
    """Goals are dicts of arrays (as Gymnasium-Robotics' FrankaKitchen has)."""

    def __init__(self) -> None:
        super().__init__()
        goal = spaces.Dict({"hand": spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float64)})
        self.observation_space = spaces.Dict(
            {
                "observation": self.observation_space["observation"],
                "achieved_goal": goal,
                "desired_goal": goal,
            }
        )

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return super().compute_reward(achieved_goal["hand"], desired_goal["hand"], info)

    def _obs(self) -> dict[str, Any]:
        obs: dict[str, Any] = super()._obs()
        obs["achieved_goal"], obs["desired_goal"] = (
            {"hand": obs["achieved_goal"]},
            {"hand": obs["desired_goal"]},
        )
        return obs

    def _info(self, obs: dict[str, Any]) -> dict[str, Any]:
        return {"is_success": bool(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], None) == 0)}

    def step(self, action: np.ndarray):
        self._move(action)
        obs = self._obs()
        info = self._info(obs)
        return (
            obs,
            float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info)),
            False,
            False,
            info,
        )


class BoolRewardEnv(ReachEnv):
    """compute_reward returns a bool "not there yet" flag while step returns -1.0 for it: buffers store
    the bool as +1.0, so relabelled failures get the opposite sign."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1) > THRESHOLD

    def step(self, action: np.ndarray):
        obs, _, terminated, truncated, info = super().step(action)
        reward = -float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
        return obs, reward, terminated, truncated, info


class InfoNoneEnv(ReachEnv):
    """compute_reward iterates over the info batch, so info=None (stable-baselines 2's HER) raises."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        infos = [info] if isinstance(info, dict) else info
        bonus = np.array([float(i.get("bonus", 0.0)) for i in infos])
        return super().compute_reward(achieved_goal, desired_goal, info) + bonus.reshape(
            np.shape(achieved_goal)[:-1]
        )


class InfoListOnlyEnv(ReachEnv):
    """compute_reward reads infos as dicts of one transition each, so one dict of arrays for the batch
    (OpenAI baselines' layout) raises."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        for one in [] if info is None else [info] if isinstance(info, dict) else info:
            float(one.get("is_success", False))  # one transition's flag; a batch's array raises
        return super().compute_reward(achieved_goal, desired_goal, info)


class TasksDoneRewardEnv(ReachEnv):
    """compute_reward counts the reached goals it is given in the env's state, which the observation
    shows (as FrankaKitchen's compute_reward updates its completed tasks): relabelling changes the env."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.done_tasks = 0
        return super().reset(seed=seed, options=options)

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        reward = super().compute_reward(achieved_goal, desired_goal, info)
        self.done_tasks = getattr(self, "done_tasks", 0) + int(np.sum(reward == 0))
        return reward

    def _obs(self) -> dict[str, np.ndarray]:
        obs = super()._obs()
        obs["observation"][-1] = getattr(self, "done_tasks", 0)
        return obs


class AliasedInfoEnv(ReachEnv):
    """info["path"] is the env's own list of positions, appended to at every step."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.path: list[float] = []
        return super().reset(seed=seed, options=options)

    def _info(self, obs: dict[str, np.ndarray]) -> dict[str, Any]:
        self.path.append(float(obs["achieved_goal"][0]))
        return {**super()._info(obs), "path": self.path}


class OneStepEpisodesEnv(ReachEnv):
    """Every episode ends after one step: HER's "future" goals have nothing to draw from."""

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return np.ones(np.shape(achieved_goal)[:-1], dtype=bool)


class TimeoutAsTerminatedEnv(ReachEnv):
    """The env's own 20-step time limit is reported as terminated=True, not truncated."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.t = 0
        return super().reset(seed=seed, options=options)

    def step(self, action: np.ndarray):
        obs, reward, terminated, truncated, info = super().step(action)
        self.t += 1
        return obs, reward, terminated or self.t >= 20, truncated, info


class StartsAtGoalEnv(ReachEnv):
    """Half the resets put the agent on its goal: free successes."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = super().reset(seed=seed, options=options)
        if self.np_random.random() < 0.5:
            self.pos = self.goal.copy()
        return self._obs(), info


class GoalInObservationEnv(ReachEnv):
    """obs['observation'] ends with goal - position, which relabelling leaves pointing at the old goal."""

    def _obs(self) -> dict[str, np.ndarray]:
        obs = super()._obs()
        obs["observation"][-3:] = self.goal - self.pos
        return obs


class SuccessThresholdMismatchEnv(ReachEnv):
    """info["is_success"] uses half the reward's threshold: the logged success rate is another task."""

    def _info(self, obs: dict[str, np.ndarray]) -> dict[str, Any]:
        return {
            "is_success": bool(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"]) < THRESHOLD / 2)
        }


class GoalNamedEnv(ReachEnv):
    """compute_reward names its desired goal ``goal`` (as Gymnasium-Robotics' Fetch does)."""

    def compute_reward(self, achieved_goal: Any, goal: Any, info: Any) -> np.ndarray:  # type: ignore[override]
        return super().compute_reward(achieved_goal, goal, info)


class ColumnRewardEnv(ReachEnv):
    """compute_reward keeps the reduced axis: shape (B, 1) for a batch."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        d = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1, keepdims=True)
        return -(d > THRESHOLD).astype(np.float64)

    def step(self, action: np.ndarray):
        self._move(action)
        obs = self._obs()
        info = self._info(obs)
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info)[0])
        return obs, reward, False, False, info


class NaNObservationEnv(ReachEnv):
    """An unstable integration: from the 10th step of an episode on, the state is NaN."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.t = 0
        return super().reset(seed=seed, options=options)

    def _move(self, action: np.ndarray) -> None:
        super()._move(action)
        self.t += 1
        if self.t >= 10:
            self.vel = np.full(3, np.nan)


class StaleGoalAtResetEnv(ReachEnv):
    """reset builds its observation before drawing the new goal: the first one shows the old goal."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        old_goal = self.goal.copy()
        super().reset(seed=seed, options=options)
        new_goal, self.goal = self.goal, old_goal
        obs = self._obs()
        self.goal = new_goal
        return obs, {}


class SameStepResetVectorEnv(gym.vector.VectorEnv):
    """A native vector env that resets finished sub-envs in the same step yet declares NextStep autoreset:
    the step that ends an episode returns the next episode's first observation and goal."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 4, max_steps: int = 10) -> None:
        self.num_envs, self.max_steps = num_envs, max_steps
        box = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.single_observation_space = spaces.Dict(
            {"observation": box, "achieved_goal": box, "desired_goal": box}
        )
        self.single_action_space = box
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(box, num_envs)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.pos.copy(),
            "achieved_goal": self.pos.copy(),
            "desired_goal": self.goal.copy(),
        }

    def _draw(self, rows: np.ndarray) -> None:
        self.pos[rows] = self.rng.uniform(-1, 1, (len(rows), 2))
        self.goal[rows] = self.rng.uniform(-1, 1, (len(rows), 2))
        self.t[rows] = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.rng = np.random.default_rng(seed)
        self.pos = np.zeros((self.num_envs, 2), np.float32)
        self.goal = np.zeros((self.num_envs, 2), np.float32)
        self.t = np.zeros(self.num_envs, int)
        self._draw(np.arange(self.num_envs))
        return self._obs(), {}

    def step(self, actions: np.ndarray):
        self.pos = np.clip(self.pos + 0.3 * np.asarray(actions, np.float32), -1, 1).astype(np.float32)
        self.t += 1
        obs = self._obs()
        rewards = self.compute_reward(obs["achieved_goal"], obs["desired_goal"], {})
        truncated = self.t >= self.max_steps
        if truncated.any():  # reset now, though the metadata says the next step does
            self._draw(np.flatnonzero(truncated))
            obs = self._obs()
        return obs, rewards, np.zeros(self.num_envs, bool), truncated, {}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        d = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return -(d > 0.15).astype(np.float32)


class ScalarTerminatedEnv(ReachEnv):
    """compute_terminated collapses a batch to one bool (as Gymnasium-Robotics' maze does)."""

    def __init__(self) -> None:
        super().__init__(terminate_on_success=True)

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return np.asarray(bool(np.linalg.norm(np.asarray(achieved_goal) - desired_goal) <= THRESHOLD))


class InfoKeyRequiredEnv(ReachEnv):
    """compute_reward and compute_terminated need info["crashed"], with no default: stable-baselines3's
    HerReplayBuffer, which passes empty infos unless copy_info_dict=True, stops at its first sample."""

    def __init__(self) -> None:
        super().__init__(terminate_on_success=True)

    def _info(self, obs: dict[str, np.ndarray]) -> dict[str, Any]:
        return {**super()._info(obs), "crashed": bool(np.abs(obs["achieved_goal"]).max() >= 1.0)}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        crashed = info_values(info, "crashed", np.shape(achieved_goal)[:-1])  # no default: raises
        return super().compute_reward(achieved_goal, desired_goal, info) - 5.0 * crashed

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        crashed = info_values(info, "crashed", np.shape(achieved_goal)[:-1]).astype(bool)
        return super().compute_terminated(achieved_goal, desired_goal, info) | crashed


class InfoKeyDeclaredEnv(InfoKeyRequiredEnv):
    """InfoKeyRequiredEnv that declares the info key its compute_reward reads: correct."""

    reward_info_keys = ("crashed",)


class InfoKeyUnderdeclaredEnv(InfoKeyRequiredEnv):
    """Declares an info key, but not the one compute_reward reads: a buffer that stores only the
    declared keys relabels without the crash penalty."""

    reward_info_keys = ("is_success",)


class InfoKeyNotInInfoEnv(ReachEnv):
    """Declares an info key that no step's info carries."""

    reward_info_keys = ("crashed",)


class NoComputeRewardEnv(gym.Env):
    """A Dict-observation env without compute_reward."""

    def __init__(self) -> None:
        self._inner = ReachEnv()
        self.observation_space = self._inner.observation_space
        self.action_space = self._inner.action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return self._inner.reset(seed=seed, options=options)

    def step(self, action: np.ndarray):
        return self._inner.step(action)


class WideAchievedGoalEnv(ReachEnv):
    """The achieved goal can leave the desired_goal space (it is wider)."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = spaces.Dict(
            {
                "observation": self.observation_space["observation"],
                "achieved_goal": spaces.Box(-2.0, 2.0, shape=(3,), dtype=np.float64),
                "desired_goal": spaces.Box(-0.2, 0.2, shape=(3,), dtype=np.float64),
            }
        )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = super().reset(seed=seed, options=options)
        self.goal = self.np_random.uniform(-0.2, 0.2, size=3)
        return self._obs(), info


class ScaleGoalsWrapper(gym.ObservationWrapper):
    """Rescales both goals to [-0.5, 0.5] (and says so in its space), but keeps the inner compute_reward."""

    def __init__(self, env: gym.Env, keep_space: bool = False) -> None:
        super().__init__(env)
        if not keep_space:
            goal = spaces.Box(-0.5, 0.5, shape=(3,), dtype=np.float64)
            self.observation_space = spaces.Dict(
                {
                    "observation": env.observation_space["observation"],
                    "achieved_goal": goal,
                    "desired_goal": goal,
                }
            )

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = dict(observation)
        out["achieved_goal"] = 0.5 * observation["achieved_goal"]
        out["desired_goal"] = 0.5 * observation["desired_goal"]
        return out


class AssertInInitEnv(ReachEnv):
    """Raises a bare AssertionError (no message) while being made, as many third-party envs do."""

    def __init__(self, size: int = 0) -> None:
        assert size > 0
        super().__init__()


# ---- envs that hang or fail to close: the checker's time limits and the CLI's cleanup ---------------


class HangingStepEnv(ReachEnv):
    """``step`` loops forever in Python: a settle loop whose exit condition is never met."""

    def step(self, action: np.ndarray):
        settled = False
        while not settled:  # pos is clipped to [-1, 1]: never settles
            settled = bool(self.pos[0] > 2.0)
        return super().step(action)


class SleepingRewardEnv(ReachEnv):
    """``compute_reward`` waits forever (for a result that never comes); ``step`` has its own reward."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        time.sleep(10**6)
        return super().compute_reward(achieved_goal, desired_goal, info)

    def step(self, action: np.ndarray):
        self._move(action)
        obs = self._obs()
        reward = -float(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"]) > THRESHOLD)
        return obs, reward, False, False, self._info(obs)


class StuckInCEnv(ReachEnv):
    """``step`` deadlocks in C (a mutex locked twice), as a simulator extension can: no signal stops it.

    With ``release_gil`` the C call releases the GIL (``ctypes.CDLL``, as simulators' steps do);
    without, it holds it (``ctypes.PyDLL``), so no other Python thread runs either. Linux (glibc) only.
    """

    def __init__(self, release_gil: bool = True) -> None:
        super().__init__()
        self.release_gil = release_gil

    def step(self, action: np.ndarray):
        libc = ctypes.CDLL(None) if self.release_gil else ctypes.PyDLL(None)
        mutex = ctypes.create_string_buffer(64)  # all zeros: a PTHREAD_MUTEX_INITIALIZER on glibc
        libc.pthread_mutex_lock(mutex)
        libc.pthread_mutex_lock(mutex)  # a default mutex locked again by its owner: never returns
        return super().step(action)


class CloseRaisesEnv(ReachEnv):
    """A correct env whose ``close`` raises."""

    def close(self) -> None:
        raise RuntimeError("the simulator was already shut down")


class CloseHangsEnv(ReachEnv):
    """A correct env whose ``close`` waits forever (for a simulator process that never exits)."""

    def close(self) -> None:
        time.sleep(10**6)


# ---- envs whose process ends or forks: the CLI runs the checks in a child process and reports its end ---


class SysExitStepEnv(ReachEnv):
    """``step`` calls ``sys.exit(3)`` (a script's error handling copied into an env)."""

    def step(self, action: np.ndarray):
        sys.exit(3)


class OsExitStepEnv(ReachEnv):
    """``step`` calls ``os._exit(7)``: the process ends at once, nothing unwinds."""

    def step(self, action: np.ndarray):
        os._exit(7)


class SegfaultStepEnv(ReachEnv):
    """``step`` crashes the process with SIGSEGV, as a simulator's C code can."""

    def step(self, action: np.ndarray):
        os.kill(os.getpid(), signal.SIGSEGV)
        return super().step(action)


class ForkingStepEnv(ReachEnv):
    """The first ``step`` forks a helper process that sleeps forever and is never reaped (a simulator
    server started and forgotten); the env itself is correct."""

    forked = False

    def step(self, action: np.ndarray):
        if not self.forked:
            self.forked = True
            if os.fork() == 0:  # the helper: never returns
                while True:
                    time.sleep(1000)
        return super().step(action)


def make_reach(env_cls: type[gym.Env] = ReachEnv, max_episode_steps: int = 50, **kwargs: Any) -> gym.Env:
    """``env_cls(**kwargs)`` under a TimeLimit, as ``gym.make`` would wrap it."""
    return gym.wrappers.TimeLimit(env_cls(**kwargs), max_episode_steps=max_episode_steps)


for _id, _cls in (
    ("CheckerReach-v0", ReachEnv),
    ("CheckerActionPenalty-v0", ActionPenaltyEnv),
    ("CheckerAssertInInit-v0", AssertInInitEnv),
    ("CheckerHangingStep-v0", HangingStepEnv),
    ("CheckerSleepingReward-v0", SleepingRewardEnv),
    ("CheckerStuckInC-v0", StuckInCEnv),
    ("CheckerCloseRaises-v0", CloseRaisesEnv),
    ("CheckerCloseHangs-v0", CloseHangsEnv),
    ("CheckerSysExitStep-v0", SysExitStepEnv),
    ("CheckerOsExitStep-v0", OsExitStepEnv),
    ("CheckerSegfaultStep-v0", SegfaultStepEnv),
    ("CheckerForkingStep-v0", ForkingStepEnv),
):
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=_cls, max_episode_steps=50)
