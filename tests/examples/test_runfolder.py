"""examples/runfolder.py on its own: the lock, the manifest, whole checkpoints, atomic writes, settings.

The training scripts' tests (test_her_ddpg_failures.py, test_train_cli.py) check the same rules
through the scripts; these pin the module's edges that a script run cannot reach on demand.
"""

from __future__ import annotations

import errno
import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

import runfolder  # noqa: E402
from runfolder import Range, RunError, RunFolder, check_settings, write_atomic  # noqa: E402

OUTPUTS = ("config.json", "eval.csv")


def new(path: Path, force: bool = False) -> RunFolder:
    return RunFolder.create(path, force=force, outputs=OUTPUTS, script="t.py")


def files(*names: str):
    return {name: (lambda p, name=name: p.write_text(name)) for name in names}


# ------------------------------------------------------------------------------ the lock
def test_a_second_holder_is_refused_even_in_the_same_process(tmp_path: Path) -> None:
    with new(tmp_path / "run"):
        with pytest.raises(RunError) as exc:
            RunFolder.open(tmp_path / "run", outputs=OUTPUTS, script="t.py")
        assert str(exc.value) == (
            f"{tmp_path / 'run'} is in use by another process (pid {os.getpid()}); wait for it to end, "
            "or choose another --output"
        )
    RunFolder.open(tmp_path / "run", outputs=OUTPUTS, script="t.py").close()  # released on close


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            sys.path.insert(0, {str(EXAMPLES)!r})
            from runfolder import RunFolder
            RunFolder.create(__import__("pathlib").Path({str(out)!r}), force=False, outputs=[], script="t.py")
            print("held", flush=True)
            time.sleep(600)
        """)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunError, match=f"in use by another process \\(pid {holder.pid}\\)"):
            RunFolder.open(out, outputs=OUTPUTS, script="t.py")
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    with RunFolder.open(out, outputs=OUTPUTS, script="t.py"):
        assert (out / ".lock").read_text().strip() == str(os.getpid())


def test_two_processes_starting_one_folder_at_once_one_wins(tmp_path: Path) -> None:
    """Started together into a folder that does not exist yet: exactly one run owns it."""
    out = tmp_path / "run"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(EXAMPLES)!r})
        from pathlib import Path
        from runfolder import RunError, RunFolder
        while time.time() < {time.time() + 1.5}:  # start together
            pass
        try:
            folder = RunFolder.create(Path({str(out)!r}), force=False, outputs=["eval.csv"], script="t.py")
        except RunError as exc:
            print("refused:", exc)
            sys.exit(2)
        folder.write("eval.csv", "mine")
        time.sleep(1.0)
        print("ran")
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(4)
    ]
    results = [(p.wait(timeout=60), p.stdout.read().strip()) for p in procs]
    for p in procs:
        p.stdout.close()
    assert sorted(code for code, _ in results) == [0, 2, 2, 2], results
    for code, text in results:
        if code == 2:  # the winner holds the folder until it ends: each loser is told so
            assert "is in use by another process" in text, text


def test_a_run_starting_this_instant_is_named_as_in_use_not_as_content(tmp_path: Path) -> None:
    """The winner of a race holds the lock and is writing its manifest aside: a loser that looks then
    is told the folder is in use (by the winner's pid), not that it holds ..run-manifest.json.tmp-N."""
    out = tmp_path / "run"
    with new(out):
        (out / "..run-manifest.json.tmp-123").write_text("{")
        with pytest.raises(RunError, match=f"is in use by another process \\(pid {os.getpid()}\\)"):
            new(out)
    new(out).close()  # once free, the bookkeeping of a start that died is no content either


# ------------------------------------------------------------------------------ starting and --force
def test_a_refused_start_leaves_no_trace(tmp_path: Path) -> None:
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "keep.txt").write_text("mine")
    with pytest.raises(RunError, match="is not empty"):
        new(tmp_path / "user")
    assert sorted(p.name for p in (tmp_path / "user").iterdir()) == ["keep.txt"]
    (tmp_path / "afile").write_text("x")
    with pytest.raises(RunError, match="is a file"):
        new(tmp_path / "afile")
    assert (tmp_path / "afile").read_text() == "x"


