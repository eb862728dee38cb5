"""The simulation: ``n`` independent parking lots as arrays, reset and stepped together.

:class:`ParkingBatch` holds each lot's state (the ego's pose and speed, crash flag, pending collision
push, simulated time, goal, parked cars) and moves it as highway-env's ``parking-v0`` does: kinematic
bicycle integration, then highway-env's collision rule against every obstacle. The single env is a
batch of one, through the same code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from goalenvs.envs.parking.collision import sat_intersecting, sat_push, sat_test
from goalenvs.envs.parking.config import ParkingConfig
from goalenvs.envs.parking.lot import (
    CAR_DIAGONAL,
    CAR_LENGTH,
    CAR_WIDTH,
    LOT_HEIGHT,
    LOT_WIDTH,
    MAX_SPEED,
    MIN_SPEED,
    OBS_DIM,
    OBS_SCALES,
    SPOT_CENTRE,
    SPOT_HEADING,
    WALL_THICKNESS,
    WALLS,
    goal_observation,
)
from goalenvs.envs.parking.scenes import OPTION_KEYS, draw_scenes, pose_option
from goalenvs.task import check_reset_options

__all__ = ["ParkingBatch"]

# The broad phase keeps a pair for the exact test unless it is separated by more than this; it only
# needs to cover rounding differences between the broad phase's and the exact test's arithmetic.
_BROAD_PHASE_MARGIN = 1e-6
_TRUE = np.ones(1, dtype=bool)


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
        # With walls and no parked cars (the default lot), every lot's obstacles are the same 4
        # axis-aligned walls: the broad phase then needs only each car's distance to their inner edges.
        self._walls_only = v == 0 and len(walls) > 0
        self._inner_edges = np.array(
            [[LOT_WIDTH / 2 - WALL_THICKNESS / 2], [LOT_HEIGHT / 2 - WALL_THICKNESS / 2]]
        )
        # The obstacle column of each candidate pair when m lots are near: the first m * k entries (a
        # view, where np.tile would build them each step).
        self._pair_columns = np.tile(np.arange(self.k), n)
        self._pair_columns.flags.writeable = False
        self._pair_shape = np.tile(self._obst_shape, (1, n))  # likewise for _obst_shape[:, columns]
        self._pair_shape.flags.writeable = False
        f = c.frames
        # The largest speed change over one action, used to bound how far the car can travel in it.
        self._max_speed_gain = f * c.acceleration_range * self.dt
        # The broad phase's radius is reach_slope * |speed| + reach_base: the car's bounding disc grown
        # by the farthest it can travel in the action, plus the margin (see _broad_phase).
        self._reach_slope = self.dt * (f + 1)
        self._reach_base = (
            CAR_DIAGONAL / 2 + self.dt * self._max_speed_gain * (f + 1) / 2 + _BROAD_PHASE_MARGIN
        )
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
        # Lot i's random generator (set by seeding: the one a single env seeded like lot i draws from).
        self.rngs: list[Any] = [None] * n
        self.goal = np.zeros((n, 3))
        self.parked_spots = np.zeros((n, v), dtype=np.intp)
        # Obstacle poses (n, k); the parked cars' columns are filled at reset. x, y and the heading's
        # cos and sin are rows of one array, so the candidate pairs gather them in one call (the
        # attributes are views: update them in place).
        self.obst_heading = np.concatenate(
            [np.zeros((n, v)), np.broadcast_to(walls[:, 2], (n, len(walls)))], axis=1
        )
        self._obst = np.empty((4, n, self.k))
        self.obst_x, self.obst_y, self.obst_cos, self.obst_sin = self._obst
        for row, col in enumerate((0, 1)):
            self._obst[row] = np.concatenate(
                [np.zeros((n, v)), np.broadcast_to(walls[:, col], (n, len(walls)))], axis=1
            )
        np.cos(self.obst_heading, out=self.obst_cos)
        np.sin(self.obst_heading, out=self.obst_sin)
        self.obst_impact = np.zeros((n, self.k, 2))
        self._any_obst_impact = False
        self._any_impact = False  # whether has_impact has any True (saves a reduction per step)
        self._goal_obs = np.zeros((n, OBS_DIM))
        self._map_consts: dict[np.dtype, tuple[np.ndarray, ...]] = {}
        # Scratch rows of one integration step (dx, dy, dheading, dspeed) and the direction of travel.
        self._delta = np.empty((4, n))
        self._trig = np.empty((3, n))
        self._direction = np.empty(n)

    _VIEWS = ("x", "y", "heading", "speed", "obst_x", "obst_y", "obst_cos", "obst_sin")

    def __getstate__(self) -> dict[str, Any]:
        # Pickle and deepcopy would turn the views into arrays of their own: keep the bases only.
        return {key: value for key, value in self.__dict__.items() if key not in self._VIEWS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.x, self.y, self.heading, self.speed = self._ego
        self.obst_x, self.obst_y, self.obst_cos, self.obst_sin = self._obst

    # ---- reset -----------------------------------------------------------------------------------

    def reset(
        self,
        rngs: Sequence[np.random.Generator],
        idx: np.ndarray | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """New scenes for the lots ``idx`` (all when None), lot ``idx[j]`` drawing from ``rngs[j]``.

        ``options`` as ``ParkingEnv.reset``'s, with poses of shape ``(3,)`` or ``(n, 3)``.
        """
        idx = np.arange(self.n) if idx is None else idx
        ego_pose = goal_pose = None
        if options:
            check_reset_options(options, OPTION_KEYS)
            ego_pose = pose_option(options, "ego_pose", self.n)
            goal_pose = pose_option(options, "goal_pose", self.n)
            ego_pose = None if ego_pose is None else ego_pose[idx]
            goal_pose = None if goal_pose is None else goal_pose[idx]
        ego, goal, parked = draw_scenes(rngs, self.n_vehicles, ego_pose, goal_pose)
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
        # The desired goal only changes here, so build its observation once.
        self._goal_obs[idx] = goal_observation(goal)

    # ---- observation -----------------------------------------------------------------------------

    def observe(self) -> dict[str, np.ndarray]:
        """``observation``/``achieved_goal`` ``(n, 6)``: ``[x, y, vx, vy, cos_h, sin_h] / scales``; the
        goal's likewise.

        Velocity is ``speed * (cos h, sin h)``, without the slip angle, as highway-env's
        ``Vehicle.velocity``. Values are float64, neither normalised nor clipped (highway-env's
        KinematicsGoal observation with ``normalize=False``).
        """
        # Built as feature rows (contiguous, fewer calls), then scaled.
        rows = np.empty((OBS_DIM, self.n))
        rows[:2] = self._ego[:2]
        np.cos(self.heading, out=rows[4])
        np.sin(self.heading, out=rows[5])
        np.multiply(self.speed, rows[4:], out=rows[2:4])
        obs = np.empty((self.n, OBS_DIM))
        np.divide(rows.T, OBS_SCALES, out=obs)
        return {"observation": obs, "achieved_goal": obs.copy(), "desired_goal": self._goal_obs.copy()}

    # ---- dynamics --------------------------------------------------------------------------------

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
        self.time += self.time_step
        c = self.config
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
                if pair_data is not None:  # the gathered obstacle positions are stale
                    pair_data = self._pair_data((pair_data[0], pair_data[1]))
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

    # ---- collisions ------------------------------------------------------------------------------

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
        reach = self._reach_slope * speed
        reach += self._reach_base
        near = self._near_walls(reach) if self._walls_only else self._near_obstacles(reach)
        if self._any_impact:
            near |= self.has_impact
        if skip is not None:
            near[skip] = False
        lots = near.nonzero()[0]
        if not lots.size:
            return None
        # (lot, obstacle) in row-major order, as np.nonzero of a (lot, obstacle) mask gives them.
        return np.repeat(lots, self.k), self._pair_columns[: lots.size * self.k]

    def _near_obstacles(self, reach: np.ndarray) -> np.ndarray:
        """Lots ``(n,)`` whose disc of radius ``reach`` comes within reach of an obstacle, tested on each
        obstacle's own axes."""
        dx = self.obst_x - self.x[:, None]
        dy = self.obst_y - self.y[:, None]
        along = np.abs(dx * self.obst_cos + dy * self.obst_sin) - self._obst_shape[0]
        across = np.abs(dy * self.obst_cos - dx * self.obst_sin) - self._obst_shape[1]
        return np.logical_or.reduce(np.maximum(along, across) <= reach[:, None], axis=1)

    def _near_walls(self, reach: np.ndarray) -> np.ndarray:
        """:meth:`_near_obstacles` for a lot whose obstacles are its 4 walls alone: a disc that stays
        inside the walls' inner edges (|x| = 34.5, |y| = 20.5) is clear of every wall. A looser test,
        so it keeps a superset of the lots, and a lot kept needlessly gets the exact test, which finds
        no collision: the simulation's bits are the same either way. It spares the default lot the
        per-obstacle arithmetic of every step, single env and vector env alike."""
        return np.logical_or.reduce(np.abs(self._ego[:2]) + reach >= self._inner_edges, axis=0)

    def _pair_data(self, pairs: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, ...] | None:
        """The obstacle side of the candidate pairs (as :meth:`_broad_phase` gives them: every obstacle
        of each lot kept, in column order), gathered once per action (obstacles only move when pushed,
        and then this is rebuilt): ``lot``, ``k``, the obstacles' ``(x, y)`` rows, the
        separating-axis vectors block with the obstacles' directions filled in (see
        :func:`~goalenvs.envs.parking.collision.sat_vectors`; the car's columns are written each
        step), and the rows ``[half length, half width, bounding radius of car and obstacle]``."""
        if pairs is None:
            return None
        lot, k = pairs
        obst = self._obst[:, lot, k]  # x, y, cos, sin of each pair's obstacle
        vectors = np.empty((2, 5, len(lot)))
        vectors[:, 3] = obst[2:]  # u = (cos, sin), u_perp = (-sin, cos)
        np.negative(obst[3], out=vectors[0, 4])
        vectors[1, 4] = obst[2]
        return lot, k, obst[:2], vectors, self._pair_shape[:, : len(lot)]

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
        will, block = sat_test(vectors, travel, shape[0], shape[1])
        # highway-env's quick test comes first there: centres farther apart than the half diagonals
        # plus this step's travel (signed speed, as there) never collide. Here it filters the exact
        # test's answers instead, the same pairs (a NaN state fails both tests alike).
        gap = vectors[:, 0] * vectors[:, 0]
        will &= np.sqrt(gap[0] + gap[1]) <= shape[2] + travel
        hit = will.nonzero()[0]
        if not hit.size:
            return False
        lot_h = lot[hit]
        self.crashed[lot_h[sat_intersecting(block)[hit]]] = True
        push = sat_push(vectors, block, travel, hit)
        self._any_impact = True
        # Each later obstacle overwrites the car's push (highway-env assigns, not adds): keep the last
        # pair of each lot. Pairs come sorted by (lot, obstacle) from the broad phase.
        last = np.concatenate((lot_h[1:] != lot_h[:-1], _TRUE))
        last_lot, last_push = lot_h[last], push[:, last]
        if self.n_vehicles:
            last_push = last_push * self.obst_push_share[k[hit][last]]
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
