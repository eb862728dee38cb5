"""What a reader opens to follow one operation: the repository's modules and function lines it runs.

``python -m benchmarks.reader_paths {step,sample,cycle} [--root DIR]``

- ``step``: one ``env.step`` of ``gym.make("goalenvs/FetchPush-v0")``;
- ``sample``: one ``her.HerReplayBuffer.sample(256)`` through stable-baselines3's interface;
- ``cycle``: one training cycle of ``examples/her_ddpg.py`` (collect, store, sample, update).

The operation runs k and 2k times under cProfile; a function of the repository (tests and installed
packages aside) whose call count grows with k is on the operation's path. Printed: per module, the
functions and the sum of their lines (``def`` to its end), then the totals. ``--root`` points at
another checkout (e.g. a ``git worktree`` of an earlier revision) to compare before and after.
Not a speed benchmark: ``python -m benchmarks`` does not run it.
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import os
import pstats
import runpy
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

Key = tuple[str, int, str]


def _calls(operation: Callable[[], None]) -> dict[Key, int]:
    profile = cProfile.Profile()
    profile.enable()
    operation()
    profile.disable()
    return {key: value[1] for key, value in pstats.Stats(profile).stats.items()}  # type: ignore[attr-defined]


def _step(k: int, root: Path) -> dict[Key, int]:
    import gymnasium as gym

    import goalenvs  # noqa: F401

    env = gym.make("goalenvs/FetchPush-v0")
    env.reset(seed=0)
    action = env.action_space.sample()

    def steps() -> None:
        for _ in range(k):
            env.step(action)

    return _calls(steps)


def _sample(k: int, root: Path) -> dict[Key, int]:
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    import goalenvs  # noqa: F401
    from her import HerReplayBuffer

    venv = DummyVecEnv([lambda: gym.make("goalenvs/FetchPush-v0")])
    buffer = HerReplayBuffer(10_000, venv.observation_space, venv.action_space, env=venv)
    obs = venv.reset()
    for _ in range(200):
        action = venv.action_space.sample()[None]
        next_obs, reward, done, infos = venv.step(action)
        buffer.add(obs, next_obs, action, reward, done, infos)  # type: ignore[arg-type]
        obs = next_obs

    def samples() -> None:
        for _ in range(k):
            buffer.sample(256)

    return _calls(samples)


def _cycle(k: int, root: Path) -> dict[Key, int]:
    out = Path(tempfile.mkdtemp()) / "run"
    sys.argv = ["her_ddpg.py", "--env", "goalenvs/FetchPush-v0", "--epochs", "1", "--n-cycles", str(k)]
    sys.argv += ["--n-batches", "2", "--batch-size", "64", "--n-envs", "2", "--eval-episodes", "2"]
    sys.argv += ["--no-gif", "--output", str(out)]

    def run() -> None:
        try:
            runpy.run_path(str(root / "examples" / "her_ddpg.py"), run_name="__main__")
        except SystemExit:
            pass

    return _calls(run)


def _length(path: str, line: int) -> int:
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line:
            return (node.end_lineno or line) - line + 1
    return 0  # a comprehension or lambda: its lines are its function's


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reader_paths", description=__doc__)
    parser.add_argument("operation", choices=["step", "sample", "cycle"])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    root = args.root.resolve()
    sys.path[:0] = [str(root), str(root / "examples")]
    os.chdir(root)
    measure = {"step": _step, "sample": _sample, "cycle": _cycle}[args.operation]
    before, after = measure(2, root), measure(4, root)
    path: dict[str, list[tuple[str, int]]] = {}
    for (file, line, name), calls in after.items():
        inside = file.startswith(str(root)) and not {"tests", ".venv"} & set(Path(file).parts)
        if inside and calls > before.get((file, line, name), 0):
            path.setdefault(os.path.relpath(file, root), []).append((name, _length(file, line)))
    for module, functions in sorted(path.items()):
        names = ", ".join(sorted(name for name, _ in functions))
        print(f"{module:36s} {sum(n for _, n in functions):5d} lines  {names}")
    lines = sum(n for functions in path.values() for _, n in functions)
    print(f"{len(path)} modules, {lines} lines of function bodies")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
