"""examples/train.py and enjoy.py on careless input, existing outputs, checkpoints and resume.

Every user mistake must end with one line that names the argument and what is accepted, exit status
2, and nothing written. A run split by ``--stop-at`` / ``--resume`` (or by a crash mid-checkpoint) must
end bit-for-bit where the uninterrupted run ends. Tiny settings: each run takes a few seconds.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import pickle
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")
pytest.importorskip("matplotlib")
pytest.importorskip("imageio")
pytest.importorskip("yaml")
import torch
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))  # as the scripts import their modules

import enjoy  # noqa: E402
import sb3_run  # noqa: E402
import train  # noqa: E402

BITFLIP = ["--env", "goalenvs/BitFlip-v0", "--env-kwargs", '{"n_bits": 4}', "--no-progress", "--no-gif"]
FAST = [*BITFLIP, "--eval-episodes", "5", "--eval-freq", "500"]


def expect_usage_error(capsys: pytest.CaptureFixture[str], call, prefix: str, *fragments: str) -> str:
    """``call()`` exits with status 2 and one stderr line starting with ``prefix`` and holding ``fragments``."""
    with pytest.raises(SystemExit) as exited:
        call()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith(prefix), err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


# ------------------------------------------------------------------------------------ careless input
TRAIN_MISTAKES = {
    "timesteps-negative": (["--timesteps", "-5"], "--timesteps", "integer >= 1"),
    "timesteps-zero": (["--timesteps", "0"], "--timesteps", "integer >= 1"),
    "timesteps-text": (["--timesteps", "many"], "--timesteps", "integer >= 1"),
    "n-envs-zero": (["--n-envs", "0"], "--n-envs", "integer >= 1"),
    "n-envs-negative": (["--n-envs", "-2"], "--n-envs", "integer >= 1"),
    "eval-freq-zero": (["--eval-freq", "0"], "--eval-freq", "integer >= 1"),
    "eval-freq-negative": (["--eval-freq", "-5"], "--eval-freq", "integer >= 1"),
    "eval-episodes-zero": (["--eval-episodes", "0"], "--eval-episodes", "integer >= 1"),
    "seed-negative": (["--seed", "-1"], "--seed", "integer >= 0"),
    "save-freq-zero": (["--save-freq", "0"], "--save-freq", "integer >= 1"),
    "threads-zero": (["--threads", "0"], "--threads", "integer >= 1"),
    "env-kwargs-env-error": (["--env-kwargs", '{"n_bits": 0}'], "--env-kwargs", "n_bits must be >= 1, got 0"),
    "env-kwargs-unknown": (
        ["--env-kwargs", '{"nbits": 8}'],
        "--env-kwargs",
        "no argument 'nbits'",
        "'n_bits'",
    ),
    "env-kwargs-bad-json": (["--env-kwargs", "{bad"], "--env-kwargs", "not valid JSON", "JSON object"),
    "env-kwargs-not-object": (["--env-kwargs", "[8]"], "--env-kwargs", "not a JSON object"),
    "env-not-goal": (["--env", "CartPole-v1"], "--env", "not a goal env", "goalenvs/BitFlip-v0"),
    "env-unknown": (["--env", "goalenvs/Nope-v0"], "--env", "unknown env", "goalenvs/BitFlip-v0"),
    "algo-no-entry": (["--algo", "sac"], "--algo", "no entry for 'goalenvs/BitFlip-v0'"),
    "conf-file-missing": (["--conf-file", "missing.yml"], "--conf-file", "missing.yml is not a file"),
    "stop-at-beyond": (["--timesteps", "2000", "--stop-at", "2000"], "--stop-at", "accepted: 1 to 1999"),
    "device-unknown": (["--device", "gpu"], "--device", "'auto', 'cpu'"),
}


@pytest.mark.parametrize("case", list(TRAIN_MISTAKES))
def test_train_rejects_careless_input(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, argument, *fragments = TRAIN_MISTAKES[case]
    monkeypatch.chdir(tmp_path)  # the default output folder would be under ./runs
    expect_usage_error(capsys, lambda: train.main(argv), f"train.py: error: argument {argument}:", *fragments)
    assert list(tmp_path.iterdir()) == [], "nothing is written"


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_train_refuses_cuda_without_cuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Asking for a GPU that is not there is an error, not a silent CPU run recorded as cuda."""
    monkeypatch.chdir(tmp_path)
    err = expect_usage_error(
        capsys, lambda: train.main(["--device", "cuda"]), "train.py: error: argument --device:", "'cuda'"
    )
    assert "accepted here: ['auto', 'cpu']" in err
    assert list(tmp_path.iterdir()) == []


