"""The parking task, :class:`ParkingTask`, and its two envs: :class:`ParkingEnv` (its batch of one
lot) and :class:`ParkingVectorEnv` (its batch of N lots).

Each formula of the task (the goal term, the reward, success, termination, truncation) is written
once, as a small function of arrays below; ``compute_*`` and the task's ``score`` (which both envs'
``step`` return) call those same functions, so a step's reward and flags are the ``compute_*``
answers on its own observation and info by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from goalenvs.core import NO_INFO_CAUSE, info_values_or_default
from goalenvs.envs.parking.config import ParkingConfig
from goalenvs.envs.parking.lot import MAX_SPEED, OBS_SCALES, POSE_LIMIT
from goalenvs.envs.parking.render import IMAGE_SIZE, RENDER_MODES, background_frame, render_frame
from goalenvs.envs.parking.scenes import OPTION_KEYS
from goalenvs.envs.parking.sim import ParkingBatch
from goalenvs.task import Task, TaskEnv, seed_generators
from goalenvs.vector import NativeVectorEnv

__all__ = [
    "ParkingEnv",
    "ParkingTask",
    "ParkingVectorEnv",
    "compute_reward",
    "compute_terminated",
    "compute_truncated",
    "goal_reward",
]

# ---- the task's formulas, each written once ---------------------------------------------------------


def goal_reward(
    achieved_goal: np.ndarray, desired_goal: np.ndarray, reward_weights: np.ndarray, p: float = 0.5
) -> np.ndarray:
    """The goal term ``-(|achieved - desired| . reward_weights) ** p`` over any leading batch shape."""
    # Multiply-then-sum rather than a matmul: BLAS may sum a batch in another order (or with FMA)
    # than one row, and a vector env's rewards must equal its single envs' to the bit.
    return -np.power(np.add.reduce(np.abs(achieved_goal - desired_goal) * reward_weights, axis=-1), p)


def _reward(goal_term: Any, crashed: Any, collision_reward: float) -> Any:
    """The reward of a step: its goal term plus ``collision_reward`` where it crashed."""
    return goal_term + collision_reward * crashed


def _success(goal_term: Any, success_goal_reward: float) -> Any:
    """Success: the goal term (with p = 0.5) above ``-success_goal_reward``."""
    return goal_term > -success_goal_reward


def _terminated(success: Any, crashed: Any) -> Any:
    """An episode ends on success or on a crash."""
    return success | crashed


def _truncated(time: Any, duration: float) -> Any:
    """An episode is cut short once its simulated time (seconds) reaches ``duration``."""
    return time >= duration


# ---- the compute_* functions: the formulas on (achieved_goal, desired_goal, info) -------------------


# An info without "crashed" or "time": what is lost, and how to keep it (warned once per process).
_NO_CRASH = (
    "Parking's {fn} got an info without 'crashed': it scores the goal term alone, so the crash penalty "
    "(collision_reward) is lost in relabelling {lost}. " + NO_INFO_CAUSE + "."
)
_NO_CRASH_REWARD = _NO_CRASH.format(fn="compute_reward", lost="and relabelled crashes look like safe steps")
_NO_CRASH_TERMINATED = _NO_CRASH.format(
    fn="compute_terminated", lost="and a crash ends no relabelled episode"
)
_NO_TIME = (
    "Parking's compute_truncated got an info without 'time': those transitions count as not truncated. "
    + NO_INFO_CAUSE
    + "."
)


def _crashed(info: Any, batch_shape: tuple[int, ...], warning: str) -> np.ndarray:
    # None means "no transition behind these goals": no crash. A dict (or a batch of them) without the
    # flag is what a buffer that keeps no infos passes (stable-baselines3's, by default): score the
    # goal term alone rather than crash training, and say once that the penalty is lost.
    if info is None:
        return np.zeros(batch_shape, dtype=bool)
    return info_values_or_default(info, "crashed", batch_shape, False, warning).astype(bool)


def compute_reward(
    achieved_goal: Any,
    desired_goal: Any,
    info: Any,
    *,
    reward_weights: np.ndarray,
    collision_reward: float,
    p: float = 0.5,
) -> np.ndarray:
    """Goal term plus ``collision_reward`` where ``info["crashed"]`` (see :meth:`ParkingEnv.compute_reward`)."""
    goal = goal_reward(
        np.asarray(achieved_goal, dtype=np.float64),
        np.asarray(desired_goal, dtype=np.float64),
        reward_weights,
        p,
    )
    return _reward(goal, _crashed(info, goal.shape, _NO_CRASH_REWARD), collision_reward)


def compute_terminated(
    achieved_goal: Any,
    desired_goal: Any,
    info: Any,
    *,
    reward_weights: np.ndarray,
    success_goal_reward: float,
) -> np.ndarray:
    """Success (goal term > ``-success_goal_reward``, with p = 0.5) or ``info["crashed"]``."""
    goal = goal_reward(
        np.asarray(achieved_goal, dtype=np.float64),
        np.asarray(desired_goal, dtype=np.float64),
        reward_weights,
    )
    success = _success(goal, success_goal_reward)
    return _terminated(success, _crashed(info, success.shape, _NO_CRASH_TERMINATED))


def compute_truncated(achieved_goal: Any, desired_goal: Any, info: Any, *, duration: float) -> np.ndarray:
    """Whether ``info["time"]`` (simulated seconds since reset) has reached ``duration``."""
    batch_shape = np.shape(achieved_goal)[:-1]
    return np.asarray(
        _truncated(info_values_or_default(info, "time", batch_shape, -np.inf, _NO_TIME), duration)
    )


class ParkingTask(Task):
    """The parking task of a :class:`ParkingConfig`: the functions both envs are built from.

    The state of ``n`` lots is a :class:`ParkingBatch` (each lot's random generator in its ``rngs``).
    """

    action_help = "acceleration and steering, clipped to [-1, 1]"
    reset_option_keys = OPTION_KEYS

    def __init__(self, config: ParkingConfig) -> None:
        self.config = config
        self._weights = config.reward_weights
        self._spaces = _spaces(config)
        self._background: np.ndarray | None = None  # the lot without cars, drawn at the first render

    @property
    def observation_space(self) -> spaces.Dict:
        return self._spaces[0]

    @property
    def action_space(self) -> spaces.Box:
        return self._spaces[1]

    # ---- the goal functions: the formulas on (achieved_goal, desired_goal, info) -----------------

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any, p: float = 0.5) -> np.ndarray:
        """``-(|achieved - desired| . reward_weights) ** p + collision_reward * info["crashed"]``.

        Vectorized over leading batch dimensions. ``info`` is a step's info, a dict of arrays, a batch
        of info dicts (what a replay buffer stores), or None for the goal term alone. The crash term
        does not depend on the goal, so it is kept when a transition is relabelled with another goal.
        An info without ``"crashed"`` scores the goal term alone and warns once (the penalty is lost).
        """
        c = self.config
        return compute_reward(
            achieved_goal,
            desired_goal,
            info,
            reward_weights=self._weights,
            collision_reward=c.collision_reward,
            p=p,
        )

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Success (goal term > -success_goal_reward) or ``info["crashed"]``."""
        return compute_terminated(
            achieved_goal,
            desired_goal,
            info,
            reward_weights=self._weights,
            success_goal_reward=self.config.success_goal_reward,
        )

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """``info["time"] >= duration`` (False, with a warning once, where an info has no ``"time"``)."""
        return compute_truncated(achieved_goal, desired_goal, info, duration=self.config.duration)

    # ---- the task's part of the two envs ---------------------------------------------------------

    def new_state(self, n: int) -> ParkingBatch:
        return ParkingBatch(self.config, n)

    def seed(self, state: ParkingBatch, seeds: np.ndarray, envs: np.ndarray) -> None:
        seed_generators(state.rngs, seeds, envs)

    def reset(self, state: ParkingBatch, envs: np.ndarray, options: dict[str, Any] | None) -> None:
        state.reset([state.rngs[i] for i in envs.tolist()], envs, options)

    def step(self, state: ParkingBatch, actions: np.ndarray, skip: np.ndarray) -> None:
        # Every lot is simulated (fixed shapes, no gather/scatter); the lots in skip (ended last step,
        # NEXT_STEP) are then overwritten by a fresh scene, so they skip the collision tests.
        state.simulate(actions, skip=skip)

    def observe(self, state: ParkingBatch) -> dict[str, np.ndarray]:
        return state.observe()

    def score(self, state: ParkingBatch, obs: dict[str, np.ndarray]) -> Any:
        # The compute_* formulas on (obs, info), the goal term (the costliest of them, shared by
        # success and the reward) computed once.
        c = self.config
        goal = goal_reward(obs["achieved_goal"], obs["desired_goal"], self._weights)
        success = _success(goal, c.success_goal_reward)
        info = {
            "speed": state.speed.copy(),
            "crashed": state.crashed.copy(),
            "is_success": success,
            "time": state.time.copy(),
        }
        reward = _reward(goal, info["crashed"], c.collision_reward)
        terminated = _terminated(success, info["crashed"])
        return info, reward, terminated, _truncated(info["time"], c.duration)

    def render(self, state: ParkingBatch, env: int, render_mode: str | None) -> np.ndarray | None:
        """Lot ``env``'s top view (``IMAGE_SIZE`` RGB), whatever the render mode; None without one."""
        if render_mode is None:
            gym.logger.warn(
                'render() called without a render_mode; make the env with render_mode="rgb_array"'
            )
            return None
        if self._background is None:
            self._background = background_frame(self.config.add_walls)
        return render_frame(state, env, self._background)


# ---- the envs ---------------------------------------------------------------------------------------


def _spaces(config: ParkingConfig) -> tuple[spaces.Dict, spaces.Box]:
    """Observation and action spaces. highway-env declares its boxes (-inf, inf); finite bounds say more
    and keep Gymnasium's checker quiet. No episode can leave them: a reset pose lies within
    ``POSE_LIMIT`` m of the centre, speed stays under ``40 + acceleration_range * dt`` m/s (the cap
    pulls it back once past 40), so the car travels less than twice that times ``duration``.
    """
    top_speed = MAX_SPEED + config.acceleration_range / config.simulation_frequency
    reach = POSE_LIMIT + 2 * top_speed * (config.duration + 1)
    high = np.array([reach, reach, top_speed, top_speed, 1.0, 1.0]) / OBS_SCALES
    box = spaces.Box(-high, high, dtype=np.float64)
    obs_space = spaces.Dict({"desired_goal": box, "achieved_goal": box, "observation": box})
    return obs_space, spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)


