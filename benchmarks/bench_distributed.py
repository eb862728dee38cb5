"""DDPG+HER on W workers (``torchrun``) against the one-process run, FetchPush, the same global settings.

Each side is a real run of ``examples/her_ddpg.py``: FetchPush's settings (16 envs a cycle, 40 updates of
batch 2048 a cycle, [256, 256, 256] networks; the hidden layers in bfloat16 where the CPU computes it
natively, else float32, the script's default, named in each row), ``CYCLES`` cycles and one evaluation,
one torch thread per worker (not pinned to cores). The one-process run is ``python
examples/her_ddpg.py``; W workers are ``torchrun --standalone --nproc-per-node W``, each with 16/W envs
and batch 2048/W, their gradients summed every update. From rank 0's timers in ``eval.csv``:

* collection: env steps per second of collecting (acting, stepping the envs, storing);
* updates: updates per second of updating (sampling, the update, the gradient exchange);
* training: env steps per second of training wall time (both, without the evaluation).

The sides (with the third below) run one after the other, ``REPEATS`` times, alternating; medians.
W = 2 and, on a machine with more cores, every power of two up to the cores and up to 16 (FetchPush
runs 16 envs, and her_ddpg.py refuses more workers than envs).

A third side gives the bound: W independent one-process runs of the workers' settings (16/W envs,
batch 2048/W, seeds 0, 1, ...), side by side, not pinned either. They do a worker's
work with nothing exchanged, so their updates/s (the mean of the W) is what W workers would reach
with a free exchange, and their env steps/s of collection (the sum of the W) what W workers would
collect if none waited for another; their rows compare these with the one-process run, as the
workers' rows do.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import Row

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "her_ddpg.py"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
# The HER paper's FetchPush recipe (batch 2048, one-step targets), whatever her_ddpg.yml's entry says.
SETTINGS = ["--env", "goalenvs/FetchPush-v0", "--batch-size", "2048", "--n-step", "1", "--epochs", "1",
            "--save-freq", "0", "--no-gif", "--force"]  # fmt: skip


def _run(workers: int, cycles: int, out: Path) -> dict[str, float]:
    """Rank 0's timers of one run of ``cycles`` cycles on ``workers`` workers."""
    launch = [sys.executable] if workers == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(workers)]  # fmt: skip
    cmd = [*launch, str(SCRIPT), *SETTINGS, "--n-cycles", str(cycles), "--output", str(out)]
    result = subprocess.run(cmd, env=ENV, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
    return _rates(out)


def _apart(workers: int, cycles: int, out: Path) -> dict[str, float]:
    """The mean rates of ``workers`` independent one-process runs of a worker's settings, side by side,
    not pinned, as the workers are not: the workers' work without the exchange."""
    share = ["--n-envs", str(16 // workers), "--batch-size", str(2048 // workers)]
    procs = []
    for i in range(workers):
        cmd = [sys.executable, str(SCRIPT), *SETTINGS, *share, "--seed", str(i), "--n-cycles", str(cycles),
               "--output", str(out / str(i))]  # fmt: skip
        procs.append(
            (
                cmd,
                subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True),
            )
        )
    errs = [proc.communicate()[1] for _, proc in procs]  # every run ends before the folder goes
    for (cmd, proc), err in zip(procs, errs, strict=True):
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    rates = [_rates(out / str(i)) for i in range(workers)]
    return {key: statistics.mean(r[key] for r in rates) for key in rates[0]}


def _rates(out: Path) -> dict[str, float]:
    """Collection, update and training rates from the timers of the run in ``out`` (eval.csv keeps them to
    the millisecond: rounded to 0.1 s, as they once were, a 12-cycle run's 2.8 s of collection read the
    same rate, to the digit, for the workers and for their bound)."""
    with (out / "eval.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    t = {key[2:]: float(value) for key, value in row.items() if key.startswith("t_")}
    steps, updates = float(row["env_steps"]), float(row["updates"])
    bf16 = json.loads((out / "config.json").read_text())["bf16"]  # her_ddpg.py's default: the CPU's own
    return {
        "bf16": float(bf16),
        "collection": steps / (t["env"] + t["act"] + t["store"]),
        "updates": updates / (t["sample"] + t["update"] + t["sync"]),
        "training": steps / (float(row["wall_s"]) - t["eval"]),
    }


def run(quick: bool) -> list[Row]:
    cycles, repeats = (4, 1) if quick else (12, 3)
    cores = len(os.sched_getaffinity(0))
    sizes = [w for w in (2, 4, 8, 16) if w <= max(2, cores)]  # at most one worker an env (16 envs)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for workers in sizes:
            alone, many, apart = [], [], []
            for _ in range(repeats):
                alone.append(_run(1, cycles, Path(tmp) / "one"))
                many.append(_run(workers, cycles, Path(tmp) / "many"))
                apart.append(_apart(workers, cycles, Path(tmp) / "apart"))
            kind = "bfloat16" if statistics.mean(r["bf16"] for r in alone + many + apart) else "float32"
            for key, unit in (
                ("collection", "env-steps/s"),
                ("updates", "updates/s"),
                ("training", "env-steps/s"),
            ):
                rows.append(
                    Row(
                        "distributed",
                        f"FetchPush {key}, 16 envs, batch 2048, {kind}, {workers} workers on {cores} cores",
                        unit,
                        statistics.median(r[key] for r in many),
                        statistics.median(r[key] for r in alone),
                        "her_ddpg.py, 1 process",
                    )
                )
            for key, unit in (("collection", "env-steps/s"), ("updates", "updates/s")):
                rows.append(
                    Row(
                        "distributed",
                        f"FetchPush {key}, {workers} processes of {16 // workers} envs, batch {2048 // workers}, "
                        f"{kind}: the bound",
                        unit,
                        (workers if key == "collection" else 1) * statistics.median(r[key] for r in apart),
                        statistics.median(r[key] for r in alone),
                        "her_ddpg.py, 1 process",
                    )
                )
    return rows
