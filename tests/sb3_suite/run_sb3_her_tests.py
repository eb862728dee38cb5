"""Run stable-baselines3's own HER tests (its ``tests/test_her.py``) against ``her.HerReplayBuffer``.

The test file comes from the sdist of the installed stable-baselines3 version, downloaded at run time
(never copied into this repository). Exactly one line changes: the import, so that ``HerReplayBuffer``
is ours. ``test_performance_her`` is left out: its 0.9 success threshold is tuned to stable-baselines3's
random stream at one seed (the stock buffer itself passes it at 28 of 60 seeds).

    python tests/sb3_suite/run_sb3_her_tests.py [--sdist PATH] [--keep DIR] [-- PYTEST_ARGS...]

Exit status: pytest's (0 when every test passed), or 2 with a one-line error when the file cannot be
had or its import line is not the expected one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STOCK_IMPORT = "from stable_baselines3 import DDPG, DQN, SAC, TD3, HerReplayBuffer\n"
OUR_IMPORT = "from stable_baselines3 import DDPG, DQN, SAC, TD3\nfrom her import HerReplayBuffer\n"
DESELECT = "not test_performance_her"


class _Unavailable(Exception):
    """The test file cannot be had as expected (reported in one line, exit status 2)."""


def download_sdist(sb3_version: str, into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", f"stable-baselines3=={sb3_version}"]
    command += ["--no-binary", ":all:", "--no-deps", "--quiet", "--dest", str(into)]
    if subprocess.run(command).returncode != 0:
        raise _Unavailable(f"pip download of stable-baselines3=={sb3_version}'s sdist failed (see above)")
    found = sorted(into.glob("stable_baselines3-*.tar.gz"))
    if not found:
        raise _Unavailable(f"pip download left no stable_baselines3 sdist in {into}")
    return found[0]


def test_file_from(sdist: Path) -> str:
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.name.endswith("/tests/test_her.py")]
        if not members:
            raise _Unavailable(f"{sdist.name} has no tests/test_her.py (this version ships no tests)")
        data = archive.extractfile(members[0])
        assert data is not None
        return data.read().decode("utf-8")


def rewrite(source: str) -> str:
    if source.count(STOCK_IMPORT) != 1:
        raise _Unavailable(
            f"test_her.py does not import HerReplayBuffer as expected ({STOCK_IMPORT.strip()!r})"
        )
    return source.replace(STOCK_IMPORT, OUR_IMPORT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sdist", type=Path, help="a stable-baselines3 sdist (.tar.gz) instead of downloading one"
    )
    parser.add_argument("--keep", type=Path, help="write the rewritten test file to this folder and keep it")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.sdist is not None and not args.sdist.is_file():
        parser.error(f"--sdist: no such file {args.sdist}")
    with tempfile.TemporaryDirectory() as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        try:
            sdist = args.sdist or download_sdist(version("stable-baselines3"), Path(scratch))
            source = rewrite(test_file_from(sdist))
        except (_Unavailable, tarfile.TarError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        test_file = work / "test_her.py"
        test_file.write_text(source, encoding="utf-8")
        print(
            f"running {sdist.name}'s tests/test_her.py with `from her import HerReplayBuffer` (-k {DESELECT!r})"
        )
        # Run from the test's folder, so that no pytest configuration of this repository applies; the
        # repository root goes on PYTHONPATH so that `her` imports from this checkout.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", DESELECT]
        command += [*args.pytest_args, test_file.name]
        return subprocess.run(command, cwd=work, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
