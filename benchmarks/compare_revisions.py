"""Benchmark ratios of an earlier revision and of the working tree, measured side by side in one run.

``python benchmarks/compare_revisions.py --rev REV [--rounds 3] [--only bench_x ...] [--full]``

A change meant to keep speed (a refactor) is judged by the ratios ``python -m benchmarks`` reports
(ours against the peer measured in the same run). This script checks out ``REV`` into a temporary git
worktree, then runs ``python -m benchmarks`` in that tree and in this one in turn, ``--rounds`` times,
so that a noisy machine's slow spells fall on both. It prints, per benchmark case, the median ratio
before and after and their quotient (after / before; 1.0 is unchanged, below 1 is slower now).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ratios(tree: Path, only: list[str], quick: bool) -> dict[tuple[str, str], float]:
    """``python -m benchmarks`` run in ``tree`` (its own packages first on sys.path): ratio per case."""
    cmd = [sys.executable, "-m", "benchmarks", *(["--quick"] if quick else [])]
    if only:
        cmd += ["--only", *only]
    out = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, check=True).stdout
    ratios: dict[tuple[str, str], float] = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.split(" | ")]
        if len(cells) != 7 or cells[0] == "benchmark":
            continue
        try:
            ratios[(cells[0], cells[1])] = float(cells[6].replace(",", ""))
        except ValueError:  # a row without a peer ("-")
            continue
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", required=True, help="the earlier revision (any git commit-ish)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME", help="benchmark modules")
    parser.add_argument("--full", action="store_true", help="full-size runs instead of --quick")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    with tempfile.TemporaryDirectory(prefix="goalenvs-before-") as tmp:
        before = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--quiet", str(before), args.rev], cwd=ROOT, check=True
        )
        try:
            runs: dict[str, list[dict[tuple[str, str], float]]] = {"before": [], "after": []}
            for r in range(args.rounds):
                for name, tree in (("before", before), ("after", ROOT)):
                    print(f"round {r + 1}/{args.rounds}: {name} ...", file=sys.stderr, flush=True)
                    runs[name].append(_ratios(tree, args.only, not args.full))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=False)
    cases = [case for case in runs["after"][0] if case in runs["before"][0]]
    print(f"# ratios (ours / peer), medians of {args.rounds} alternating rounds; before = {args.rev}")
    print("benchmark | case | before | after | after / before")
    print("--- | --- | --- | --- | ---")
    for case in cases:
        b = statistics.median(run[case] for run in runs["before"] if case in run)
        a = statistics.median(run[case] for run in runs["after"] if case in run)
        print(f"{case[0]} | {case[1]} | {b:.3g} | {a:.3g} | {a / b:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