class ParkingEnv(TaskEnv):
    """Park a car in a given spot of a parking lot: highway-env's ``parking-v0``.

    ## Description
    A car (kinematic bicycle, 5 m x 2 m) starts at rest in the aisle of a lot with two rows of 14
    spots (4 m wide, 8 m deep) enclosed by walls (70 m x 42 m) and must stop in a goal spot, facing
    into it. This reproduces highway-env 1.12's ``parking-v0`` (credited there to Munir Jojo-Verge):
    same numbers, same integration, collision and goal-sampling rules, float64 observations that match
    highway-env's to rounding, and, from the same seed, the same start scenes.

    ## Action Space
    ``Box(-1, 1, (2,), float32)``: ``[acceleration, steering]``, clipped to [-1, 1] then mapped
    linearly to ``[-acceleration_range, acceleration_range]`` m/s^2 and
    ``[-steering_range, steering_range]`` rad (5 m/s^2 and pi/4 by default). Each action is held for
    ``simulation_frequency // policy_frequency`` integration steps (15 Hz / 5 Hz: 3 steps of 1/15 s).
    An action with a NaN or infinite entry raises ``ValueError`` before the car moves (highway-env's
    clipping passes NaN on, and the car's pose would be NaN for the rest of the episode).

    ## Observation Space
    ``Dict`` of three ``Box((6,), float64)``: ``observation`` and ``achieved_goal`` are the car's
    ``[x, y, vx, vy, cos(heading), sin(heading)]`` divided by ``[100, 100, 5, 5, 1, 1]``;
    ``desired_goal`` is the goal pose in the same form (speed 0). No normalisation or clipping, as
    highway-env's ``KinematicsGoal`` observation with ``normalize=False``. ``vx, vy`` is
    ``speed * (cos h, sin h)`` (highway-env leaves the slip angle out of the velocity). highway-env
    declares ``(-inf, inf)`` bounds; these are finite (the farthest a car can get in ``duration``
    seconds, and at most ``40 + acceleration_range / simulation_frequency`` m/s), which Gymnasium's
    checker prefers; the values are the same.

    ## Rewards
    ``compute_reward(ag, dg, info, p=0.5) = -(|ag - dg| . reward_weights) ** p
    + collision_reward * info["crashed"]``, weights ``[1, 0.3, 0, 0, 0.02, 0.02]``, collision -5.

    highway-env adds the collision term in ``step`` only; its ``compute_reward`` ignores ``info``, so
    a HER buffer that relabels through ``compute_reward`` silently drops the crash penalty and the
    relabelled rewards of crashing transitions differ from the rewards the env gave. Here ``step``
    returns exactly ``compute_reward(ag, dg, info)`` and the crash flag travels in ``info["crashed"]``.
    A crash does not depend on the goal, so adding it to a relabelled reward is correct: the
    transition crashed whatever goal it is scored against. ``info=None`` scores goals alone (no crash
    term). An info without ``"crashed"`` (stable-baselines3's ``HerReplayBuffer`` passes empty ones
    unless ``copy_info_dict=True``) scores the goal term alone too, as highway-env's does, and warns
    once that the crash penalty is lost in relabelling; ``copy_info_dict=True`` keeps it.

    ## Starting State
    The car at (0, 0), speed 0, heading uniform in [0, 2 pi). The goal is a spot drawn uniformly from
    the 27 spots other than the one nearest the car (highway-env's lane-distance rule); then
    ``vehicles_count`` parked cars fill spots drawn uniformly from those still free.
    ``reset(options={"ego_pose": (x, y, heading), "goal_pose": (x, y, heading)})`` (metres, radians;
    either key may be left out) puts the car or the goal anywhere instead of drawing them, e.g. for
    curricula or fixed evaluations; the spot nearest a given pose is kept free of parked cars.

    ## Episode End
    Terminated on success (goal term > ``-success_goal_reward``, i.e. -0.12, computed with p = 0.5)
    or on a crash into a wall or a parked car: highway-env's separating-axis test on the car's and the
    obstacle's rectangles, which also crashes a car that *will* overlap after its next integration
    step (it is pushed out, then marked crashed). Truncated once ``info["time"]``, the simulated time,
    reaches ``duration`` (100 s: 500 actions at 5 Hz); the env truncates itself, there is no
    ``TimeLimit`` (highway-env registers none either).

    ``info``: ``speed`` (m/s), ``crashed``, ``is_success``, ``time`` (s).

    ## Arguments
    ``gym.make("goalenvs/Parking-v0", **kwargs)`` with any of (highway-env's config keys):

    * ``reward_weights`` (6 numbers >= 0, default ``(1, 0.3, 0, 0, 0.02, 0.02)``);
    * ``success_goal_reward`` (> 0, default 0.12); ``collision_reward`` (default -5);
    * ``steering_range`` (rad in (0, pi/2), default pi/4) and ``acceleration_range`` (m/s^2 > 0,
      default 5): the action's ranges (highway-env's ``ContinuousAction`` defaults; its config key
      ``steering_range`` is never read there, so it is not the same knob);
    * ``simulation_frequency`` (Hz, default 15), ``policy_frequency`` (Hz, default 5; must divide it);
    * ``duration`` (s, default 100); ``add_walls`` (default True);
    * ``vehicles_count`` (parked cars, 0..26, default 0; highway-env's ``parking-parked-v0`` is 10);
    * ``render_mode``: ``"rgb_array"`` (numpy only, a 640 x 400 top view), or ``"human"`` when pygame
      is installed.

    One controlled car only (highway-env's ``controlled_vehicles`` > 1 is not supported).

    ## Version History
    * v0: first version, numerically matching highway-env 1.12.1's ``parking-v0``.
    """

    metadata = {"render_modes": RENDER_MODES, "render_fps": 5}
    reward_info_keys = ("crashed",)
    _task: ParkingTask

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        reward_weights: Sequence[float] = (1.0, 0.3, 0.0, 0.0, 0.02, 0.02),
        success_goal_reward: float = 0.12,
        collision_reward: float = -5.0,
        steering_range: float = np.pi / 4,
        acceleration_range: float = 5.0,
        simulation_frequency: int = 15,
        policy_frequency: int = 5,
        duration: float = 100.0,
        add_walls: bool = True,
        vehicles_count: int = 0,
    ) -> None:
        config = ParkingConfig(
            reward_weights=reward_weights,
            success_goal_reward=success_goal_reward,
            collision_reward=collision_reward,
            steering_range=steering_range,
            acceleration_range=acceleration_range,
            simulation_frequency=simulation_frequency,
            policy_frequency=policy_frequency,
            duration=duration,
            add_walls=add_walls,
            vehicles_count=vehicles_count,
        )
        self._init_task(ParkingTask(config), render_mode)
        self.config = self._task.config
        self.metadata = {**self.metadata, "render_fps": self.config.policy_frequency}
        self._window: Any = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        out = super().reset(seed=seed, options=options)
        if self.render_mode == "human":
            self.render()
        return out

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        out = super().step(action)
        if self.render_mode == "human":
            self.render()
        return out

    def render(self) -> np.ndarray | None:
        frame = super().render()
        if self.render_mode != "human":
            return frame
        self._show(frame)
        return None

    def _show(self, frame: np.ndarray) -> None:
        import pygame  # only for render_mode="human", listed only when pygame is installed

        if self._window is None:
            pygame.init()
            self._window = pygame.display.set_mode(IMAGE_SIZE)
            pygame.display.set_caption("goalenvs/Parking-v0")
        pygame.event.pump()
        self._window.blit(pygame.surfarray.make_surface(frame.swapaxes(0, 1)), (0, 0))
        pygame.display.flip()

    def close(self) -> None:
        if self._window is not None:
            import pygame

            pygame.display.quit()
            self._window = None
        super().close()


