"""examples/her_ddpg.py when things go wrong: the user's files, a second process, damaged files, Ctrl-C, a full disk.

Each case asserts the exact outcome: the first line of stderr, the exit status and the files left in
the run folder. Tiny settings (a run takes about a second after the imports).
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")
pytest.importorskip("matplotlib")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

import her_ddpg  # noqa: E402

from tests.examples.folder_checks import DAMAGES, checkpoint_dir, copy_run, fails, snapshot  # noqa: E402

TINY = ["--env", "goalenvs/FetchReach-v0", "--n-envs", "2", "--n-cycles", "3", "--n-batches", "2",
        "--batch-size", "32", "--hidden", "16", "--layers", "2", "--buffer-size", "2000",
        "--eval-episodes", "3", "--save-freq", "1", "--no-gif"]  # fmt: skip
PREFIX = "her_ddpg.py: error: "


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "run"
    her_ddpg.main([*TINY, "--epochs", "2", "--output", str(out)])
    return out


# ------------------------------------------------------------------------------ the user's files
def test_force_removes_only_what_a_run_wrote(finished_run: Path, tmp_path: Path) -> None:
    out = copy_run(finished_run, tmp_path)
    (out / "notes.txt").write_text("my notes")
    (out / "checkpoints" / "mine.txt").write_text("mine too")
    her_ddpg.main([*TINY, "--epochs", "1", "--output", str(out), "--force"])
    assert (out / "notes.txt").read_text() == "my notes"
    assert (out / "checkpoints" / "mine.txt").read_text() == "mine too"
    assert checkpoint_dir(out).name == "000000000001"  # the new run's, the old one's removed
    assert [
        int(r) for r in [line.split(",")[0] for line in (out / "eval.csv").read_text().splitlines()[1:]]
    ] == [1]


def test_force_refuses_a_file_it_would_overwrite_but_did_not_write(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "eval.csv").write_text("the user's own curve\n")
    line = fails(capsys, her_ddpg.main, [*TINY, "--output", str(out), "--force"])
    assert line == (
        f"{PREFIX}--force: {out} holds eval.csv, which no run of her_ddpg.py recorded writing (--force removes "
        "only a run's own files); move them away or choose another --output"
    )
    assert sorted(p.name for p in out.iterdir()) == ["eval.csv"]


def test_refuses_a_non_empty_output_without_writing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    line = fails(capsys, her_ddpg.main, [*TINY, "--output", str(out)])
    assert line.startswith(f"{PREFIX}--output: {out} is not empty (it holds keep.txt); pass --resume")
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_a_bad_value_writes_nothing_so_the_corrected_rerun_works(tmp_path: Path, capsys) -> None:
    out = tmp_path / "deep" / "out"
    line = fails(capsys, her_ddpg.main, [*TINY, "--seed", "-1", "--output", str(out)])
    assert line.startswith(f"{PREFIX}--seed: -1 is not accepted")
    assert not (tmp_path / "deep").exists()  # not even the parent folders
    her_ddpg.main([*TINY, "--epochs", "1", "--output", str(out)])
    assert checkpoint_dir(out).name == "000000000001"


def test_resume_with_another_output_is_refused(finished_run: Path, tmp_path: Path, capsys) -> None:
    out = copy_run(finished_run, tmp_path)
    before = snapshot(out)
    line = fails(
        capsys, her_ddpg.main, ["--resume", str(out), "--output", str(tmp_path / "other"), "--epochs", "3"]
    )
    assert line == (
        f"{PREFIX}--output: --resume continues the run in its own folder {out}, not {tmp_path / 'other'}; "
        "accepted: no --output with --resume"
    )
    assert snapshot(out) == before and not (tmp_path / "other").exists()


# ------------------------------------------------------------------------------ damaged or foreign files


@pytest.mark.parametrize("name", ["agent.pt", "storage.pkl", "envs.pkl"])
@pytest.mark.parametrize("damage", DAMAGES, ids=["zero-bytes", "truncated", "random-bytes"])
def test_a_damaged_checkpoint_file_is_one_line(finished_run, tmp_path, capsys, name, damage) -> None:
    out = copy_run(finished_run, tmp_path)
    damage(checkpoint_dir(out) / name)
    before = snapshot(out)
    line = fails(capsys, her_ddpg.main, ["--resume", str(out), "--epochs", "3"])
    assert line.startswith(f"{PREFIX}checkpoint {checkpoint_dir(out)}: {name} is damaged (")
    assert line.endswith(
        "content does not match its recorded SHA-256): start again with --force, or put back a copy of the folder"
    )
    assert snapshot(out) == before


def test_a_checkpoint_of_another_run_is_refused(finished_run, tmp_path, capsys) -> None:
    out = copy_run(finished_run, tmp_path)
    other = tmp_path / "other"
    her_ddpg.main([*TINY, "--epochs", "2", "--seed", "1", "--output", str(other)])
    shutil.rmtree(checkpoint_dir(out))
    shutil.copytree(checkpoint_dir(other), out / "checkpoints" / checkpoint_dir(other).name)
    before = snapshot(out)
    line = fails(capsys, her_ddpg.main, ["--resume", str(out), "--epochs", "3"])
    assert line.startswith(f"{PREFIX}checkpoint {checkpoint_dir(out)} belongs to another run (run id ")
    assert snapshot(out) == before


@pytest.mark.parametrize(
    ("name", "other", "why"),
    [
        (
            "agent.pt",
            ["--hidden", "8"],
            "(Error(s) in loading state_dict for MLP: size mismatch for body.0.weight",
        ),
        (
            "storage.pkl",
            ["--n-envs", "3"],
            "(this HerStorage holds steps of n_envs=3 envs, not of the n_envs=2 given",
        ),
        ("envs.pkl", ["--n-envs", "3"], "(holds no random states of 2 envs)"),
    ],
)
def test_a_foreign_but_whole_checkpoint_file_is_one_line(
    finished_run, tmp_path, capsys, name, other, why
) -> None:
    """Another run's file, with its hash recorded (as if the manifest were edited to match)."""
    import hashlib

    out = copy_run(finished_run, tmp_path)
    foreign = tmp_path / "other"
    argv = [*TINY, "--epochs", "1", "--output", str(foreign)]
    her_ddpg.main([*argv[: argv.index("--epochs")], *other, *argv[argv.index("--epochs") :]])
    target = checkpoint_dir(out)
    shutil.copy(checkpoint_dir(foreign) / name, target / name)
    manifest = json.loads((target / "MANIFEST.json").read_text())
    data = (target / name).read_bytes()
    manifest["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (target / "MANIFEST.json").write_text(json.dumps(manifest))
    before = snapshot(out)
    line = fails(capsys, her_ddpg.main, ["--resume", str(out), "--epochs", "3"])
    assert line.startswith(f"{PREFIX}checkpoint {target}: {name} does not fit this run {why}"), line
    assert line.endswith(
        "was it copied from another run or written by another version? Start again with --force"
    )
    assert snapshot(out) == before


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: "", "config.json is not valid JSON"),
        (lambda text: text[: len(text) // 2], "config.json is not valid JSON"),
        (
            lambda text: text.replace('"gamma": 0.98', '"gamma": 5'),
            "config.json, key gamma: 5 is not accepted",
        ),
        (
            lambda text: text.replace('"gamma": 0.98', '"gamma": 0.9'),
            "differs from its checkpoint's settings in ['gamma']",
        ),
        (
            lambda text: text.replace('"polyak": 0.95,', ""),
            "does not hold the settings of a run of her_ddpg.py",
        ),
        (lambda text: "[1, 2]", "does not hold the settings of a run of her_ddpg.py"),
    ],
    ids=["empty", "truncated", "out-of-range", "edited", "missing-key", "not-an-object"],
)
def test_an_edited_or_damaged_config_is_one_line(finished_run, tmp_path, capsys, edit, message) -> None:
    out = copy_run(finished_run, tmp_path)
    (out / "config.json").write_text(edit((out / "config.json").read_text()))
    before = snapshot(out)
    line = fails(capsys, her_ddpg.main, ["--resume", str(out), "--epochs", "3"])
    assert line.startswith(PREFIX) and message in line, line
    assert snapshot(out) == before


