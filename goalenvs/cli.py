"""The ``goalenvs`` command: ``goalenvs list``, ``goalenvs check ENV_ID`` and ``goalenvs --version``.

Exit status of ``check``: 0 when no check failed, 1 when one did (a check that ran past
``--timeout`` and an ``env.close()`` that raised included) or the report could not be written, 2
when the env cannot be made (unknown id, an import error of a ``"module:Env-v0"`` id, bad
``--env-kwargs``) or an option is wrong, with a one-line error on stderr and no traceback: the
exception's message and, when the env's own code raised it, where (``raised at FILE:LINE``, with the
source line for a bare ``assert``). An unknown id that an installed but not imported goal-env
package registers (gymnasium_robotics, highway_env, panda_gym) gets the ``"package:ID"`` form to use.

Output: a closed pipe (``goalenvs check ... | head``) ends the command quietly with status 1, as
Python's docs advise for SIGPIPE; any other write error (a full disk) is a one-line error, status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import importlib
import importlib.metadata
import importlib.util
import io
import json
import math
import os
import select
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import gymnasium as gym

from goalenvs._version import __version__
from goalenvs.check import CHECKS, CheckReport, CheckResult
from goalenvs.check.limits import TimeLimitExceeded, deadline, describe_stack, frames_of, stack_of
from goalenvs.check.runner import DEFAULT_TIMEOUT, MAX_TIMEOUT, hang_message, run_checks
from goalenvs.registration import ENVS

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_CANNOT_MAKE = 0, 1, 2


# Packages of goal envs that register their ids when imported: an id unknown to gym.make may be theirs.
KNOWN_PACKAGES = ("gymnasium_robotics", "highway_env", "panda_gym")


def _raised_at(err: BaseException) -> str:
    """`` (raised at FILE:LINE)`` for an error raised outside Gymnasium's own code, else ``""``.

    An error without a message (a bare ``assert``) gets the source line too: ``: assert x > 0``.
    """
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    gymnasium_dir = os.path.dirname(gym.__file__)
    if os.path.abspath(last.filename).startswith(gymnasium_dir + os.sep):
        return ""  # e.g. NameNotFound from the registry: its message says it all
    path = last.filename
    try:
        relative = os.path.relpath(path)
        path = relative if not relative.startswith("..") else path
    except ValueError:  # another drive (Windows)
        pass
    source = last.line.strip() if last.line and not str(err).strip() else ""
    return f" (raised at {path}:{last.lineno}{': ' + source if source else ''})"


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    head = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return head + _raised_at(err)


def _mujoco_too_new(env_id: str, err: BaseException) -> str:
    """Advice for Gymnasium-Robotics' ``AssertionError`` on MuJoCo >= 3.12, else ``""``.

    Its ``mujoco_utils`` asserts that a joint's type is one of the ``mujoco.mjtJoint`` values, which
    MuJoCo 3.12 changed so that they no longer compare equal: every Fetch, Hand and Kitchen env fails
    in ``__init__`` with a bare ``AssertionError``. Recognised narrowly: that error, raised there.
    """
    frames = traceback.extract_tb(err.__traceback__)
    if not isinstance(err, AssertionError) or not frames:
        return ""
    where = os.path.normpath(frames[-1].filename).replace(os.sep, "/")
    if not where.endswith("gymnasium_robotics/utils/mujoco_utils.py"):
        return ""
    try:
        version = importlib.metadata.version("mujoco")
        if tuple(int(part) for part in version.split(".")[:2]) < (3, 12):
            return ""
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return ""
    name = env_id.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    ours = f"goalenvs/{name.rsplit('-v', 1)[0]}-v0"
    alternative = (
        f", or check {ours}, the same task on MuJoCo 3 and 4"
        if name.startswith("Fetch") and any(e.id == ours for e in ENVS)
        else ""
    )
    return (
        f" Gymnasium-Robotics' MuJoCo envs cannot be made on MuJoCo {version} (3.12 and later): its "
        "mujoco_utils asserts joint types against mujoco.mjtJoint values that no longer compare equal. "
        f'Fix: pin MuJoCo below 3.12 (pip install "mujoco<3.12"){alternative}.'
    )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No warnings, and what is printed to stdout or stderr dropped (a package's notices on import)."""
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        yield


