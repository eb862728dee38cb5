"""Success curves of her_ddpg runs side by side: against sampled transitions and against wall time.

``python -m benchmarks.study_curves OUT.png TITLE LABEL=CSV:BATCH [LABEL=CSV:BATCH ...]``

Each ``CSV`` is a run's ``eval.csv`` (``examples/results/...``), ``BATCH`` the run's ``--batch-size``:
the left panel puts each evaluation at ``updates x batch`` sampled transitions (millions), the right one
at the run's wall-clock minutes (which depend on the CPU and on what ran beside the run: the docs say).
Not a speed benchmark: ``python -m benchmarks`` does not run it.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path


def read(spec: str) -> tuple[str, list[dict[str, float]], int]:
    """``LABEL=CSV:BATCH`` -> the label, the curve's rows (numbers) and the batch size."""
    try:
        label, rest = spec.split("=", 1)
        path, batch = rest.rsplit(":", 1)
        with Path(path).open() as f:
            rows = [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]
        return label, rows, int(batch)
    except (ValueError, OSError) as exc:
        raise SystemExit(
            f"study_curves: {spec!r}: expected LABEL=CSV:BATCH with a readable eval.csv ({exc})"
        ) from None


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        raise SystemExit(__doc__)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out, title = Path(argv[0]), argv[1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for label, rows, batch in map(read, argv[2:]):
        success = [r["success_rate"] for r in rows]
        left.plot([r["updates"] * batch / 1e6 for r in rows], success, marker="o", markersize=3, label=label)
        right.plot([r["wall_s"] / 60 for r in rows], success, marker="o", markersize=3, label=label)
    left.set(
        xlabel="sampled transitions (millions: updates x batch)", ylabel="success rate", ylim=(-0.02, 1.02)
    )
    right.set(xlabel="wall clock (minutes)")
    for ax in (left, right):
        ax.axhline(0.9, color="grey", linewidth=0.8, linestyle=":")
        ax.grid(alpha=0.3)
    left.legend(fontsize=8, loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
