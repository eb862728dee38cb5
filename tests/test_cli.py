"""The ``goalenvs`` command line: list, check, exit statuses 0 / 1 / 2, JSON output."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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


TIMEOUT_ERROR = "argument --timeout: expected a number of seconds in (0, 1000000), got"


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["check", GOOD, "--n-steps", "0"], "argument --n-steps: expected an integer >= 1, got 0"),
        (["check", GOOD, "--n-steps", "-1"], "argument --n-steps: expected an integer >= 1, got -1"),
        (["check", GOOD, "--n-steps", "abc"], "argument --n-steps: expected an integer >= 1, got 'abc'"),
        (["check", GOOD, "--seed", "-1"], "argument --seed: expected an integer >= 0, got -1"),
        (["check", GOOD, "--seed", "abc"], "argument --seed: expected an integer >= 0, got 'abc'"),
        *[
            (["check", GOOD, "--timeout", text], f"{TIMEOUT_ERROR} {text!r}")
            for text in ("0", "-1", "nan", "inf", "1e7", "abc")
        ],
        (["check"], "the following arguments are required: ENV_ID"),
    ],
)
def test_bad_options_are_one_line_usage_errors(
    argv: list[str], phrase: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"goalenvs check: error: {phrase} (see goalenvs check --help)\n"


def test_no_command_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == "goalenvs: error: the following arguments are required: COMMAND (see goalenvs --help)\n"


def test_version_prints_the_version_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"goalenvs {goalenvs.__version__}\n"
    shown = subprocess.run(
        [sys.executable, "-m", "goalenvs", "--version"], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )  # fmt: skip
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"goalenvs {goalenvs.__version__}\n", "")


@pytest.mark.parametrize("env_id", ["goalenvs/BitFlip-v0", "goalenvs/Parking-v0", "goalenvs/FetchReach-v0"])
def test_check_takes_any_seed_gymnasium_takes(env_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed = str(10**23)
    assert main(["check", env_id, "--n-steps", "20", "--seed", seed, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is True and all(seed not in r["message"] or r["status"] == "pass"
                                            for r in report["results"])  # fmt: skip


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


# ---- hangs, a raising close, output that cannot be written -------------------------------------------

NEEDS_SIGALRM = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no SIGALRM (Windows)")
LINUX_ONLY = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mutexes, /dev/full")


def _run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``python -m goalenvs ARGS`` in a fresh process; a hang fails the test at 60 s instead of hanging it."""
    return subprocess.run(
        [sys.executable, "-m", "goalenvs", *args], text=True, cwd=ROOT, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, **{"capture_output": True, **kwargs},
    )  # fmt: skip


def _rows(table: str) -> dict[str, tuple[str, str]]:
    """``{check: (STATUS, message)}`` from a printed table, wrapped message lines joined."""
    rows: dict[str, tuple[str, str]] = {}
    last = ""
    for line in table.splitlines()[2:]:
        if not line.strip() or line.startswith(" "):
            if line.strip() and last:
                rows[last] = (rows[last][0], rows[last][1] + " " + line.strip())
            continue
        if line[:4] in ("PASS", "WARN", "FAIL", "SKIP"):
            # A SKIP row is named by its count: "(5 checks)".
            end = line.index(")") + 1 if line.startswith("SKIP") else line.index(" ", 6)
            last = line[6:end]
            rows[last] = (line[:4], line[end:].strip())
    return rows


def _env_line(source: str, after: str | None = None) -> str:
    """``FILE:LINE`` of ``source`` in checker_envs.py (its first line after the line ``after``)."""
    lines = ENVS_FILE.read_text().splitlines()
    start = 0 if after is None else next(i for i, line in enumerate(lines) if line.startswith(after))
    line = next(i for i, line in enumerate(lines[start:], start + 1) if line.strip() == source)
    return f"{_shown(ENVS_FILE)}:{line}"


def _qual(name: str) -> str:
    """How a hang message names a method: with its class from Python 3.11 (``co_qualname``) on."""
    return name if sys.version_info >= (3, 11) else name.rsplit(".", 1)[-1]


