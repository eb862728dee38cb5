"""examples/train.py when things go wrong: the user's files, a second process, damaged files, bad settings, Ctrl-C.

Each case asserts the exact outcome: the first line of stderr, the exit status and the files left in
the run folder. Tiny BitFlip runs (a second or two each; a subprocess about five with its imports).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")
pytest.importorskip("matplotlib")
pytest.importorskip("yaml")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))  # as the scripts import their modules

import enjoy  # noqa: E402
import train  # noqa: E402

from tests.examples.folder_checks import DAMAGES, checkpoint_dir, copy_run, fails, snapshot  # noqa: E402

BITFLIP = [
    "--env",
    "goalenvs/BitFlip-v0",
    "--no-progress",
    "--no-gif",
    "--eval-episodes",
    "5",
    "--eval-freq",
    "300",
]
TINY = [*BITFLIP, "--env-kwargs", '{"n_bits": 4}', "--timesteps", "600", "--save-freq", "300"]
PREFIX = "train.py: error: "
FIX = "start again with --force, or put back a copy of the folder"
RUN_JSON_FIX = "restore it from a copy (each checkpoint's MANIFEST.json holds the run's settings) or start again with --force"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "run"
    train.main([*TINY, "--output", str(out)])
    return out


# ------------------------------------------------------------------------------ the user's files
def test_force_removes_only_what_a_run_wrote(finished_run: Path, tmp_path: Path) -> None:
    out = copy_run(finished_run, tmp_path)
    (out / "keep.txt").write_text("my notes")
    (out / "checkpoints" / "mine.txt").write_text("mine too")
    train.main([*TINY[:-2], "--timesteps", "300", "--output", str(out), "--force"])  # no checkpoints
    assert sorted(p.name for p in out.iterdir()) == [
        ".lock", ".run-manifest.json", "checkpoints", "eval.csv", "keep.txt", "model.zip", "run.json", "success.png"
    ]  # fmt: skip
    assert (out / "keep.txt").read_text() == "my notes"
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["mine.txt"]  # the old run's checkpoint went
    assert json.loads((out / "run.json").read_text())["timesteps"] == 300


def test_force_refuses_a_file_it_would_overwrite_but_no_run_wrote(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "eval.csv").write_text("the user's own curve\n")
    line = fails(capsys, train.main, [*TINY, "--output", str(out), "--force"])
    assert line == (
        f"{PREFIX}--force: {out} holds eval.csv, which no run of train.py recorded writing (--force removes "
        "only a run's own files); move them away or choose another --output"
    )
    assert snapshot(out) == {"eval.csv": b"the user's own curve\n"} and not (out / ".lock").exists()


def test_a_folder_of_her_ddpg_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.json").write_text("{}")
    (out / ".run-manifest.json").write_text(json.dumps({"script": "her_ddpg.py", "run_id": "x", "files": []}))
    before = snapshot(out)
    line = fails(capsys, train.main, [*TINY, "--output", str(out), "--force"])
    assert (
        line
        == f"{PREFIX}--force: {out} is a run folder of her_ddpg.py, not of train.py; choose another --output"
    )
    assert snapshot(out) == before


# ------------------------------------------------------------------------------ hyperparameters
def _conf(tmp_path: Path, edit: dict, algo: str = "dqn") -> Path:
    """``<algo>.yml``: goalenvs.zoo.dqn as YAML, its BitFlip entry with ``edit`` (None: key removed)."""
    import yaml

    from goalenvs.zoo.dqn import hyperparams

    entries = yaml.safe_load(yaml.safe_dump(hyperparams))
    entry = entries["goalenvs/BitFlip-v0"]
    for key, value in edit.items():
        if value is None:
            entry.pop(key)
        else:
            entry[key] = value
    (tmp_path / f"{algo}.yml").write_text(yaml.safe_dump(entries))
    return tmp_path / f"{algo}.yml"


ENTRY = "argument --conf-file: dqn.yml, entry 'goalenvs/BitFlip-v0', key"
CONF_MISTAKES = {
    "gamma-nan": ({"gamma": math.nan}, f"{ENTRY} gamma: nan is not accepted; accepted: a finite number, 0.0 <= gamma <= 1.0"),
    "gamma-5": ({"gamma": 5}, f"{ENTRY} gamma: 5 is not accepted; accepted: a finite number, 0.0 <= gamma <= 1.0"),
    "tau-7": ({"tau": 7.0}, f"{ENTRY} tau: 7.0 is not accepted; accepted: a finite number, 0.0 < tau <= 1.0"),
    "learning-rate-negative": ({"learning_rate": -0.001}, f"{ENTRY} learning_rate: -0.001 is not accepted; accepted: a finite number, 0.0 < learning_rate"),
    "learning-rate-lin-negative": ({"learning_rate": "lin_-1e-3"}, f"{ENTRY} learning_rate: 'lin_-1e-3' is not accepted; accepted: a number > 0, or \"lin_<number > 0>\" (decayed to 0)"),
    "batch-size-zero": ({"batch_size": 0}, f"{ENTRY} batch_size: 0 is not accepted; accepted: an integer, 1 <= batch_size"),
    "buffer-size-fraction": ({"buffer_size": 1e5 + 0.5}, f"{ENTRY} buffer_size: 100000.5 is not accepted; accepted: an integer, 1 <= buffer_size"),
    "n-timesteps-zero": ({"n_timesteps": 0}, f"{ENTRY} n_timesteps: 0 is not accepted; accepted: an integer, 1 <= n_timesteps"),
    "exploration-final-eps": ({"exploration_final_eps": 1.5}, f"{ENTRY} exploration_final_eps: 1.5 is not accepted; accepted: a finite number, 0.0 <= exploration_final_eps <= 1.0"),
    "target-update-interval": ({"target_update_interval": -1}, f"{ENTRY} target_update_interval: -1 is not accepted; accepted: an integer, 1 <= target_update_interval"),
    "train-freq-unit": ({"train_freq": [4, "steps"]}, f"{ENTRY} train_freq: [4, 'steps'] is not accepted; accepted: an integer >= 1, or [integer >= 1, \"step\" or \"episode\"]"),
    "gradient-steps": ({"gradient_steps": -2}, f"{ENTRY} gradient_steps: -2 is not accepted; accepted: an integer, -1 <= gradient_steps"),
    "n-sampled-goal": ({"replay_buffer_kwargs": {"goal_selection_strategy": "future", "n_sampled_goal": -1}},
                       "argument --conf-file: dqn.yml, entry 'goalenvs/BitFlip-v0', replay_buffer_kwargs key n_sampled_goal: -1 is not accepted; accepted: an integer, 0 <= n_sampled_goal"),
    "goal-selection-strategy": ({"replay_buffer_kwargs": {"goal_selection_strategy": "futur"}},
                                "argument --conf-file: dqn.yml, entry 'goalenvs/BitFlip-v0', replay_buffer_kwargs key goal_selection_strategy: 'futur' is not accepted; accepted: one of ['future', 'final', 'episode']"),
    "policy-kwargs-string": ({"policy_kwargs": "dict(net_arch=[256, 256])"}, f"{ENTRY} policy_kwargs: 'dict(net_arch=[256, 256])' is not accepted; accepted: a mapping, e.g. {{'net_arch': [64, 64]}} (a value such as nn.ReLU: in a .py file or module)"),
    "normalize-string": ({"normalize": "dict(norm_obs=True)"}, f"{ENTRY} normalize: 'dict(norm_obs=True)' is not accepted; accepted: true, false or a mapping of VecNormalize's arguments"),
    "replay-buffer-class": ({"replay_buffer_class": "dict"}, f"{ENTRY} replay_buffer_class: 'dict' is not accepted; accepted: her.HerReplayBuffer (this script always trains with it)"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CONF_MISTAKES))
def test_a_bad_hyperparameter_is_one_line_naming_file_and_key(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    edit, expected = CONF_MISTAKES[case]
    monkeypatch.chdir(tmp_path)
    _conf(tmp_path, edit)
    timesteps = [] if case == "n-timesteps-zero" else ["--timesteps", "300"]
    line = fails(capsys, train.main, [*BITFLIP, *timesteps, "--conf-file", "dqn.yml", "--output", "out"])
    assert line == PREFIX + expected
    assert [p.name for p in tmp_path.iterdir()] == ["dqn.yml"], "nothing is written"


def test_ent_coef_and_unknown_keys_are_checked_before_the_model_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [*BITFLIP, "--timesteps", "300", "--conf-file", "sac.yml", "--algo", "sac", "--output", "out"]
    for value in ("auto_0", "auto_x", "manual", -0.1):
        _conf(tmp_path, {"ent_coef": value, "target_update_interval": None, "exploration_fraction": None,
                         "exploration_final_eps": None}, algo="sac")  # fmt: skip
        line = fails(capsys, train.main, argv)
        accepted = "a finite number, 0.0 < ent_coef" if value == -0.1 else 'a number > 0, "auto" or "auto_<initial value > 0>"'  # fmt: skip
        assert line == (
            f"{PREFIX}argument --conf-file: sac.yml, entry 'goalenvs/BitFlip-v0', key ent_coef: {value!r} is not "
            f"accepted; accepted: {accepted}"
        )
    _conf(tmp_path, {"gama": 0.9})
    line = fails(
        capsys, train.main, [*BITFLIP, "--timesteps", "300", "--conf-file", "dqn.yml", "--output", "out"]
    )
    assert line == (
        f"{PREFIX}{ENTRY} gama: not a setting of DQN+HER; accepted: ['batch_size', 'buffer_size', 'env_kwargs', "
        "'exploration_final_eps', 'exploration_fraction', 'exploration_initial_eps', 'gamma', 'gradient_steps', "
        "'learning_rate', 'learning_starts', 'max_grad_norm', 'n_envs', 'n_steps', 'n_timesteps', 'noise_std', "
        "'noise_type', 'normalize', 'optimize_memory_usage', 'policy', 'policy_kwargs', 'replay_buffer_class', "
        "'replay_buffer_kwargs', 'stats_window_size', 'target_update_interval', 'tau', 'tensorboard_log', "
        "'train_freq']"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dqn.yml", "sac.yml"]


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ({"policy_kwargs": {"net_arch": [8], "bogus": 1}}, "TypeError: MultiInputPolicy.__init__() got an unexpected keyword argument 'bogus'"),
        ({"policy": "NoSuchPolicy"}, "ValueError: Policy NoSuchPolicy unknown"),
        ({"replay_buffer_kwargs": {"bogus": 1}}, "TypeError: HerReplayBuffer.__init__() got an unexpected keyword argument 'bogus'"),
    ],
    ids=["policy-kwargs", "policy", "replay-buffer-kwargs"],
)  # fmt: skip
def test_what_the_algorithm_refuses_is_one_line(
    edit: dict, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    _conf(tmp_path, edit)
    line = fails(
        capsys, train.main, [*BITFLIP, "--timesteps", "300", "--conf-file", "dqn.yml", "--output", "out"]
    )
    assert line == (
        f"{PREFIX}argument --conf-file: dqn.yml, entry 'goalenvs/BitFlip-v0': DQN+HER cannot be built from it ({why})"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["dqn.yml"], "nothing is written"


def test_a_python_conf_file_may_hold_classes_and_its_run_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A .py --conf-file (as the RL Zoo's) runs, with Python values YAML cannot hold; run.json names them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text(
        "from torch import nn\nfrom her import HerReplayBuffer\n"
        "hyperparams = {'goalenvs/BitFlip-v0': {'policy': 'MultiInputPolicy', 'learning_starts': 100,\n"
        "    'policy_kwargs': {'net_arch': [8], 'activation_fn': nn.Tanh}, 'replay_buffer_class': HerReplayBuffer}}\n"
    )
    argv = [*TINY, "--conf-file", "mine.py", "--output", "out"]
    assert math.isnan(train.main([*argv, "--stop-at", "300"]))
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (run["conf_file"], run["hyperparams"]["replay_buffer_class"]) == ("mine.py", "her.HerReplayBuffer")
    assert train.main(["--resume", "out", "--no-progress", "--no-gif"]) >= 0
    (tmp_path / "broken.py").write_text("hyperparams = {\n")
    line = fails(capsys, train.main, [*BITFLIP, "--conf-file", "broken.py", "--output", "x"])
    assert line.startswith(f"{PREFIX}argument --conf-file: cannot load broken.py (SyntaxError: ")


def test_a_seed_numpy_cannot_take_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    line = fails(capsys, train.main, [*TINY, "--seed", str(2**32)])
    assert line == (
        f"{PREFIX}argument --seed: '4294967296' is not accepted: expected an integer >= 0 and <= 4294967295"
    )
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ damaged or foreign files


@pytest.mark.parametrize("name", ["model.zip", "replay_buffer.pkl", "env.pkl", "state.pkl"])
@pytest.mark.parametrize("damage", DAMAGES, ids=["zero-bytes", "truncated", "random-bytes"])
def test_a_damaged_checkpoint_file_is_one_line(finished_run, tmp_path, capsys, name, damage) -> None:
    out = copy_run(finished_run, tmp_path)
    target = checkpoint_dir(out)
    recorded = json.loads((target / "MANIFEST.json").read_text())["files"][name]["bytes"]
    damage(target / name)
    size = (target / name).stat().st_size
    before = snapshot(out)
    line = fails(capsys, train.main, ["--resume", str(out), "--timesteps", "900"])
    assert line == (
        f"{PREFIX}checkpoint {target}: {name} is damaged ({size} bytes, recorded {recorded}, content does not "
        f"match its recorded SHA-256): {FIX}"
    )
    assert snapshot(out) == before
    assert fails(capsys, enjoy.main, [str(out), "--gif", str(tmp_path / "a.gif")]) == (
        f"enjoy.py: error: checkpoint {target}: {name} is damaged ({size} bytes, recorded {recorded}, content "
        f"does not match its recorded SHA-256): {FIX}"
    )  # enjoy.py loads the same checked checkpoint
    assert snapshot(out) == before and not (tmp_path / "a.gif").exists()


def test_a_damaged_checkpoint_manifest_is_one_line(finished_run, tmp_path, capsys) -> None:
    out = copy_run(finished_run, tmp_path)
    (checkpoint_dir(out) / "MANIFEST.json").write_bytes(b"")
    before = snapshot(out)
    line = fails(capsys, train.main, ["--resume", str(out), "--timesteps", "900"])
    assert (
        line == f"{PREFIX}checkpoint {checkpoint_dir(out)}: MANIFEST.json is damaged (JSONDecodeError): {FIX}"
    )
    assert snapshot(out) == before


@pytest.fixture(scope="module")
def six_bits_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("six") / "run"
    train.main([*TINY, "--env-kwargs", '{"n_bits": 6}', "--output", str(out)])
    return out


def _record(checkpoint: Path, name: str) -> None:
    """Record ``name``'s present size and hash in the checkpoint's manifest (as if copied with it)."""
    manifest = json.loads((checkpoint / "MANIFEST.json").read_text())
    data = (checkpoint / name).read_bytes()
    manifest["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (checkpoint / "MANIFEST.json").write_text(json.dumps(manifest))


def test_a_checkpoint_of_another_run_or_env_is_one_line(finished_run, six_bits_run, tmp_path, capsys) -> None:
    """An n_bits=4 checkpoint copied into an n_bits=6 run: the run id, then the settings, then the file refuse it."""
    out = copy_run(six_bits_run, tmp_path)
    ours = json.loads((out / ".run-manifest.json").read_text())["run_id"]
    theirs = json.loads((finished_run / ".run-manifest.json").read_text())["run_id"]
    target = checkpoint_dir(out)
    shutil.rmtree(target)
    shutil.copytree(checkpoint_dir(finished_run), target)  # with its MANIFEST.json
    before = snapshot(out)
    assert fails(capsys, train.main, ["--resume", str(out), "--timesteps", "900"]) == (
        f"{PREFIX}checkpoint {target} belongs to another run (run id {theirs}, of train.py), not to this "
        f"folder's run {ours}: {FIX}"
    )
    assert snapshot(out) == before

    manifest = json.loads((target / "MANIFEST.json").read_text())
    (target / "MANIFEST.json").write_text(json.dumps({**manifest, "run_id": ours}))  # its run id edited
    before = snapshot(out)
    assert fails(capsys, train.main, ["--resume", str(out), "--timesteps", "900"]) == (
        f"{PREFIX}argument --resume: {out / 'run.json'} differs from its checkpoint's settings in ['env_kwargs']; "
        "restore run.json or start again with --force"
    )
    assert snapshot(out) == before

    shutil.rmtree(target)  # only model.zip of the n_bits=4 run, its hash recorded in our manifest
    shutil.copytree(checkpoint_dir(six_bits_run), target)
    shutil.copy(checkpoint_dir(finished_run) / "model.zip", target / "model.zip")
    _record(target, "model.zip")
    before = snapshot(out)
    line = fails(capsys, train.main, ["--resume", str(out), "--timesteps", "900"])
    assert line.startswith(
        f"{PREFIX}checkpoint {target}: model.zip does not fit this run (ValueError: Observation spaces do not "
        "match: Dict('achieved_goal': MultiBinary(4)"
    )
    assert line.endswith(
        "was it copied from another run or written by another version? Start again with --force"
    )
    assert snapshot(out) == before


def _edit_run(out: Path, edit) -> None:
    (out / "run.json").write_text(edit((out / "run.json").read_text()))


def _set(key: str, value: object):
    def edit(text: str) -> str:
        run = json.loads(text)
        if key.startswith("hyperparams."):
            run["hyperparams"][key.split(".")[1]] = value
        elif value is None:
            del run[key]
        else:
            run[key] = value
        return json.dumps(run)

    return edit


RUN_JSON_CASES = {
    "zero-bytes": (lambda text: "", "is not valid JSON (JSONDecodeError: Expecting value: line 1 column 1 (char 0)); " + RUN_JSON_FIX),
    "truncated": (lambda text: text[:100], "is not valid JSON (JSONDecodeError: Expecting value: line 7 column 11 (char 100)); " + RUN_JSON_FIX),
    "not-json": (lambda text: "seed: 0\n", "is not valid JSON (JSONDecodeError: Expecting value: line 1 column 1 (char 0)); " + RUN_JSON_FIX),
    "not-an-object": (lambda text: "[1, 2]", "does not describe a run of train.py (missing keys ['algo', 'commands', 'env', 'env_kwargs', 'eval_episodes', 'eval_freq', 'her_overrides', 'hyperparams', 'n_envs', 'save_freq', 'seed', 'total_timesteps']); " + RUN_JSON_FIX),
    "missing-key": (_set("seed", None), "does not describe a run of train.py (missing keys ['seed']); " + RUN_JSON_FIX),
    "seed-negative": (_set("seed", -1), ", key seed: -1 is not accepted; accepted: an integer, 0 <= seed <= 4294967295"),
    "seed-text": (_set("seed", "0"), ", key seed: '0' is not accepted; accepted: an integer, 0 <= seed <= 4294967295"),
    "n-envs-zero": (_set("n_envs", 0), ", key n_envs: 0 is not accepted; accepted: an integer, 1 <= n_envs"),
    "gamma-5": (_set("hyperparams.gamma", 5), ", entry hyperparams, key gamma: 5 is not accepted; accepted: a finite number, 0.0 <= gamma <= 1.0"),
    "env-unknown": (_set("env", "goalenvs/Nope-v0"), ", key env: 'goalenvs/Nope-v0' is not accepted; accepted: a registered env id"),
    "seed-edited": (_set("seed", 1), "differs from its checkpoint's settings in ['seed']; restore run.json or start again with --force"),
    "gamma-edited": (_set("hyperparams.gamma", 0.9), "differs from its checkpoint's settings in ['hyperparams']; restore run.json or start again with --force"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(RUN_JSON_CASES))
def test_a_damaged_or_edited_run_json_is_one_line(finished_run, tmp_path, capsys, case) -> None:
    edit, message = RUN_JSON_CASES[case]
    out = copy_run(finished_run, tmp_path)
    _edit_run(out, edit)
    before = snapshot(out)
    line = fails(capsys, train.main, ["--resume", str(out), "--timesteps", "900"])
    sep = "" if message.startswith(",") else " "
    assert line == f"{PREFIX}argument --resume: {out / 'run.json'}{sep}{message}"
    assert snapshot(out) == before


# ------------------------------------------------------------------------------ other processes, signals
def _ctrl_c_as_in_a_terminal() -> None:
    """In the child: SIGINT raises KeyboardInterrupt, as in a terminal. A shell starts background jobs
    with SIGINT ignored, and Python then keeps it ignored: the Ctrl-C tests would wait for nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(EXAMPLES.parent)}
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / "train.py"), *argv],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )  # fmt: skip