def test_a_folder_of_the_other_script_is_refused(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(dataclasses.asdict(her_ddpg.Config())))
    (out / ".run-manifest.json").write_text(json.dumps({"script": "train.py", "run_id": "x", "files": []}))
    line = fails(capsys, her_ddpg.main, ["--resume", str(out)])
    assert line == f"{PREFIX}--resume: {out} is a run folder of train.py, not of her_ddpg.py"


# ------------------------------------------------------------------------------ a full disk
def test_a_failed_write_is_one_line_and_keeps_the_last_checkpoint(tmp_path, capsys, monkeypatch) -> None:
    whole, out = tmp_path / "whole", tmp_path / "out"
    her_ddpg.main([*TINY, "--epochs", "3", "--output", str(whole)])
    real_write, calls = Path.write_bytes, []

    def full_disk(path: Path, data) -> int:  # the storage of the epoch-2 checkpoint hits a full disk
        calls.append(path.name)
        if calls.count("storage.pkl") == 2 and path.name == "storage.pkl":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(path, data)

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    line = fails(capsys, her_ddpg.main, [*TINY, "--epochs", "3", "--output", str(out)], code=1)
    monkeypatch.undo()
    assert line.startswith(f"{PREFIX}No space left on device ({out / 'checkpoints'}/.tmp-000000000002-")
    assert line.endswith(
        f"go on from the checkpoint of epoch 1 with: python examples/her_ddpg.py --resume {out}"
    )
    assert checkpoint_dir(out).name == "000000000001"
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["000000000001"]  # no half-written one
    her_ddpg.main(["--resume", str(out), "--no-gif"])
    a = torch.load(checkpoint_dir(whole) / "agent.pt", weights_only=False)
    b = torch.load(checkpoint_dir(out) / "agent.pt", weights_only=False)
    for key, value in a["agent"]["actor"].items():
        assert torch.equal(value, b["agent"]["actor"][key])
    assert [r["success_rate"] for r in a["rows"]] == [r["success_rate"] for r in b["rows"]]


