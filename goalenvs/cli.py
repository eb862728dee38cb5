"""The ``goalenvs`` command: ``goalenvs list`` and ``goalenvs check ENV_ID``.

Exit status of ``check``: 0 when no check failed, 1 when one did, 2 when the env cannot be made
(unknown id, an import error of a ``"module:Env-v0"`` id, bad ``--env-kwargs``), with a one-line
error on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from goalenvs.check import check_goal_env
from goalenvs.registration import ENVS

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_CANNOT_MAKE = 0, 1, 2


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


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
        except Exception as err:  # noqa: BLE001 - any failure to make the env is exit status 2
            print(f"{prog}: error: cannot make {args.env_id!r}: {_one_line(err)}", file=sys.stderr)
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
