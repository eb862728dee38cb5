"""Fetch vector env-steps/s: the native FetchVectorEnv against Sync/AsyncVectorEnv of single envs.

For each number of envs N (1, 4, 16, 64; ``--quick``: 1, 4, 16), in one run, interleaved over repeats
(so that load from other processes hits every candidate alike):

* **native**: ``gym.make_vec(id, num_envs=N, num_threads=T)`` for each thread count T of ``--threads``
  (default 1, 2, 4, ... up to the machine's cores, each at most N; T = 1 makes no thread pool);
* **SyncVectorEnv**: ``gym.make_vec(id, num_envs=N, vectorization_mode="sync")``, N single envs made
  by ``gym.make`` stepped one after the other in this process;
* **AsyncVectorEnv**: the same N single envs, each in a worker process (``vectorization_mode="async"``).

Each loop resets with seed 0 and steps under uniform random actions (the same for every candidate)
through at least one episode end, so the autoresets are part of the measure. Rows: env-steps/s
(vector steps x N per second); ``ours/peer`` is the speed-up over the peer. The task is FetchPush
(contacts between the gripper, the block and the table) unless ``--env`` says otherwise.

    python -m benchmarks --only bench_fetch_vector [--quick]
    python -m benchmarks.bench_fetch_vector [--quick] [--threads 1 2 4] [--sizes 16 64] [--env ID]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np

from benchmarks.common import Row, interleaved_rates, print_table

ENV_ID = "goalenvs/FetchPush-v0"
SIZES = (1, 4, 16, 64)
QUICK_SIZES = (1, 4, 16)


def default_threads() -> list[int]:
    """1, 2, 4, ... below the number of cores, and the number of cores itself."""
    cores = os.cpu_count() or 1
    counts = [1]
    while counts[-1] * 2 < cores:
        counts.append(counts[-1] * 2)
    return sorted({*counts, cores})


def _loop(env: gym.vector.VectorEnv, actions: np.ndarray) -> Callable[[], None]:
    def loop() -> None:
        env.reset(seed=0)
        for step_actions in actions:
            env.step(step_actions)  # next-step autoreset: every env starts over where its episode ended

    return loop


def run(
    quick: bool,
    threads: Sequence[int] | None = None,
    sizes: Sequence[int] | None = None,
    env_id: str = ENV_ID,
) -> list[Row]:
    import goalenvs

    gym.register_envs(goalenvs)
    threads = list(threads or default_threads())
    sizes = list(sizes or (QUICK_SIZES if quick else SIZES))
    repeats = 1 if quick else 3
    rows: list[Row] = []
    for n in sizes:
        # Past one 50-step episode (resets included); small N longer, for a steadier clock.
        steps = 60 if quick else max(100, 800 // n)
        actions = np.random.default_rng(n).uniform(-1.0, 1.0, (steps, n, 4)).astype(np.float32)
        # The worker processes first: they are forked, and the native envs' threads are better not.
        asynchronous = gym.make_vec(env_id, num_envs=n, vectorization_mode="async")
        synchronous = gym.make_vec(env_id, num_envs=n, vectorization_mode="sync")
        counts = sorted({min(t, n) for t in threads})
        natives = [gym.make_vec(env_id, num_envs=n, num_threads=t) for t in counts]
        rates = interleaved_rates(
            [_loop(env, actions) for env in (synchronous, asynchronous, *natives)], steps * n, repeats
        )
        sync_rate, async_rate, native_rates = rates[0], rates[1], rates[2:]
        for t, rate in zip(counts, native_rates, strict=True):
            case = f"x{n} native, {t} thread{'s' if t > 1 else ''}"
            rows.append(
                Row("fetch_vector", f"{case} vs sync", "env-steps/s", rate, sync_rate, f"SyncVectorEnv x{n}")
            )
            rows.append(
                Row(
                    "fetch_vector",
                    f"{case} vs async",
                    "env-steps/s",
                    rate,
                    async_rate,
                    f"AsyncVectorEnv x{n}",
                )
            )
        for env in (asynchronous, synchronous, *natives):
            env.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_fetch_vector", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="N = 1, 4, 16, one repeat (smoke run)")
    parser.add_argument("--threads", type=int, nargs="+", metavar="T", help="native thread counts")
    parser.add_argument("--sizes", type=int, nargs="+", metavar="N", help="numbers of envs")
    parser.add_argument("--env", default=ENV_ID, help=f"a goalenvs Fetch id (default {ENV_ID})")
    args = parser.parse_args(argv)
    if any(t < 1 for t in args.threads or ()) or any(n < 1 for n in args.sizes or ()):
        parser.error("--threads and --sizes take integers >= 1")
    print_table(run(args.quick, args.threads, args.sizes, args.env))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
