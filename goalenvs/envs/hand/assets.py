"""What the Shadow Hand tasks need from outside: MuJoCo and Gymnasium-Robotics' hand MJCF files.

MuJoCo, and the offscreen renderer, come through goalenvs.envs.mujoco_assets, which picks a
headless OpenGL backend (``MUJOCO_GL``) before mujoco is first imported and explains a failed
context; the hand's models are Gymnasium-Robotics' own, read from its installed package without
importing it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from gymnasium import error

# First: it sets the OpenGL backend default before anything imports mujoco.
from goalenvs.envs.mujoco_assets import INSTALL_FETCH, make_renderer, mujoco  # isort: skip

__all__ = ["hand_assets_dir", "make_hand_renderer", "mujoco"]


def hand_assets_dir() -> Path:
    """Folder of Gymnasium-Robotics' Shadow Hand MJCF files, found without importing gymnasium_robotics."""
    spec = importlib.util.find_spec("gymnasium_robotics")
    if spec is None or not spec.submodule_search_locations:
        raise error.DependencyNotInstalled(
            "the Shadow Hand tasks use the MJCF assets shipped with gymnasium-robotics, which is not "
            "installed; " + INSTALL_FETCH
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "envs" / "assets" / "hand"
    if not folder.is_dir():
        raise error.DependencyNotInstalled(
            f"gymnasium-robotics is installed but has no hand assets at {folder}; reinstall gymnasium-robotics"
        )
    return folder


def make_hand_renderer(
    model: mujoco.MjModel, height: int, width: int
) -> tuple[mujoco.Renderer, mujoco.MjvCamera]:
    """An offscreen renderer for ``model`` and the free camera Gymnasium-Robotics' hand envs view from.

    Raises ``DependencyNotInstalled`` saying which OpenGL backend failed and how to choose another.
    """
    return make_renderer(
        model, height, width, distance=0.5, azimuth=55.0, elevation=-25.0, lookat=(1.0, 0.96, 0.14)
    )
