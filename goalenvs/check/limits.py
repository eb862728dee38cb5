"""Time limits for the checks: stop a check whose env call does not return, and say which call it was.

A Python thread cannot be killed, the env is not thread-safe, and a subprocess cannot share the env
object passed to ``check_goal_env``, so a check runs where it is called and :func:`deadline`
interrupts it there: ``SIGALRM`` (``setitimer``) makes the main thread raise
:class:`TimeLimitExceeded` at its next bytecode, which stops Python loops and blocking calls
(``time.sleep``, lock waits, socket reads). What it cannot stop, and where it does nothing, is said in
:func:`deadline`; the ``goalenvs check`` command adds a watchdog for those (:mod:`goalenvs.cli`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType, TracebackType

import numpy as np

__all__ = ["TimeLimitExceeded", "can_interrupt", "deadline", "describe_stack", "frames_of", "stack_of"]

_CHECK_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Frames in numpy are the checker's own array work, not a call into the env.
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep


class TimeLimitExceeded(BaseException):
    """Raised in the main thread when a check runs past its time limit.

    A ``BaseException``, like ``KeyboardInterrupt``, so that neither the checks' nor the env's
    ``except Exception`` swallows it.
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the check ran past its {seconds:g} s time limit")
        self.seconds = seconds


def can_interrupt() -> bool:
    """Whether :func:`deadline` can interrupt here: POSIX ``setitimer``, the main thread, no other's timer."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return False
    # Someone else's ITIMER_REAL (pytest-timeout's, the user's own) is running: there is one per
    # process, so leave it alone rather than delay or steal its alarm.
    return signal.getitimer(signal.ITIMER_REAL)[0] == 0.0


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise :class:`TimeLimitExceeded` in the body when it runs longer than ``seconds``.

    Does nothing when ``seconds`` is None or :func:`can_interrupt` is False (Windows, a thread other
    than the main one, another ITIMER_REAL running). Python runs the alarm's handler between
    bytecodes of the main thread, so C code that does not return to the interpreter (a deadlocked
    or endless loop in an extension, with or without the GIL) is not interrupted, and code that
    catches ``BaseException`` and carries on swallows the interrupt. The previous ``SIGALRM``
    handler is restored on exit.
    """
    if seconds is None or not can_interrupt():
        yield
        return
    armed = True

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        nonlocal armed
        if armed:  # an alarm that lands while the body is being left changes nothing
            armed = False
            raise TimeLimitExceeded(seconds)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        yield
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        # None: a handler installed from C, which Python cannot reinstall; the default is the closest.
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)


def frames_of(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    """``(frame, line)`` of each level of a traceback, outermost first."""
    out = []
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return out


def stack_of(frame: FrameType | None) -> list[tuple[FrameType, int]]:
    """``(frame, line)`` of ``frame`` and its callers, outermost first (another thread's stack, say)."""
    out = []
    while frame is not None:
        out.append((frame, frame.f_lineno))
        frame = frame.f_back
    return out[::-1]


def describe_stack(frames: list[tuple[FrameType, int]]) -> tuple[str | None, str]:
    """Which call of the checker into the env did not return, and where it was, from its stack.

    Returns ``(call, where)``: ``call`` is the name of the first function the checker called outside
    its own code and numpy (``"step"``, ``"reset"``, ``"compute_reward"``, ``"deepcopy"``), None
    when the stack is the checker's own work; ``where`` is ``"QUALNAME at FILE:LINE"`` of the
    innermost frame outside the checker and numpy (of the innermost frame, when all are theirs; this
    module's alarm handler left out).
    """
    frames = [(f, line) for f, line in frames if not _in(f, __file__)]
    # A whole thread's stack starts with whatever called the checker: look from its first frame on.
    start = next((i for i, (f, _) in enumerate(frames) if _in(f, _CHECK_DIR)), 0)
    frames = frames[start:]
    outside = [(f, line) for f, line in frames if not _in(f, _CHECK_DIR) and not _in(f, _NUMPY_DIR)]
    call = outside[0][0].f_code.co_name if outside else None
    # Where the env's own code was (numpy calls below it are its tools), else the innermost frame.
    innermost = outside[-1] if outside else frames[-1] if frames else None
    if innermost is None:
        return call, "an unknown place"
    frame, line = innermost
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name)  # Python 3.11+ knows the class too
    return call, f"{name} at {_shown(code.co_filename)}:{line}"


def _in(frame: FrameType, path: str) -> bool:
    filename = os.path.abspath(frame.f_code.co_filename)
    return filename.startswith(path) if path.endswith(os.sep) else filename == os.path.abspath(path)


def _shown(path: str) -> str:
    """``path`` relative to the working directory when it lies inside it (as tracebacks are read)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative
