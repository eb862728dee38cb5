"""Shared fixtures: the registry of goalenvs ids, as Gymnasium's own env tests parametrize."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import pytest

import goalenvs
from goalenvs.registration import ENVS

gym.register_envs(goalenvs)

if importlib.util.find_spec("mujoco") is not None:
    # goalenvs chooses MuJoCo's offscreen backend (EGL without a display) when it first imports
    # mujoco; a test module importing mujoco before that would leave rendering on GLFW, which fails.
    import goalenvs.envs.fetch


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# The in-hand manipulation family registers 22 ids of one code path that differ only in settings;
# tests/envs/test_hand_manipulate.py runs every one of them (parity, vector env, checker). The suites
# that run once per id (wrappers, Minari, the checker's, SB3's buffer...) take two: the block with a
# position and free rotation target (sparse), and the pen, whose rotation leaves its own axis out (dense).
MANIPULATE_FOR_SUITES = {"goalenvs/HandManipulateBlock-v0", "goalenvs/HandManipulatePenRotateDense-v0"}


def make_params(entries=ENVS, every_id: bool = False):
    """One pytest param per registered id (of the manipulate family, :data:`MANIPULATE_FOR_SUITES`
    unless ``every_id``); ids needing an absent optional dependency are skipped."""
    params = []
    for entry in entries:
        if not every_id and entry.name.startswith("HandManipulate") and entry.id not in MANIPULATE_FOR_SUITES:
            continue
        marks = []
        if ("fetch" in entry.entry_point or "hand" in entry.entry_point) and not _has("mujoco"):
            marks.append(pytest.mark.skip(reason="the fetch extra (mujoco) is not installed"))
        params.append(pytest.param(entry.id, id=entry.id, marks=marks))
    return params


@pytest.fixture
def one_torch_thread():
    """Tiny networks on a shared 2-core machine: extra torch threads only contend."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
