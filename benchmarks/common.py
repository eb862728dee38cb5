"""Shared timing helpers and the result row of every benchmark."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = [
    "ArgumentParser",
    "Row",
    "at_least",
    "interleaved_rates",
    "median_rate",
    "median_seconds",
    "print_table",
    "single_env_loop",
]


@dataclass(frozen=True)
class Row:
    """One comparison: ours against a peer, measured in the same run.

    ``ours`` and ``peer`` are in ``unit``; ``higher_is_better`` says which way the ratio reads.
    ``peer`` is ``None`` when the row has no peer (e.g. a physics bound reported alone).
    """

    benchmark: str
    case: str
    unit: str
    ours: float
    peer: float | None
    peer_name: str
    higher_is_better: bool = True

    @property
    def ratio(self) -> float | None:
        """How many times better ours is than the peer (>1 means ours is better)."""
        if self.peer is None or self.peer == 0 or self.ours == 0:
            return None
        return self.ours / self.peer if self.higher_is_better else self.peer / self.ours


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def print_table(rows: Sequence[Row]) -> None:
    """Print ``rows`` as the table ``python -m benchmarks`` shows (``compare_revisions.py`` parses it)."""
    header = ("benchmark", "case", "unit", "ours", "peer", "peer value", "ours/peer (x better)")
    table = [header] + [
        (r.benchmark, r.case, r.unit, _fmt(r.ours), r.peer_name, _fmt(r.peer), _fmt(r.ratio)) for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for i, row in enumerate(table):
        print(" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if i == 0:
            print("-+-".join("-" * w for w in widths))


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn()`` over ``repeats`` calls, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def median_rate(fn: Callable[[], object], work: int, repeats: int) -> float:
    """Median rate of ``fn()``, which does ``work`` units per call, in units per second."""
    return work / median_seconds(fn, repeats)


def interleaved_rates(fns: list[Callable[[], object]], work: int, repeats: int) -> list[float]:
    """Median rates of several ``fns`` (each doing ``work`` units per call), timed in turn per repeat.

    Alternating the candidates round by round spreads a noisy machine's slow spells over all of them,
    so their ratio is steadier than that of back-to-back medians.
    """
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, bucket in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return [work / statistics.median(bucket) for bucket in times]


def single_env_loop(env: Any, actions: Sequence[Any]) -> Callable[[], None]:
    """A training loop's env work: reset with seed 0, step through ``actions``, reset on episode end."""

    def loop() -> None:
        env.reset(seed=0)
        for action in actions:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()

    return loop


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (what was wrong, what is accepted), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``; the error says what is accepted."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is not None and value >= minimum:
            return value
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted: expected an integer >= {minimum}")

    return parse
