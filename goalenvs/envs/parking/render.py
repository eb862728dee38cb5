"""Top-view frames of a lot, drawn with numpy alone (no pygame needed for ``rgb_array``)."""

from __future__ import annotations

import importlib.util
import math

import numpy as np

from goalenvs.envs.parking.lot import (
    CAR_LENGTH,
    CAR_WIDTH,
    N_SPOTS,
    SPOT_CENTRE,
    SPOT_HEADING,
    SPOT_LENGTH,
    SPOT_WIDTH,
    WALLS,
)
from goalenvs.envs.parking.sim import ParkingBatch

__all__ = ["IMAGE_SIZE", "RENDER_MODES", "background_frame", "render_frame"]

_PX_PER_M = 8.0
_VIEW_W, _VIEW_H = 80.0, 50.0  # metres shown, centred on the lot
_IMG_W, _IMG_H = int(_VIEW_W * _PX_PER_M), int(_VIEW_H * _PX_PER_M)
#: A frame's ``(width, height)`` in pixels.
IMAGE_SIZE = (_IMG_W, _IMG_H)
_COLORS = {
    "ground": (100, 100, 100),
    "line": (255, 255, 255),
    "wall": (40, 40, 40),
    "ego": (50, 200, 0),
    "parked": (100, 200, 255),
    "goal": (230, 80, 80),
    "front": (20, 20, 20),
}
#: The single env's render modes: "human" needs pygame, so it is listed only where pygame is installed.
RENDER_MODES = ["rgb_array"] + (["human"] if importlib.util.find_spec("pygame") is not None else [])


def _fill_rectangle(
    img: np.ndarray,
    x: float,
    y: float,
    heading: float,
    length: float,
    width: float,
    color: tuple[int, int, int],
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


def _draw_car(img: np.ndarray, x: float, y: float, heading: float, color: tuple[int, int, int]) -> None:
    _fill_rectangle(img, x, y, heading, CAR_LENGTH, CAR_WIDTH, color)
    # A dark band across the front shows which way the car points.
    fx, fy = x + 0.4 * CAR_LENGTH * math.cos(heading), y + 0.4 * CAR_LENGTH * math.sin(heading)
    _fill_rectangle(img, fx, fy, heading, 0.2 * CAR_LENGTH, CAR_WIDTH, _COLORS["front"])


def background_frame(add_walls: bool) -> np.ndarray:
    """The frame of an empty lot ``(400, 640, 3)``: ground, spot lines and (when ``add_walls``) walls."""
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