def _registered_by(env_id: str) -> str | None:
    """The known package, installed but not imported, whose import registers ``env_id``; else None."""
    if ":" in env_id:
        return None
    for package in KNOWN_PACKAGES:
        if package in sys.modules or importlib.util.find_spec(package) is None:
            continue
        try:
            # Some packages print notices when imported; the error line must stay the only output.
            with _quiet():
                module = importlib.import_module(package)
                gym.register_envs(module)
            gym.spec(env_id)
        except Exception:  # not this package's id (or the package is broken)
            continue
        return package
    return None


def _parse_kwargs(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"--env-kwargs is not valid JSON ({err.msg} at char {err.pos}): {text!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"--env-kwargs must be a JSON object like '{{\"n_bits\": 8}}', got {text!r}")
    return value


def _error(prog: str, message: str) -> None:
    print(f"{prog}: error: {message}", file=sys.stderr)


def _write(prog: str, text: str) -> int:
    """Write ``text`` to stdout: EXIT_OK, or EXIT_FAILED when it cannot be written.

    A closed pipe ends quietly (the reader chose to stop reading, as ``head`` does); any other error
    (a full disk, a closed stdout) gets a one-line error on stderr. Either way stdout is then pointed
    at os.devnull, so the interpreter's final flush does not fail again with a traceback.
    """
    out = sys.stdout
    if out is None:  # Python sets it to None when started with file descriptor 1 closed
        _error(prog, "cannot write the output: stdout is closed")
        return EXIT_FAILED
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_FAILED
    except OSError as err:
        _silence_stdout()
        _error(prog, f"cannot write the output to stdout: {err}")
        return EXIT_FAILED
    return EXIT_OK


def _silence_stdout() -> None:
    """Point stdout's file descriptor at os.devnull.

    As the "Note on SIGPIPE" of the Python docs of the signal module does after a BrokenPipeError.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (captured output)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _cmd_list(args: argparse.Namespace) -> int:
    width = max((len(e.id) for e in ENVS), default=0)
    return _write("goalenvs list", "".join(f"{e.id:<{width}}  {e.description}\n" for e in ENVS))


class _Watchdog:
    """Ends ``goalenvs check`` with the report so far when a check overruns its limit unstopped.

    The time limit (SIGALRM, :func:`goalenvs.check.limits.deadline`) interrupts Python code in the
    main thread only. A check still running ``grace`` seconds past its limit is stuck where no signal
    reaches (C code that does not return to Python, code that catches the interrupt, a platform
    without SIGALRM): this thread then prints the report so far, that check failed and the rest
    skipped, and ends the process with status 1 (``os._exit``: the stuck thread cannot be stopped).
    It needs the GIL, which C code may hold forever; for that case faulthandler's own C thread dumps
    the Python stacks to stderr and exits with status 1 a ``grace`` later.

    Args:
        report: the report the checks append to as they end.
        limit: the time limit of one check, in seconds.
        planned: the names of the checks that will run, in order.
        emit: writes a report to stdout and returns the exit status of the write.
    """

    def __init__(
        self,
        report: CheckReport,
        limit: float,
        planned: list[str],
        emit: Callable[[CheckReport], int],
        progress: _Progress | None = None,
    ) -> None:
        self._report = report
        self._progress = progress
        self._limit = limit
        self._grace = max(1.0, 0.1 * limit)
        self._planned = planned
        self._emit = emit
        self._checked = threading.get_ident()  # the thread that runs the checks
        self._cond = threading.Condition()
        self._current: str | None = None
        self._deadline: float | None = None
        self._stopped = False
        threading.Thread(target=self._watch, name="goalenvs-check-watchdog", daemon=True).start()

    def on_check(self, name: str | None) -> None:
        """``name`` starts now (its deadline too); None: nothing more to watch."""
        if self._progress is not None:
            self._progress.send(f"check {name or ''}")
        with self._cond:
            self._current = name
            self._deadline = None if name is None else time.monotonic() + self._limit + self._grace
            self._cond.notify()
        try:
            if name is None:
                faulthandler.cancel_dump_traceback_later()
            else:
                faulthandler.dump_traceback_later(self._limit + 2 * self._grace, exit=True, file=sys.stderr)
        except (AttributeError, ValueError, OSError, RuntimeError):  # stderr is no real file: no last resort
            pass

    def stop(self) -> None:
        """Nothing more to watch: end the thread."""
        self.on_check(None)
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while not self._stopped and (self._deadline is None or self._deadline > time.monotonic()):
                self._cond.wait(None if self._deadline is None else self._deadline - time.monotonic())
            if not self._stopped:
                self._give_up(self._current)

    def _give_up(self, name: str | None) -> NoReturn:
        call, where = describe_stack(stack_of(sys._current_frames().get(self._checked)))
        report = self._report
        results = list(report.results)
        if name is not None and all(r.name != name for r in results):
            message = hang_message(call, where, self._limit, interrupted=False)
            results.append(CheckResult(name, "fail", message))
        done = {r.name for r in results} | {n for n, _ in report.skipped}
        why = f"the checker stopped at {name}, stuck in a call it could not interrupt"
        skipped = list(report.skipped) + [(n, why) for n in self._planned if n not in done]
        self._emit(CheckReport(report.env_id, results, skipped))
        if self._progress is not None:
            self._progress.send(f"done {EXIT_FAILED}")
        os._exit(EXIT_FAILED)


def _close(env: Any, limit: float) -> CheckResult | None:
    """``env.close()`` under the time limit; a failed ``close`` result when it raised or hung, else None."""
    try:
        with deadline(limit):
            env.close()
    except TimeLimitExceeded as hang:
        _, where = describe_stack(frames_of(hang.__traceback__))
        return CheckResult(
            "close", "fail",
            f"env.close() did not return within the {limit:g} s time limit (it was running {where}). "
            "Training code closes its envs when it ends, so it would hang there. Fix: make close() "
            "release what it holds without waiting on it forever.",
        )  # fmt: skip
    except (Exception, SystemExit) as err:
        return CheckResult(
            "close", "fail",
            f"env.close() raised {_one_line(err)}. Training code closes its envs when it ends (a vector "
            "env closes each sub-env), often in a finally block, where this error would end the run or "
            "hide the error that did. Fix: make close() safe to call at any time, and more than once.",
        )  # fmt: skip
    return None


def _render(args: argparse.Namespace, report: CheckReport) -> str:
    """The report as ``goalenvs check`` prints it: a table under a header line, or one JSON object."""
    if args.json:
        return json.dumps(report.to_dict()) + "\n"
    header = f"goalenvs check {args.env_id} (n_steps={args.n_steps}, seed={args.seed})"
    return f"{header}\n\n{report.format()}\n"


def _cmd_check(args: argparse.Namespace) -> int:
    if _can_isolate():
        return _check_in_child(args)
    return _check(args, None)


def _check(args: argparse.Namespace, progress: _Progress | None) -> int:
    """Make the env, run the checks, close it and print the report: the exit status."""
    prog = "goalenvs check"
    try:
        kwargs = _parse_kwargs(args.env_kwargs)
    except ValueError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return EXIT_CANNOT_MAKE
    # The checker reports everything Gymnasium's passive checker would warn about, with causes and
    # fixes, so its warnings would only repeat them in a less useful form.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if ":" in args.env_id:  # import the package quietly first (its notices are no report)
                with contextlib.suppress(Exception), _quiet():
                    importlib.import_module(args.env_id.split(":", 1)[0])
            env = gym.make(args.env_id, **kwargs)
        except Exception as err:  # any failure to make the env is exit status 2
            hint = ""
            if isinstance(
                err, (gym.error.NameNotFound, gym.error.NamespaceNotFound, gym.error.VersionNotFound)
            ):
                package = _registered_by(args.env_id)
                if package is not None:
                    hint = (
                        f" It is registered by {package}, which is installed but not imported: "
                        f"use {package + ':' + args.env_id!r}."
                    )
            hint = hint or _mujoco_too_new(args.env_id, err)
            print(f"{prog}: error: cannot make {args.env_id!r}: {_one_line(err)}{hint}", file=sys.stderr)
            return EXIT_CANNOT_MAKE
        report = CheckReport(env_id=args.env_id, results=[])
        planned = [c.name for c in CHECKS if c.applies_to(isinstance(env, gym.vector.VectorEnv))]
        watchdog = _Watchdog(
            report, args.timeout, planned, lambda partial: _write(prog, _render(args, partial)), progress
        )
        closed = None
        try:
            # No final reset, unlike check_goal_env: the env is closed right away.
            run_checks(
                env, report, n_steps=args.n_steps, seed=args.seed, timeout=args.timeout,
                on_check=watchdog.on_check,
            )  # fmt: skip
        finally:
            watchdog.on_check("close")
            closed = _close(env, args.timeout)
            watchdog.stop()
    if closed is not None:
        report.results.append(closed)
    written = _write(prog, _render(args, report))
    return written if written != EXIT_OK else EXIT_OK if report.passed else EXIT_FAILED


class _Progress:
    """The child's side of the pipe to the parent (:func:`_check_in_child`): which check runs, and the exit
    status once the report is written, one line each (``check NAME``, ``done STATUS``)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def send(self, line: str) -> None:
        try:
            os.write(self._fd, (line + "\n").encode("utf-8", "replace"))
        except OSError:  # the parent is gone: nobody to tell
            pass


def _real_file(stream: Any) -> bool:
    """Whether ``stream`` writes to a file descriptor (not pytest's capsys buffer, not a closed stdout)."""
    try:
        return stream is not None and stream.fileno() >= 0
    except (AttributeError, OSError, ValueError):
        return False


def _can_isolate() -> bool:
    """Whether ``goalenvs check`` can run the checks in a child process: POSIX, and stdout and stderr that
    a child writes to as the command itself would (an in-memory stream stays in-process)."""
    return (
        hasattr(os, "fork") and hasattr(os, "setpgid") and _real_file(sys.stdout) and _real_file(sys.stderr)
    )


_SIGNALS = {
    "SIGSEGV": "a crash in C code: a segmentation fault",
    "SIGBUS": "a crash in C code: a bus error",
    "SIGILL": "a crash in C code: an illegal instruction",
    "SIGFPE": "a crash in C code: an arithmetic error",
    "SIGABRT": "abort(): a failed C assertion or a fatal error in a library",
    "SIGKILL": "killed from outside, often by the kernel's out-of-memory killer",
}


def _how_it_ended(status: int) -> tuple[str, bool]:
    """What a ``waitpid`` status says, in words, and whether it was a signal."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        what = _SIGNALS.get(name)
        return f"killed by signal {name}" + (f" ({what})" if what else ""), True
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return f"exit status {code} (os._exit or C exit() in the env)", False


def _die_with(parent: int) -> None:
    """Linux: this child is killed when ``parent`` dies (``kill -9`` of ``goalenvs check``, which cannot
    pass it on: the child has a process group of its own); if ``parent`` died already, end now."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(EXIT_FAILED)


def _check_in_child(args: argparse.Namespace) -> int:
    """Run :func:`_check` in a forked child, in a process group of its own, and wait for it.

    An env can end its process where no Python code regains control (``os._exit``, a segfault in C):
    the parent then says in one line which check was running and how the process ended. Whatever the
    env started and left running (a forked helper, a simulator server) is in the child's process group
    and is killed when the child ends. Forking costs a few milliseconds: nothing is imported again.
    """
    prog = "goalenvs check"
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: check, tell the parent the status, and never return into the caller
        code = EXIT_FAILED
        try:
            os.close(read_fd)
            os.setpgid(0, 0)
            _die_with(parent)
            progress = _Progress(write_fd)
            code = _check(args, progress)
            progress.send(f"done {code}")
        except BaseException:  # a bug of the checker itself: show it as Python would
            traceback.print_exc()
            _Progress(write_fd).send(f"done {EXIT_FAILED}")
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)
    os.close(write_fd)
    with contextlib.suppress(OSError):  # the child may have done it first, or ended already
        os.setpgid(pid, pid)

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = (
        signal.signal(signal.SIGTERM, on_term)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    try:
        current, started, done, status = _follow(pid, read_fd)
    finally:
        os.close(read_fd)
        left = _kill_group(pid)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if left:
        print(
            f"{prog}: note: the env left processes running after the checks (started while checking it); "
            "they were killed.",
            file=sys.stderr,
        )
    if done is not None:
        return done
    how, by_signal = _how_it_ended(status)
    grace = max(1.0, 0.1 * args.timeout)
    if (
        not by_signal
        and os.WEXITSTATUS(status) == EXIT_FAILED
        and time.monotonic() - started >= args.timeout + 2 * grace - 0.5
    ):
        return EXIT_FAILED  # the watchdog's last resort (faulthandler) ended it and printed the stacks
    if current is None:
        during, code = "while the env was being made", EXIT_CANNOT_MAKE
    elif current == "close":
        during, code = "during env.close()", EXIT_FAILED
    else:
        during, code = f"during check `{current}`", EXIT_FAILED
    advice = (
        "Run python -X faulthandler -m goalenvs check ... to see where it crashed."
        if by_signal
        else "Fix: raise an exception instead of ending the process (the checker then reports where)."
    )
    print(f"{prog}: error: the env's process ended {during}: {how}. {advice}", file=sys.stderr)
    return code


def _follow(pid: int, fd: int) -> tuple[str | None, float, int | None, int]:
    """Read the child's progress lines until it ends: ``(last check started, when, exit status it sent
    or None, waitpid status)``."""
    current: str | None = None
    started = time.monotonic()
    done: int | None = None
    buffer = b""

    def take(chunk: bytes) -> None:
        nonlocal buffer, current, started, done
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            kind, _, value = line.decode("utf-8", "replace").partition(" ")
            if kind == "check":
                current, started = value or current, time.monotonic()
            elif kind == "done":
                done = int(value)

    try:
        while True:
            # Something the env started may hold the pipe open after the child ends: poll the child too.
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 4096)
                take(chunk)
                if chunk and done is None:
                    continue
                return current, started, done, os.waitpid(pid, 0)[1]  # done, or the end of the pipe
            ended, status = os.waitpid(pid, os.WNOHANG)
            if ended:
                while select.select([fd], [], [], 0)[0] and (chunk := os.read(fd, 4096)):
                    take(chunk)
                return current, started, done, status
    except BaseException:  # Ctrl-C, SIGTERM: end the child and what it started, then go on as asked
        _kill_group(pid)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        raise