def test_a_full_disk_inside_torch_save_is_one_line(tmp_path) -> None:
    """torch.save's own file writer turns a failed write into a RuntimeError (a 44-line traceback): agent.pt
    is made in memory, then written, so the failure is an OSError naming the file. Here every file is
    limited to 1 MB (RLIMIT_FSIZE, with SIGXFSZ ignored: the write fails with EFBIG), and agent.pt of
    256-wide networks is larger."""
    import resource

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))

    out = tmp_path / "out"
    argv = [*TINY, "--hidden", "256", "--layers", "3", "--epochs", "2", "--output", str(out)]
    proc = subprocess.run([sys.executable, str(EXAMPLES / "her_ddpg.py"), *argv], capture_output=True, text=True,
                          preexec_fn=limited, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)  # fmt: skip
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 1
    assert (
        line.startswith(f"{PREFIX}File too large ({out / 'checkpoints'}/.tmp-000000000001-")
        and "agent.pt); " in line
    )
    assert line.endswith("no checkpoint was written yet (--save-freq), so a rerun starts over with --force")
    assert not list((out / "checkpoints").iterdir())  # the half-written checkpoint is gone


def test_ctrl_c_just_after_a_checkpoint_names_that_checkpoint(tmp_path, capsys, monkeypatch) -> None:
    """A Ctrl-C (or torchrun's SIGTERM) that lands after epoch 2's checkpoint is renamed into place, but
    before its writer returns, names epoch 2's checkpoint, which --resume then goes on from."""
    import runfolder

    out, real = tmp_path / "out", runfolder.fsync_dir

    def interrupted_after_the_rename(path: Path) -> None:
        real(path)
        if path == out / "checkpoints" and (path / "000000000002").is_dir():
            raise KeyboardInterrupt

    monkeypatch.setattr(runfolder, "fsync_dir", interrupted_after_the_rename)
    line = fails(capsys, her_ddpg.main, [*TINY, "--epochs", "3", "--output", str(out)], code=130)
    monkeypatch.undo()
    assert line.endswith(
        f"go on from the checkpoint of epoch 2 with: python examples/her_ddpg.py --resume {out}"
    )
    her_ddpg.main(["--resume", str(out), "--no-gif"])
    assert "resumed" in capsys.readouterr().out and _epochs_done(out) == 3
    assert [r["epoch"] for r in csv.DictReader((out / "eval.csv").open())] == ["1", "2", "3"]


