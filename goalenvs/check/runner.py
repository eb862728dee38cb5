"""``check_goal_env``: run the checks table on one env and collect the verdicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from goalenvs._util import check_int, check_real
from goalenvs.check.context import Context
from goalenvs.check.limits import TimeLimitExceeded, deadline, describe_stack, frames_of
from goalenvs.check.report import CheckReport, CheckResult, Skip, Status
from goalenvs.check.specs import CHECKS

__all__ = ["DEFAULT_TIMEOUT", "MAX_TIMEOUT", "check_goal_env", "exit_message", "hang_message", "run_checks"]

#: The time limit of one check, in seconds: ample for the default 200 steps of a simulated robot.
DEFAULT_TIMEOUT = 60.0
#: The longest limit accepted (11.6 days): the OS timers take no more (``None`` is no limit at all).
MAX_TIMEOUT = 1e6

# A call that hung would hang again in every check that needs it: skip the checks that list this one
# in their ``after`` instead of waiting out their limits one by one.
_HANG_BLOCKS = {"step": "rollout", "reset": "rollout", "compute_reward": "compute_reward_defined"}


def check_goal_env(
    env: gym.Env | gym.vector.VectorEnv,
    *,
    n_steps: int = 200,
    seed: int = 0,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> CheckReport:
    """Check that ``env`` keeps the GoalEnv contract Hindsight Experience Replay relies on.

    Runs every check of :data:`goalenvs.check.CHECKS` that applies to the env on one recorded
    rollout of ``n_steps`` random actions from ``reset(seed=seed)`` (plus one replay of it and a few
    steps for the copy checks) and collects their verdicts. The env may be wrapped, need not inherit
    from :class:`goalenvs.GoalEnv`, and may be a ``gymnasium.vector.VectorEnv``. It is left usable:
    the last thing done to it is ``reset(seed=seed)``; it is not closed.

    A check that runs past ``timeout`` is stopped and fails with a message naming the env call that
    did not return (``step``, ``compute_reward``, ...); the checks that need that call are skipped
    and the others still run. The limit interrupts Python code and blocking calls, in the main thread
    on POSIX only (see docs/checker.md, "Time limits").

    Args:
        env: the environment to check.
        n_steps: how many steps (vector steps for a vector env) the rollout takes; an int >= 1.
        seed: seeds the env's resets, the random actions and the random goals; an int >= 0.
        timeout: the time limit of each check in seconds, a number in (0, 1e6), or None for none.

    Returns:
        A :class:`CheckReport`; ``report.passed`` is False when a check failed, and
        ``report.raise_if_failed()`` turns that into a :class:`goalenvs.GoalEnvError`.
    """
    if not isinstance(env, (gym.Env, gym.vector.VectorEnv)):
        raise TypeError(
            f"env must be a gymnasium.Env or gymnasium.vector.VectorEnv, got {type(env).__name__}"
        )
    n_steps = check_int("n_steps", n_steps, 1)
    seed = check_int("seed", seed, 0)
    limit = None if timeout is None else check_real("timeout", timeout, 0.0, MAX_TIMEOUT, strict=True)
    report = CheckReport(env_id=_env_id(env), results=[])
    run_checks(env, report, n_steps=n_steps, seed=seed, timeout=limit)
    try:
        with deadline(limit):
            env.reset(seed=seed)
    except (Exception, SystemExit, TimeLimitExceeded):  # a failing, exiting or hanging reset: reported above
        pass
    return report


def run_checks(
    env: Any,
    report: CheckReport,
    *,
    n_steps: int,
    seed: int,
    timeout: float | None,
    on_check: Callable[[str | None], None] | None = None,
) -> None:
    """Run the checks that apply to ``env``, appending their verdicts to ``report`` as each ends.

    Arguments as validated by :func:`check_goal_env`. ``on_check(name)`` is called as each check
    starts and ``on_check(None)`` after the last (the ``goalenvs check`` watchdog follows them).
    """
    ctx = Context(env, n_steps, seed)
    blocked: dict[str, str] = {}  # check name -> why the checks that need it are skipped
    for check in CHECKS:
        if not check.applies_to(ctx.vector):
            continue
        why = next((blocked[name] for name in check.after if name in blocked), None)
        if why is not None:
            report.skipped.append((check.name, why))
            blocked[check.name] = why
            continue
        if on_check is not None:
            on_check(check.name)
        status: Status
        try:
            with deadline(timeout):
                status, message = check.run(ctx)
        except Skip as skip:
            report.skipped.append((check.name, str(skip)))
            continue
        except TimeLimitExceeded as hang:
            call, where = describe_stack(frames_of(hang.__traceback__))
            report.results.append(CheckResult(check.name, "fail", hang_message(call, where, hang.seconds)))
            why = f"{call or check.name} did not return within the {hang.seconds:g} s time limit"
            blocked[check.name] = why
            if call in _HANG_BLOCKS:
                blocked.setdefault(_HANG_BLOCKS[call], why)
            continue
        except SystemExit as stop:  # the env tried to end the process: a failure of this check
            call, where = describe_stack(frames_of(stop.__traceback__))
            report.results.append(CheckResult(check.name, "fail", exit_message(stop, call, where)))
            why = f"{call or 'the env'} called sys.exit"
            blocked[check.name] = why
            if call in _HANG_BLOCKS:
                blocked.setdefault(_HANG_BLOCKS[call], why)
            continue
        except Exception as err:  # the env raised somewhere the check did not expect
            status, message = "fail", f"the check stopped on {type(err).__name__}: {err} (raised by the env)."
        report.results.append(CheckResult(check.name, status, message))
        if status == "fail" and check.skip_reason is not None:
            blocked[check.name] = check.skip_reason
    if on_check is not None:
        on_check(None)


def hang_message(call: str | None, where: str, timeout: float, *, interrupted: bool = True) -> str:
    """The failure message of a check that ran past its time limit.

    ``call`` and ``where`` as :func:`~goalenvs.check.limits.describe_stack` gives them;
    ``interrupted`` is False when the limit could not stop the call (the CLI's watchdog).
    """
    what = f"{call} did not return" if call else "the check did not finish"
    head = f"{what} within the {timeout:g} s time limit"
    if not interrupted:
        return (
            f"{head} and could not be interrupted (it was running {where}): C code that does not return "
            "to Python, or code that catches the interrupt and carries on. The checker stopped here: the "
            "env is stuck in that call."
        )
    if call is None:
        return (
            f"{head} (it was running {where}, the checker's own work on what the env returned): too slow "
            "for the limit. Fix: raise timeout (--timeout) or lower n_steps (--n-steps)."
        )
    return (
        f"{head} (it was running {where}). The env hangs there (an endless loop, a wait that never "
        "ends) or is too slow for the limit: fix the hang, or raise timeout (--timeout) / lower "
        "n_steps (--n-steps)."
    )


def exit_message(stop: SystemExit, call: str | None, where: str) -> str:
    """The failure message of a check during which the env raised ``SystemExit`` (``sys.exit``)."""
    inside = f"in {call} (at {where})" if call else f"(at {where})"
    return (
        f"the env called sys.exit({stop.code!r}) {inside}: a training run would end there without a "
        "word of why. Fix: raise an exception that says what is wrong; leave sys.exit to scripts."
    )


def _env_id(env: Any) -> str:
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    return type(getattr(env, "unwrapped", env)).__name__
