"""``python -m benchmarks [--quick] [--only NAME ...]``: run the benchmark modules, print one table."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import platform
import sys
from pathlib import Path

from benchmarks.common import Row, print_table


def _modules() -> list[str]:
    here = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few repeats and small sizes (smoke run)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="module names, e.g. bench_bitflip")
    args = parser.parse_args(argv)
    names = _modules()
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            parser.error(f"unknown benchmark module(s) {unknown}; available: {names}")
        names = [n for n in names if n in args.only]
    rows: list[Row] = []
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        print(f"running {name} ...", file=sys.stderr, flush=True)
        rows.extend(module.run(quick=args.quick))
    print(f"# {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
