"""The Fetch tasks' MJCF files: Gymnasium-Robotics' own, read from its installed package folder without
importing the package (importing it would build its whole env registry)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from gymnasium import error

# First: it sets the OpenGL backend default before anything imports mujoco.
from goalenvs.envs.mujoco_assets import INSTALL_FETCH  # isort: skip

__all__ = ["fetch_assets_dir"]


def fetch_assets_dir() -> Path:
    """Folder of Gymnasium-Robotics' Fetch MJCF files, found without importing gymnasium_robotics."""
    spec = importlib.util.find_spec("gymnasium_robotics")
    if spec is None or not spec.submodule_search_locations:
        raise error.DependencyNotInstalled(
            "the Fetch tasks use the MJCF assets shipped with gymnasium-robotics, which is not installed; "
            + INSTALL_FETCH
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "envs" / "assets" / "fetch"
    if not folder.is_dir():
        raise error.DependencyNotInstalled(
            f"gymnasium-robotics is installed but has no Fetch assets at {folder}; "
            "reinstall gymnasium-robotics"
        )
    return folder
