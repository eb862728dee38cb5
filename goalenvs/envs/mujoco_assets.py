"""MuJoCo for the robotics families (Fetch, Shadow Hand), with an OpenGL backend for rendering.

Every family imports this module before anything imports mujoco, because of the backend: MuJoCo's offscreen renderer
picks its OpenGL backend when ``mujoco`` is first imported, and on a headless machine the default
(GLFW) cannot open a context. So, before importing mujoco, ``MUJOCO_GL`` defaults to ``egl`` on a
machine without a display (a user's own choice wins). If something imported mujoco before us, its
choice is made already: that is remembered, for the rendering errors below.
"""

from __future__ import annotations

import os
import sys

from gymnasium import error

__all__ = ["INSTALL_FETCH", "make_renderer", "mujoco"]

# How to get the fetch extra's packages (mujoco and gymnasium-robotics, whose MJCF files every family
# reads), for the errors of every robotics family.
INSTALL_FETCH = (
    'install the fetch extra: `pip install "goalenvs[fetch]"` (goalenvs is not on PyPI yet: from the '
    'clone, `pip install -e ".[fetch]"`), or `pip install mujoco gymnasium-robotics`'
)

_MUJOCO_IMPORTED_FIRST = "mujoco" in sys.modules
if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ["MUJOCO_GL"] = "egl"

try:
    import mujoco  # after the MUJOCO_GL default above
except ModuleNotFoundError as _missing:
    if _missing.name != "mujoco":
        raise
    # Still a ModuleNotFoundError (pytest.importorskip and `except ImportError` keep working), saying
    # what to install.
    raise ModuleNotFoundError(
        "the Fetch and Shadow Hand tasks need MuJoCo, which is not installed; " + INSTALL_FETCH, name="mujoco"
    ) from None


def _mujoco_gl_choice() -> tuple[str, str | None]:
    """The OpenGL backend mujoco chose when first imported, and the MUJOCO_GL it read then (None: unknown)."""
    module = sys.modules.get("mujoco.rendering.classic.gl_context") or sys.modules.get("mujoco.gl_context")
    read = getattr(module, "_MUJOCO_GL", None)
    context = getattr(module, "GLContext", None)
    if context is None:
        return "unknown", read
    if context.__name__ == "_MissingGLContext":  # its backend's libraries failed to import
        return f"none (the {read or 'default'!r} backend failed to load)", read
    return context.__module__.rsplit(".", 1)[-1], read


def _no_gl_context_message(exc: Exception) -> str:
    """Why the offscreen renderer failed: the backend mujoco chose, why it chose it, how to change it."""
    backend, read = _mujoco_gl_choice()
    now = os.environ.get("MUJOCO_GL")
    head = f"MuJoCo could not create an offscreen OpenGL context with its {backend} backend: {exc}. "
    fix = (
        "Fix: set MUJOCO_GL=egl (or MUJOCO_GL=osmesa) before anything imports mujoco, in the shell "
        "(MUJOCO_GL=egl python ...) or at the very top of the script, with EGL (libegl1) or OSMesa "
        "(libosmesa6) installed."
    )
    value = read if read is not None else now  # what mujoco read (or, if unknown, what is set now)
    was = "unset" if not value else repr(value)
    if _MUJOCO_IMPORTED_FIRST and read is not None and read != (now or "").lower().strip():
        return head + (
            f"mujoco chose {backend} when it was first imported, before goalenvs, with MUJOCO_GL {was}; "
            f"MUJOCO_GL={now!r}, which goalenvs sets on machines without a display, came after that "
            "choice and has no effect in this process. " + fix
        )
    return head + f"mujoco chose it when first imported, with MUJOCO_GL {was}. " + fix


def make_renderer(
    model: mujoco.MjModel,
    height: int,
    width: int,
    *,
    distance: float = 2.5,
    azimuth: float = 132.0,
    elevation: float = -14.0,
    lookat: tuple[float, float, float] = (1.3, 0.75, 0.55),
) -> tuple[mujoco.Renderer, mujoco.MjvCamera]:
    """An offscreen renderer for ``model`` and a free camera: by default the one Gymnasium-Robotics'
    Fetch views from (``distance`` in m, ``azimuth`` and ``elevation`` in degrees, ``lookat`` a point).

    Raises ``DependencyNotInstalled`` saying which backend failed and how to choose another.
    """
    try:
        renderer = mujoco.Renderer(model, height, width)
    except Exception as exc:  # the OpenGL backend is chosen by MUJOCO_GL (egl, osmesa, glfw)
        raise error.DependencyNotInstalled(_no_gl_context_message(exc)) from exc
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.distance = distance
    cam.azimuth = azimuth
    cam.elevation = elevation
    cam.lookat[:] = lookat
    return renderer, cam
