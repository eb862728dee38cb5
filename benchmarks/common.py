"""Shared timing helpers and the result row of every benchmark."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Row", "interleaved_rates", "median_rate", "median_seconds", "single_env_loop"]


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
