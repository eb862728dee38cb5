"""``check_goal_env``: run the checks table on one env and collect the verdicts."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from goalenvs._util import check_int
from goalenvs.check.context import Context
from goalenvs.check.report import CheckReport, CheckResult, Skip, Status
from goalenvs.check.specs import CHECKS

__all__ = ["check_goal_env"]


def check_goal_env(env: gym.Env | gym.vector.VectorEnv, *, n_steps: int = 200, seed: int = 0) -> CheckReport:
    """Check that ``env`` keeps the GoalEnv contract Hindsight Experience Replay relies on.

    Runs every check of :data:`goalenvs.check.CHECKS` that applies to the env on one recorded
    rollout of ``n_steps`` random actions from ``reset(seed=seed)`` (plus one replay of it and a few
    steps for the copy checks) and collects their verdicts. The env may be wrapped, need not inherit
    from :class:`goalenvs.GoalEnv`, and may be a ``gymnasium.vector.VectorEnv``. It is left usable:
    the last thing done to it is ``reset(seed=seed)``; it is not closed.

    Args:
        env: the environment to check.
        n_steps: how many steps (vector steps for a vector env) the rollout takes; an int >= 1.
        seed: seeds the env's resets, the random actions and the random goals; an int >= 0.

    Returns:
        A :class:`CheckReport`; ``report.passed`` is False when a check failed, and
        ``report.raise_if_failed()`` turns that into a :class:`goalenvs.GoalEnvError`.
    """
    if not isinstance(env, (gym.Env, gym.vector.VectorEnv)):
        raise TypeError(
            f"env must be a gymnasium.Env or gymnasium.vector.VectorEnv, got {type(env).__name__}"
        )
    ctx = Context(env, check_int("n_steps", n_steps, 1), check_int("seed", seed, 0))
    report = CheckReport(env_id=_env_id(env), results=[])
    blocked: dict[str, str] = {}  # check name -> why the checks that need it are skipped
    for check in CHECKS:
        if not check.applies_to(ctx.vector):
            continue
        why = next((blocked[name] for name in check.after if name in blocked), None)
        if why is not None:
            report.skipped.append((check.name, why))
            blocked[check.name] = why
            continue
        status: Status
        try:
            status, message = check.run(ctx)
        except Skip as skip:
            report.skipped.append((check.name, str(skip)))
            continue
        except Exception as err:  # the env raised somewhere the check did not expect
            status, message = "fail", f"the check stopped on {type(err).__name__}: {err} (raised by the env)."
        report.results.append(CheckResult(check.name, status, message))
        if status == "fail" and check.skip_reason is not None:
            blocked[check.name] = check.skip_reason
    try:
        env.reset(seed=ctx.seed)
    except Exception:  # a failing reset has been reported above
        pass
    return report


def _env_id(env: Any) -> str:
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    return type(getattr(env, "unwrapped", env)).__name__