def test_force_removes_the_manifest_names_and_keeps_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with new(out) as folder:
        folder.write("eval.csv", "old curve")
        folder.save_checkpoint(5, files("a.bin"), {"k": 1})
    (out / "mine.txt").write_text("mine")
    (out / "checkpoints" / "notes.txt").write_text("mine too")
    (out / "checkpoints" / "my-plots").mkdir()  # the user's own folder
    (out / "checkpoints" / "my-plots" / "a.txt").write_text("mine")
    (out / ".eval.csv.tmp-999").write_text("half")  # left by a killed write
    with new(out, force=True) as folder:
        assert folder.checkpoints() == []
        assert sorted(p.name for p in out.iterdir()) == [
            ".lock",
            ".run-manifest.json",
            "checkpoints",
            "mine.txt",
        ]
        assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["my-plots", "notes.txt"]
        assert (out / "checkpoints" / "my-plots" / "a.txt").read_text() == "mine"


def test_force_refuses_another_scripts_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    RunFolder.create(out, force=False, outputs=OUTPUTS, script="other.py").close()
    (out / "x").write_text("x")
    with pytest.raises(RunError, match="is a run folder of other.py, not of t.py"):
        new(out, force=True)


def test_a_damaged_manifest_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    new(out).close()
    (out / ".run-manifest.json").write_text("{not json")
    with pytest.raises(RunError) as exc:
        RunFolder.open(out, outputs=OUTPUTS, script="t.py")
    assert "\n" not in str(exc.value) and ".run-manifest.json is damaged (JSONDecodeError)" in str(exc.value)


# ------------------------------------------------------------------------------ checkpoints
def test_a_failing_writer_leaves_the_previous_checkpoint_and_no_temporary(tmp_path: Path) -> None:
    with new(tmp_path / "run") as folder:
        folder.save_checkpoint(1, files("a.bin", "b.bin"), {"epoch": 1})

        def full_disk(path: Path) -> None:
            path.write_text("half")
            raise OSError(errno.ENOSPC, "No space left on device")

        with pytest.raises(OSError, match="No space left"):
            folder.save_checkpoint(2, {"a.bin": full_disk}, {"epoch": 2})
        assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["000000000001"]
        latest = folder.latest_checkpoint()
        assert latest is not None and latest.tag == 1 and latest.meta == {"epoch": 1}
        assert (latest.path / "b.bin").read_text() == "b.bin"