STUCK_LINE = "libc.pthread_mutex_lock(mutex)  # a default mutex locked again by its owner: never returns"
CLOSE_LINE = 'raise RuntimeError("the simulator was already shut down")'


@NEEDS_SIGALRM
def test_step_looping_forever_fails_the_rollout_and_the_report_is_printed() -> None:
    env_id = f"{ENVS_MODULE}:CheckerHangingStep-v0"
    result = _run(["check", env_id, "--n-steps", "20", "--timeout", "1"])
    assert result.returncode == 1 and result.stderr == ""
    rows = _rows(result.stdout)
    assert rows["rollout"][0] == "FAIL"
    where = f"{_qual('HangingStepEnv.step')} at {_shown(ENVS_FILE)}:"
    assert rows["rollout"][1].startswith(
        f"step did not return within the 1 s time limit (it was running {where}"
    )
    n_skipped = sum(c.applies_to(vector=False) for c in CHECKS) - 4
    status, message = rows[f"({n_skipped} checks)"]  # the later checks, listed as not run
    assert status == "SKIP" and message.endswith("not run: step did not return within the 1 s time limit")
    assert result.stdout.rstrip().endswith(f"3 passed, 0 warning(s), 1 failed, {n_skipped} skipped -> FAILED")


@NEEDS_SIGALRM
def test_compute_reward_sleeping_forever_fails_and_the_later_checks_still_run() -> None:
    env_id = f"{ENVS_MODULE}:CheckerSleepingReward-v0"
    result = _run(["check", env_id, "--n-steps", "20", "--timeout", "1"])
    assert result.returncode == 1 and result.stderr == ""
    rows = _rows(result.stdout)
    where = f"{_qual('SleepingRewardEnv.compute_reward')} at {_env_line('time.sleep(10**6)')}"
    assert rows["reward_contract"] == (
        "FAIL",
        f"compute_reward did not return within the 1 s time limit (it was running {where}). The env hangs "
        "there (an endless loop, a wait that never ends) or is too slow for the limit: fix the hang, or "
        "raise timeout (--timeout) / lower n_steps (--n-steps).",
    )
    for name in ("compute_terminated", "compute_truncated", "reset_seeding", "deepcopy", "pickle"):
        assert rows[name][0] == "PASS", name
    assert rows["(10 checks)"] == (
        "SKIP",
        "compute_reward_vectorized, goal_dtypes, compute_reward_pure, reward_depends_on_goals, "
        "best_reward_at_goal, reset_goals, success_matches_reward, empty_infos, reward_info_keys, "
        "reward_reads_goal_info not run: "
        "compute_reward did "
        "not return within the 1 s time limit",
    )


@LINUX_ONLY
def test_step_stuck_in_c_without_the_gil_is_reported_by_the_watchdog() -> None:
    env_id = f"{ENVS_MODULE}:CheckerStuckInC-v0"
    result = _run(["check", env_id, "--n-steps", "20", "--timeout", "1", "--json"])
    assert result.returncode == 1 and result.stderr == ""
    report = json.loads(result.stdout)
    assert report["passed"] is False
    assert report["results"][-1] == {
        "name": "rollout",
        "status": "fail",
        "message": "step did not return within the 1 s time limit and could not be interrupted (it was "
        f"running {_qual('StuckInCEnv.step')} at {_env_line(STUCK_LINE)}): C code that does "
        "not return to Python, or code that catches the interrupt and carries on. The checker stopped "
        "here: the env is stuck in that call.",
    }
    later = [c.name for c in CHECKS if c.applies_to(vector=False)][4:]
    reason = "the checker stopped at rollout, stuck in a call it could not interrupt"
    assert report["skipped"] == [{"name": name, "reason": reason} for name in later]