def _kill_group(pgid: int) -> bool:
    """SIGKILL every process left in process group ``pgid``; whether there was any."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < MAX_TIMEOUT:  # NaN too
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds in (0, {MAX_TIMEOUT:.0f}), got {text!r}"
        )
    return value


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_CANNOT_MAKE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="goalenvs", description="Goal-conditioned Gymnasium environments and their contract checker."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p_list = sub.add_parser("list", help="list the registered goalenvs ids")
    p_list.set_defaults(func=_cmd_list)
    p_check = sub.add_parser(
        "check",
        help="check that an env keeps the GoalEnv contract HER relies on",
        description="Check that an env keeps the GoalEnv contract HER relies on. Exit status: 0 when "
        "no check failed, 1 when one did (or the report could not be written), 2 when the env cannot "
        "be made or an option is wrong.",
    )
    p_check.add_argument(
        "env_id",
        metavar="ENV_ID",
        help='anything gym.make accepts, e.g. "goalenvs/BitFlip-v0" or "module:Env-v0"',
    )
    p_check.add_argument(
        "--env-kwargs", metavar="JSON", help="keyword arguments for gym.make, e.g. '{\"n_bits\": 8}'"
    )
    p_check.add_argument(
        "--n-steps", type=_positive_int, default=200, metavar="N", help="rollout length (200)"
    )
    p_check.add_argument(
        "--seed", type=_seed, default=0, metavar="S", help="seed of resets, actions, goals (0)"
    )
    p_check.add_argument(
        "--timeout",
        type=_timeout,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit of each check; one that runs past it fails ({DEFAULT_TIMEOUT:g})",
    )
    p_check.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p_check.set_defaults(func=_cmd_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``goalenvs`` command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))
