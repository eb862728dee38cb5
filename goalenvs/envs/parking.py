"""Parking: steer a car into a parking spot, highway-env's ``parking-v0`` in vectorized numpy.

The task is written once, as functions over a leading batch axis (kinematic bicycle dynamics, the
oriented-rectangle collision test, the observation, reward, success and episode-end flags, the random
start); :class:`ParkingEnv` is the batch of one and :class:`ParkingVectorEnv` the batch of N.

It reproduces highway-env 1.12's ``parking-v0`` number for number (the collision test to rounding
error): the same lot, car, action mapping, integration order, collision rule (including its "will
intersect next step" push), goal sampling, observation scaling, reward, success, crash and truncation
rules, and the same random draws: each lot draws from its own generator as highway-env draws from its
``np_random``, so ``reset(seed=s)`` gives the scene highway-env gives for ``reset(seed=s)``.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from goalenvs.core import NO_INFO_CAUSE, GoalEnv, info_values_or_default

__all__ = [
    "ParkingConfig",
    "ParkingEnv",
    "ParkingVectorEnv",
    "box_collision",
    "compute_reward",
    "compute_terminated",
    "compute_truncated",
    "goal_reward",
    "sample_scenes",
]

# --------------------------------------------------------------------------------------------------
# Constants of the task (highway-env's values; the names say where they come from).
# --------------------------------------------------------------------------------------------------

CAR_LENGTH = 5.0  # Vehicle.LENGTH [m]
CAR_WIDTH = 2.0  # Vehicle.WIDTH [m]
CAR_DIAGONAL = math.sqrt(CAR_LENGTH**2 + CAR_WIDTH**2)
MAX_SPEED = 40.0  # Vehicle.MAX_SPEED [m/s]
MIN_SPEED = -40.0  # Vehicle.MIN_SPEED [m/s]

SPOTS_PER_ROW = 14  # ParkingEnv._create_road(spots=14)
SPOT_WIDTH = 4.0  # [m]
SPOT_LENGTH = 8.0  # [m]
SPOT_Y_OFFSET = 10.0  # the rows start 10 m either side of the aisle's centre line
N_SPOTS = 2 * SPOTS_PER_ROW
LOT_WIDTH, LOT_HEIGHT = 70.0, 42.0  # the walls' extent [m]
WALL_THICKNESS = 1.0

#: Observation and goal features ``[x, y, vx, vy, cos_h, sin_h]`` are divided by these.
OBS_SCALES = np.array([100.0, 100.0, 5.0, 5.0, 1.0, 1.0])
OBS_DIM = 6
#: ``reset(options=...)`` poses must lie within this many metres of the lot's centre, in x and y.
POSE_LIMIT = 100.0


def _spot_geometry() -> tuple[np.ndarray, ...]:
    """Start points, unit directions, lateral directions, headings and centres of the 28 spots.

    Spot order is highway-env's lane order: the 14 spots of the row at y in [10, 18] (left to right),
    then the 14 at y in [-18, -10]. Goals and parked cars are drawn by position in this order, so it
    must match for seeded resets to agree with highway-env.
    """
    starts, ends = [], []
    for k in range(SPOTS_PER_ROW):
        x = (k + 1 - SPOTS_PER_ROW // 2) * SPOT_WIDTH - SPOT_WIDTH / 2
        starts.append((x, SPOT_Y_OFFSET))
        ends.append((x, SPOT_Y_OFFSET + SPOT_LENGTH))
    for k in range(SPOTS_PER_ROW):
        x = (k + 1 - SPOTS_PER_ROW // 2) * SPOT_WIDTH - SPOT_WIDTH / 2
        starts.append((x, -SPOT_Y_OFFSET))
        ends.append((x, -SPOT_Y_OFFSET - SPOT_LENGTH))
    start = np.array(starts, dtype=np.float64)
    end = np.array(ends, dtype=np.float64)
    delta = end - start
    length = np.sqrt((delta**2).sum(axis=1))
    direction = delta / length[:, None]
    lateral = np.stack([-direction[:, 1], direction[:, 0]], axis=1)
    heading = np.arctan2(delta[:, 1], delta[:, 0])
    # highway-env places goals and parked cars at lane.position(length / 2, 0) (4 m is half of 8 m).
    centre = start + (SPOT_LENGTH / 2) * direction + 0.0 * lateral
    return start, direction, lateral, heading, centre


SPOT_START, SPOT_DIRECTION, SPOT_LATERAL, SPOT_HEADING, SPOT_CENTRE = _spot_geometry()
SPOT_POSE = np.column_stack([SPOT_CENTRE, SPOT_HEADING])  # (x, y, heading) of a car parked in each spot

# The four walls, in the order highway-env adds them (bottom, top, left, right): centre x, y, heading,
# length, width. The order matters: when the car is about to hit two things, the last one's push wins.
WALLS = np.array(
    [
        [0.0, -LOT_HEIGHT / 2, 0.0, LOT_WIDTH, WALL_THICKNESS],
        [0.0, LOT_HEIGHT / 2, 0.0, LOT_WIDTH, WALL_THICKNESS],
        [-LOT_WIDTH / 2, 0.0, np.pi / 2, LOT_HEIGHT, WALL_THICKNESS],
        [LOT_WIDTH / 2, 0.0, np.pi / 2, LOT_HEIGHT, WALL_THICKNESS],
    ]
)

# The broad phase keeps a pair for the exact test unless it is separated by more than this; it only
# needs to cover rounding differences between the broad phase's and the exact test's arithmetic.
_BROAD_PHASE_MARGIN = 1e-6


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------


def _finite_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} ({value!r})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return int(value)


class ParkingConfig:
    """The validated settings of a parking task (highway-env's config keys that change the task).

    Every argument is checked here, so a bad value fails at construction with a message naming it.
    See :class:`ParkingEnv` for what each one means.
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
        self.success_goal_reward = _finite_float("success_goal_reward", success_goal_reward)
        if self.success_goal_reward <= 0:
            raise ValueError(
                f"success_goal_reward must be > 0 (success is goal reward > -success_goal_reward), "
                f"got {self.success_goal_reward}"
            )
        self.collision_reward = _finite_float("collision_reward", collision_reward)
        self.steering_range = _finite_float("steering_range", steering_range)
        if not 0 < self.steering_range < np.pi / 2:
            raise ValueError(
                f"steering_range (the largest steering angle, radians) must be in (0, pi/2), "
                f"got {self.steering_range}"
            )
        self.acceleration_range = _finite_float("acceleration_range", acceleration_range)
        if self.acceleration_range <= 0:
            raise ValueError(
                f"acceleration_range (the largest |acceleration|, m/s^2) must be > 0, "
                f"got {self.acceleration_range}"
            )
        self.simulation_frequency = _positive_int("simulation_frequency", simulation_frequency)
        self.policy_frequency = _positive_int("policy_frequency", policy_frequency)
        if self.simulation_frequency % self.policy_frequency:
            raise ValueError(
                "simulation_frequency must be a multiple of policy_frequency (each action is held for "
                f"simulation_frequency // policy_frequency integration steps), got "
                f"simulation_frequency={self.simulation_frequency}, policy_frequency={self.policy_frequency}"
            )
        self.frames = self.simulation_frequency // self.policy_frequency
        self.duration = _finite_float("duration", duration)
        if self.duration <= 0:
            raise ValueError(f"duration (seconds of simulated time) must be > 0, got {self.duration}")
        if not isinstance(add_walls, (bool, np.bool_)):
            raise TypeError(f"add_walls must be a bool, got {type(add_walls).__name__} ({add_walls!r})")
        self.add_walls = bool(add_walls)
        if isinstance(vehicles_count, bool) or not isinstance(vehicles_count, (int, np.integer)):
            raise TypeError(
                f"vehicles_count must be an int, got {type(vehicles_count).__name__} ({vehicles_count!r})"
            )
        if not 0 <= vehicles_count <= N_SPOTS - 2:
            raise ValueError(
                f"vehicles_count must be in [0, {N_SPOTS - 2}] (28 spots, less the ego's and the goal's), "
                f"got {vehicles_count}"
            )
        self.vehicles_count = int(vehicles_count)

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


# --------------------------------------------------------------------------------------------------
# Reward, success and episode end: pure functions of (achieved_goal, desired_goal, info).
# --------------------------------------------------------------------------------------------------


def goal_reward(
    achieved_goal: np.ndarray, desired_goal: np.ndarray, reward_weights: np.ndarray, p: float = 0.5
) -> np.ndarray:
    """The goal term ``-(|achieved - desired| . reward_weights) ** p`` over any leading batch shape."""
    # Multiply-then-sum rather than a matmul: BLAS may sum a batch in another order (or with FMA)
    # than one row, and a vector env's rewards must equal its single envs' to the bit.
    return -np.power(np.add.reduce(np.abs(achieved_goal - desired_goal) * reward_weights, axis=-1), p)


def _goal_term(obs: Mapping[str, np.ndarray], reward_weights: np.ndarray) -> np.ndarray:
    """The goal term of an env's own observation (float64 already): one call for reward and success."""
    return goal_reward(obs["achieved_goal"], obs["desired_goal"], reward_weights)


def _float_array(x: Any) -> np.ndarray:
    if type(x) is np.ndarray and x.dtype == np.float64:
        return x
    return np.asarray(x, dtype=np.float64)


def _info_array(info: Any, key: str, batch_shape: tuple[int, ...], default: Any, warning: str) -> np.ndarray:
    """``info_values_or_default(...)``, with a shortcut for a step's own info dict."""
    if type(info) is dict:
        value = info.get(key)
        if type(value) is np.ndarray:
            if value.shape == batch_shape:
                return value
        elif not batch_shape and isinstance(value, (bool, int, float)):
            return np.asarray(value)
    return info_values_or_default(info, key, batch_shape, default, warning)


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
    return _info_array(info, "crashed", batch_shape, False, warning).astype(bool)


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
    achieved_goal = _float_array(achieved_goal)
    desired_goal = _float_array(desired_goal)
    reward = goal_reward(achieved_goal, desired_goal, reward_weights, p)
    crashed = _crashed(info, reward.shape, _NO_CRASH_REWARD)
    return reward + collision_reward * crashed


def compute_terminated(
    achieved_goal: Any,
    desired_goal: Any,
    info: Any,
    *,
    reward_weights: np.ndarray,
    success_goal_reward: float,
) -> np.ndarray:
    """Success (goal term > ``-success_goal_reward``, with p = 0.5) or ``info["crashed"]``."""
    achieved_goal = _float_array(achieved_goal)
    desired_goal = _float_array(desired_goal)
    success = goal_reward(achieved_goal, desired_goal, reward_weights) > -success_goal_reward
    return success | _crashed(info, success.shape, _NO_CRASH_TERMINATED)


def compute_truncated(achieved_goal: Any, desired_goal: Any, info: Any, *, duration: float) -> np.ndarray:
    """Whether ``info["time"]`` (simulated seconds since reset) has reached ``duration``."""
    batch_shape = np.shape(achieved_goal)[:-1]
    return np.asarray(_info_array(info, "time", batch_shape, -np.inf, _NO_TIME) >= duration)


# --------------------------------------------------------------------------------------------------
# Geometry: oriented rectangles and highway-env's separating-axis collision rule, vectorized.
# --------------------------------------------------------------------------------------------------


# highway-env tests the 4 edge normals of the car, then the 4 of the obstacle, in this order: for a
# rectangle with direction e (and left normal e_perp) its corner order gives [-e, +e_perp, +e, -e_perp].
# Axis i is SIGN[i] times base direction BASE[i] of [e, e_perp, u, u_perp] (u: the obstacle's direction).
_AXIS_BASE = np.array([0, 1, 0, 1, 2, 3, 2, 3])
_AXIS_SIGN = np.array([-1.0, 1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0])
# Index arrays of the push's single gathers (see _sat_push): the rows centre, half_a, half_b, along of
# the projection block on each of the 8 axes' base directions; and each base's column in the vectors.
_PUSH_ROWS = np.array([0, 5, 6, 1])[:, None, None]
_AXIS_BASE_COLUMN = _AXIS_BASE + 1
_TRUE = np.ones(1, dtype=bool)


def _sat_vectors(rx, ry, cos_h, sin_h, cos_o, sin_o) -> np.ndarray:
    """The 5 vectors of the separating-axis test as a ``(2, 5, M)`` block of x and y rows: the centre gap
    r, then the 4 base directions ``[e, e_perp, u, u_perp]`` (e: the car's direction, u: the obstacle's)."""
    return np.array([[rx, cos_h, -sin_h, cos_o, -sin_o], [ry, sin_h, cos_h, sin_o, cos_o]])


def _sat_test(
    vectors: np.ndarray, travel: np.ndarray, half_length_o: np.ndarray, half_width_o: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``will_intersect`` of each pair and the projection block the other answers are read from.

    ``vectors``: :func:`_sat_vectors`. The block ``(8, 4, M)`` holds, per base direction b: the 5
    projections ``v . b`` (rows 0-4: the centre gap's, then e's, e_perp's, u's, u_perp's), the car's
    and the obstacle's half extents (rows 5, 6) and their sum (row 7). These arrays hold a handful of
    pairs, so the cost is the number of numpy calls: each row is written in place by one call.
    """
    vx, vy = vectors
    m = vx.shape[1]
    block = np.empty((8, 4, m))
    proj = block[:5]
    # proj[i, j] = v_i . b_j: one broadcast product for the 5 x 4 dot products.
    np.multiply(vx[:, None], vx[1:], out=proj)
    proj += vy[:, None] * vy[1:]
    extent = np.abs(proj[1:])  # |e . b|, |e_perp . b|, |u . b|, |u_perp . b|
    # The car's half extent |e . b| L/2 + |e_perp . b| W/2 (W/2 = 1: no product, the same bits).
    half_a, half_b, reach = block[5], block[6], block[7]
    np.multiply(extent[0], CAR_LENGTH / 2, out=half_a)
    half_a += extent[1]
    np.multiply(extent[2], half_length_o, out=half_b)
    half_b += extent[3] * half_width_o
    np.add(half_a, half_b, out=reach)
    # An axis and its opposite separate alike, so the 4 directions decide the flag: apart on one when
    # the centres' gap exceeds the half extents, the car's swept by half its displacement.
    sweep = (travel / 2) * proj[1]  # e . b is the car's displacement along b per unit of travel
    within = np.abs(proj[0] + sweep) <= reach + np.abs(sweep)
    return np.logical_and.reduce(within, axis=0), block


def _sat_intersecting(block: np.ndarray) -> np.ndarray:
    """Whether each pair overlaps now (no sweep): within reach on every base direction."""
    return np.logical_and.reduce(np.abs(block[0]) <= block[7], axis=0)


def _sat_push(vectors: np.ndarray, block: np.ndarray, travel: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """highway-env's push ``(2, H)`` for the pairs ``hit``: out of the obstacle along the axis of least
    overlap, from its signed distances on the 8 axes (an axis and its opposite can measure the
    overlap from different ends, so the 4 directions do not suffice here)."""
    sign = _AXIS_SIGN[:, None]
    centre, half_a8, half_b8, along = block[_PUSH_ROWS, _AXIS_BASE[:, None], hit]  # each (8, H)
    centre8 = centre * sign
    projection = (travel[hit] * along) * sign
    min_a = centre8 - half_a8 + np.minimum(projection, 0.0)
    max_a = centre8 + half_a8 + np.maximum(projection, 0.0)
    low = -half_b8
    distance = np.abs(np.where(min_a < low, low - max_a, min_a - half_b8))
    best = distance.argmin(axis=0)  # the first axis of least overlap, as highway-env
    axis = vectors[:, _AXIS_BASE_COLUMN[best], hit] * _AXIS_SIGN[best]  # (2, H)
    # Push the car away from the obstacle: the axis's sign follows the centre gap.
    gap = vectors[:, 0, hit] * axis
    axis = np.where(gap[0] + gap[1] > 0, axis, -axis)
    return distance[best, np.arange(hit.size)] * axis


def box_collision(
    rx: np.ndarray,
    ry: np.ndarray,
    heading: np.ndarray,
    travel: np.ndarray,
    cos_o: np.ndarray,
    sin_o: np.ndarray,
    half_length_o: np.ndarray,
    half_width_o: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """highway-env's ``are_polygons_intersecting`` for the car against obstacles, over a batch of pairs.

    ``rx, ry``: the car's centre minus the obstacle's; ``heading``: the car's; ``travel``: its signed
    speed times dt (it moves by ``travel * (cos, sin)(heading)`` in one step; obstacles are static);
    ``cos_o, sin_o``: the obstacle's direction; ``half_length_o, half_width_o``: its half sizes.

    Returns ``intersecting``, ``will_intersect`` (overlap once the car's interval is swept along its
    displacement, on every axis) and ``translation`` (M, 2), the push out of the obstacle along the axis
    of least overlap (zero where ``will_intersect`` is False).

    Same separating-axis test as highway-env, on the same 8 axes in the same order (the first axis of
    smallest ``|distance|`` wins), but each rectangle's projection is its centre's plus or minus its
    half extent, ``|n . e| L/2 + |n . e_perp| W/2``, instead of the min and max over its 4 rotated
    corners: the same intervals up to rounding (1e-15 m), for a fraction of the array work.
    """
    vectors = _sat_vectors(rx, ry, np.cos(heading), np.sin(heading), cos_o, sin_o)
    will, block = _sat_test(vectors, travel, half_length_o, half_width_o)
    translation = np.zeros((len(rx), 2))
    hit = will.nonzero()[0]
    if hit.size:
        translation[hit] = _sat_push(vectors, block, travel, hit).T
    return _sat_intersecting(block), will, translation


# --------------------------------------------------------------------------------------------------
# The batch: state arrays and the functions that move them.
# --------------------------------------------------------------------------------------------------


def _wrap_to_pi(angle: np.ndarray) -> np.ndarray:
    return ((angle + np.pi) % (2 * np.pi)) - np.pi


def closest_spot(x: np.ndarray, y: np.ndarray, heading: np.ndarray) -> np.ndarray:
    """Index of the spot nearest each pose, by highway-env's lane distance (position and heading).

    highway-env keeps the spot "under" the ego (its lane index) out of the goal draw; this is
    ``RoadNetwork.get_closest_lane_index``: L1 distance to the spot's segment plus the heading gap.
    """
    dx = x[:, None] - SPOT_START[:, 0]
    dy = y[:, None] - SPOT_START[:, 1]
    s = dx * SPOT_DIRECTION[:, 0] + dy * SPOT_DIRECTION[:, 1]
    r = dx * SPOT_LATERAL[:, 0] + dy * SPOT_LATERAL[:, 1]
    angle = np.abs(_wrap_to_pi(heading[:, None] - SPOT_HEADING))
    distance = np.abs(r) + np.maximum(s - SPOT_LENGTH, 0) + np.maximum(0 - s, 0) + angle
    return np.argmin(distance, axis=1)


def _pose_option(options: Mapping[str, Any], key: str, n: int) -> np.ndarray | None:
    if key not in options or options[key] is None:
        return None
    pose = np.asarray(options[key], dtype=np.float64)
    if pose.shape == (3,):
        pose = np.broadcast_to(pose, (n, 3))
    if pose.shape != (n, 3):
        raise ValueError(
            f"options[{key!r}] must be (x, y, heading) in metres and radians, or an array of shape "
            f"({n}, 3) with one pose per environment; got shape {np.shape(options[key])}"
        )
    if not np.all(np.isfinite(pose)) or np.any(np.abs(pose[:, :2]) > POSE_LIMIT):
        raise ValueError(
            f"options[{key!r}] must be finite with |x|, |y| <= {POSE_LIMIT} m (the lot spans "
            f"{LOT_WIDTH} x {LOT_HEIGHT} m around (0, 0)), got {pose.tolist()}"
        )
    return pose


_OPTION_KEYS = ("ego_pose", "goal_pose")


def _goal_observation(pose: np.ndarray) -> np.ndarray:
    """The ``desired_goal`` of goal poses ``(m, 3)``: ``[x, y, 0, 0, cos h, sin h] / scales``."""
    goal_obs = np.zeros((len(pose), OBS_DIM))
    goal_obs[:, :2] = pose[:, :2]
    goal_obs[:, 4] = np.cos(pose[:, 2])
    goal_obs[:, 5] = np.sin(pose[:, 2])
    goal_obs /= OBS_SCALES
    return goal_obs


# A drawn goal is a spot: its desired_goal is looked up (the same operations, done once).
SPOT_GOAL_OBS = _goal_observation(SPOT_POSE)


def _origin_spot_distance() -> np.ndarray:
    """The position part of :func:`closest_spot`'s distance for a car at (0, 0), per spot: a drawn
    start is always there, so only the heading part is left to compute."""
    dx = 0.0 - SPOT_START[:, 0]
    dy = 0.0 - SPOT_START[:, 1]
    s = dx * SPOT_DIRECTION[:, 0] + dy * SPOT_DIRECTION[:, 1]
    r = dx * SPOT_LATERAL[:, 0] + dy * SPOT_LATERAL[:, 1]
    return np.abs(r) + np.maximum(s - SPOT_LENGTH, 0) + np.maximum(0 - s, 0)


_ORIGIN_SPOT_DISTANCE = _origin_spot_distance()


def sample_scenes(
    rngs: Sequence[np.random.Generator],
    vehicles_count: int,
    ego_pose: np.ndarray | None = None,
    goal_pose: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw one start scene per generator: ego poses ``(n, 3)``, goal poses ``(n, 3)``, parked spots ``(n, V)``.

    highway-env's draws, in its order, on each lot's own generator: the ego's heading
    ``2 pi U(0, 1)`` at (0, 0); the goal, a uniform pick among the spots other than the ego's; then each
    parked car, a uniform pick among the spots still free. These are the very calls highway-env makes
    on its ``np_random``, so the same seed gives the same scene. A pose given in ``ego_pose`` /
    ``goal_pose`` (shape ``(n, 3)``) replaces its draw; the spot nearest it is kept free.

    Why a generator per lot: lot ``i`` of a vector env seeded ``s`` then replays exactly the single env
    seeded ``s + i``. Only the scalar draws loop over lots (a few calls per new episode); the
    geometry around them is batched.
    """
    ego_pose, goal_pose, _, parked = _sample_scenes(rngs, vehicles_count, ego_pose, goal_pose)
    return ego_pose, goal_pose, parked


def _goal_spot(draw: Any, ego_spot: Any) -> Any:
    """highway-env's goal: the ``draw``-th free spot when only the ego's is taken (k, or k + 1 from
    the ego's spot on), for arrays or ints."""
    return draw + (draw >= ego_spot)


def _sample_scenes(
    rngs: Sequence[np.random.Generator],
    vehicles_count: int,
    ego_pose: np.ndarray | None,
    goal_pose: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """:func:`sample_scenes`, also returning the goal's spot when it was drawn (None otherwise)."""
    n = len(rngs)
    if ego_pose is None:
        ego_pose = np.zeros((n, 3))
        ego_pose[:, 2] = 2.0 * np.pi * np.array([rng.random() for rng in rngs])  # = uniform(), cheaper
        # closest_spot at (0, 0): the same sums, the position part looked up.
        angle = np.abs(_wrap_to_pi(ego_pose[:, 2, None] - SPOT_HEADING))
        ego_spot = np.argmin(_ORIGIN_SPOT_DISTANCE + angle, axis=1)
    else:
        ego_spot = closest_spot(ego_pose[:, 0], ego_pose[:, 1], ego_pose[:, 2])
    drawn = goal_pose is None
    if not drawn:
        goal_spot = closest_spot(goal_pose[:, 0], goal_pose[:, 1], goal_pose[:, 2])
    parked = np.empty((n, vehicles_count), dtype=np.intp)
    if not vehicles_count:
        if drawn:  # the goal draws alone, one call per lot
            goal_spot = _goal_spot(np.array([rng.integers(0, N_SPOTS - 1) for rng in rngs]), ego_spot)
    else:
        # Each lot draws its goal, then each parked car takes the k-th spot still free, k drawn on
        # the lot's generator (highway-env's order): popped from the lot's list of free spots.
        goal_list = [0] * n if drawn else goal_spot.tolist()
        for i, (rng, ego_i) in enumerate(zip(rngs, ego_spot.tolist(), strict=True)):
            if drawn:
                goal_list[i] = _goal_spot(rng.integers(0, N_SPOTS - 1), ego_i)
            free = [spot for spot in range(N_SPOTS) if spot != ego_i and spot != goal_list[i]]
            parked[i] = [free.pop(rng.integers(0, len(free))) for _ in range(vehicles_count)]
        if drawn:
            goal_spot = np.array(goal_list)
    if drawn:
        goal_pose = SPOT_POSE[goal_spot]
    return ego_pose, goal_pose, (goal_spot if drawn else None), parked


class ParkingBatch:
    """State and stepping of ``n`` independent parking lots; the single and vector envs both hold one.

    State per lot: the ego's pose, speed, crash flag and pending collision push, the simulated time,
    the goal pose, and the obstacles (parked cars first, in the order they were placed, then the
    walls: the order highway-env checks them in).
    """

    def __init__(self, config: ParkingConfig, n: int) -> None:
        self.config = config
        self.n = n
        c = config
        self.dt = 1 / c.simulation_frequency
        self.time_step = 1 / c.policy_frequency
        v = c.vehicles_count
        walls = WALLS if c.add_walls else WALLS[:0]
        self.n_vehicles = v
        self.k = v + len(walls)
        # Obstacle shapes, per obstacle column: parked cars then walls.
        self.obst_length = np.concatenate([np.full(v, CAR_LENGTH), walls[:, 3]])
        self.obst_width = np.concatenate([np.full(v, CAR_WIDTH), walls[:, 4]])
        self.obst_diagonal = np.sqrt(self.obst_length**2 + self.obst_width**2)
        # highway-env splits a car-car push between both cars but gives a wall push wholly to the car.
        self.obst_push_share = np.concatenate([np.full(v, 0.5), np.ones(len(walls))])
        # Per obstacle column: half length, half width, and the bounding radius of car and obstacle
        # (highway-env's quick test), gathered by column for the candidate pairs in one call.
        self._obst_shape = np.array(
            [self.obst_length / 2, self.obst_width / 2, (CAR_DIAGONAL + self.obst_diagonal) / 2]
        )
        self._walls = walls
        # With walls and no parked cars, every lot's obstacles are the same 4 axis-aligned walls: the
        # broad phase then needs only each lot's distance to the lot's inner edges (see _broad_phase).
        self._walls_only = v == 0 and len(walls) > 0
        self._inner_edges = np.array(
            [[LOT_WIDTH / 2 - WALL_THICKNESS / 2], [LOT_HEIGHT / 2 - WALL_THICKNESS / 2]]
        )
        self._obst_columns = np.arange(self.k)
        # The largest speed change over one action, used to bound how far the car can travel in it.
        self._max_speed_gain = c.frames * c.acceleration_range * self.dt
        self._acc_slope = (c.acceleration_range - -c.acceleration_range) / 2.0
        self._steer_slope = (c.steering_range - -c.steering_range) / 2.0

        # The ego's x, y [m], heading [rad] and speed [m/s] as rows of one array, so the narrow phase
        # gathers a pair's car state in one call (the attributes are views: update them in place).
        self._ego = np.zeros((4, n))
        self.x, self.y, self.heading, self.speed = self._ego
        self.crashed = np.zeros(n, dtype=bool)
        self.impact = np.zeros((2, n))  # the pending push (x and y rows), where has_impact
        self.has_impact = np.zeros(n, dtype=bool)
        self.time = np.zeros(n)
        self.goal = np.zeros((n, 3))
        self.parked_spots = np.zeros((n, v), dtype=np.intp)
        # Obstacle poses (n, k); the parked cars' columns are filled at reset.
        self.obst_x, self.obst_y, self.obst_heading = (
            np.concatenate([np.zeros((n, v)), np.broadcast_to(walls[:, col], (n, len(walls)))], axis=1)
            for col in range(3)
        )
        self.obst_cos = np.cos(self.obst_heading)
        self.obst_sin = np.sin(self.obst_heading)
        self.obst_impact = np.zeros((n, self.k, 2))
        self._any_obst_impact = False
        self._any_impact = False  # whether has_impact has any True (saves a reduction per step)
        self._goal_obs = np.zeros((n, OBS_DIM))
        self._map_consts: dict[np.dtype, tuple[np.ndarray, ...]] = {}
        # Scratch rows of one integration step (dx, dy, dheading, dspeed) and the direction of travel.
        self._delta = np.empty((4, n))
        self._trig = np.empty((3, n))
        self._direction = np.empty(n)
        # Lot 0's obstacles as Python floats for the single-lot broad phase; None when stale.
        self._obstacle_rows: list[tuple[float, ...]] | None = None

    _EGO_VIEWS = ("x", "y", "heading", "speed")

    def __getstate__(self) -> dict[str, Any]:
        # Pickle and deepcopy would turn the views into arrays of their own: keep the base only.
        return {key: value for key, value in self.__dict__.items() if key not in self._EGO_VIEWS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.x, self.y, self.heading, self.speed = self._ego

    # ---------------------------------------------------------------------------- reset
    def reset(
        self,
        rngs: Sequence[np.random.Generator],
        idx: np.ndarray | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """New scenes for the lots ``idx`` (all when None), lot ``idx[j]`` drawing from ``rngs[j]``.

        ``options`` as :meth:`ParkingEnv.reset`, with poses of shape ``(3,)`` or ``(n, 3)``.
        """
        idx = np.arange(self.n) if idx is None else idx
        ego_pose = goal_pose = None
        if options:
            unknown = sorted(set(options) - set(_OPTION_KEYS))
            if unknown:
                raise ValueError(f"unknown reset option(s) {unknown}; accepted: {list(_OPTION_KEYS)}")
            ego_pose = _pose_option(options, "ego_pose", self.n)
            goal_pose = _pose_option(options, "goal_pose", self.n)
            ego_pose = None if ego_pose is None else ego_pose[idx]
            goal_pose = None if goal_pose is None else goal_pose[idx]
        ego, goal, goal_spot, parked = _sample_scenes(rngs, self.n_vehicles, ego_pose, goal_pose)
        self._ego[:3, idx] = ego.T
        self.speed[idx] = 0.0
        self.crashed[idx] = False
        self.time[idx] = 0.0
        self.goal[idx] = goal
        if self._any_impact:
            self.impact[:, idx] = 0.0
            self.has_impact[idx] = False
            self._any_impact = bool(self.has_impact.any())
        v = self.n_vehicles
        if v:
            self.parked_spots[idx] = parked
            self.obst_x[idx, :v] = SPOT_CENTRE[parked, 0]
            self.obst_y[idx, :v] = SPOT_CENTRE[parked, 1]
            self.obst_heading[idx, :v] = SPOT_HEADING[parked]
            self.obst_cos[idx, :v] = np.cos(SPOT_HEADING[parked])
            self.obst_sin[idx, :v] = np.sin(SPOT_HEADING[parked])
            self.obst_impact[idx] = 0.0
        self._obstacle_rows = None
        # The desired goal only changes here, so build its observation once.
        self._goal_obs[idx] = _goal_observation(goal) if goal_spot is None else SPOT_GOAL_OBS[goal_spot]

    # ---------------------------------------------------------------------------- observation
    def observe(self) -> dict[str, np.ndarray]:
        """``observation``/``achieved_goal``: ``[x, y, vx, vy, cos_h, sin_h] / scales``; the goal's likewise.

        Velocity is ``speed * (cos h, sin h)``, without the slip angle, as highway-env's
        ``Vehicle.velocity``. Values are float64, neither normalised nor clipped (highway-env's
        KinematicsGoal observation with ``normalize=False``).
        """
        if self.n == 1:  # the same products on scalars: one small array instead of a stack of six
            heading, speed = self.heading[0], self.speed.item()
            c, s = np.cos(heading), np.sin(heading)
            obs = np.array([[self.x.item(), self.y.item(), speed * c, speed * s, c, s]])
            obs /= OBS_SCALES
        else:
            # Built as feature rows (contiguous, fewer calls), scaled into the (n, 6) observation.
            rows = np.empty((OBS_DIM, self.n))
            rows[:2] = self._ego[:2]
            np.cos(self.heading, out=rows[4])
            np.sin(self.heading, out=rows[5])
            np.multiply(self.speed, rows[4:], out=rows[2:4])
            obs = np.empty((self.n, OBS_DIM))
            np.divide(rows.T, OBS_SCALES, out=obs)
        return {"observation": obs, "achieved_goal": obs.copy(), "desired_goal": self._goal_obs.copy()}

    # ---------------------------------------------------------------------------- dynamics
    def simulate(self, action: np.ndarray, skip: np.ndarray | None = None) -> None:
        """Hold ``action`` (shape ``(n, 2)``, in [-1, 1]) for one policy period: ``frames`` Euler steps.

        Per step, as highway-env's ``Vehicle.step``: a crashed car steers straight and brakes with
        ``-speed``; acceleration is capped so speed returns towards [-40, 40]; the position moves by
        ``speed * (cos, sin)(heading + beta) * dt`` (beta = arctan(tan(steer) / 2), the slip angle),
        plus any push a collision left pending; heading turns by ``speed * sin(beta) / (L/2) * dt``;
        speed grows by ``acceleration * dt``. Then collisions are checked against every obstacle.

        ``skip``: indices of lots whose result will be thrown away (a vector env's lots about to be
        reset); they are integrated but not collision-checked, which is the costly part.
        """
        c = self.config
        self.time += self.time_step
        if self.n == 1 and self._free_driving():
            self._drive_one(action[0])
            return
        if skip is not None and skip.size:
            # Lots about to be reset drive as they like: their result is thrown away, so they get no
            # crash handling, no pending push and no collision test (reset rewrites all of it).
            self.crashed[skip] = False
            self.has_impact[skip] = False
        else:
            skip = None
        accel, steer = self._map_action(action)
        beta = np.arctan(1 / 2 * np.tan(steer))
        # cos(h + beta), sin(h + beta) and sin(beta): each step multiplies the three rows by speed at once.
        trig = self._trig
        np.sin(beta, out=trig[2])
        dt = self.dt

        speed = np.abs(self.speed)
        pair_data = self._pair_data(self._broad_phase(speed, skip)) if self.k else None
        # Speed caps only bite once |speed| could pass 40 m/s during this action; skip them otherwise.
        cap_speed = float(speed.max()) + self._max_speed_gain > MAX_SPEED
        ego, delta, direction = self._ego, self._delta, self._direction
        crashed = self.crashed
        any_crashed = bool(crashed.any())
        crashes_changed = any_crashed  # whether beta and sin_beta still miss a crashed lot
        for _ in range(c.frames):
            if any_crashed:
                if crashes_changed:
                    beta[crashed] = 0.0
                    trig[2][crashed] = 0.0
                    crashes_changed = False
                np.multiply(-1.0, self.speed, out=accel, where=crashed)
            if cap_speed:
                # highway-env writes the capped value back into the held action, so a cap, once
                # applied, carries over to the remaining integration steps of this action.
                accel = np.where(
                    self.speed > MAX_SPEED, np.minimum(accel, 1.0 * (MAX_SPEED - self.speed)), accel
                )
                accel = np.where(
                    self.speed < MIN_SPEED, np.maximum(accel, 1.0 * (MIN_SPEED - self.speed)), accel
                )
            # x += speed cos(h + beta) dt, y += speed sin(h + beta) dt, h += speed sin(beta) / (L/2) dt,
            # speed += accel dt, all from the state before the step: the 4 increments are rows of one
            # array, each computed in highway-env's order, then added in one call.
            np.add(self.heading, beta, out=direction)
            np.cos(direction, out=trig[0])
            np.sin(direction, out=trig[1])
            np.multiply(trig, self.speed, out=delta[:3])
            delta[2] /= CAR_LENGTH / 2
            np.multiply(accel, dt, out=delta[3])
            delta[:3] *= dt
            if self._any_impact:
                # A pending push moves the car after its own displacement (x + dx + push, in that order).
                ego[:2] += delta[:2]
                ego[:2] += np.where(self.has_impact, self.impact, 0.0)
                ego[2:] += delta[2:]
                crashed |= self.has_impact
                self.has_impact[:] = False
                self._any_impact = False
                any_crashed = crashes_changed = True
            else:
                ego += delta
            if self._any_obst_impact:  # pushed parked cars move by their push (they have no speed)
                self.obst_x += self.obst_impact[..., 0]
                self.obst_y += self.obst_impact[..., 1]
                self.obst_impact[:] = 0.0
                self._any_obst_impact = False
                self._obstacle_rows = None
                if pair_data is not None:  # the gathered obstacle positions are stale
                    pair_data = self._pair_data(pair_data[:2])
            if pair_data is not None and self._collide(pair_data):
                any_crashed = crashes_changed = True

    def _map_consts_for(self, dtype: np.dtype) -> tuple[np.ndarray, ...]:
        consts = self._map_consts.get(dtype)
        if consts is None:
            c = self.config
            lo = np.array([-c.acceleration_range, -c.steering_range], dtype=dtype)
            slope = np.array([self._acc_slope, self._steer_slope], dtype=dtype)
            consts = self._map_consts[dtype] = (np.ones(2, dtype), -np.ones(2, dtype), lo, slope)
        return consts

    def _map_action(self, action: np.ndarray) -> np.ndarray:
        """Clip to [-1, 1] and map to ``[acceleration, steering]`` (float64 rows, shape ``(2, n)``).

        The arithmetic runs in the action's own float dtype, as highway-env's ``lmap`` does on the
        action it is given: a float32 action yields a float32-rounded acceleration and steering,
        which highway-env later widens with ``float()``. ``lo + (a + 1) * (hi - lo) / 2`` with the
        halving folded into the slope (exact: a power of two).
        """
        dtype = action.dtype if action.dtype.kind == "f" else np.dtype(np.float64)
        one, minus_one, lo, slope = self._map_consts_for(dtype)
        clipped = np.minimum(np.maximum(action, minus_one), one)
        # Transposed in the cast's copy: each of the two rows is then contiguous (and ours to write).
        return ((clipped + one) * slope + lo).T.astype(np.float64, order="C")

    def _free_driving(self) -> bool:
        """For a single lot: nothing but driving can happen in this action (no crash, push, speed cap
        or obstacle within reach), so :meth:`_drive_one` may integrate it with scalars."""
        if self.crashed[0] or self.has_impact[0] or self._any_obst_impact:
            return False
        speed = abs(self.speed.item())
        if speed + self._max_speed_gain > MAX_SPEED:
            return False
        if not self.k:
            return True
        if self._obstacle_rows is None:
            self._obstacle_rows = list(
                zip(
                    self.obst_x[0].tolist(),
                    self.obst_y[0].tolist(),
                    self.obst_cos[0].tolist(),
                    self.obst_sin[0].tolist(),
                    (self.obst_length / 2).tolist(),
                    (self.obst_width / 2).tolist(),
                    strict=True,
                )
            )
        x, y = self.x.item(), self.y.item()
        f = self.config.frames
        # The same bound as _broad_phase, on Python floats.
        reach = (
            CAR_DIAGONAL / 2
            + self.dt * ((f + 1) * speed + self._max_speed_gain * (f + 1) / 2)
            + _BROAD_PHASE_MARGIN
        )
        for ox, oy, cos_o, sin_o, half_length, half_width in self._obstacle_rows:
            dx, dy = ox - x, oy - y
            if abs(dx * cos_o + dy * sin_o) - half_length <= reach and (
                abs(dy * cos_o - dx * sin_o) - half_width <= reach
            ):
                return False
        return True

    def _drive_one(self, action: np.ndarray) -> None:
        """:meth:`simulate` for one lot in free driving, on scalars: the same operations in the same
        order as the batched path (numpy scalars of the action's dtype for the action mapping, numpy's
        ufuncs for the trigonometry), so the same bits, several times sooner."""
        dtype = action.dtype if action.dtype.kind == "f" else np.dtype(np.float64)
        one, minus_one, lo, slope = self._map_consts_for(dtype)
        mapped = []
        for i in range(2):
            a = dtype.type(action[i])
            clipped = min(max(a, minus_one[i]), one[i])
            mapped.append(float((clipped + one[i]) * slope[i] + lo[i]))
        accel, steer = mapped
        beta = np.arctan(1 / 2 * np.tan(steer))
        sin_beta = np.sin(beta)
        dt = self.dt
        x, y, heading, speed = self.x.item(), self.y.item(), self.heading.item(), self.speed.item()
        for _ in range(self.config.frames):
            direction = heading + beta
            x += speed * np.cos(direction) * dt
            y += speed * np.sin(direction) * dt
            heading += speed * sin_beta / (CAR_LENGTH / 2) * dt
            speed += accel * dt
        self.x[0], self.y[0], self.heading[0], self.speed[0] = x, y, heading, speed

    def _broad_phase(
        self, speed: np.ndarray, skip: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Pairs (lot, obstacle) that may touch during this action; the exact test runs on these only
        (None when there are none). ``speed``: each lot's ``|speed|``.

        A pair is dropped when, on one of the obstacle's own axes, the car's bounding disc stays
        clear of it for the whole action. The disc grows with the farthest the car can travel in the
        action (speed can change by at most ``frames * a_max * dt``), so a dropped pair is one that
        highway-env's test (whose axes include the obstacle's) also finds apart at every step.

        A lot with any pair kept keeps every obstacle, and so does a lot with a push pending: a push
        is not bounded by speed, and only a lot with a pair kept can be pushed during the action, so
        the candidates stay valid through the action's pushes and are gathered once.
        """
        f = self.config.frames
        # The disc's radius plus the margin that covers the rounding of this test against the exact one.
        reach = self.dt * (f + 1) * speed
        reach += CAR_DIAGONAL / 2 + self.dt * self._max_speed_gain * (f + 1) / 2 + _BROAD_PHASE_MARGIN
        if self._walls_only:
            # The walls' inner edges are at |x| = 34.5 and |y| = 20.5: a disc that stays inside them
            # is clear of every wall (a looser test than each wall's own, so it keeps a superset).
            near = np.logical_or.reduce(np.abs(self._ego[:2]) + reach >= self._inner_edges, axis=0)
        else:
            dx = self.obst_x - self.x[:, None]
            dy = self.obst_y - self.y[:, None]
            along = np.abs(dx * self.obst_cos + dy * self.obst_sin) - self._obst_shape[0]
            across = np.abs(dy * self.obst_cos - dx * self.obst_sin) - self._obst_shape[1]
            near = np.logical_or.reduce(np.maximum(along, across) <= reach[:, None], axis=1)
        if self._any_impact:
            near |= self.has_impact
        if skip is not None:
            near[skip] = False
        lots = near.nonzero()[0]
        if not lots.size:
            return None
        # (lot, obstacle) in row-major order, as np.nonzero of a (lot, obstacle) mask gives them.
        return np.repeat(lots, self.k), np.tile(self._obst_columns, lots.size)

    def _pair_data(self, pairs: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, ...] | None:
        """The obstacle side of the candidate pairs, gathered once per action (obstacles only move
        when pushed, and then this is rebuilt): ``lot``, ``k``, the obstacles' ``(x, y)`` rows, the
        separating-axis vectors block with the obstacles' directions filled in (see
        :func:`_sat_vectors`; the car's columns are written each step), and the rows ``[half length,
        half width, bounding radius of car and obstacle]``."""
        if pairs is None:
            return None
        lot, k = pairs
        vectors = np.empty((2, 5, len(lot)))
        vectors[0, 3] = cos_o = self.obst_cos[lot, k]  # u = (cos, sin), u_perp = (-sin, cos)
        vectors[1, 3] = sin_o = self.obst_sin[lot, k]
        np.negative(sin_o, out=vectors[0, 4])
        vectors[1, 4] = cos_o
        obst_xy = np.array([self.obst_x[lot, k], self.obst_y[lot, k]])
        return lot, k, obst_xy, vectors, self._obst_shape[:, k]

    def _collide(self, pair_data: tuple[np.ndarray, ...]) -> bool:
        """highway-env's ``handle_collisions`` for the ego against the obstacles of the candidate pairs.

        Returns whether any pair will intersect (a push pending; an intersecting pair always will).
        """
        lot, k, obst_xy, vectors, shape = pair_data
        car = self._ego[:, lot]  # x, y, heading, speed of each pair's car
        np.subtract(car[:2], obst_xy, out=vectors[:, 0])  # the centre gap r
        np.cos(car[2], out=vectors[0, 1])  # e = (cos h, sin h), e_perp = (-sin h, cos h)
        np.sin(car[2], out=vectors[1, 1])
        np.negative(vectors[1, 1], out=vectors[0, 2])
        vectors[1, 2] = vectors[0, 1]
        travel = car[3] * self.dt
        will, block = _sat_test(vectors, travel, shape[0], shape[1])
        # highway-env's quick test comes first there: centres farther apart than the half diagonals
        # plus this step's travel (signed speed, as there) never collide. Here it filters the exact
        # test's answers instead, the same pairs (a NaN state fails both tests alike).
        gap = vectors[:, 0] * vectors[:, 0]
        will &= np.sqrt(gap[0] + gap[1]) <= shape[2] + travel
        hit = will.nonzero()[0]
        if not hit.size:
            return False
        lot_h = lot[hit]
        self.crashed[lot_h[_sat_intersecting(block)[hit]]] = True
        push = _sat_push(vectors, block, travel, hit)
        self._any_impact = True
        if hit.size == 1:
            last_lot, last_push, last_k = lot_h, push, k[hit]
        else:
            # Each later obstacle overwrites the car's push (highway-env assigns, not adds): keep the
            # last pair of each lot. Pairs come sorted by (lot, obstacle) from the broad phase.
            last = np.concatenate((lot_h[1:] != lot_h[:-1], _TRUE))
            last_lot, last_push, last_k = lot_h[last], push[:, last], k[hit][last]
        if self.n_vehicles:
            last_push = last_push * self.obst_push_share[last_k]
        # (Walls take the whole push: their share is 1, and a product by 1 changes no bit.)
        self.impact[:, last_lot] = last_push
        self.has_impact[last_lot] = True
        if self.n_vehicles:
            k_h = k[hit]
            parked = k_h < self.n_vehicles
            if parked.any():
                self.obst_impact[lot_h[parked], k_h[parked]] = -push[:, parked].T / 2
                self._any_obst_impact = True
        return True


# --------------------------------------------------------------------------------------------------
# Rendering (numpy only)
# --------------------------------------------------------------------------------------------------

_PX_PER_M = 8.0
_VIEW_W, _VIEW_H = 80.0, 50.0  # metres shown, centred on the lot
_IMG_W, _IMG_H = int(_VIEW_W * _PX_PER_M), int(_VIEW_H * _PX_PER_M)
_COLORS = {
    "ground": (100, 100, 100),
    "line": (255, 255, 255),
    "wall": (40, 40, 40),
    "ego": (50, 200, 0),
    "parked": (100, 200, 255),
    "goal": (230, 80, 80),
    "front": (20, 20, 20),
}
_RENDER_MODES = ["rgb_array"] + (["human"] if importlib.util.find_spec("pygame") is not None else [])


def _fill_rectangle(
    img: np.ndarray, x: float, y: float, heading: float, length: float, width: float, color
) -> None:
    """Paint the pixels whose centres fall inside an oriented rectangle (world y points down, as in highway-env)."""
    half_diag = 0.5 * math.hypot(length, width)
    col0 = max(int((x - half_diag + _VIEW_W / 2) * _PX_PER_M), 0)
    col1 = min(int((x + half_diag + _VIEW_W / 2) * _PX_PER_M) + 1, _IMG_W)
    row0 = max(int((y - half_diag + _VIEW_H / 2) * _PX_PER_M), 0)
    row1 = min(int((y + half_diag + _VIEW_H / 2) * _PX_PER_M) + 1, _IMG_H)
    if col0 >= col1 or row0 >= row1:
        return
    px = (np.arange(col0, col1) + 0.5) / _PX_PER_M - _VIEW_W / 2 - x
    py = (np.arange(row0, row1) + 0.5) / _PX_PER_M - _VIEW_H / 2 - y
    c, s = math.cos(heading), math.sin(heading)
    along = c * px[None, :] + s * py[:, None]
    across = -s * px[None, :] + c * py[:, None]
    inside = (np.abs(along) <= length / 2) & (np.abs(across) <= width / 2)
    img[row0:row1, col0:col1][inside] = color


def _draw_car(img: np.ndarray, x: float, y: float, heading: float, color) -> None:
    _fill_rectangle(img, x, y, heading, CAR_LENGTH, CAR_WIDTH, color)
    # A dark band across the front shows which way the car points.
    fx, fy = x + 0.4 * CAR_LENGTH * math.cos(heading), y + 0.4 * CAR_LENGTH * math.sin(heading)
    _fill_rectangle(img, fx, fy, heading, 0.2 * CAR_LENGTH, CAR_WIDTH, _COLORS["front"])


def _background(add_walls: bool) -> np.ndarray:
    img = np.empty((_IMG_H, _IMG_W, 3), dtype=np.uint8)
    img[:] = _COLORS["ground"]
    line = 0.15
    for i in range(N_SPOTS):
        cx, cy = SPOT_CENTRE[i]
        for side in (-1, 1):  # the two side lines of each spot (highway-env draws them continuous)
            _fill_rectangle(
                img, cx + side * SPOT_WIDTH / 2, cy, SPOT_HEADING[i], SPOT_LENGTH, line, _COLORS["line"]
            )
    if add_walls:
        for wx, wy, wh, wl, ww in WALLS:
            _fill_rectangle(img, wx, wy, wh, wl, ww, _COLORS["wall"])
    return img


def render_frame(batch: ParkingBatch, i: int, background: np.ndarray) -> np.ndarray:
    """An RGB image ``(400, 640, 3)`` of lot ``i``: spots, walls, parked cars, goal (red) and ego (green)."""
    img = background.copy()
    gx, gy, gh = batch.goal[i]
    _fill_rectangle(img, gx, gy, gh, CAR_LENGTH, CAR_WIDTH, _COLORS["goal"])
    for j in range(batch.n_vehicles):
        _draw_car(img, batch.obst_x[i, j], batch.obst_y[i, j], batch.obst_heading[i, j], _COLORS["parked"])
    _draw_car(img, batch.x[i], batch.y[i], batch.heading[i], _COLORS["ego"])
    return img


# --------------------------------------------------------------------------------------------------
# Environments
# --------------------------------------------------------------------------------------------------


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


def _check_render_mode(render_mode: str | None) -> None:
    if render_mode is not None and render_mode not in _RENDER_MODES:
        raise ValueError(f"render_mode must be None or one of {_RENDER_MODES}, got {render_mode!r}")


class _ParkingGoalFunctions:
    """The three task functions, bound to an env's settings (``config`` and ``_weights``); pure: they
    read no state. Shared by :class:`ParkingEnv` and :class:`ParkingVectorEnv`."""

    config: ParkingConfig
    _weights: np.ndarray

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any, p: float = 0.5) -> np.ndarray:
        """``-(|achieved - desired| . reward_weights) ** p + collision_reward * info["crashed"]``.

        Vectorized over leading batch dimensions. ``info`` is a step's info, a dict of arrays, a batch
        of info dicts (what a replay buffer stores), or None for the goal term alone. The crash term
        does not depend on the goal, so it is kept when a transition is relabelled with another goal.
        An info without ``"crashed"`` scores the goal term alone and warns once (the penalty is lost).
        """
        return compute_reward(
            achieved_goal,
            desired_goal,
            info,
            reward_weights=self._weights,
            collision_reward=self.config.collision_reward,
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


class ParkingEnv(_ParkingGoalFunctions, GoalEnv[dict[str, np.ndarray], np.ndarray]):
    """Park a car in a given spot of a parking lot: highway-env's ``parking-v0``, ~100x faster.

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

    metadata = {"render_modes": _RENDER_MODES, "render_fps": 5}

    def __init__(self, render_mode: str | None = None, **kwargs: Any) -> None:
        _check_render_mode(render_mode)
        self.config = ParkingConfig(**kwargs)
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": self.config.policy_frequency}
        self.observation_space, self.action_space = _spaces(self.config)
        self._batch = ParkingBatch(self.config, 1)
        self._weights = self.config.reward_weights
        self._background: np.ndarray | None = None
        self._window: Any = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed, options=options)
        self._batch.reset([self.np_random], None, options)
        obs = self._observation()
        info = self._info(obs)
        if self.render_mode == "human":
            self.render()
        return obs, info

    def _observation(self) -> dict[str, np.ndarray]:
        obs = self._batch.observe()
        return {key: value[0] for key, value in obs.items()}

    def _info(self, obs: dict[str, np.ndarray], goal: np.ndarray | None = None) -> dict[str, Any]:
        b = self._batch
        if goal is None:
            goal = _goal_term(obs, self._weights)
        success = goal > -self.config.success_goal_reward
        return {
            "speed": float(b.speed[0]),
            "crashed": bool(b.crashed[0]),
            "is_success": bool(success),
            "time": float(b.time[0]),
        }

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        action = np.asarray(action)
        if action.shape != (2,):
            raise ValueError(f"action must have shape (2,) ([acceleration, steering]), got {action.shape}")
        self._batch.simulate(action[None])
        obs = self._observation()
        # The compute_* answers on (obs, info), sharing one goal term: the same operations, so the
        # same bits (the checker tests it).
        goal = _goal_term(obs, self._weights)
        info = self._info(obs, goal)
        c = self.config
        reward = float(goal + c.collision_reward * info["crashed"])
        terminated = info["is_success"] or info["crashed"]
        truncated = info["time"] >= c.duration
        if self.render_mode == "human":
            self.render()
        return obs, reward, terminated, truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn(
                'render() called without a render_mode; make the env with render_mode="rgb_array"'
            )
            return None
        if self._background is None:
            self._background = _background(self.config.add_walls)
        frame = render_frame(self._batch, 0, self._background)
        if self.render_mode == "rgb_array":
            return frame
        self._show(frame)
        return None

    def _show(self, frame: np.ndarray) -> None:
        import pygame  # only for render_mode="human", listed only when pygame is installed

        if self._window is None:
            pygame.init()
            self._window = pygame.display.set_mode((_IMG_W, _IMG_H))
            pygame.display.set_caption("goalenvs/Parking-v0")
        pygame.event.pump()
        self._window.blit(pygame.surfarray.make_surface(frame.swapaxes(0, 1)), (0, 0))
        pygame.display.flip()

    def close(self) -> None:
        if self._window is not None:
            import pygame

            pygame.display.quit()
            self._window = None


class ParkingVectorEnv(_ParkingGoalFunctions, VectorEnv):
    """``num_envs`` parking lots stepped as one batch (see :class:`ParkingEnv` for the task).

    ``gym.make_vec("goalenvs/Parking-v0", num_envs=N, **kwargs)``. Same arguments as ParkingEnv.
    Autoreset is next-step (``metadata["autoreset_mode"]``): the step after a lot's episode ends
    resets it, ignores its action and returns its first observation with reward 0, terminated and
    truncated False. ``reset(seed=s)`` seeds lot ``i`` with ``s + i`` (a list seeds each lot), so lot
    ``i`` replays exactly what ``ParkingEnv`` reset with seed ``s + i`` does, autoresets included.
    ``reset(options=...)`` takes ``ego_pose`` and ``goal_pose`` as one pose for every lot or an
    ``(N, 3)`` array. ``info`` is a dict of arrays (with Gymnasium's ``_key`` masks, all True).
    ``render()`` returns a tuple of ``num_envs`` frames.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 5, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, render_mode: str | None = None, **kwargs: Any) -> None:
        self.num_envs = _positive_int("num_envs", num_envs)
        if render_mode is not None and render_mode != "rgb_array":
            raise ValueError(
                f"render_mode must be None or 'rgb_array' for the vector env, got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.config = ParkingConfig(**kwargs)
        self.metadata = {**self.metadata, "render_fps": self.config.policy_frequency}
        self.single_observation_space, self.single_action_space = _spaces(self.config)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._batch = ParkingBatch(self.config, self.num_envs)
        self._weights = self.config.reward_weights
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._rngs: list[np.random.Generator] | None = None
        self._background: np.ndarray | None = None

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        n = self.num_envs
        if isinstance(seed, (list, tuple, np.ndarray)):
            if len(seed) != n or any(s is None for s in seed):
                raise ValueError(f"seed as a list must hold {n} ints, got {seed!r}")
            seeds = [int(s) for s in seed]
        elif seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
                raise TypeError(f"seed must be an int, a list of {n} ints, or None; got {seed!r}")
            seeds = [int(seed) + i for i in range(n)]
        elif self._rngs is None:
            seeds = [int(s) for s in self.np_random.integers(0, 2**63, size=n)]
        else:
            seeds = None
        if seeds is not None:
            super().reset(seed=seeds[0])
            # Lot i draws from the generator a single env seeded seeds[i] would use.
            self._rngs = [seeding.np_random(s)[0] for s in seeds]
        self._batch.reset(self._rngs, None, options)
        self._autoreset[:] = False
        obs = self._batch.observe()
        return obs, self._info(_goal_term(obs, self._weights) > -self.config.success_goal_reward)

    def _info(self, success: np.ndarray) -> dict[str, Any]:
        b = self._batch
        every = np.ones(self.num_envs, dtype=bool)
        return {
            "speed": b.speed.copy(),
            "crashed": b.crashed.copy(),
            "is_success": success,
            "time": b.time.copy(),
            "_speed": every,
            "_crashed": every,
            "_is_success": every,
            "_time": every,
        }

    def step(
        self, actions: Any
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if self._rngs is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs, 2):
            raise ValueError(
                f"actions must have shape ({self.num_envs}, 2) ([acceleration, steering] per env), "
                f"got {actions.shape}"
            )
        b = self._batch
        restart = self._autoreset.nonzero()[0]
        # Every lot is simulated (fixed shapes, no gather/scatter); the lots whose episode ended last
        # step are then overwritten by a fresh scene: next-step autoreset ignores their action.
        b.simulate(actions, skip=restart)
        if restart.size:
            rngs = self._rngs
            b.reset([rngs[i] for i in restart.tolist()], restart)
        obs = b.observe()
        # compute_reward / compute_terminated / compute_truncated on (obs, info), with the goal term
        # they share computed once: the same operations, so the same bits (the checker tests it).
        c = self.config
        goal = _goal_term(obs, self._weights)
        info = self._info(goal > -c.success_goal_reward)
        reward = goal + c.collision_reward * info["crashed"]
        terminated = info["is_success"] | info["crashed"]
        truncated = info["time"] >= c.duration
        if restart.size:
            reward[restart], terminated[restart], truncated[restart] = 0.0, False, False
        self._autoreset = terminated | truncated
        return obs, reward, terminated, truncated, info

    def render(self) -> tuple[np.ndarray, ...] | None:
        if self.render_mode is None:
            gym.logger.warn(
                'render() called without a render_mode; make the env with render_mode="rgb_array"'
            )
            return None
        if self._background is None:
            self._background = _background(self.config.add_walls)
        return tuple(render_frame(self._batch, i, self._background) for i in range(self.num_envs))
