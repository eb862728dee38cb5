"""A test-only shim that lets Gymnasium-Robotics 1.4.2 build its Fetch and hand envs on MuJoCo >= 3.12.

Its ``mujoco_utils`` asserts that a joint's type is one of ``mujoco.mjtJoint``'s values, and since
MuJoCo 3.12 those enums no longer compare equal to numpy integers. :func:`int_enum_mujoco` is the
``mujoco`` module as that file sees it, with those enums as plain ints; everything else is MuJoCo's
own. :func:`register_shimmed_gymnasium_robotics` registers Gymnasium-Robotics' envs with it for one
test. Used by ``tests/envs/test_fetch.py``, ``tests/envs/test_hand.py``,
``tests/envs/test_hand_manipulate.py``, ``tests/data/record_fetch_golden.py`` and
``tests/data/record_hand_golden.py``.
"""

from __future__ import annotations

import types
import warnings
from typing import Any

import gymnasium as gym
import mujoco
import pytest

_JOINTS = ("mjJNT_FREE", "mjJNT_BALL", "mjJNT_SLIDE", "mjJNT_HINGE")


class _IntEnumMujoco(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        return getattr(mujoco, name)


def int_enum_mujoco() -> types.ModuleType:
    """``mujoco`` with ``mjtJoint`` and ``mjtEq.mjEQ_WELD`` as plain ints, for ``mujoco_utils.mujoco``."""
    shim = _IntEnumMujoco("mujoco_with_int_enums")
    shim.mjtJoint = types.SimpleNamespace(**{n: int(getattr(mujoco.mjtJoint, n)) for n in _JOINTS})  # type: ignore[attr-defined]
    shim.mjtEq = types.SimpleNamespace(mjEQ_WELD=int(mujoco.mjtEq.mjEQ_WELD))  # type: ignore[attr-defined]
    return shim


def register_shimmed_gymnasium_robotics(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register Gymnasium-Robotics' envs, its ``mujoco_utils`` seeing :func:`int_enum_mujoco` until the
    test ends; skip the test where gymnasium-robotics is not installed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gr = pytest.importorskip("gymnasium_robotics")
        from gymnasium_robotics.utils import mujoco_utils

    monkeypatch.setattr(mujoco_utils, "mujoco", int_enum_mujoco())
    gym.register_envs(gr)