# ------------------------------------------------------------------------------ other processes, signals
def _ctrl_c_as_in_a_terminal() -> None:
    """In the child: SIGINT raises KeyboardInterrupt, as in a terminal. A shell starts background jobs
    with SIGINT ignored, and Python then keeps it ignored: the Ctrl-C tests would wait for nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv: list[str]) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / "her_ddpg.py"), *argv],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )  # fmt: skip


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_second_process_is_refused_and_a_dead_holder_is_taken_over(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    proc = _start([*TINY, "--epochs", "1000", "--output", str(out)])
    try:
        _wait_for(
            lambda: (
                (out / "checkpoints").is_dir()
                and any(p.name.isdigit() for p in (out / "checkpoints").iterdir())
            ),
            proc,
        )
        expected = (
            f"{PREFIX}{out} is in use by another process (pid {proc.pid}); wait for it to end, or choose "
            "another --output"
        )
        assert fails(capsys, her_ddpg.main, ["--resume", str(out), "--epochs", "1000"]) == expected
        assert (
            fails(capsys, her_ddpg.main, [*TINY, "--epochs", "2", "--output", str(out), "--force"])
            == expected
        )
    finally:
        proc.kill()  # SIGKILL: the kernel drops its lock
        proc.wait()
    assert (out / ".lock").read_text().strip() == str(proc.pid)  # the stale lock file is still there
    her_ddpg.main(["--resume", str(out), "--epochs", str(_epochs_done(out) + 1)])
    assert (out / ".lock").read_text().strip() == str(os.getpid())


def _epochs_done(out: Path) -> int:
    return json.loads((checkpoint_dir(out) / "MANIFEST.json").read_text())["meta"]["epoch"]


@pytest.mark.parametrize(
    "signum",
    [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],  # one path in the default tier
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_and_sigterm_say_where_to_resume_in_one_line(tmp_path, signum) -> None:
    out = tmp_path / "out"
    proc = _start([*TINY, "--epochs", "1000", "--output", str(out)])
    _wait_for(
        lambda: (
            (out / "checkpoints").is_dir() and any(p.name.isdigit() for p in (out / "checkpoints").iterdir())
        ),
        proc,
    )
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    (line,) = err.strip().splitlines()
    assert line.startswith("her_ddpg.py: interrupted at epoch ")
    done = _epochs_done(out)
    assert line.endswith(
        f"go on from the checkpoint of epoch {done} with: python examples/her_ddpg.py --resume {out}"
    )
    assert not list((out / "checkpoints").glob(".tmp-*"))  # an interrupted checkpoint write cleans up
    her_ddpg.main(["--resume", str(out), "--epochs", str(done + 1)])
    assert _epochs_done(out) == done + 1


def test_a_diverged_policy_stops_in_one_line(tmp_path, capsys) -> None:
    """Learning rates of 1e30 send the weights to NaN within the first epoch: one line, not the env's traceback."""
    out = tmp_path / "out"
    argv = [*TINY, "--epochs", "3", "--n-batches", "20", "--lr-actor", "1e30", "--lr-critic", "1e30"]
    line = fails(capsys, her_ddpg.main, [*argv, "--output", str(out)])
    assert line == (
        f"{PREFIX}training diverged in epoch 1: the actor's actions are not finite (its weights no longer "
        "are); lower --lr-actor / --lr-critic and start again with --force"
    )


def test_a_torchrun_restart_replaces_nothing(finished_run, tmp_path, capsys, monkeypatch) -> None:
    """torchrun --max-restarts runs the launch's own command again, --force included: refused in one line."""
    out = copy_run(finished_run, tmp_path)
    before = snapshot(out)
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    line = fails(capsys, her_ddpg.main, [*TINY, "--epochs", "3", "--force", "--output", str(out)])
    assert line == f"{PREFIX}torchrun restarted the workers; a restart replaces nothing: go on with --resume"
    assert snapshot(out) == before


def test_a_refused_resume_releases_the_folder(finished_run, tmp_path, capsys) -> None:
    """A resume refused once the folder is locked lets go of it: the same process (a notebook) can go on."""
    out = copy_run(finished_run, tmp_path)
    agent = checkpoint_dir(out) / "agent.pt"
    good = agent.read_bytes()
    agent.write_bytes(b"")
    assert " agent.pt is damaged (" in fails(capsys, her_ddpg.main, ["--resume", str(out), "--epochs", "3"])
    agent.write_bytes(good)
    her_ddpg.main(["--resume", str(out), "--epochs", "3"])
    assert checkpoint_dir(out).name == "000000000003"


@pytest.mark.parametrize("device", ["cuda", "tpu"])
def test_a_device_this_machine_lacks_is_refused_in_one_line_before_any_write(device, tmp_path, capsys, monkeypatch) -> None:  # fmt: skip
    """--device cuda without a CUDA GPU (CUDA hidden here, so the test runs on any machine), or an unknown
    device: one line naming --device and the accepted values, and no folder made."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "out"
    line = fails(capsys, her_ddpg.main, [*TINY, "--device", device, "--output", str(out)])
    if device == "cuda":
        assert (
            line == f"{PREFIX}--device: 'cuda' is not accepted here: torch finds no CUDA GPU; accepted: cpu"
        )
    else:
        assert line == f"{PREFIX}--device: 'tpu' is not accepted; accepted: cpu or cuda"
    assert not out.exists()
