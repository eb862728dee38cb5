"""How close the Shadow hand's fingertips can come to HandReach goals at all: a kinematic bound.

``python -m benchmarks.handreach_bound [EPISODES] [KINDS] [PENETRATION_MM]`` (default 300 episodes; KINDS a
comma-separated subset of first, middle, ring, little; default all four)

For the goal of each episode of seeds 2e9 + i (the seeds ``--evaluate`` uses), a constrained least-squares
search over the hand's 24 joint positions (SLSQP from the start pose and 5 perturbed ones), within the
joints' ranges and the model's tendon limits (which couple each finger's two distal joints), minimises
the distance between the five fingertips and the goal (success: under 1 cm over all 15 coordinates).
Actuators and dynamics are ignored, and so are contacts unless PENETRATION_MM is given: then the model's 19
explicit contact pairs (finger against finger, fingertips and palm against the thumb's tip) may sink at most that
far into each other (MuJoCo's contacts are soft: held random actions press them up to about 3.4 mm). Either way
what it finds is a lower bound on the distance any policy can reach: a goal it cannot bring under 1 cm is out of
the hand's reach. Prints, per kind of goal, the least distances' spread and the share under 1 cm, then the
success no policy can exceed. Not a speed benchmark.
"""

from __future__ import annotations

import collections
import sys
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from scipy.optimize import Bounds, LinearConstraint, NonlinearConstraint, minimize

import goalenvs  # noqa: F401  (registers the ids)
from benchmarks.handreach_fingers import EVAL_SEED, FINGERS, goal_kind
from goalenvs.envs.hand.settings import FINGERTIP_SITES

SEEDS = EVAL_SEED  # the first seed ``--evaluate`` uses
STARTS = 6  # searches per goal: the start pose, then perturbed ones (0.3 rad per joint)
THRESHOLD = 0.01  # m: HandReach's distance_threshold


class Hand:
    """The HandReach model's kinematics: fingertips ``(15,)`` of joint positions ``(24,)``, and the limits."""

    def __init__(self, env: Any, penetration: float | None = None) -> None:
        m = self.model = env.model
        self.data = mujoco.MjData(m)
        mujoco.mj_kinematics(m, self.data)  # gap() recomputes only when the pose changes
        self.sites = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, name) for name in FINGERTIP_SITES]
        self.bounds = Bounds(m.jnt_range[:, 0], m.jnt_range[:, 1])
        # Fixed tendons: length = sum of coefficient x joint position, each held in its range.
        coupling = np.zeros((m.ntendon, m.nq))
        for t in range(m.ntendon):
            for k in range(m.tendon_adr[t], m.tendon_adr[t] + m.tendon_num[t]):
                coupling[t, m.jnt_qposadr[m.wrap_objid[k]]] += m.wrap_prm[k]
        self.tendons = LinearConstraint(coupling, m.tendon_range[:, 0], m.tendon_range[:, 1])
        # The model's explicit contact pairs (finger against finger, fingertips against the thumb's), each
        # held at most ``penetration`` (m) into the other: MuJoCo's contacts are soft, not rigid.
        self.constraints: list[Any] = [self.tendons]
        if penetration is not None:
            pairs = list(zip(m.pair_geom1.tolist(), m.pair_geom2.tolist(), strict=True))
            gaps = lambda q: np.array([self.gap(q, a, b) for a, b in pairs])  # noqa: E731
            self.constraints.append(NonlinearConstraint(gaps, -penetration, np.inf))
        env.reset(seed=0)  # every episode starts from the same pose; only the goal differs
        self.start = env.data.qpos.copy()
        self.start_tips = env.initial_goal.copy()
        self.pose = self.start  # the pose of the latest least_distance

    def gap(self, qpos: np.ndarray, geom1: int, geom2: int) -> float:
        """The signed distance (m) between two geoms in pose ``qpos`` (negative: interpenetrating)."""
        if not np.array_equal(self.data.qpos, qpos):
            self.data.qpos[:] = qpos
            mujoco.mj_kinematics(self.model, self.data)
        return float(mujoco.mj_geomDistance(self.model, self.data, geom1, geom2, 0.05, None))

    def tips(self, qpos: np.ndarray) -> np.ndarray:
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.site_xpos[self.sites].reshape(-1).copy()

    def least_distance(self, goal: np.ndarray, rng: np.random.Generator) -> float:
        """The least distance (m) to ``goal`` found over poses within the limits (the pose: ``self.pose``)."""
        squared = lambda q: float(np.sum((self.tips(q) - goal) ** 2))  # noqa: E731
        best, self.pose = np.inf, self.start
        for start in range(STARTS):
            x = self.start if start == 0 else np.clip(self.start + rng.normal(0, 0.3, len(self.start)), self.bounds.lb, self.bounds.ub)  # fmt: skip
            found = minimize(squared, x, method="SLSQP", bounds=self.bounds, constraints=self.constraints,
                             options={"maxiter": 300, "ftol": 1e-12})  # fmt: skip
            q = np.clip(found.x, self.bounds.lb, self.bounds.ub)
            lengths = self.tendons.A @ q
            apart = all(np.all(c.fun(q) >= c.lb - 1e-5) for c in self.constraints[1:])
            within = np.all(lengths >= self.tendons.lb - 1e-6) and np.all(lengths <= self.tendons.ub + 1e-6)
            if apart and within and np.sqrt(squared(q)) < best:
                best, self.pose = float(np.sqrt(squared(q))), q
        return best


