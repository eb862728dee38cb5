"""kill -9 at random moments, then --resume: the end result equals the uninterrupted run's, bit for bit.

For ``examples/her_ddpg.py`` and ``examples/train.py``: a tiny run is killed with SIGKILL at least
``KILLS`` times (every other kill at a random moment, the others as soon as a checkpoint or another
checkpoint is seen being written, so some land inside checkpoint writes). After each kill ``--resume``
is tried; it either goes on or refuses with exactly one line and exit status 2 (a run killed before
its first checkpoint), and then the run is started again with ``--force``. Finally the run completes
and its parameters, optimiser states, replay storage and curve are compared with the uninterrupted
run's, and so are its TensorBoard events (``--tensorboard``): every file readable, no step twice, the
same figures. Slow (a few minutes: every attempt imports torch): ``python -m pytest -m slow``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pickle
import random
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")
pytest.importorskip("stable_baselines3")
pytest.importorskip("tensorboard")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KILLS = 20

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Script:
    name: str
    new: list[str]  # options of a new run (--output is added)
    resume: list[str]  # options besides --resume RUN_DIR
    curve_columns: tuple[str, ...]  # the columns of eval.csv that must be equal (not the clocks)
    settings: str  # the file naming the run's TensorBoard folder
    learned: tuple[str, ...]  # the TensorBoard series that must be equal (not the clocks)
    launcher: tuple[str, ...] = ()  # torchrun's options: the launcher is what is killed, its workers with it
    kills: int = KILLS


DDPG = ["--env", "goalenvs/FetchReach-v0", "--n-envs", "2", "--n-cycles", "4", "--n-batches", "4",
        "--batch-size", "32", "--hidden", "16", "--layers", "2", "--buffer-size", "5000",
        "--eval-episodes", "2", "--save-freq", "1", "--no-gif", "--epochs", "8", "--tensorboard", "tb"]  # fmt: skip
DDPG_LEARNED = ("eval/success_rate", "eval/mean_reward", "rollout/ep_rew_mean", "rollout/success_rate",
                "train/critic_loss", "train/actor_loss", "train/q_mean", "train/q_target_mean", "train/n_updates")  # fmt: skip
DDPG_CURVE = ("epoch", "env_steps", "updates", "success_rate")
SCRIPTS = {
    "her_ddpg": Script("her_ddpg.py", DDPG, ["--no-gif"], DDPG_CURVE, "config.json", DDPG_LEARNED),
    "her_ddpg_torchrun": Script("her_ddpg.py", DDPG, ["--no-gif"], DDPG_CURVE, "config.json", DDPG_LEARNED,
                                ("--standalone", "--nproc-per-node", "2"), kills=8),  # fmt: skip
    "train": Script(
        "train.py",
        ["--env", "goalenvs/BitFlip-v0", "--env-kwargs", '{"n_bits": 4}', "--timesteps", "3000",
         "--save-freq", "250", "--eval-freq", "500", "--eval-episodes", "5", "--no-progress", "--no-gif",
         "--tensorboard", "tb"],
        ["--no-progress", "--no-gif"],
        ("timesteps", "success_rate", "mean_return"),
        "run.json",
        ("eval/success_rate", "eval/mean_reward"),  # stable-baselines3's rollout/ means do not survive a resume
    ),
}  # fmt: skip


def command(script: Script, options: list[str]) -> list[str]:
    launch = (
        [sys.executable, "-m", "torch.distributed.run", *script.launcher]
        if script.launcher
        else [sys.executable]
    )
    return [*launch, str(EXAMPLES / script.name), *options]


def our_lines(script: Script, err: str) -> list[str]:
    """The script's own lines of stderr (torchrun adds its report of a failed worker)."""
    lines = err.strip().splitlines()
    return [line for line in lines if line.startswith(script.name + ": ")] if script.launcher else lines


