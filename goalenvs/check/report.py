"""What :func:`goalenvs.check_goal_env` returns: one verdict per check, the skipped checks, a table."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any, Literal

from goalenvs.core import GoalEnvError

__all__ = ["CheckReport", "CheckResult", "Skip", "Status", "Verdict"]

Status = Literal["pass", "warn", "fail"]
#: What a check function returns: its status and a message saying what is wrong, why, and the fix.
Verdict = tuple[Status, str]


class Skip(Exception):
    """A check cannot run because something it needs is missing; the message says what (and is reported)."""


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one check: ``status`` is ``"pass"``, ``"warn"`` or ``"fail"``."""

    name: str
    status: Status
    message: str


@dataclass
class CheckReport:
    """All verdicts of :func:`check_goal_env` on one environment.

    ``results`` holds one :class:`CheckResult` per check that ran; ``skipped`` names the checks that
    could not run (because an earlier one failed) and why.
    """

    env_id: str
    results: list[CheckResult]
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no check failed (warnings allowed)."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "fail"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "warn"]

    def result(self, name: str) -> CheckResult:
        """The result of the check called ``name`` (e.g. ``"reward_contract"``)."""
        for r in self.results:
            if r.name == name:
                return r
        ran = [r.name for r in self.results]
        skipped = [s for s, _ in self.skipped]
        raise KeyError(f"no result named {name!r}; checks that ran: {ran}; skipped: {skipped}")

    def raise_if_failed(self) -> None:
        """Raise :class:`goalenvs.GoalEnvError` listing every failed check (do nothing if none failed)."""
        if self.passed:
            return
        lines = [f"{self.env_id} breaks the GoalEnv contract ({len(self.failures)} failed check(s)):"]
        lines += [f"- {r.name}: {r.message}" for r in self.failures]
        raise GoalEnvError("\n".join(lines))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form printed by ``goalenvs check --json``."""
        return {
            "env_id": self.env_id,
            "passed": self.passed,
            "results": [{"name": r.name, "status": r.status, "message": r.message} for r in self.results],
            "skipped": [{"name": n, "reason": why} for n, why in self.skipped],
        }

    def summary(self) -> str:
        """One line: counts per status and the verdict."""
        counts = {s: sum(r.status == s for r in self.results) for s in ("pass", "warn", "fail")}
        parts = [f"{counts['pass']} passed", f"{counts['warn']} warning(s)", f"{counts['fail']} failed"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        verdict = "PASSED" if self.passed else "FAILED"
        return f"{self.env_id}: {', '.join(parts)} -> {verdict}"

    def format(self, width: int = 100) -> str:
        """A readable table: one row per check, its message wrapped under it, and a summary line."""
        name_w = max([len(r.name) for r in self.results] + [len(n) for n, _ in self.skipped] + [5])
        indent = " " * (6 + name_w + 2)
        body_w = max(40, width - len(indent))
        lines = []
        for r in self.results:
            body = textwrap.wrap(r.message, width=body_w) or [""]
            lines.append(f"{r.status.upper():<4}  {r.name:<{name_w}}  " + body[0])
            lines.extend(indent + b for b in body[1:])
        reasons: dict[str, list[str]] = {}
        for name, why in self.skipped:
            reasons.setdefault(why, []).append(name)
        for why, names in reasons.items():
            body = textwrap.wrap(f"{', '.join(names)} not run: {why}", width=body_w)
            count = f"({len(names)} check{'s' * (len(names) > 1)})"
            lines.append(f"{'SKIP':<4}  {count:<{name_w}}  " + body[0])
            lines.extend(indent + b for b in body[1:])
        lines.append("")
        lines.append(self.summary())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()
