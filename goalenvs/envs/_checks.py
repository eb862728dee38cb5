"""Checks the envs' ``step`` shares: an action with NaN or infinite entries is refused before it moves anything.

Why refuse rather than clip: ``np.clip`` (Gymnasium-Robotics' Fetch, highway-env) passes NaN through,
so a NaN action sends the state to NaN (Parking: the car is lost for the rest of the episode) or makes
MuJoCo reset the simulation mid-episode (Fetch: the arm jumps back to its start pose), with no sign
of either in the step's return. A non-finite action is always an upstream bug (a diverged policy, a
division by zero), best reported at the step that received it.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["check_finite_action"]

_SHOWN = 4  # non-finite entries quoted in the error, at most
_PYTHON_SUM_MAX = 16  # up to this many entries a sum of Python floats beats numpy's per-call cost
_ZEROS: dict[tuple[int, np.dtype], np.ndarray] = {}  # one zero vector per action size and dtype


def check_finite_action(name: str, action: np.ndarray, accepted: str) -> None:
    """Raise a one-line ``ValueError`` naming ``name`` and its non-finite entries, if a float ``action`` has any.

    ``accepted`` says what the action holds (e.g. ``"4 numbers: dx, dy, dz, gripper, ..."``). Integer
    and bool actions are always finite; a huge finite action passes (to be clipped, as before).
    The test is one sum, which is NaN or inf as soon as an entry is: about 0.3 us for a few entries
    (Python floats: a float64 sum may overflow to inf, and the exact test below then lets it pass),
    0.7 us for many (a dot product with zeros, which cannot overflow: ``0 * inf`` is NaN).
    """
    if action.dtype.kind != "f":
        return
    if action.size <= _PYTHON_SUM_MAX:
        if math.isfinite(sum(action.ravel().tolist())):
            return
    else:
        flat = action.reshape(-1)
        key = (flat.size, flat.dtype)
        zeros = _ZEROS.get(key)
        if zeros is None:
            zeros = _ZEROS[key] = np.zeros(flat.size, flat.dtype)
        if flat.dot(zeros) == 0:
            return
    bad = np.argwhere(~np.isfinite(action))
    if not len(bad):  # huge finite entries overflowed the sum
        return
    entries = ", ".join(
        f"{name}[{', '.join(map(str, index.tolist()))}] = {float(action[tuple(index)])}"
        for index in bad[:_SHOWN]
    )
    more = f" and {len(bad) - _SHOWN} more" if len(bad) > _SHOWN else ""
    raise ValueError(
        f"{name} must hold finite numbers ({accepted}), got {entries}{more}; nothing was stepped"
    )