class ParkingVectorEnv(NativeVectorEnv):
    """``num_envs`` parking lots stepped as one batch (see :class:`ParkingEnv` for the task).

    ``gym.make_vec("goalenvs/Parking-v0", num_envs=N, **kwargs)``: ParkingEnv's arguments, plus

    * ``num_envs`` (int >= 1). ``reset(seed=s)`` seeds lot ``i`` with ``s + i`` (a list seeds each
      lot), so lot ``i`` replays exactly what ``ParkingEnv`` reset with seed ``s + i`` does,
      autoresets included;
    * ``autoreset_mode``: ``AutoresetMode.NEXT_STEP`` (default; Gymnasium's: the step after a lot's
      episode ends resets it, ignores its action and returns its first observation with reward 0,
      terminated and truncated False) or ``SAME_STEP`` (the lot restarts within the step; in a step
      that ends an episode, ``info["final_obs"]`` is an object array holding each ended lot's last
      observation dict, None elsewhere, and ``info["final_info"]`` their last infos) or ``DISABLED``
      (reset ended lots with ``options={"reset_mask": mask}``; torchrl's choice). The
      ``autoreset_mode`` attribute and ``metadata["autoreset_mode"]``;
    * ``batched_final_obs`` (opt-in, ``SAME_STEP`` only): ``info["final_obs"]`` is one dict of
      ``(num_envs, ...)`` arrays instead, rows valid where ``info["_final_obs"]``.

    ``reset(options=...)`` takes ``ego_pose`` and ``goal_pose`` as one pose for every lot or an
    ``(N, 3)`` array. ``info`` is what Gymnasium's ``SyncVectorEnv`` of ``ParkingEnv`` returns, key
    for key: a dict of arrays with ``"_" + key`` masks (all True), and the ``final_*`` keys above.
    ``render()`` returns a tuple of ``num_envs`` frames.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 5, "autoreset_mode": AutoresetMode.NEXT_STEP}
    reward_info_keys = ("crashed",)
    _task: ParkingTask

    def __init__(
        self,
        num_envs: int = 1,
        render_mode: str | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        batched_final_obs: bool = False,
        *,
        reward_weights: Sequence[float] = (1.0, 0.3, 0.0, 0.0, 0.02, 0.02),
        success_goal_reward: float = 0.12,
        collision_reward: float = -5.0,
        steering_range: float = np.pi / 4,
        acceleration_range: float = 5.0,
        simulation_frequency: int = 15,
        policy_frequency: int = 5,
        duration: float = 100.0,
        add_walls: bool = True,
        vehicles_count: int = 0,
    ) -> None:
        task = ParkingTask(
            ParkingConfig(
                reward_weights=reward_weights,
                success_goal_reward=success_goal_reward,
                collision_reward=collision_reward,
                steering_range=steering_range,
                acceleration_range=acceleration_range,
                simulation_frequency=simulation_frequency,
                policy_frequency=policy_frequency,
                duration=duration,
                add_walls=add_walls,
                vehicles_count=vehicles_count,
            )
        )
        self._init_vector(task, num_envs, render_mode, autoreset_mode, batched_final_obs)
        self.config = task.config
        self.metadata = {**self.metadata, "render_fps": self.config.policy_frequency}
