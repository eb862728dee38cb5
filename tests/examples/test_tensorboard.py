"""``--tensorboard DIR`` in both training scripts: what is written, one folder per run, resume, refusals.

The events are read back as TensorBoard reads them (``EventAccumulator``, which hides what a stopped
session wrote after the step a resumed one purges from) and, to see that nothing was removed, with
that purge turned off.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("tensorboard")
pytest.importorskip("torch")
pytest.importorskip("mujoco")
pytest.importorskip("matplotlib")
pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")
pytest.importorskip("imageio")
pytest.importorskip("yaml")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

import her_ddpg  # noqa: E402
import sb3_run  # noqa: E402
import train  # noqa: E402

from tests.examples.folder_checks import fails, snapshot  # noqa: E402

# her_ddpg.py: 2 envs, 3 cycles of 2 updates per epoch (300 env steps), a tiny network: seconds.
TINY = ["--env", "goalenvs/FetchReach-v0", "--n-envs", "2", "--n-cycles", "3", "--n-batches", "2",
        "--batch-size", "32", "--hidden", "16", "--layers", "2", "--buffer-size", "2000",
        "--eval-episodes", "3", "--save-freq", "1", "--no-gif"]  # fmt: skip
EPOCH_STEPS = 300
# Every tag her_ddpg.py writes, one point per epoch.
DDPG_TAGS = {
    "eval/success_rate", "eval/mean_reward", "rollout/ep_rew_mean", "rollout/success_rate",
    "train/critic_loss", "train/actor_loss", "train/q_mean", "train/q_target_mean", "train/n_updates",
    "time/env_steps_per_s", "time/updates_per_s", "time/wall_s", "time/cpu_s",
    *(f"time/t_{name}" for name in her_ddpg.TIMERS),
}  # fmt: skip
# What does not depend on the clock: equal, bit for bit, in a run and in the same run resumed.
LEARNED = sorted(tag for tag in DDPG_TAGS if not tag.startswith("time/"))
# train.py: DQN on BitFlip with 4 bits.
BITFLIP = ["--env", "goalenvs/BitFlip-v0", "--env-kwargs", '{"n_bits": 4}', "--no-progress", "--no-gif",
           "--eval-episodes", "5", "--eval-freq", "500", "--timesteps", "2000"]  # fmt: skip
# stable-baselines3's own scalars for DQN (learning starts at 1000 steps: train/ after that).
SB3_TAGS = {"rollout/ep_rew_mean", "rollout/ep_len_mean", "rollout/success_rate", "rollout/exploration_rate",
            "time/fps", "train/loss", "train/learning_rate"}  # fmt: skip


def scalars(folder: Path, purge: bool = True) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series under ``folder``: (step, value) pairs, as TensorBoard shows them (``purge``:
    what a resumed session purged is hidden) or as they are on disk."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0}, purge_orphaned_data=purge)
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def steps(series: dict[str, list[tuple[int, float]]], tag: str) -> list[int]:
    return [step for step, _ in series[tag]]


def event_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("events.out.tfevents.*"))


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


# ------------------------------------------------------------------------------ her_ddpg.py
def test_her_ddpg_writes_every_epoch_to_a_folder_of_its_own(tmp_path: Path) -> None:
    out, tb = tmp_path / "run", tmp_path / "tb"
    her_ddpg.main([*TINY, "--epochs", "2", "--output", str(out), "--tensorboard", str(tb)])
    folder = tb / "run_1"  # the run folder's name, numbered as stable-baselines3 numbers its runs
    assert json.loads((out / "config.json").read_text())["tensorboard"] == str(folder)
    assert len(event_files(folder)) == 1
    series = scalars(folder)
    assert set(series) == DDPG_TAGS
    for tag in DDPG_TAGS:
        assert steps(series, tag) == [EPOCH_STEPS, 2 * EPOCH_STEPS], (
            tag
        )  # one point per epoch, at its env steps
        assert all(math.isfinite(value) for _, value in series[tag]), tag
    rows = _csv(out / "eval.csv")
    assert [v for _, v in series["eval/success_rate"]] == pytest.approx(
        [float(r["success_rate"]) for r in rows]
    )
    assert [v for _, v in series["train/n_updates"]] == [6, 12]
    assert all(-50 <= v <= 0 for _, v in series["eval/mean_reward"] + series["rollout/ep_rew_mean"])
    assert all(v > 0 for _, v in series["train/critic_loss"] + series["time/env_steps_per_s"])
    # Another run in the same folder (--force) writes to a new TensorBoard folder; the first stays as it was.
    first = snapshot(tb)
    her_ddpg.main([*TINY, "--epochs", "1", "--output", str(out), "--force", "--tensorboard", str(tb)])
    assert sorted(p.name for p in tb.iterdir()) == ["run_1", "run_2"]
    assert {name: data for name, data in snapshot(tb).items() if name.startswith("run_1")} == first
    assert steps(scalars(tb / "run_2"), "eval/success_rate") == [EPOCH_STEPS]


def test_her_ddpg_resume_goes_on_in_the_same_folder_without_a_step_twice(
    tmp_path, monkeypatch, capsys
) -> None:
    out, tb = tmp_path / "run", tmp_path / "tb"
    tb.mkdir()
    (tb / "notes.txt").write_text("mine")
    import workers

    real_save = workers.Run.save

    def ctrl_c_in_the_second_checkpoint(self: workers.Run, epoch: int, state) -> None:
        if epoch == 2:  # epoch 2 is in TensorBoard (and eval.csv), its checkpoint is not
            raise KeyboardInterrupt
        real_save(self, epoch, state)

    monkeypatch.setattr(workers.Run, "save", ctrl_c_in_the_second_checkpoint)
    with pytest.raises(SystemExit) as exc:
        her_ddpg.main([*TINY, "--epochs", "3", "--output", str(out), "--tensorboard", str(tb)])
    assert exc.value.code == 130
    monkeypatch.undo()
    folder = tb / "run_1"
    stopped = scalars(folder)
    assert steps(stopped, "eval/success_rate") == [EPOCH_STEPS, 2 * EPOCH_STEPS]
    written = snapshot(tb)
    capsys.readouterr()

    # Another --tensorboard than the run's is one line, and nothing is written anywhere.
    before = snapshot(out)
    line = fails(capsys, her_ddpg.main, ["--resume", str(out), "--tensorboard", str(tmp_path / "other")])
    assert line == (
        f"her_ddpg.py: error: --tensorboard: this run writes its TensorBoard events to {folder} (recorded in "
        f"{out / 'config.json'}), not in {tmp_path / 'other'}; accepted: no --tensorboard with --resume, or "
        f"--tensorboard {tb}"
    )
    assert snapshot(out) == before and not (tmp_path / "other").exists()

    her_ddpg.main(["--resume", str(out), "--no-gif"])  # from the epoch-1 checkpoint to the 3 epochs
    shown = scalars(folder)
    for tag in DDPG_TAGS:
        assert steps(shown, tag) == [EPOCH_STEPS, 2 * EPOCH_STEPS, 3 * EPOCH_STEPS], tag
    for tag in LEARNED:  # epoch 2 again, bit for bit: the stopped session's points are hidden, not mixed in
        assert shown[tag][:2] == stopped[tag], tag
    on_disk = scalars(folder, purge=False)
    assert steps(on_disk, "eval/success_rate") == [
        EPOCH_STEPS,
        2 * EPOCH_STEPS,
        2 * EPOCH_STEPS,
        3 * EPOCH_STEPS,
    ]
    assert {
        name: data for name, data in snapshot(tb).items() if name in written
    } == written  # nothing removed
    assert (tb / "notes.txt").read_text() == "mine" and sorted(p.name for p in tb.iterdir()) == [
        "notes.txt",
        "run_1",
    ]
    assert len(event_files(folder)) == 2  # one per session

    # --tensorboard naming the run's own DIR is accepted; the run goes on in the same folder.
    her_ddpg.main(["--resume", str(out), "--epochs", "4", "--no-gif", "--tensorboard", str(tb)])
    assert steps(scalars(folder), "train/actor_loss") == [EPOCH_STEPS * e for e in (1, 2, 3, 4)]
    assert json.loads((out / "config.json").read_text())["tensorboard"] == str(folder)


def test_her_ddpg_run_without_tensorboard_gets_it_on_resume(tmp_path: Path) -> None:
    out, tb = tmp_path / "run", tmp_path / "tb"
    her_ddpg.main([*TINY, "--epochs", "1", "--output", str(out)])
    assert json.loads((out / "config.json").read_text())["tensorboard"] is None
    her_ddpg.main(["--resume", str(out), "--epochs", "2", "--no-gif", "--tensorboard", str(tb)])
    assert steps(scalars(tb / "run_1"), "eval/success_rate") == [2 * EPOCH_STEPS]  # from the resumed epoch on
    assert json.loads((out / "config.json").read_text())["tensorboard"] == str(tb / "run_1")
    # TensorBoard reads a folder's event files in the order of their names: the second, then a counter of
    # this process that sorts 10 before 9. Resumed in the same second, the later session could come first.
    time.sleep(1.0 - time.time() % 1.0)
    her_ddpg.main(["--resume", str(out), "--epochs", "3", "--no-gif"])  # kept: no option needed
    assert steps(scalars(tb / "run_1"), "eval/success_rate") == [2 * EPOCH_STEPS, 3 * EPOCH_STEPS]


# ------------------------------------------------------------------------------ train.py
def test_train_writes_sb3_scalars_and_the_evaluations_and_resumes_in_the_same_folder(
    tmp_path, monkeypatch, capsys
) -> None:
    out, tb = tmp_path / "run", tmp_path / "tb"
    train.main([*BITFLIP, "--stop-at", "1000", "--output", str(out), "--tensorboard", str(tb)])
    folder = tb / "run_1"
    assert json.loads((out / "run.json").read_text())["tensorboard"] == str(folder)
    first = scalars(folder)
    assert SB3_TAGS - {"train/loss", "train/learning_rate"} <= set(first)
    assert steps(first, "eval/success_rate") == steps(first, "eval/mean_reward") == [500, 1000]

    real_evaluate = sb3_run.EvalSuccess.evaluate

    def ctrl_c_after_the_evaluation_at_1500(self: sb3_run.EvalSuccess) -> None:
        real_evaluate(self)  # recorded and dumped, then the run is stopped before a checkpoint
        if self.model.num_timesteps >= 1500:
            raise KeyboardInterrupt

    monkeypatch.setattr(sb3_run.EvalSuccess, "evaluate", ctrl_c_after_the_evaluation_at_1500)
    with pytest.raises(SystemExit) as exc:
        train.main(["--resume", str(out), "--no-progress", "--no-gif"])
    assert exc.value.code == 130
    monkeypatch.undo()
    assert steps(scalars(folder), "eval/success_rate") == [500, 1000, 1500]
    written = snapshot(tb)
    capsys.readouterr()

    before = snapshot(out)
    line = fails(capsys, train.main, ["--resume", str(out), "--tensorboard", str(tmp_path / "other")])
    assert line.startswith(
        "train.py: error: argument --tensorboard: this run writes its TensorBoard events to "
    )
    assert snapshot(out) == before and not (tmp_path / "other").exists()

    train.main(["--resume", str(out), "--no-progress", "--no-gif"])  # from the checkpoint at 1000 steps
    shown = scalars(folder)
    assert SB3_TAGS | {"eval/success_rate", "eval/mean_reward"} <= set(shown)
    rows = _csv(out / "eval.csv")
    assert steps(shown, "eval/success_rate") == [int(r["timesteps"]) for r in rows] == [500, 1000, 1500, 2000]
    assert [v for _, v in shown["eval/success_rate"]] == pytest.approx(
        [float(r["success_rate"]) for r in rows]
    )
    for tag, series in shown.items():  # no step twice, in any of stable-baselines3's series either
        assert steps(shown, tag) == sorted(set(steps(shown, tag))), tag
        assert all(math.isfinite(v) for _, v in series), tag
    assert steps(scalars(folder, purge=False), "eval/success_rate") == [500, 1000, 1500, 1500, 2000]
    assert {
        name: data for name, data in snapshot(tb).items() if name in written
    } == written  # nothing removed
    assert sorted(p.name for p in tb.iterdir()) == ["run_1"]


def test_train_run_without_tensorboard_gets_it_on_resume(tmp_path: Path) -> None:
    out, tb = tmp_path / "run", tmp_path / "tb"
    train.main([*BITFLIP, "--stop-at", "1000", "--output", str(out)])
    assert json.loads((out / "run.json").read_text())["tensorboard"] is None
    train.main(["--resume", str(out), "--no-progress", "--no-gif", "--tensorboard", str(tb)])
    assert steps(scalars(tb / "run_1"), "eval/success_rate") == [1500, 2000]
    assert json.loads((out / "run.json").read_text())["tensorboard"] == str(tb / "run_1")


# ------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("script", ["her_ddpg", "train"])
@pytest.mark.parametrize("case", ["a-file", "under-a-file", "unmakeable", "empty"])
def test_a_bad_tensorboard_value_is_one_line_and_nothing_is_written(script, case, tmp_path, capsys) -> None:
    if case == "unmakeable" and not Path("/proc/self").is_dir():
        pytest.skip("needs Linux's /proc, where no folder can be made (its mode bits let root write)")
    main, argv, prefix = {
        "her_ddpg": (her_ddpg.main, [*TINY, "--epochs", "1"], "her_ddpg.py: error: "),
        "train": (train.main, BITFLIP, "train.py: error: "),
    }[script]
    mine = tmp_path / "mine.txt"
    mine.write_text("mine")
    value, message = {
        "a-file": (str(mine), f"--tensorboard: {mine} is a file, not a folder; accepted: a folder"),
        "under-a-file": (
            str(mine / "tb"),
            f"--tensorboard: {mine / 'tb'} cannot be made in {mine} (Not a directory)",
        ),
        "unmakeable": ("/proc/goalenvs-tb", "--tensorboard: /proc/goalenvs-tb cannot be made in /proc ("),
        "empty": ("", "--tensorboard: '' is not accepted: expected a folder's path"),
    }[case]
    out = tmp_path / "out"
    line = fails(capsys, main, [*argv, "--output", str(out), "--tensorboard", value])
    assert line.startswith(prefix) and message in line, line
    assert not out.exists() and mine.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_her_ddpg_evaluate_refuses_tensorboard(tmp_path, capsys) -> None:
    line = fails(
        capsys, her_ddpg.main, ["--resume", str(tmp_path), "--evaluate", "3", "--tensorboard", str(tmp_path)]
    )
    assert (
        line
        == "her_ddpg.py: error: --tensorboard: --evaluate writes nothing; accepted: --evaluate without --tensorboard"
    )
