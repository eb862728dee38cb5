"""The ``goalenvs`` command: ``goalenvs list`` and ``goalenvs check ENV_ID``.

Exit status of ``check``: 0 when no check failed, 1 when one did, 2 when the env cannot be made
(unknown id, an import error of a ``"module:Env-v0"`` id, bad ``--env-kwargs``), with a one-line
error on stderr and no traceback: the exception's message and, when the env's own code raised it,
where (``raised at FILE:LINE``, with the source line for a bare ``assert``). An unknown id that an
installed but not imported goal-env package registers (gymnasium_robotics, highway_env, panda_gym)
gets the ``"package:ID"`` form to use.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import json
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from goalenvs.check import check_goal_env
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


def _registered_by(env_id: str) -> str | None:
    """The known package, installed but not imported, whose import registers ``env_id``; else None."""
    if ":" in env_id:
        return None
    for package in KNOWN_PACKAGES:
        if package in sys.modules or importlib.util.find_spec(package) is None:
            continue
        try:
            # Some packages print notices when imported; the error line must stay the only output.
            quiet = io.StringIO()
            with (
                warnings.catch_warnings(),
                contextlib.redirect_stdout(quiet),
                contextlib.redirect_stderr(quiet),
            ):
                warnings.simplefilter("ignore")
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


def _cmd_list(args: argparse.Namespace) -> int:
    width = max((len(e.id) for e in ENVS), default=0)
    for entry in ENVS:
        print(f"{entry.id:<{width}}  {entry.description}")
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
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
            print(f"{prog}: error: cannot make {args.env_id!r}: {_one_line(err)}{hint}", file=sys.stderr)
            return EXIT_CANNOT_MAKE
        try:
            report = check_goal_env(env, n_steps=args.n_steps, seed=args.seed)
        finally:
            env.close()
    report.env_id = args.env_id
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print(f"goalenvs check {args.env_id} (n_steps={args.n_steps}, seed={args.seed})\n")
        print(report.format())
    return EXIT_OK if report.passed else EXIT_FAILED


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goalenvs", description="Goal-conditioned Gymnasium environments and their contract checker."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p_list = sub.add_parser("list", help="list the registered goalenvs ids")
    p_list.set_defaults(func=_cmd_list)
    p_check = sub.add_parser(
        "check",
        help="check that an env keeps the GoalEnv contract HER relies on",
        description="Check that an env keeps the GoalEnv contract HER relies on. Exit status: 0 when "
        "no check failed, 1 when one did, 2 when the env cannot be made.",
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
    p_check.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p_check.set_defaults(func=_cmd_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``goalenvs`` command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))
