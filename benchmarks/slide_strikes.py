"""FetchSlide: how long a slide takes, against the 50 steps of an episode. Scripted strikes, no learning.

``python -m benchmarks.slide_strikes [EPISODES] [START]`` (default 40 episodes per strike length, strike at step 12)

In each episode the gripper goes behind the puck (on the line from the goal through the puck) by step
START, pushes it toward the goal at full speed for k = 1-4 steps, then holds still. Printed per band of the
puck's travel: the runs, the steps the puck kept moving (over 1 mm a step) and the share still moving at
the episode's last step. A goal that needs a slide longer than the steps left after the approach cannot be
met, however precise the strike. Not a speed benchmark: ``python -m benchmarks`` does not run it.
"""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np

import goalenvs  # noqa: F401  (registers the ids)


def strike(env: gym.Env, seed: int, steps: int, start: int) -> tuple[float, int, bool]:
    """One episode: the puck's travel (m), the steps it moved, and whether it moved in the last step."""
    obs, _ = env.reset(seed=seed)
    puck0 = obs["observation"][3:5].copy()
    toward = obs["desired_goal"][:2] - puck0
    toward /= np.linalg.norm(toward)
    path = []
    for t in range(50):
        grip, puck = obs["observation"][:3], obs["observation"][3:6]
        if t < start:  # behind the puck, from above for the first steps
            target = np.r_[puck[:2] - 0.05 * toward, puck[2] + (0.04 if t < start - 4 else 0.0)]
            move = np.clip((target - grip) / 0.05, -1.0, 1.0)
        else:
            move = np.r_[toward, 0.0] if t < start + steps else np.zeros(3)
        obs, *_ = env.step(np.r_[move, -1.0].astype(np.float32))
        path.append(obs["observation"][3:5].copy())
    per_step = np.linalg.norm(np.diff(np.vstack([puck0, path]), axis=0), axis=1)
    moving = np.flatnonzero(per_step > 1e-3)
    if not len(moving):
        return 0.0, 0, False
    return float(np.linalg.norm(path[-1] - puck0)), int(moving[-1] - moving[0] + 1), bool(moving[-1] == 49)


def main(episodes: int = 40, start: int = 12) -> None:
    env = gym.make("goalenvs/FetchSlide-v0").unwrapped
    runs = np.array([strike(env, s, k, start) for k in (1, 2, 3, 4) for s in range(episodes)])
    print(f"FetchSlide, {len(runs)} scripted strikes from step {start}:")
    for low, high in ((0.1, 0.3), (0.3, 0.45), (0.45, 0.6), (0.6, 0.9)):
        band = runs[(runs[:, 0] >= low) & (runs[:, 0] < high)]
        if len(band):
            print(
                f"  travel {low:.2f}-{high:.2f} m: {len(band):3d} runs, moving {band[:, 1].mean():.1f} steps "
                f"(at most {band[:, 1].max():.0f}), still moving at step 50: {band[:, 2].mean():.0%}"
            )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
