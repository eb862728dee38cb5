"""Side-by-side speed comparisons of goalenvs against the packages our users run today.

Run them all with ``python -m benchmarks`` (``--quick`` for a short smoke run, ``--only NAME`` for
one module). Every module ``benchmarks/bench_*.py`` defines ``run(quick: bool) -> list[Row]``; each
row times ours and the peer **in the same run** and reports the ratio of medians over repeats.
"""