def test_train_refuses_a_used_output_folder_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    argv = [*FAST, "--timesteps", "300", "--output", str(out)]
    err = expect_usage_error(capsys, lambda: train.main(argv), "train.py: error: --output:")
    assert err == (
        f"train.py: error: --output: {out} is not empty (it holds notes.txt); pass --resume {out} to "
        "continue that run, --force to replace it, or another --output\n"
    )
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]

    train.main([*[a for a in argv if a != "--no-gif"], "--force"])  # this run records policy.gif
    assert (out / "policy.gif").read_bytes()[:6] == b"GIF89a"
    train.main([*argv, "--force", "--timesteps", "200"])
    held = sorted(p.name for p in out.iterdir())
    assert held == [
        ".lock",
        ".run-manifest.json",
        "eval.csv",
        "model.zip",
        "notes.txt",
        "run.json",
        "success.png",
    ]
    assert "policy.gif" not in held, "--force removes the outputs of the replaced run (this one has --no-gif)"
    assert (out / "notes.txt").read_text() == "mine", "--force removes only what a run recorded writing"
    assert json.loads((out / "run.json").read_text())["timesteps"] == 200


# ------------------------------------------------------------------------------------ enjoy.py
@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("enjoy") / "run"
    train.main([*FAST, "--timesteps", "1200", "--output", str(out), "--no-gif"])
    return out


