"""The run folder of a training script: one process at a time, whole checkpoints, the user's files kept.

Both ``examples/train.py`` and ``examples/her_ddpg.py`` keep their outputs through this module, so the
rules are written once:

* **Settings are checked before the first write.** :class:`Range` gives every numeric setting its
  accepted values; :func:`check_settings` names the bad one (with the file and key it came from).
* **One process per folder.** :meth:`RunFolder.create` and :meth:`RunFolder.open` take an advisory
  lock (``fcntl.flock`` on ``.lock``, which holds the holder's pid) before anything is written; a
  second process is refused at once, naming that pid. The kernel drops the lock when its holder dies
  (``kill -9`` included), so a stale lock is simply taken over.
* **Nothing of the user's is deleted.** ``.run-manifest.json`` names everything a run wrote here (the
  name is recorded before the file is written). ``--force`` removes those names and nothing else, and
  refuses when a file the script would write is there but was not written by a run.
* **A checkpoint is one atomic unit.** Its files are written to ``checkpoints/.tmp-<tag>-<pid>/`` with
  a ``MANIFEST.json`` (size and SHA-256 of each file, the run's id, the script's metadata), fsynced,
  and switched in by one rename; only then are older checkpoints removed. Loading checks the run id,
  sizes and hashes, so a damaged or foreign checkpoint is refused with one line, never half-loaded.
* **Every file a user's work depends on is written aside, fsynced and renamed** (:func:`write_atomic`).
* **A folder beside the run (``--tensorboard DIR``) is checked before the first write too**
  (:func:`check_new_folder`), and each run writes in a subfolder of its own (:func:`make_numbered_folder`),
  which a resumed run goes on writing in; nothing else in it is touched.

Errors a user can act on are :class:`RunError` (one line: which file, what is wrong, what to do); the
scripts print them as ``<script>: error: <message>`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import errno
import hashlib
import io
import json
import math
import os
import re
import shutil
import signal
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

try:
    import fcntl
except ImportError:  # Windows: no flock; the folder is then not locked (said in docs/training.md)
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "ArgumentParser",
    "Checkpoint",
    "Range",
    "RunError",
    "RunFolder",
    "at_least",
    "check_capacity",
    "check_new_folder",
    "check_settings",
    "csv_text",
    "folder_path",
    "fsync_dir",
    "make_numbered_folder",
    "resumed_folder",
    "run_main",
    "sigterm_as_interrupt",
    "write_atomic",
]

_T = TypeVar("_T")

LOCK = ".lock"
MANIFEST = ".run-manifest.json"
CHECKPOINTS = "checkpoints"
CHECKPOINT_MANIFEST = "MANIFEST.json"
_TAG_DIGITS = 12


class RunError(Exception):
    """A problem the user can act on, said in one line (the scripts exit with status 2)."""


# ---------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Range:
    """The accepted values of a numeric setting: ``kind`` int or float, within ``[low, high]``.

    ``low_open`` / ``high_open`` exclude the bound. A float setting also accepts an int (``gamma: 1``
    in YAML); neither accepts a bool, NaN or infinity.
    """

    kind: type = float
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def describe(self, name: str) -> str:
        what = "an integer" if self.kind is int else "a finite number"
        lo = "" if self.low is None else f"{self.low} {'<' if self.low_open else '<='} "
        hi = "" if self.high is None else f" {'<' if self.high_open else '<='} {self.high}"
        return f"{what}, {lo}{name}{hi}" if lo or hi else what

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind is int and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))


def check_settings(values: Mapping[str, Any], ranges: Mapping[str, Range], where: str) -> None:
    """Raise :class:`RunError` naming the first value outside its range; ``where`` says where it came from.

    ``where`` is e.g. ``"--gamma"``-style (``"option"``: each key is named as its option) or a file
    and entry (``"--conf-file: conf.yml, entry 'goalenvs/FetchPush-v0', key"``). Keys without a range
    are not checked here.
    """
    for key, value in values.items():
        spec = ranges.get(key)
        if spec is None or spec.accepts(value):
            continue
        name = f"--{key.replace('_', '-')}" if where == "option" else f"{where} {key}"
        raise RunError(f"{name}: {value!r} is not accepted; accepted: {spec.describe(key)}")


def check_capacity(buffer_size: int, n_envs: int, horizon: int | None, option: str) -> None:
    """Refuse a replay storage too small to hold one whole episode of every env (HER samples whole
    episodes: ``buffer_size // n_envs`` steps per env must reach the episode length ``horizon``).

    ``option`` names where ``buffer_size`` came from. Without a known ``horizon`` nothing is checked.
    """
    if horizon is not None and buffer_size // n_envs < horizon:
        raise RunError(
            f"{option}: {buffer_size} is not accepted; accepted: at least n_envs x the episode length = "
            f"{n_envs} x {horizon} = {n_envs * horizon} (the storage keeps buffer_size // n_envs steps per "
            "env, and HER samples only whole episodes)"
        )


# ---------------------------------------------------------------------------------------- folders beside the run
def check_new_folder(path: Path, option: str) -> None:
    """Raise :class:`RunError` unless ``path`` is a folder, or one that can be made (its nearest existing
    ancestor is a folder this process may write in); writes nothing. ``option`` names where it came from."""
    accepted = "accepted: a folder (made if it does not exist)"
    if os.path.lexists(path) and not path.is_dir():
        raise RunError(f"{option}: {path} is a file, not a folder; {accepted}")
    ancestor = path
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise RunError(f"{option}: {path} cannot be made, as {ancestor} is a file; {accepted}")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise RunError(f"{option}: {path} cannot be written, as {ancestor} is not writable; {accepted}")


def resumed_folder(recorded: Any, given: Path | None, option: str, resume: str, file: Path) -> Path | None:
    """The folder beside the run (``--tensorboard``) that a resumed run goes on writing in; writes nothing.

    ``recorded``: the run's own, as its settings ``file`` holds it (None: it had none); ``given``: this
    command's ``option``, which must then be that folder's parent, or be left out; ``resume`` names the
    resume option in errors. Returns the recorded folder, checked; None for a run that had none (a new
    one is then made in ``given``, if given).
    """
    flag = option.split()[-1]  # "argument --tensorboard" -> "--tensorboard"
    if recorded is None:
        if given is not None:
            check_new_folder(given, option)
        return None
    if not isinstance(recorded, str) or not recorded:
        raise RunError(
            f"{resume}: {file}, key tensorboard: {recorded!r} is not accepted; accepted: a folder's path or null"
        )
    path = Path(recorded)
    if given is not None and given.resolve() != path.parent.resolve():
        raise RunError(
            f"{option}: this run writes its TensorBoard events to {path} (recorded in {file}), not in {given}; "
            f"accepted: no {flag} with --resume, or {flag} {path.parent}"
        )
    check_new_folder(path, f"{resume}: {file}, key tensorboard")
    return path


def folder_path(text: str) -> Path:
    """An argparse type: a folder's path (an empty one is refused: ``Path("")`` would be the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted: expected a folder's path")
    return Path(text)


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (what was wrong, what is accepted), exit status 2,
    without argparse's usage block; they name the script (a subcommand's parser too), as RunError's do."""

    def error(self, message: str) -> NoReturn:
        script = self.prog.split()[0]  # a subcommand's prog is "<script> <command>"
        self.exit(2, f"{script}: error: {' '.join(str(message).split())}\n")


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``; the error says what is accepted."""

    def parse(text: str) -> int:
        if text.lstrip("-").isdigit() and int(text) >= minimum:
            return int(text)
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted: expected an integer >= {minimum}")

    return parse


def csv_text(rows: list[dict[str, Any]]) -> str:
    """A curve's rows (one dict each) as the text of a CSV file: a column for every key of any row, in
    the order they first appear (a run resumed by a newer version may add columns: her_ddpg's t_sync)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(dict.fromkeys(key for row in rows for key in row)))
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def curve_png(steps: list[float], success: list[float], xlabel: str, title: str) -> bytes:
    """A success curve (success rate against ``steps``) as a PNG file's bytes (both scripts' plot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, success, marker="o", markersize=3)
    ax.set(xlabel=xlabel, ylabel="success rate", ylim=(-0.02, 1.02), title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    return png.getvalue()


def make_numbered_folder(parent: Path, name: str) -> Path:
    """Make ``parent/<name>_<N>`` and return it: N is one above the highest of the folders already named
    so (stable-baselines3's numbering of its TensorBoard runs), and a folder made by another process
    meanwhile is skipped, so no two runs share one."""
    parent.mkdir(parents=True, exist_ok=True)
    numbered = re.compile(re.escape(name) + r"_(\d+)")
    n = max((int(m.group(1)) for p in parent.iterdir() if (m := numbered.fullmatch(p.name))), default=0)
    while True:
        n += 1
        path = parent / f"{name}_{n}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path


# ---------------------------------------------------------------------------------------- atomic writes
def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename in it) to disk; a no-op where directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # Windows
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write ``path`` aside, fsync it and rename it over the old one: a crash leaves the old or the new file."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------- interrupts
@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (a scheduler's stop, ``kill``) ends the run as Ctrl-C does."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_main(
    script: str, body: Callable[[], _T], where: Callable[[], str], quiet_interrupt: bool = False
) -> _T:
    """Run a training script's ``body`` and end it the same way in every script.

    A :class:`RunError` (a user's mistake, a damaged or busy folder) prints one line and exits with
    status 2; Ctrl-C or SIGTERM prints one line ``<script>: interrupted <where()>`` and exits with 130;
    a failed write (an ``OSError`` with an errno: a full disk, a read-only file system) prints one
    line and exits with 1. ``where()`` says where the run stopped and how to go on from there.
    """
    try:
        with sigterm_as_interrupt():
            return body()
    except RunError as exc:
        print(f"{script}: error: {exc}", file=sys.stderr)
        raise SystemExit(getattr(exc, "exit_code", 2)) from None
    except KeyboardInterrupt:
        _interrupted(script, where, quiet_interrupt)
    except Exception as exc:
        # Ctrl-C inside a library's write can surface as the library's own clean-up error (torch.save
        # raises "RuntimeError: ... unexpected pos" from its zip writer): still an interrupt.
        if _raised_while_interrupted(exc):
            _interrupted(script, where, quiet_interrupt)
        if not isinstance(exc, OSError) or exc.errno is None:
            raise
        file = f" ({exc.filename})" if exc.filename else ""
        print(f"{script}: error: {exc.strerror}{file}; stopped {where()}", file=sys.stderr)
        raise SystemExit(1) from None


def _raised_while_interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while handling a KeyboardInterrupt (anywhere down its chain)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _interrupted(script: str, where: Callable[[], str], quiet: bool) -> NoReturn:
    if not quiet:
        print(f"{script}: interrupted {where()}", file=sys.stderr)
    raise SystemExit(130) from None


# ---------------------------------------------------------------------------------------- the folder
@dataclass(frozen=True)
class Checkpoint:
    """A whole checkpoint: ``path`` (``checkpoints/<tag>``), its ``tag`` and the script's ``meta``."""

    path: Path
    tag: int
    meta: dict[str, Any]

    def file(self, name: str) -> Path:
        return self.path / name

    def unfit(self, name: str, why: object) -> RunError:
        """The one-line error for a file of this checkpoint that is whole (its hash matches) but does not
        fit the run (another run's, or another version's). ``why``: the reason, or the exception."""
        # torch's state_dict error names the first mismatch on its second line: keep two lines, on one.
        text = " ".join(line.strip() for line in str(why).strip().splitlines()[:2])
        text = text if len(text) <= 300 else text[:297] + "..."
        return RunError(
            f"checkpoint {self.path}: {name} does not fit this run ({text}); was it copied from another run "
            "or written by another version? Start again with --force"
        )

    def load(self, name: str, load: Callable[[Path], _T]) -> _T:
        """``load(path)`` of the file ``name``; whatever it raises becomes :meth:`unfit`'s one line."""
        try:
            return load(self.file(name))
        except Exception as exc:  # unpickling and torch can raise almost anything on foreign content
            if not self.path.exists():  # read without the lock, and replaced by a newer checkpoint meanwhile
                raise RunError(
                    f"checkpoint {self.path} was replaced by a newer one while being read; run the command again"
                ) from None
            raise self.unfit(name, f"{type(exc).__name__}: {exc}") from None


def _in_use(path: Path, holder: str) -> RunError:
    return RunError(
        f"{path} is in use by another process (pid {holder}); wait for it to end, or choose another --output"
    )


def _describe(names: list[str]) -> str:
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


class RunFolder:
    """An output folder held by this process (see the module docstring); use :meth:`create` or :meth:`open`.

    ``script`` names the script (``"her_ddpg.py"``): a folder of another script is refused.
    ``outputs`` are the names the script may write at the top level (besides ``checkpoints``).
    """

    def __init__(self, path: Path, script: str, outputs: Iterable[str]) -> None:
        self.path, self.script = path, script
        self.outputs = frozenset(outputs) | {CHECKPOINTS}
        self.run_id = ""
        self._written: set[str] = set()
        self._lock_fd: int | None = None

    # ------------------------------------------------------------------ opening
    @classmethod
    def check_new(cls, path: Path, force: bool, outputs: Iterable[str], script: str) -> None:
        """Raise :class:`RunError` unless a new run may use ``path``; writes nothing."""
        folder = cls(path, script, outputs)
        folder._check_new(force, option="--output")

    def _check_new(self, force: bool, option: str) -> None:
        path = self.path
        if path.exists() and not path.is_dir():
            raise RunError(f"{option}: {path} is a file; accepted: a folder that is empty or does not exist")
        if not path.is_dir():
            return
        held = sorted(p.name for p in path.iterdir() if p.name not in (LOCK, MANIFEST))
        if not held and not (path / MANIFEST).exists():
            return
        manifest = self._read_manifest(missing_ok=True)
        if not force:
            if not held:  # only our bookkeeping: a run that stopped before its first output
                return
            raise RunError(
                f"{option}: {path} is not empty (it holds {_describe(held)}); pass --resume {path} to "
                "continue that run, --force to replace it, or another --output"
            )
        ours = set(manifest.get("files", [])) if manifest else set()
        if manifest and manifest.get("script") not in (None, self.script):
            raise RunError(
                f"--force: {path} is a run folder of {manifest['script']}, not of {self.script}; "
                "choose another --output"
            )
        clash = sorted((set(held) & self.outputs) - ours)
        if clash:
            raise RunError(
                f"--force: {path} holds {_describe(clash)}, which no run of {self.script} recorded writing "
                "(--force removes only a run's own files); move them away or choose another --output"
            )

    @classmethod
    def create(cls, path: Path, *, force: bool, outputs: Iterable[str], script: str) -> RunFolder:
        """Lock ``path`` (made if needed) for a new run; with ``force`` remove what an earlier run wrote there.

        The folder is checked before anything is written and again once locked (another process may
        have started a run in between). Files the user put there are never removed.
        """
        folder = cls(path, script, outputs)
        folder._check_new(force, option="--output")
        made = [p for p in (path, *path.parents) if not p.exists()]
        path.mkdir(parents=True, exist_ok=True)
        try:
            folder._lock()
            folder._check_new(force, option="--output")  # again: another run may have started meanwhile
        except BaseException:
            if folder._lock_fd is not None and made:  # a lock file of ours, in a folder this call made
                (path / LOCK).unlink(missing_ok=True)
            folder.close()
            for p in made:  # innermost first: leave no trace of a refused start (rmdir keeps a non-empty one)
                with contextlib.suppress(OSError):
                    p.rmdir()
            raise
        folder._remove_temporaries()
        old = folder._read_manifest(missing_ok=True)
        for name in sorted(set(old.get("files", [])) if old else ()):
            folder._remove_own(name)
        folder.run_id = uuid.uuid4().hex
        folder._written = {LOCK}
        folder._write_manifest()
        return folder

    @classmethod
    def open(cls, path: Path, *, outputs: Iterable[str], script: str, option: str = "--resume") -> RunFolder:
        """Lock the folder of an existing run of ``script`` (to resume it)."""
        folder = cls(path, script, outputs)
        if not path.is_dir():
            what = "does not exist" if not path.exists() else "is not a folder"
            raise RunError(f"{option}: {path} {what}; accepted: an output folder of {script}")
        manifest = folder._read_manifest(missing_ok=True)
        if manifest is None:
            raise RunError(
                f"{option}: {path} is not a run folder of {script} (it has no {MANIFEST}); "
                "accepted: the --output folder of a run"
            )
        if manifest.get("script") != script:
            raise RunError(f"{option}: {path} is a run folder of {manifest.get('script')}, not of {script}")
        folder._lock()
        folder._remove_temporaries()
        manifest = folder._read_manifest(missing_ok=False)  # as it is now that we hold the folder
        assert manifest is not None
        folder.run_id = manifest["run_id"]
        folder._written = set(manifest["files"])
        return folder

    @classmethod
    def read_only(
        cls, path: Path, script: str, outputs: Iterable[str], option: str = "--resume"
    ) -> RunFolder:
        """The folder of a run of ``script``, not locked: for reading a checkpoint while a run may go on."""
        folder = cls(path, script, outputs)
        manifest = folder._read_manifest(missing_ok=True) if path.is_dir() else None
        if manifest is None or manifest.get("script") != script:
            raise RunError(
                f"{option}: {path} is not a run folder of {script}; accepted: the --output folder of a run"
            )
        folder.run_id = manifest["run_id"]
        return folder

    def close(self) -> None:
        """Release the lock (the process's exit does too)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lock(self) -> None:
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
                    os.close(fd)
                    raise
                holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise _in_use(self.path, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    @staticmethod
    def check_free(path: Path) -> None:
        """Raise :class:`RunError` naming the pid of a live process that holds ``path``; writes nothing.

        For a script that does slow work (building a model) before :meth:`create` or :meth:`open`
        take the lock: a busy folder is refused at once. It holds a shared lock for an instant: a
        process taking the lock in that instant is refused as if the folder were in use.
        """
        if fcntl is None or not (path / LOCK).is_file():
            return
        try:
            fd = os.open(path / LOCK, os.O_RDONLY)
        except OSError:  # unreadable: the lock taken by create/open will say what is wrong
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
                raise
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            raise _in_use(path, holder) from None
        finally:
            os.close(fd)  # releases the shared lock

    # ------------------------------------------------------------------ manifest
    def _read_manifest(self, missing_ok: bool) -> dict[str, Any] | None:
        path = self.path / MANIFEST
        try:
            manifest = json.loads(path.read_bytes())
        except FileNotFoundError:
            if missing_ok:
                return None
            raise RunError(f"{path} is missing; this is not a run folder any more") from None
        except (ValueError, OSError) as exc:
            raise RunError(
                f"{path} is damaged ({type(exc).__name__}); delete it and the run's files by hand, or choose another --output"
            ) from None
        if not (
            isinstance(manifest, dict)
            and isinstance(manifest.get("files"), list)
            and isinstance(manifest.get("run_id"), str)
        ):
            raise RunError(f"{path} is damaged (not a manifest of {self.script}); choose another --output")
        return manifest

    def _write_manifest(self) -> None:
        text = json.dumps(
            {"script": self.script, "run_id": self.run_id, "files": sorted(self._written)}, indent=1
        )
        write_atomic(self.path / MANIFEST, text + "\n")

    def record(self, name: str) -> None:
        """Note ``name`` (a top-level entry) as written by this run, before it is written."""
        if name not in self._written:
            self._written.add(name)
            self._write_manifest()

    def write(self, name: str, data: bytes | str) -> Path:
        """Write the top-level file ``name`` atomically (recorded in the manifest first)."""
        self.record(name)
        write_atomic(self.path / name, data)
        return self.path / name

    def _remove_temporaries(self) -> None:
        """Remove the temporary files of :func:`write_atomic` that a killed process left (we hold the lock)."""
        for name in (*self.outputs, MANIFEST):
            for tmp in self.path.glob(f".{name}.tmp-*"):
                tmp.unlink(missing_ok=True)

    def _remove_own(self, name: str) -> None:
        """Remove an entry a run wrote; in ``checkpoints/`` only the checkpoints and their temporaries."""
        path = self.path / name
        if name in (LOCK, MANIFEST):
            return
        if name == CHECKPOINTS and path.is_dir():
            for child in path.iterdir():
                if child.name.isdigit() or child.name.startswith(".tmp-"):
                    shutil.rmtree(child, ignore_errors=True)
            with contextlib.suppress(OSError):
                path.rmdir()  # kept if the user put something there
        elif path.is_file() or path.is_symlink():
            path.unlink()

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(
        self, tag: int, files: Mapping[str, Callable[[Path], None]], meta: Mapping[str, Any]
    ) -> Checkpoint:
        """Write checkpoint ``tag`` as one unit and make it the latest; older ones are then removed.

        ``files`` maps each file name to a function that writes it to the given path. ``meta`` (JSON)
        is kept in the checkpoint's manifest. A crash at any moment leaves the previous checkpoint.
        """
        self.record(CHECKPOINTS)
        root = self.path / CHECKPOINTS
        root.mkdir(exist_ok=True)
        for stale in root.glob(".tmp-*"):  # left by a process that died mid-write (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        name = f"{tag:0{_TAG_DIGITS}d}"
        final, tmp = root / name, root / f".tmp-{name}-{os.getpid()}"
        if final.exists():  # this state is saved already (e.g. a periodic checkpoint at the last step);
            return read_checkpoint(
                final, self.script, self.run_id, verify=False
            )  # never delete it to rewrite it
        tmp.mkdir()
        try:
            hashes = {}
            for file_name, write in files.items():
                write(tmp / file_name)
                _fsync_file(tmp / file_name)
                hashes[file_name] = {
                    "bytes": (tmp / file_name).stat().st_size,
                    "sha256": _sha256(tmp / file_name),
                }
            manifest = {
                "script": self.script,
                "run_id": self.run_id,
                "tag": tag,
                "files": hashes,
                "meta": dict(meta),
            }
            write_atomic(tmp / CHECKPOINT_MANIFEST, json.dumps(manifest, indent=1) + "\n")
            fsync_dir(tmp)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        fsync_dir(root)
        for old in root.iterdir():
            if old.name.isdigit() and old.name != name:
                shutil.rmtree(old, ignore_errors=True)
        return Checkpoint(final, tag, dict(meta))

    def checkpoints(self) -> list[Path]:
        """The whole checkpoints in the folder, oldest first (normally one)."""
        root = self.path / CHECKPOINTS
        if not root.is_dir():
            return []
        return sorted(p for p in root.iterdir() if p.name.isdigit() and p.is_dir())

    def latest_checkpoint(self, verify: bool = True) -> Checkpoint | None:
        """The newest checkpoint, checked whole (every file's size and hash) and of this run; None if none.

        Raises :class:`RunError` when it is damaged or belongs to another run.
        """
        run_id = self.run_id if self.run_id else None
        for _ in range(3):
            found = self.checkpoints()
            if not found:
                return None
            try:
                return read_checkpoint(found[-1], self.script, run_id, verify)
            except (RunError, OSError):
                # A reader that does not hold the folder (--evaluate, enjoy.py) can see a checkpoint
                # removed under it once a newer one is whole: look again, rather than call it damaged.
                if found[-1].exists():
                    raise
        raise RunError(
            f"the checkpoints of {self.path} kept changing while being read; run the command again"
        )


def read_checkpoint(path: Path, script: str, run_id: str | None, verify: bool = True) -> Checkpoint:
    """The checkpoint in ``path``, its manifest checked (and, with ``verify``, each file's size and hash)."""
    fix = "start again with --force, or put back a copy of the folder"
    try:
        manifest = json.loads((path / CHECKPOINT_MANIFEST).read_bytes())
        files, meta, tag = manifest["files"], manifest["meta"], int(manifest["tag"])
    except FileNotFoundError:
        raise RunError(
            f"checkpoint {path} has no {CHECKPOINT_MANIFEST}; it is not a whole checkpoint: {fix}"
        ) from None
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise RunError(
            f"checkpoint {path}: {CHECKPOINT_MANIFEST} is damaged ({type(exc).__name__}): {fix}"
        ) from None
    if manifest.get("script") != script or (run_id is not None and manifest.get("run_id") != run_id):
        raise RunError(
            f"checkpoint {path} belongs to another run (run id {manifest.get('run_id')}, of "
            f"{manifest.get('script')}), not to this folder's run {run_id}: {fix}"
        )
    if verify:
        for name, expected in files.items():
            file = path / name
            if not file.is_file():
                raise RunError(f"checkpoint {path}: {name} is missing: {fix}")
            size = file.stat().st_size
            if size != expected["bytes"] or _sha256(file) != expected["sha256"]:
                raise RunError(
                    f"checkpoint {path}: {name} is damaged ({size} bytes, recorded {expected['bytes']}, "
                    f"content does not match its recorded SHA-256): {fix}"
                )
    return Checkpoint(path, tag, meta)
