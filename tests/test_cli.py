"""The ``goalenvs`` command line: list, check, exit statuses 0 / 1 / 2, JSON output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import goalenvs
from goalenvs.check import CHECKS
from goalenvs.cli import main

TESTS = Path(__file__).parent
ROOT = TESTS.parent
ENVS_MODULE = "tests.check.checker_envs"  # importing it registers the ids
ENVS_FILE = TESTS / "check" / "checker_envs.py"
GOOD = f"{ENVS_MODULE}:CheckerReach-v0"


def _shown(path: Path) -> str:
    """How the CLI shows a file: relative to the working directory when inside it, else as it is."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def _line_of(source: str) -> int:
    """The line number of ``source`` in tests/check/checker_envs.py."""
    lines = ENVS_FILE.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip() == source)


BROKEN = f"{ENVS_MODULE}:CheckerActionPenalty-v0"


def test_list_prints_every_registered_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(goalenvs.ENVS)
    for entry, line in zip(goalenvs.ENVS, lines, strict=True):
        assert line.startswith(entry.id) and line.endswith(entry.description)


def test_check_good_env_exits_0_with_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", GOOD, "--n-steps", "60"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"goalenvs check {GOOD} (n_steps=60, seed=0)")
    assert "PASS  reward_contract" in out
    n_checks = sum(c.applies_to(vector=False) for c in CHECKS)
    assert out.rstrip().endswith(f"{GOOD}: {n_checks} passed, 0 warning(s), 0 failed -> PASSED")


def test_check_broken_env_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", BROKEN, "--n-steps", "30", "--seed", "4"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  reward_contract" in out and "-> FAILED" in out


def test_json_output_is_one_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", BROKEN, "--n-steps", "30", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["env_id"] == BROKEN and data["passed"] is False
    statuses = {r["name"]: r["status"] for r in data["results"]}
    assert statuses["reward_contract"] == "fail" and statuses["observation_space"] == "pass"
    assert all(set(r) == {"name", "status", "message"} for r in data["results"])


def test_env_kwargs_reach_the_env(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", GOOD, "--env-kwargs", '{"terminate_on_success": true}', "--n-steps", "30"]) == 0
    assert main(["check", GOOD, "--env-kwargs", '{"substeps": -1}']) == 2
    assert "substeps must be >= 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (
            ["check", "NoSuchEnv-v0"],
            "cannot make 'NoSuchEnv-v0': NameNotFound: Environment `NoSuchEnv` doesn't exist.",
        ),
        (["check", "no_such_module_xyz:Env-v0"], "ModuleNotFoundError: No module named 'no_such_module_xyz'"),
        (["check", GOOD, "--env-kwargs", '{"no_such_kwarg": 1}'], "TypeError"),
        (["check", GOOD, "--env-kwargs", "{not json"], "--env-kwargs is not valid JSON"),
        (["check", GOOD, "--env-kwargs", "[1, 2]"], "--env-kwargs must be a JSON object"),
        (
            ["check", f"{ENVS_MODULE}:CheckerAssertInInit-v0"],
            f"cannot make '{ENVS_MODULE}:CheckerAssertInInit-v0': AssertionError (raised at "
            f"{_shown(ENVS_FILE)}:{_line_of('assert size > 0')}: assert size > 0)",
        ),
        (
            ["check", GOOD, "--env-kwargs", '{"substeps": -1}'],
            f"ValueError: substeps must be >= 0, got -1 (raised at {_shown(ENVS_FILE)}:",
        ),
    ],
    ids=["unknown id", "import error", "bad kwarg", "bad JSON", "JSON not an object", "bare assert", "raise"],
)
def test_env_that_cannot_be_made_exits_2_with_one_line(
    argv: list[str], phrase: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("goalenvs check: error: ") and phrase in err


def test_unknown_id_gets_no_location_nor_package_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "NoSuchEnv-v0"]) == 2
    err = capsys.readouterr().err
    assert "raised at" not in err and "installed but not imported" not in err


@pytest.mark.parametrize(
    ("env_id", "package"), [("PointMaze_UMaze-v3", "gymnasium_robotics"), ("parking-v0", "highway_env")]
)
def test_id_of_an_installed_package_not_imported_suggests_its_prefix(env_id: str, package: str) -> None:
    pytest.importorskip(package)
    # A fresh process, where nothing has imported the package (this one may have).
    result = subprocess.run(
        [sys.executable, "-m", "goalenvs", "check", env_id],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr  # the package's import notices are not shown
    assert result.stderr.startswith(f"goalenvs check: error: cannot make {env_id!r}: NameNotFound: ")
    assert result.stderr.rstrip().endswith(
        f"It is registered by {package}, which is installed but not imported: use '{package}:{env_id}'."
    )


@pytest.mark.parametrize("argv", [["check", GOOD, "--n-steps", "0"], ["check", GOOD, "--seed", "-1"], []])
def test_bad_options_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


def test_python_dash_m_goalenvs_runs_without_traceback() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run(
        [sys.executable, "-m", "goalenvs", "check", GOOD, "--n-steps", "20", "--json"],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["passed"] is True
    bad = subprocess.run(
        [sys.executable, "-m", "goalenvs", "check", "nope_mod:X-v0"],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1