def test_every_file_of_a_checkpoint_is_fsynced_before_its_rename(tmp_path: Path, monkeypatch) -> None:
    """The rename switches the checkpoint in: a power cut after it must find every byte on disk. So each
    file, the manifest and the folder itself are fsynced before the rename, and the parent after it."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst) -> None:
        events.append(("rename", str(src)))
        real_replace(src, dst)

    monkeypatch.setattr(runfolder.os, "fsync", fsync)
    monkeypatch.setattr(runfolder.os, "replace", replace)
    monkeypatch.setattr(
        runfolder.os, "rename", lambda src, dst: (events.append(("rename", str(src))), real_rename(src, dst))
    )
    with new(tmp_path / "run") as folder:
        events.clear()
        folder.save_checkpoint(1, files("a.bin", "b.bin"), {})
    root = str((tmp_path / "run" / "checkpoints").resolve())
    switch = next(
        i for i, (kind, path) in enumerate(events) if kind == "rename" and Path(path).name.startswith(".tmp-")
    )
    tmp = str(Path(events[switch][1]).resolve())
    synced = {path for kind, path in events[:switch] if kind == "fsync"}
    assert {f"{tmp}/a.bin", f"{tmp}/b.bin", tmp} <= synced, events
    assert any(path.startswith(f"{tmp}/.MANIFEST.json.tmp-") for path in synced), events
    assert ("fsync", root) in events[switch:]


def test_the_newest_whole_checkpoint_wins_and_a_temporary_is_ignored(tmp_path: Path) -> None:
    """A kill between the rename and the removal of the older one leaves two whole checkpoints."""
    import shutil

    out = tmp_path / "run"
    with new(out) as folder:
        folder.save_checkpoint(1, files("a.bin"), {})
        shutil.copytree(out / "checkpoints" / "000000000001", out / "checkpoints" / "keep")
        folder.save_checkpoint(2, files("a.bin"), {})
        (out / "checkpoints" / "keep").rename(out / "checkpoints" / "000000000001")
        (out / "checkpoints" / ".tmp-000000000003-1").mkdir()  # a write that was killed
        assert folder.latest_checkpoint().tag == 2
        folder.save_checkpoint(3, files("a.bin"), {})  # removes the older one and the temporary
        assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["000000000003"]
        assert folder.save_checkpoint(3, files("other.bin"), {}).tag == 3  # the same tag: kept, not rewritten
        assert sorted(p.name for p in (out / "checkpoints" / "000000000003").iterdir()) == [
            "MANIFEST.json",
            "a.bin",
        ]


def test_a_checkpoint_without_or_with_a_damaged_manifest_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with new(out) as folder:
        folder.save_checkpoint(1, files("a.bin"), {})
        manifest = out / "checkpoints" / "000000000001" / "MANIFEST.json"
        manifest.write_text(json.dumps({"files": {}}))
        with pytest.raises(RunError, match=r"MANIFEST.json is damaged \(KeyError\)"):
            folder.latest_checkpoint()
        manifest.unlink()
        with pytest.raises(RunError, match="has no MANIFEST.json; it is not a whole checkpoint"):
            folder.latest_checkpoint()


# ------------------------------------------------------------------------------ atomic writes
def test_a_failed_atomic_write_keeps_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "run.json"
    write_atomic(target, "old")

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runfolder.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


# ------------------------------------------------------------------------------ settings
@pytest.mark.parametrize(
    ("value", "ok"),
    [(0.5, True), (0, True), (0.0, True), (1.0, False), (-0.1, False), (math.nan, False), (math.inf, False),
     (True, False), ("0.5", False), (None, False), (10**400, False)],
)  # fmt: skip
def test_a_range_accepts_only_finite_numbers_inside_it(value, ok) -> None:
    spec = {"gamma": Range(float, 0.0, 1.0, high_open=True)}
    if ok:
        check_settings({"gamma": value}, spec, "option")
    else:
        with pytest.raises(RunError) as exc:
            check_settings({"gamma": value}, spec, "option")
        assert (
            str(exc.value)
            == f"--gamma: {value!r} is not accepted; accepted: a finite number, 0.0 <= gamma < 1.0"
        )


def test_an_integer_range_refuses_floats_and_names_the_file_and_key() -> None:
    with pytest.raises(RunError) as exc:
        check_settings({"epochs": 2.0}, {"epochs": Range(int, 1)}, "--conf-file: c.yml, entry 'x', key")
    assert (
        str(exc.value)
        == "--conf-file: c.yml, entry 'x', key epochs: 2.0 is not accepted; accepted: an integer, 1 <= epochs"
    )


def test_a_reader_whose_checkpoint_is_replaced_meanwhile_reads_the_newer_one(
    tmp_path: Path, monkeypatch
) -> None:
    """--evaluate and enjoy.py read without the lock: the writer may switch in a newer checkpoint and
    remove the one being read. That is no damage: the reader looks again."""
    out = tmp_path / "run"
    with new(out) as writer:
        writer.save_checkpoint(1, files("a.bin"), {"epoch": 1})
        reader = RunFolder.read_only(out, "t.py", OUTPUTS)
        first = reader.latest_checkpoint()
        real_sha256 = runfolder.sha256

        def racing(path: Path) -> str:
            if path.parent.name == "000000000001":  # while the reader checks checkpoint 1...
                writer.save_checkpoint(2, files("a.bin"), {"epoch": 2})  # ...2 is switched in, 1 removed
            return real_sha256(path)

        monkeypatch.setattr(runfolder, "sha256", racing)
        assert reader.latest_checkpoint().meta == {"epoch": 2}
        with pytest.raises(RunError) as exc:
            first.load("a.bin", lambda path: path.read_text())
        assert (
            str(exc.value) == f"checkpoint {first.path} was replaced while being read; run the command again"
        )


class _InterruptedFile:
    """A file whose second write is hit by Ctrl-C, as a signal landing inside a library's writer."""

    def __init__(self) -> None:
        self.writes = 0

    def write(self, data: bytes) -> int:
        self.writes += 1
        if self.writes == 2:
            raise KeyboardInterrupt
        return len(data)

    def flush(self) -> None:
        pass


def test_ctrl_c_inside_torch_save_still_ends_the_run_as_an_interrupt(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # torch.save turns the KeyboardInterrupt into "RuntimeError: ... unexpected pos" from its zip writer's
    # clean-up; the run must still end with the one interrupt line and status 130, not a traceback.
    torch = pytest.importorskip("torch")

    def body() -> None:
        torch.save({"w": torch.zeros(3)}, _InterruptedFile())

    with pytest.raises(SystemExit) as stop:
        runfolder.run_main("train.py", body, lambda: "at step 7; resume with --resume")
    assert stop.value.code == 130
    assert capsys.readouterr().err == "train.py: interrupted at step 7; resume with --resume\n"


def test_a_real_error_is_not_taken_for_an_interrupt() -> None:
    def body() -> None:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        runfolder.run_main("train.py", body, lambda: "")


def test_csv_text_has_a_column_per_key_in_first_seen_order_and_lf_line_ends() -> None:
    text = runfolder.csv_text([{"epoch": 1, "success": 0.5}, {"epoch": 2, "extra": "a,b"}])
    assert text == 'epoch,success,extra\n1,0.5,\n2,,"a,b"\n'
