"""The settings of a parking task (highway-env's config keys that change it), checked once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from goalenvs._util import check_bool, check_int, check_real
from goalenvs.envs.parking.lot import N_SPOTS, OBS_DIM

__all__ = ["ParkingConfig"]


class ParkingConfig:
    """The validated settings of a parking task (highway-env's config keys that change the task).

    Every argument is checked here, so a bad value fails at construction with a message naming it.
    See :class:`~goalenvs.envs.parking.ParkingEnv` for what each one means.
    """

    __slots__ = (
        "acceleration_range",
        "add_walls",
        "collision_reward",
        "duration",
        "frames",
        "policy_frequency",
        "reward_weights",
        "simulation_frequency",
        "steering_range",
        "success_goal_reward",
        "vehicles_count",
    )

    def __init__(
        self,
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
        weights = np.asarray(reward_weights)
        if weights.shape != (OBS_DIM,) or not np.issubdtype(weights.dtype, np.number):
            raise ValueError(
                "reward_weights must be 6 numbers, one per goal feature [x, y, vx, vy, cos_h, sin_h], "
                f"got {reward_weights!r}"
            )
        weights = weights.astype(np.float64)
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError(f"reward_weights must be finite and >= 0, got {weights.tolist()}")
        self.reward_weights = weights
        self.reward_weights.flags.writeable = False
        # Success is a goal term above -success_goal_reward, so 0 or less could never succeed.
        self.success_goal_reward = check_real("success_goal_reward", success_goal_reward, 0, strict=True)
        self.collision_reward = check_real("collision_reward", collision_reward)
        self.steering_range = check_real("steering_range", steering_range)
        if not 0 < self.steering_range < np.pi / 2:
            raise ValueError(
                f"steering_range (the largest steering angle, radians) must be in (0, pi/2), "
                f"got {self.steering_range}"
            )
        self.acceleration_range = check_real("acceleration_range", acceleration_range, 0, strict=True)
        self.simulation_frequency = check_int("simulation_frequency", simulation_frequency, 1)
        self.policy_frequency = check_int("policy_frequency", policy_frequency, 1)
        if self.simulation_frequency % self.policy_frequency:
            raise ValueError(
                "simulation_frequency must be a multiple of policy_frequency (each action is held for "
                f"simulation_frequency // policy_frequency integration steps), got "
                f"simulation_frequency={self.simulation_frequency}, policy_frequency={self.policy_frequency}"
            )
        self.frames = self.simulation_frequency // self.policy_frequency
        self.duration = check_real("duration", duration, 0, strict=True)
        self.add_walls = check_bool("add_walls", add_walls)
        # At most 26 parked cars: 28 spots, less the ego's and the goal's.
        self.vehicles_count = check_int("vehicles_count", vehicles_count, 0, N_SPOTS - 2)

    @property
    def max_steps(self) -> int:
        """Steps in an episode that neither crashes nor succeeds: until the simulated time, summed one
        policy period at a time exactly as ``step`` sums it (float rounding included), reaches
        ``duration`` (500 for the default 100 s at 5 Hz)."""
        t, k, dt = 0.0, 0, 1 / self.policy_frequency
        while t < self.duration:
            t += dt
            k += 1
        return k

    def as_dict(self) -> dict[str, Any]:
        """The arguments that rebuild this config (``ParkingConfig(**c.as_dict())``)."""
        return {
            "reward_weights": tuple(self.reward_weights.tolist()),
            "success_goal_reward": self.success_goal_reward,
            "collision_reward": self.collision_reward,
            "steering_range": self.steering_range,
            "acceleration_range": self.acceleration_range,
            "simulation_frequency": self.simulation_frequency,
            "policy_frequency": self.policy_frequency,
            "duration": self.duration,
            "add_walls": self.add_walls,
            "vehicles_count": self.vehicles_count,
        }