def run_to_end(script: Script, options: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        command(script, options), cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def writing(out: Path) -> bool:
    """Whether a checkpoint is being written in ``out`` (its temporary folder exists)."""
    try:
        return any(n.startswith(".tmp-") for n in os.listdir(out / "checkpoints"))
    except OSError:
        return False


def killed_attempt(
    script: Script, options: list[str], out: Path, cwd: Path, rng: random.Random, at_write: bool, span: float
):
    """Start an attempt and SIGKILL it, at a random moment within ``span`` seconds or as soon as a
    checkpoint is being written (``at_write``); returns (killed, during a write, returncode, stderr)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(command(script, options), cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + (rng.uniform(0.5, span) if not at_write else 60.0)
    during_write = False
    while proc.poll() is None and time.monotonic() < deadline:
        if at_write and writing(out):
            time.sleep(rng.uniform(0.0, 0.004))
            during_write = writing(out)
            break
        time.sleep(0.001 if at_write else 0.02)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        return True, during_write, -9, ""
    err = proc.stderr.read()
    proc.stderr.close()
    return False, False, proc.returncode, err


def latest_checkpoint(out: Path) -> Path:
    return sorted(p for p in (out / "checkpoints").iterdir() if p.name.isdigit())[-1]


def curve(out: Path, columns: tuple[str, ...]) -> list[tuple[str, ...]]:
    with (out / "eval.csv").open() as f:
        return [tuple(row[c] for c in columns) for row in csv.DictReader(f)]


def assert_same_value(a: object, b: object, where: str) -> None:
    """``a`` and ``b`` hold the same values, recursively (arrays bit for bit, generators by state)."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), where
    elif isinstance(a, np.random.Generator):
        assert a.bit_generator.state == b.bit_generator.state, where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same_value(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_value(x, y, f"{where}[{i}]")
    elif isinstance(a, (int, float, str, bytes, bool, type(None), np.generic, np.dtype, type)):
        assert a == b or (a != a and b != b), (where, a, b)  # NaN equals NaN here
    else:
        state = type(a).__getstate__
        assert_same_value(state(a), state(b), f"{where}<{type(a).__name__}>")


def tensorboard(out: Path, settings: str) -> dict[str, list[tuple[int, float]]]:
    """The scalar series of the run's TensorBoard folder (named in its settings, relative to the folder the
    run was started in), as TensorBoard shows them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder = out.parent / json.loads((out / settings).read_text())["tensorboard"]
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def assert_same_end(name: str, a: Path, b: Path) -> None:
    script = SCRIPTS[name]
    assert curve(a, script.curve_columns) == curve(b, script.curve_columns)
    ta, tb = (tensorboard(out, script.settings) for out in (a, b))
    for tag in script.learned:
        assert ta[tag] == tb[tag], tag
    for tag, series in tb.items():  # what killed sessions wrote after their checkpoint is hidden
        steps = [step for step, _ in series]
        assert steps == sorted(set(steps)), tag
    ca, cb = latest_checkpoint(a), latest_checkpoint(b)
    assert ca.name == cb.name
    if name.startswith("her_ddpg"):
        # The same storage and envs' generators (by value: pickle's memo of shared objects such as a
        # dtype may differ after a resume), networks, optimisers and random states.
        for file in sorted(p.name for p in ca.iterdir() if p.suffix == ".pkl"):
            with (ca / file).open("rb") as f, (cb / file).open("rb") as g:
                assert_same_value(pickle.load(f), pickle.load(g), file)
        sa, sb = (torch.load(c / "agent.pt", weights_only=False) for c in (ca, cb))
        for key in ("actor", "critic", "actor_target", "critic_target"):
            for param, value in sa["agent"][key].items():
                assert torch.equal(value, sb["agent"][key][param]), (key, param)
        assert str(sa["agent"]["actor_opt"]) == str(sb["agent"]["actor_opt"])
    else:
        for file in ("model.zip",):
            za, zb = zipfile.ZipFile(a / file), zipfile.ZipFile(b / file)
            for member in (m for m in za.namelist() if m.endswith(".pth")):
                ta = torch.load(io.BytesIO(za.read(member)), weights_only=False)
                tb = torch.load(io.BytesIO(zb.read(member)), weights_only=False)
                assert str(ta) == str(tb), member
        with (ca / "replay_buffer.pkl").open("rb") as f, (cb / "replay_buffer.pkl").open("rb") as g:
            ba, bb = pickle.load(f).storage, pickle.load(g).storage
        assert ba.num_transitions == bb.num_transitions
        for field in ("observations", "actions", "rewards", "terminateds", "truncateds"):
            ra, rb = ba.rows(field), bb.rows(field)
            for key in ra if isinstance(ra, dict) else [None]:
                np.testing.assert_array_equal(ra[key] if key else ra, rb[key] if key else rb, err_msg=field)


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_kill_9_at_random_moments_then_resume_ends_as_the_uninterrupted_run(
    name: str, tmp_path: Path
) -> None:
    script = SCRIPTS[name]
    rng = random.Random(f"kill-fuzz-{name}-{os.environ.get('KILL_FUZZ_SEED', '0')}")
    whole = tmp_path / "whole"
    started = time.monotonic()
    done = run_to_end(script, [*script.new, "--output", str(whole)], tmp_path)
    assert done.returncode == 0, done.stderr
    span = time.monotonic() - started  # random kills fall within the uninterrupted run's duration

    chains, kills, during_writes, refusals = 0, 0, 0, []
    while kills < script.kills:
        out = tmp_path / f"killed{chains}"
        options = [*script.new, "--output", str(out)]
        while kills < script.kills:
            killed, during, code, err = killed_attempt(
                script, options, out, tmp_path, rng, at_write=kills % 2 == 1, span=span
            )
            if not killed:
                if code == 0:  # it finished before the kill: this chain is whole
                    break
                lines = our_lines(script, err)
                assert code == (1 if script.launcher else 2) and len(lines) == 1, (code, err)  # one line
                refusals.append(lines[0])
                options = [*script.new, "--output", str(out), "--force"]  # no checkpoint yet: start again
                continue
            kills += 1
            during_writes += during
            options = ["--resume", str(out), *script.resume]
        if kills >= script.kills:  # the last chain: go on to the end
            end = run_to_end(script, options, tmp_path)
            if end.returncode != 0:  # killed before its first checkpoint: the refusal, then a new start
                assert len(our_lines(script, end.stderr)) == 1, end.stderr
                refusals.append(our_lines(script, end.stderr)[0])
                end = run_to_end(script, [*script.new, "--output", str(out), "--force"], tmp_path)
            assert end.returncode == 0, end.stderr
        assert_same_end(name, whole, out)
        chains += 1
    for line in refusals:  # a resume of a run killed before its first checkpoint says so
        assert line.startswith(f"{script.name}: error:") and "--resume" in line, line
    print(
        f"{name}: {kills} kills ({during_writes} during a write) over {chains} chains, {len(refusals)} refusals"
    )
    assert during_writes >= 1, "no kill landed during a write"