def _wait_for_a_checkpoint(out: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until the run in ``proc`` has written a whole checkpoint (it holds the lock by then)."""
    deadline = time.monotonic() + timeout
    while not (
        (out / "checkpoints").is_dir() and any(p.name.isdigit() for p in (out / "checkpoints").iterdir())
    ):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _latest(out: Path) -> int:
    return max(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())


LONG = [*BITFLIP, "--env-kwargs", '{"n_bits": 4}', "--timesteps", "1000000", "--save-freq", "300"]


def test_a_second_process_is_refused_and_a_dead_holders_lock_is_taken_over(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    proc = _start([*LONG, "--output", str(out)], tmp_path)
    try:
        _wait_for_a_checkpoint(out, proc)
        proc.send_signal(signal.SIGSTOP)  # holds its lock, writes nothing while the others try
        # The signal takes effect a moment later, maybe in the middle of a checkpoint's write: wait until
        # the child has stopped before reading the folder (a snapshot taken earlier once caught a file
        # still being written).
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        before = snapshot(out)
        expected = (
            f"{PREFIX}{out} is in use by another process (pid {proc.pid}); wait for it to end, or choose "
            "another --output"
        )
        assert fails(capsys, train.main, ["--resume", str(out), "--no-progress"]) == expected
        assert fails(capsys, train.main, [*TINY, "--output", str(out), "--force"]) == expected
        assert fails(capsys, train.main, [*TINY, "--output", str(out)]) == expected
        assert snapshot(out) == before
    finally:
        proc.kill()  # SIGKILL: the kernel drops its lock
        proc.wait()
    assert (out / ".lock").read_text().strip() == str(proc.pid)  # the stale lock file is still there
    done = _latest(out)
    assert math.isnan(train.main(["--resume", str(out), "--stop-at", str(done + 300), "--no-progress"]))
    assert _latest(out) == done + 300 and [p.name for p in (out / "checkpoints").iterdir()] == [
        f"{done + 300:012d}"
    ]
    assert (out / ".lock").read_text().strip() == str(os.getpid())


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_say_where_to_resume_in_one_line(tmp_path: Path, signum: int) -> None:
    out = tmp_path / "out"
    proc = _start([*LONG, "--output", str(out)], tmp_path)
    _wait_for_a_checkpoint(out, proc)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    done = _latest(out)
    (line,) = err.splitlines()
    match = re.fullmatch(
        rf"train\.py: interrupted at (\d+) steps; go on from the checkpoint of step {done} with: python examples/train\.py --resume {out}",
        line,
    )
    assert match and int(match.group(1)) >= done, line
    assert not list((out / "checkpoints").glob(".tmp-*")) and not list(out.glob(".*.tmp-*"))  # no half files
    assert math.isnan(train.main(["--resume", str(out), "--stop-at", str(done + 300), "--no-progress"]))
    assert _latest(out) == done + 300


def test_a_storage_too_small_for_one_episode_stops_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """BitFlip truncates itself, so its episode length is known only once an episode outgrows the storage."""
    monkeypatch.chdir(tmp_path)
    _conf(tmp_path, {"buffer_size": 5, "learning_starts": 50})
    argv = [
        *BITFLIP,
        "--env-kwargs",
        '{"n_bits": 10}',
        "--timesteps",
        "300",
        "--conf-file",
        "dqn.yml",
        "--output",
        "out",
    ]
    with pytest.warns(UserWarning, match="has outgrown the 5 steps the storage keeps per env"):
        line = fails(capsys, train.main, argv)
    assert line == (
        f"{PREFIX}buffer_size of dqn.yml, entry 'goalenvs/BitFlip-v0': the longest episode of env 0 has reached "
        "10 steps, more than the 5 steps the storage keeps per env (capacity // n_envs), so it can never be "
        "sampled; raise capacity (stable-baselines3's buffer_size) to at least 10 (n_envs=1 x the longest "
        "episode length), or end episodes sooner (a time limit); start again with --output out --force"
    )
    _conf(tmp_path, {"buffer_size": 1000, "learning_starts": 50})
    train.main([*argv, "--force"])  # the corrected run goes ahead in the same folder


def test_a_diverged_policy_stops_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A learning rate of 1e30 sends SAC's weights to NaN at its first update: one line, not torch's traceback."""
    pytest.importorskip("mujoco")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sac.yml").write_text(
        "goalenvs/FetchReach-v0:\n  n_timesteps: 2000\n  buffer_size: 10000\n  batch_size: 32\n"
        "  learning_rate: 1.0e+30\n  learning_starts: 100\n  policy_kwargs: {net_arch: [16]}\n"
    )
    argv = ["--env", "goalenvs/FetchReach-v0", "--algo", "sac", "--conf-file", "sac.yml", "--output", "out",
            "--no-progress", "--no-gif", "--eval-episodes", "2"]  # fmt: skip
    line = fails(capsys, train.main, argv)
    assert line == (
        f"{PREFIX}training diverged by 101 steps: the policy's weights are no longer finite; lower the "
        "learning rate in sac.yml and start again with --output out --force"
    )