def test_enjoy_writes_its_own_gif_and_never_overwrites(
    trained_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (trained_run / "policy.gif").write_bytes(b"the training run's GIF")
    success = enjoy.main([str(trained_run), "--episodes", "2"])
    assert 0.0 <= success <= 1.0
    assert (trained_run / "enjoy.gif").read_bytes()[:6] == b"GIF89a"
    assert (trained_run / "policy.gif").read_bytes() == b"the training run's GIF"
    first = (trained_run / "enjoy.gif").stat().st_mtime_ns
    capsys.readouterr()

    expect_usage_error(capsys, lambda: enjoy.main([str(trained_run)]), "enjoy.py: error: argument --gif:",
                       "exists", "--force")  # fmt: skip
    assert (trained_run / "enjoy.gif").stat().st_mtime_ns == first
    enjoy.main([str(trained_run), "--episodes", "1", "--force"])
    assert (trained_run / "enjoy.gif").stat().st_mtime_ns != first


@pytest.mark.parametrize(
    ("make", "argument", "fragment"),
    [
        (lambda d: [str(d / "missing")], "run_dir", "is not a folder"),
        (lambda d: [str(d)], "run_dir", "has no run.json"),
        (lambda d: [str(d), "--episodes", "0"], "--episodes", "integer >= 1"),
        (lambda d: [str(d), "--gif", str(d / "out.png")], "--gif", "accepted: a .gif file name"),
        (lambda d: [str(d), "--gif", str(d / "nowhere" / "a.gif")], "--gif", "does not exist"),
    ],
    ids=["missing-folder", "not-a-run", "episodes-zero", "not-gif", "no-such-folder"],
)
def test_enjoy_rejects_careless_input(
    make, argument: str, fragment: str, tmp_path: Path, trained_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = trained_run if argument in ("--episodes", "--gif") else tmp_path
    before = sorted(p.name for p in folder.iterdir())
    expect_usage_error(
        capsys, lambda: enjoy.main(make(folder)), f"enjoy.py: error: argument {argument}:", fragment
    )
    assert sorted(p.name for p in folder.iterdir()) == before


# ------------------------------------------------------------------------------------ checkpoints and resume
def zip_tensors(path: Path) -> dict[str, object]:
    """The torch state (parameters, optimiser states) saved in a stable-baselines3 zip."""
    with zipfile.ZipFile(path) as archive:
        return {
            name: torch.load(io.BytesIO(archive.read(name)), weights_only=False)
            for name in archive.namelist()
            if name.endswith(".pth")
        }


def assert_same_state(a: object, b: object, where: str = "") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            assert_same_state(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def final_buffer(run_dir: Path):
    run = json.loads((run_dir / "run.json").read_text())
    with (run_dir / run["checkpoint"] / "replay_buffer.pkl").open("rb") as f:
        return pickle.load(f).storage


def curve(run_dir: Path) -> list[tuple[str, str, str]]:
    with (run_dir / "eval.csv").open() as f:
        return [(r["timesteps"], r["success_rate"], r["mean_return"]) for r in csv.DictReader(f)]


def assert_same_run(a: Path, b: Path, steps: int) -> None:
    """Same parameters and optimiser states, the same transitions in the buffer, the same curve."""
    assert_same_state(zip_tensors(a / "model.zip"), zip_tensors(b / "model.zip"))
    buffer_a, buffer_b = final_buffer(a), final_buffer(b)
    assert buffer_a.num_transitions == buffer_b.num_transitions == steps, "every transition is kept"
    for name in ("observations", "next_observations", "actions", "rewards", "terminateds", "truncateds"):
        rows_a, rows_b = buffer_a.rows(name), buffer_b.rows(name)
        if isinstance(rows_a, dict):  # the same transitions, in the same rows
            assert rows_a.keys() == rows_b.keys()
            for key in rows_a:
                np.testing.assert_array_equal(rows_a[key], rows_b[key], err_msg=f"{name}[{key}]")
        else:
            np.testing.assert_array_equal(rows_a, rows_b, err_msg=name)
    assert curve(a) == curve(b)


RESUMABLE = {
    # DQN on BitFlip: exploration from NumPy's global generator and the action space's.
    "dqn-bitflip": ([*FAST, "--timesteps", "2000"], 1000),
    # SAC with VecNormalize on FetchReach, stopped mid-episode (episodes are 50 steps): torch sampling,
    # normalisation statistics and an unfinished episode carried over.
    "sac-fetchreach": (["--env", "goalenvs/FetchReach-v0", "--algo", "sac", "--timesteps", "1150", "--no-progress",
                        "--no-gif", "--eval-episodes", "2", "--eval-freq", "1000"], 1075),
}  # fmt: skip


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if c == "sac-fetchreach" else c for c in RESUMABLE]
)
def test_stop_and_resume_is_bit_for_bit_the_uninterrupted_run(case: str, tmp_path: Path) -> None:
    argv, stop = RESUMABLE[case]
    if case == "sac-fetchreach":
        pytest.importorskip("mujoco")
    total = int(argv[argv.index("--timesteps") + 1])
    whole, split = tmp_path / "whole", tmp_path / "split"
    train.main([*argv, "--output", str(whole), "--save-freq", "100000"])  # checkpoints only at the end

    assert math.isnan(train.main([*argv, "--output", str(split), "--stop-at", str(stop)]))  # stopped
    run = json.loads((split / "run.json").read_text())
    assert run["status"] == "stopped" and run["checkpoint_timesteps"] == stop
    assert not (split / "model.zip").exists()
    model, _ = enjoy.load(split)  # a stopped run loads from its checkpoint
    assert model.num_timesteps == stop

    success = train.main(["--resume", str(split), "--no-progress", "--no-gif"])
    run = json.loads((split / "run.json").read_text())
    assert run["status"] == "finished" and run["timesteps"] == total and run["success_rate"] == success
    assert len(run["commands"]) == 2 and "--resume" in run["commands"][1]
    assert_same_run(whole, split, total)


def test_a_crash_mid_checkpoint_keeps_the_previous_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk while the step-1000 checkpoint is written: one line, exit 1, the step-500 one kept whole."""
    argv = [*FAST, "--timesteps", "2000"]
    whole, crashed = tmp_path / "whole", tmp_path / "crashed"
    train.main([*argv, "--output", str(whole), "--save-freq", "100000"])

    real_save = OffPolicyAlgorithm.save_replay_buffer
    calls = []

    def failing_save(self, path):
        calls.append(path)
        if len(calls) == 2:  # the second checkpoint (step 1000) dies half-written
            real_save(self, path)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_save(self, path)

    monkeypatch.setattr(OffPolicyAlgorithm, "save_replay_buffer", failing_save)
    with pytest.raises(SystemExit) as exited:
        train.main([*argv, "--output", str(crashed), "--save-freq", "500"])
    monkeypatch.undo()
    assert exited.value.code == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"train.py: error: No space left on device ({calls[1]}); stopped at 1000 steps; go on from the "
        f"checkpoint of step 500 with: python examples/train.py --resume {crashed}"
    )
    run = json.loads((crashed / "run.json").read_text())
    assert run["checkpoint"] == "checkpoints/000000000500" and run["status"] == "running"
    assert sorted(p.name for p in (crashed / "checkpoints").iterdir()) == ["000000000500"]  # no half one
    assert sorted(p.name for p in (crashed / run["checkpoint"]).iterdir()) == [
        "MANIFEST.json", "env.pkl", "model.zip", "replay_buffer.pkl", "state.pkl"
    ]  # fmt: skip
    assert [r[0] for r in curve(crashed)] == ["500", "1000"]  # the crashed session evaluated at 1000

    train.main(["--resume", str(crashed), "--no-progress", "--no-gif"])
    assert sorted(p.name for p in (crashed / "checkpoints").iterdir()) == ["000000002000"]
    assert_same_run(whole, crashed, 2000)  # the evaluation at 1000 was redone once, not appended twice


def test_resume_extends_a_finished_run_and_rejects_careless_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, plain = tmp_path / "run", tmp_path / "plain"
    train.main([*FAST, "--timesteps", "600", "--output", str(out), "--save-freq", "300"])
    train.main([*FAST, "--timesteps", "300", "--output", str(plain)])  # no --save-freq: no checkpoint
    capsys.readouterr()
    prefix = "train.py: error: argument"
    for argv, argument, fragment in [
        ([str(tmp_path / "missing")], "--resume", "does not exist"),
        ([str(plain)], "--resume", "has no checkpoint"),
        ([str(out)], "--resume", "is complete (600 of 600 steps)"),
        ([str(out), "--timesteps", "500"], "--timesteps", "accepted: > 600"),
        ([str(out), "--timesteps", "900", "--stop-at", "600"], "--stop-at", "accepted: 601 to 899"),
        ([str(out), "--env", "goalenvs/Parking-v0"], "--resume", "--env cannot be given with --resume"),
        ([str(out), "--seed", "3"], "--resume", "--seed cannot be given"),
    ]:
        before = (out / "run.json").read_text()
        call = lambda argv=argv: train.main(["--resume", *argv])  # noqa: E731
        expect_usage_error(capsys, call, f"{prefix} {argument}:", fragment)
        assert (out / "run.json").read_text() == before

    train.main(["--resume", str(out), "--timesteps", "900", "--no-progress", "--no-gif"])
    run = json.loads((out / "run.json").read_text())
    assert run["timesteps"] == 900 and run["total_timesteps"] == 900 and len(run["commands"]) == 2
    assert [int(r[0]) for r in curve(out)] == [500, 600, 900]
    assert final_buffer(out).num_transitions == 900


def test_evaluation_in_waves_equals_all_episodes_side_by_side(trained_run: Path) -> None:
    """Envs without a native vector version are evaluated a few at a time: the same episodes, the same result."""
    import gymnasium as gym

    model, run = enjoy.load(trained_run)
    results = []
    for width in (7, 3, 1):
        envs = gym.make_vec(run["env"], num_envs=width, vectorization_mode="sync", **run["env_kwargs"])
        results.append(sb3_run.evaluate(model, envs, 7, seed=123))
    assert results[0] == results[1] == results[2]
    assert (
        0.0 <= results[0][0] <= 1.0 and results[0][1] < 0
    )  # BitFlip's reward is -1 per step short of the goal