@LINUX_ONLY
def test_step_stuck_in_c_holding_the_gil_ends_with_its_stack() -> None:
    env_id = f"{ENVS_MODULE}:CheckerStuckInC-v0"
    result = _run(
        ["check", env_id, "--n-steps", "20", "--timeout", "1", "--env-kwargs", '{"release_gil": false}']
    )
    # No Python thread can run: faulthandler's C thread names where it hangs and ends the process.
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("Timeout (0:00:03)!\n")
    assert f'File "{ENVS_FILE}", line {_line_of(STUCK_LINE)} in step' in result.stderr


def test_close_that_raises_is_a_failed_check_and_the_report_is_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env_id = f"{ENVS_MODULE}:CheckerCloseRaises-v0"
    assert main(["check", env_id, "--n-steps", "20"]) == 1
    rows = _rows(capsys.readouterr().out)
    assert rows["close"] == (
        "FAIL",
        "env.close() raised RuntimeError: the simulator was already shut down (raised at "
        f"{_env_line(CLOSE_LINE)}). Training code closes "
        "its envs when it ends (a vector env closes each sub-env), often in a finally block, where this "
        "error would end the run or hide the error that did. Fix: make close() safe to call at any time, "
        "and more than once.",
    )
    n_checks = sum(c.applies_to(vector=False) for c in CHECKS)
    assert [status for name, (status, _) in rows.items() if name != "close"] == ["PASS"] * n_checks
    assert main(["check", env_id, "--n-steps", "20", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["results"][-1]["name"] == "close" and data["results"][-1]["status"] == "fail"


@NEEDS_SIGALRM
def test_close_that_hangs_is_a_failed_check_and_the_report_is_printed() -> None:
    result = _run(["check", f"{ENVS_MODULE}:CheckerCloseHangs-v0", "--n-steps", "20", "--timeout", "1"])
    assert result.returncode == 1 and result.stderr == ""
    rows = _rows(result.stdout)
    where = f"{_qual('CloseHangsEnv.close')} at {_env_line('time.sleep(10**6)', after='class CloseHangsEnv')}"
    assert rows["close"] == (
        "FAIL",
        f"env.close() did not return within the 1 s time limit (it was running {where}). Training code "
        "closes its envs when it ends, so it would hang there. Fix: make close() release what it holds "
        "without waiting on it forever.",
    )
    n_checks = sum(c.applies_to(vector=False) for c in CHECKS)
    assert result.stdout.rstrip().endswith(f"{n_checks} passed, 0 warning(s), 1 failed -> FAILED")


@LINUX_ONLY
@pytest.mark.parametrize(
    "args", [["check", GOOD, "--n-steps", "5", "--json"], ["check", GOOD, "--n-steps", "5"], ["list"]],
    ids=["json", "table", "list"],
)  # fmt: skip
def test_full_disk_is_a_one_line_error_and_exit_1(args: list[str]) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        result = _run(args, capture_output=False, stdout=full, stderr=subprocess.PIPE)
    prog = "goalenvs check" if args[0] == "check" else "goalenvs list"
    assert result.returncode == 1
    assert (
        result.stderr
        == f"{prog}: error: cannot write the output to stdout: [Errno 28] No space left on device\n"
    )


@pytest.mark.parametrize(
    "args",
    [["check", GOOD, "--n-steps", "5", "--json"], ["check", GOOD, "--n-steps", "5"]],
    ids=["json", "table"],
)
def test_closed_pipe_ends_quietly_with_exit_1(args: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written (as `| head` after its lines)
    try:
        result = _run(args, capture_output=False, stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert result.returncode == 1 and result.stderr == ""


@pytest.mark.skipif(sys.platform == "win32", reason="preexec_fn")
def test_closed_stdout_is_a_one_line_error_and_exit_1() -> None:
    result = _run(
        ["check", GOOD, "--n-steps", "5"], capture_output=False, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == "goalenvs check: error: cannot write the output: stdout is closed\n"


def _session_processes(sid: int) -> list[str]:
    """The command lines of the live processes of session ``sid`` (Linux /proc; zombies left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(cmdline)
    return found


def _run_alone(args: list[str]) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``python -m goalenvs ARGS`` in a session of its own; its result and what of the session is left."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "goalenvs", *args], text=True, cwd=ROOT, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        left = _session_processes(proc.pid)
        if left:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), left


@LINUX_ONLY
@pytest.mark.parametrize(
    ("env", "how"),
    [
        ("CheckerOsExitStep-v0", "exit status 7 (os._exit or C exit() in the env)"),
        ("CheckerSegfaultStep-v0", "killed by signal SIGSEGV (a crash in C code: a segmentation fault)"),
    ],
)
def test_env_ending_the_process_is_reported_in_one_line(env: str, how: str) -> None:
    result, left = _run_alone(["check", f"{ENVS_MODULE}:{env}", "--n-steps", "20"])
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(
        f"goalenvs check: error: the env's process ended during check `rollout`: {how}."
    )
    assert result.stderr.count("\n") == 1
    assert left == []


@LINUX_ONLY
def test_env_calling_sys_exit_fails_the_check_it_ran_in() -> None:
    result, left = _run_alone(["check", f"{ENVS_MODULE}:CheckerSysExitStep-v0", "--n-steps", "20"])
    assert result.returncode == 1 and result.stderr == ""
    status, message = _rows(result.stdout)["rollout"]
    assert status == "FAIL"
    assert message.startswith(f"the env called sys.exit(3) in step (at {_qual('SysExitStepEnv.step')} at ")
    assert left == []


@LINUX_ONLY
def test_processes_the_env_leaves_running_are_ended() -> None:
    result, left = _run_alone(["check", f"{ENVS_MODULE}:CheckerForkingStep-v0", "--n-steps", "20"])
    assert left == []
    assert result.returncode == 0, result.stderr
    assert _rows(result.stdout)["rollout"][0] == "PASS"
    assert result.stderr == (
        "goalenvs check: note: the env left processes running after the checks (started while checking "
        "it); they were killed.\n"
    )


@LINUX_ONLY
def test_goalenvs_check_killed_with_sigkill_takes_its_checking_child_with_it() -> None:
    """The checks run in a child with a process group of its own, which a SIGKILL of the command cannot
    reach by itself: the child dies with its parent instead of checking on, unseen."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "goalenvs", "check", f"{ENVS_MODULE}:CheckerHangingStep-v0", "--timeout", "60"],
        cwd=ROOT, start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while len(_session_processes(proc.pid)) < 2:  # the command and its child
            assert time.monotonic() < deadline, "the checking child never started"
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while _session_processes(proc.pid):
            assert time.monotonic() < deadline, _session_processes(proc.pid)
            time.sleep(0.05)
    finally:
        if _session_processes(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.kill()


def _mujoco_version() -> tuple[int, ...]:
    import importlib.metadata

    try:
        return tuple(int(p) for p in importlib.metadata.version("mujoco").split(".")[:2])
    except Exception:
        return (0,)


NEEDS_NEW_MUJOCO_AND_ROBOTICS = pytest.mark.skipif(
    _mujoco_version() < (3, 12) or importlib.util.find_spec("gymnasium_robotics") is None,
    reason="needs gymnasium-robotics and MuJoCo >= 3.12, which it cannot run on",
)


@NEEDS_NEW_MUJOCO_AND_ROBOTICS
@pytest.mark.parametrize(
    ("env_id", "ours"),
    [("gymnasium_robotics:FetchPush-v4", "goalenvs/FetchPush-v0"), ("gymnasium_robotics:HandReach-v3", None)],
)
def test_gymnasium_robotics_on_new_mujoco_says_what_to_do(env_id: str, ours: str | None) -> None:
    result = _run(["check", env_id])
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "AssertionError" in result.stderr
    assert 'Fix: pin MuJoCo below 3.12 (pip install "mujoco<3.12")' in result.stderr
    if ours is None:
        assert "goalenvs/" not in result.stderr
    else:
        assert f"or check {ours}, the same task on MuJoCo 3 and 4." in result.stderr