def main(episodes: int = 300, kinds: tuple[str, ...] = FINGERS, penetration_mm: float | None = None) -> None:
    if episodes < 1:
        raise SystemExit(f"EPISODES: {episodes} not accepted; accepted: an integer >= 1")
    bad = [kind for kind in kinds if kind not in FINGERS]
    if bad:
        raise SystemExit(f"KINDS: {bad} not accepted; accepted: a comma-separated subset of {list(FINGERS)}")
    env: Any = gym.make("goalenvs/HandReach-v0").unwrapped
    if penetration_mm is not None and not 0 <= penetration_mm < 20:
        raise SystemExit(
            f"PENETRATION_MM: {penetration_mm} not accepted; accepted: a number of mm in [0, 20)"
        )
    hand = Hand(env, None if penetration_mm is None else penetration_mm / 1000)
    rng = np.random.default_rng(0)
    if not np.allclose(hand.tips(hand.start), hand.start_tips, atol=1e-9):
        raise SystemExit("handreach_bound: the model's start pose does not give its initial fingertips")
    counts: collections.Counter[str] = collections.Counter()
    distances: dict[str, list[float]] = collections.defaultdict(list)
    for seed in range(SEEDS, SEEDS + episodes):
        goal = env.reset(seed=seed)[0]["desired_goal"]
        kind = goal_kind(goal)
        counts[kind] += 1
        if kind in kinds:
            distances[kind].append(hand.least_distance(goal, rng))
    print(f"goal kinds over {episodes} episodes: {dict(counts)}")
    ceiling = 1.0
    for kind in kinds:
        cm = 100 * np.array(distances[kind])
        if not len(cm):
            continue
        reachable = float(np.mean(cm < 100 * THRESHOLD))
        ceiling -= counts[kind] / episodes * (1 - reachable)
        q10, q50, q90 = np.percentile(cm, [10, 50, 90])
        print(f"  {kind:>6}: {len(cm)} goals, least distance {cm.min():.2f} / {q10:.2f} / {q50:.2f} / {q90:.2f} / "
              f"{cm.max():.2f} cm (min / 10% / median / 90% / max), under 1 cm: {reachable:.1%}")  # fmt: skip
    print(
        f"success no policy can exceed on these episodes (the kinds not searched counted as reachable): {ceiling:.1%}"
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and not args[0].isdigit():
        sys.exit(f"EPISODES: {args[0]!r} not accepted; accepted: an integer >= 1")
    try:
        penetration = [float(a) for a in args[2:3]]
    except ValueError:
        sys.exit(f"PENETRATION_MM: {args[2]!r} not accepted; accepted: a number of mm in [0, 20)")
    main(*(int(a) for a in args[:1]), *(tuple(a.split(",")) for a in args[1:2]), *penetration)
