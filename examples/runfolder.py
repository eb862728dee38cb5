"""The run folder of train.py, her_ddpg.py and offline_her.py (its rules and each one's test are in
docs/failures.md), and what else they share: settings and their checks, CSV, TensorBoard, one-line exits."""

from __future__ import annotations

import argparse
import contextlib
import csv
import errno
import hashlib
import importlib.util
import io
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import yaml

try:
    import fcntl
except ImportError:  # Windows: no flock; the folder is then not locked (said in docs/training.md)
    fcntl = None  # type: ignore[assignment]

_T = TypeVar("_T")
LOCK, MANIFEST = ".lock", ".run-manifest.json"
CHECKPOINTS, CHECKPOINT_MANIFEST = "checkpoints", "MANIFEST.json"


class RunError(Exception):
    """A problem the user can act on, said in one line (the scripts exit with status 2)."""


def describe_error(exc: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first if len(first) <= 300 else first[:297] + '...'}"


# ---------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Range:
    """A numeric setting's accepted values: ``kind`` in ``[low, high]`` (``*_open``: excluded); not NaN or inf."""

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
        kinds = int if self.kind is int else int | float  # below: isfinite would overflow on huge ints
        if isinstance(value, bool) or not isinstance(value, kinds) or not -math.inf < value < math.inf:
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))


TYPES = {bool: "true or false", str: "a string", int: "an integer", dict: "an object", list: "a list"}


def check_settings(values: Mapping[str, Any], ranges: Mapping[str, Any], where: str) -> None:
    """Raise :class:`RunError` naming the first value not accepted by ``ranges`` (a :class:`Range`, a type of
    :data:`TYPES` or a tuple of choices per key); ``where``: ``"option"`` or the file and entry."""
    for key, value in values.items():
        spec = ranges.get(key)
        if isinstance(spec, Range):
            ok, accepted = spec.accepts(value), spec.describe(key)
        elif isinstance(spec, tuple):
            ok, accepted = value in spec, " or ".join(spec)
        elif isinstance(spec, type):  # bool, str, int, dict, list: a JSON value of that type
            ok, accepted = isinstance(value, spec) and (spec is bool or type(value) is not bool), TYPES[spec]
        else:
            continue
        if not ok:
            name = f"--{key.replace('_', '-')}" if where == "option" else f"{where} {key}"
            raise RunError(f"{name}: {value!r} is not accepted; accepted: {accepted}")


def setting(default: Any, accepted: Any) -> Any:
    """A settings dataclass field: its default (a function: called) and its accepted values."""
    kind = "default_factory" if callable(default) else "default"
    return field(**{kind: default}, metadata={"accepted": accepted})


def add_settings(parser: argparse.ArgumentParser, config: type) -> None:
    """An option per field of the settings dataclass ``config`` (made with :func:`setting`), default None."""
    for f in fields(config):
        flags, accepted = ["--" + f.name.replace("_", "-")], f.metadata["accepted"]
        flags += ["--env"] * (f.name == "env_id")
        if accepted is bool:
            parser.add_argument(*flags, action=argparse.BooleanOptionalAction, default=None)
        else:
            kind = accepted.kind if isinstance(accepted, Range) else str
            parser.add_argument(*flags, type=kind, default=None, help=f"default {f.default}")


def check_new_folder(path: Path, option: str) -> None:
    """Raise :class:`RunError` unless ``path`` is a folder or one this process can make; leaves nothing."""
    accepted = "accepted: a folder (made if it does not exist)"
    if os.path.lexists(path) and not path.is_dir():
        raise RunError(f"{option}: {path} is a file, not a folder; {accepted}")
    ancestor = path
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    try:  # a folder made and removed in it: os.access trusts mode bits, which root passes on /proc
        os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=ancestor))
    except OSError as e:  # under a file, on a read-only or virtual file system, without permission
        raise RunError(f"{option}: {path} cannot be made in {ancestor} ({e.strerror}); {accepted}") from None


def tensorboard_folder(
    recorded: Any, given: Path | None, option: str, resume: str = "", file: Path | None = None
) -> Path | None:
    """A run's TensorBoard folder (``recorded`` in its settings ``file``; None: a new one made in ``given``,
    which must be its parent or absent), checked, as is that tensorboard is installed, before any write."""
    if (recorded is not None or given is not None) and importlib.util.find_spec("tensorboard") is None:
        raise RunError(f"{option}: needs the tensorboard package; pip install tensorboard")
    if recorded is None:
        if given is not None:
            check_new_folder(given, option)
        return None
    if not isinstance(recorded, str) or not recorded:
        raise RunError(f"{resume}: {file}, key tensorboard: {recorded!r} is not accepted; accepted: a path or null")  # fmt: skip
    path, flag = Path(recorded), option.split()[-1]
    if given is not None and given.resolve() != path.parent.resolve():
        raise RunError(f"{option}: this run writes its TensorBoard events to {path} (recorded in {file}), not in {given}; accepted: no {flag} with --resume, or {flag} {path.parent}")  # fmt: skip
    check_new_folder(path, f"{resume}: {file}, key tensorboard")
    return path


def load_conf(path: Path, option: str) -> dict[str, Any]:
    """The entries of a settings file: YAML, env id -> settings (as the RL Zoo's hyperparameter files)."""
    try:
        entries = yaml.safe_load(path.read_text()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RunError(f"{option}: cannot read {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(entries, dict):
        raise RunError(f"{option}: {path} is not a mapping of env ids to mappings of settings")
    return entries


def read_json(path: Path, option: str, script: str, fix: str) -> Any:
    """The JSON of a run's settings file ``path``; missing or not JSON: one line (``fix``: what to do)."""
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        raise RunError(
            f"{option}: {path.parent} has no {path.name}; accepted: an output folder of {script}"
        ) from None
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8
        raise RunError(f"{option}: {path} is not valid JSON ({describe_error(exc)}); {fix}") from None


def folder_path(text: str) -> Path:
    """An argparse type: a folder's path (an empty one would be the current folder: refused)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted: expected a folder's path")
    return Path(text)


def integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``[minimum, maximum]`` (``1e4`` style accepted when it is whole)."""
    spec = Range(int, minimum, maximum)
    expected = f"an integer >= {minimum}" + ("" if maximum is None else f" and <= {maximum}")

    def parse(text: str) -> int:
        with contextlib.suppress(ValueError, OverflowError):
            value = float(text)
            if value.is_integer() and spec.accepts(int(value)):
                return int(value)
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted: expected {expected}")

    return parse


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line naming the script, exit status 2, no usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog.split()[0]}: error: {' '.join(str(message).split())}\n")


def csv_text(rows: list[dict[str, Any]]) -> str:
    """Rows (one dict each) as CSV text (LF line ends): a column per key of any row, in first-seen order."""
    text = io.StringIO()
    writer = csv.DictWriter(text, list(dict.fromkeys(k for row in rows for k in row)), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def summary_writer(recorded: str | Path | None, given: Path | None, run: Path, purge_step: int | None) -> Any:
    """A TensorBoard ``SummaryWriter`` in ``recorded`` (a resumed run's; ``purge_step`` hides what it wrote after
    the checkpoint), else in a new ``given/<run's name>_<N>`` as stable-baselines3 numbers them; neither: None."""
    name = run.resolve().name
    if recorded is None and given is not None:
        given.mkdir(parents=True, exist_ok=True)
        numbered = re.compile(re.escape(name) + r"_(\d+)")
        n = max((int(m.group(1)) for p in given.iterdir() if (m := numbered.fullmatch(p.name))), default=0)
        while recorded is None:
            n += 1
            with contextlib.suppress(FileExistsError):
                (given / f"{name}_{n}").mkdir()
                recorded = given / f"{name}_{n}"
    if recorded is None:
        return None
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(recorded), purge_step=purge_step)


# ---------------------------------------------------------------------------------------- atomic writes
def fsync_dir(path: Path) -> None:
    """Flush a file, or a directory's entries (a rename in it), to disk; a no-op where it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
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
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------- exits
def run_main(
    script: str, body: Callable[[], _T], where: Callable[[], str], quiet_interrupt: bool = False
) -> _T:
    """A script's ``body``, ended in one line: a :class:`RunError` (status 2); Ctrl-C or SIGTERM
    ``interrupted <where()>`` (130); a failed write (an errno: a full disk) (1)."""
    previous = None
    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # a scheduler's stop, as Ctrl-C
    try:
        return body()
    except RunError as exc:
        print(f"{script}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as exc:
        if not interrupted(exc):
            if not isinstance(exc, OSError) or exc.errno is None:
                raise
            file = f" ({exc.filename})" if exc.filename else ""  # a failed write: a full disk
            print(f"{script}: error: {exc.strerror}{file}; stopped {where()}", file=sys.stderr)
            raise SystemExit(1) from None
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if not quiet_interrupt:
        print(f"{script}: interrupted {where()}", file=sys.stderr)
    raise SystemExit(130)


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` comes of Ctrl-C (which, in a library's write, can surface as its clean-up error)."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, KeyboardInterrupt):
        cause = cause.__cause__ or cause.__context__
    return cause is not None


# ---------------------------------------------------------------------------------------- the folder
@dataclass(frozen=True)
class Checkpoint:
    """A whole checkpoint: ``path`` (``checkpoints/<tag>``), its ``tag`` and the script's ``meta``."""

    path: Path
    tag: int
    meta: dict[str, Any]

    def unfit(self, name: str, why: object) -> RunError:
        """The one line for a file of this checkpoint that is whole but does not fit the run (``why``'s first two
        lines: torch's second names the problem)."""
        text = " ".join(line.strip() for line in str(why).strip().splitlines()[:2])
        text = text if len(text) <= 300 else text[:297] + "..."
        return RunError(
            f"checkpoint {self.path}: {name} does not fit this run ({text}); was it copied from another run "
            "or written by another version? Start again with --force"
        )

    def load(self, name: str, load: Callable[[Path], _T]) -> _T:
        """``load(path)`` of the file ``name``; whatever it raises becomes :meth:`unfit`'s one line."""
        try:
            return load(self.path / name)
        except Exception as exc:  # unpickling and torch can raise almost anything on foreign content
            if not self.path.exists():  # read without the lock, and replaced by a newer one meanwhile
                raise RunError(f"checkpoint {self.path} was replaced while being read; run the command again") from None  # fmt: skip
            raise self.unfit(name, f"{type(exc).__name__}: {exc}") from None


def stopped_at(progress: str, folder: RunFolder | None, unit: str, launch: str = "python") -> str:
    """Where a run stopped (``progress``: "at epoch 7"), and how to go on from its latest checkpoint (of ``unit``)."""
    latest = None
    if folder is not None:
        with contextlib.suppress(RunError, OSError):
            latest = folder.latest_checkpoint(verify=False)
    if folder is None or latest is None:
        return f"{progress}; no checkpoint was written yet (--save-freq), so a rerun starts over with --force"
    return f"{progress}; go on from the checkpoint of {unit} {latest.tag} with: {launch} examples/{folder.script} --resume {folder.path}"


def is_checkpoint(path: Path) -> bool:
    """Whether ``path`` is a whole checkpoint a run wrote: a folder named by its tag, holding its manifest."""
    return path.name.isdigit() and not path.is_symlink() and (path / CHECKPOINT_MANIFEST).is_file()


class RunFolder:
    """An output folder of ``script`` held by this process (:meth:`create`, :meth:`open`); ``outputs``: its files."""

    def __init__(self, path: Path, script: str, outputs: Iterable[str]) -> None:
        self.path, self.script, self.outputs = path, script, frozenset(outputs) | {CHECKPOINTS}
        self.run_id, self.written = "", set[str]()
        self.lock_fd: int | None = None

    def check_new(self, force: bool, resumable: bool = True) -> None:
        """Raise :class:`RunError` unless a new run may use the folder; writes nothing."""
        path = self.path
        if path.exists() and not path.is_dir():
            raise RunError(f"--output: {path} is a file; accepted: a folder that is empty or does not exist")
        if not path.is_dir():
            return
        if self.lock_fd is None:
            self.lock(probe=True)  # a run busy there is named as such
        bookkeeping = (LOCK, MANIFEST, "." + MANIFEST)  # a run's lock, manifest and its temporaries
        held = sorted(p.name for p in path.iterdir() if not p.name.startswith(bookkeeping))
        if held and not force:
            fix = f"pass --resume {path} to continue that run, --force to replace it"
            if not resumable:
                fix = "pass --force to replace the run there (train starts over, it does not resume)"
            raise RunError(f"--output: {path} is not empty (it holds {', '.join(held[:4])}{', ...' * (len(held) > 4)}); {fix}, or another --output")  # fmt: skip
        manifest = self.read_manifest(missing_ok=True) or {}
        if force and manifest.get("script") not in (None, self.script):
            raise RunError(f"--force: {path} is a run folder of {manifest['script']}, not of {self.script}; choose another --output")  # fmt: skip
        clash = sorted((set(held) & self.outputs) - set(manifest.get("files", [])))
        if force and clash:
            raise RunError(f"--force: {path} holds {', '.join(clash[:4])}, which no run of {self.script} recorded writing (--force removes only a run's own files); move them away or choose another --output")  # fmt: skip

    @classmethod
    def create(cls, path: Path, *, force: bool, outputs: Iterable[str], script: str) -> RunFolder:
        """Lock ``path`` (made if needed) for a new run (``force``: removing an earlier run's files), checked first."""
        folder = cls(path, script, outputs)
        folder.check_new(force)
        made = [p for p in (path, *path.parents) if not p.exists()]
        path.mkdir(parents=True, exist_ok=True)
        try:
            folder.lock()
            folder.check_new(force)  # again: another run may have started meanwhile
        except BaseException:
            if folder.lock_fd is not None and made:
                (path / LOCK).unlink(missing_ok=True)
            folder.close()
            for p in made:  # innermost first (rmdir keeps a non-empty one)
                with contextlib.suppress(OSError):
                    p.rmdir()
            raise
        folder.remove_temporaries()
        for name in sorted((folder.read_manifest(missing_ok=True) or {}).get("files", [])):
            own = path / name  # in checkpoints/ only whole checkpoints and their temporaries
            if name == CHECKPOINTS and own.is_dir() and not own.is_symlink():
                for child in own.iterdir():
                    if is_checkpoint(child) or (child.name.startswith(".tmp-") and child.is_dir()):
                        shutil.rmtree(child)
                with contextlib.suppress(OSError):
                    own.rmdir()  # kept if the user put something there
            elif name not in (LOCK, MANIFEST) and (own.is_file() or own.is_symlink()):
                own.unlink()
        folder.run_id, folder.written = uuid.uuid4().hex, {LOCK}
        folder.write_manifest()
        return folder

    @classmethod
    def open(cls, path: Path, *, outputs: Iterable[str], script: str) -> RunFolder:
        """Lock the folder of an existing run of ``script`` (to resume it)."""
        folder = cls.read_only(path, script, outputs)
        folder.lock()
        folder.remove_temporaries()
        manifest = folder.read_manifest(missing_ok=False)  # as it is now that we hold the folder
        assert manifest is not None
        folder.run_id, folder.written = manifest["run_id"], set(manifest["files"])
        return folder

    @classmethod
    def read_only(
        cls, path: Path, script: str, outputs: Iterable[str], option: str = "--resume"
    ) -> RunFolder:
        """The folder of a run of ``script``, not locked: for reading a checkpoint while a run may go on."""
        folder = cls(path, script, outputs)
        if not path.is_dir():
            what = "does not exist" if not path.exists() else "is not a folder"
            raise RunError(f"{option}: {path} {what}; accepted: an output folder of {script}")
        manifest = folder.read_manifest(missing_ok=True)
        if manifest is None:
            raise RunError(f"{option}: {path} is not a run folder of {script}; accepted: the --output folder of a run")  # fmt: skip
        if manifest.get("script") != script:
            raise RunError(f"{option}: {path} is a run folder of {manifest.get('script')}, not of {script}")
        folder.run_id = manifest["run_id"]
        return folder

    def close(self) -> None:
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lock(self, probe: bool = False) -> None:
        """Hold the folder: its .lock flocked and holding our pid (``probe``: only refuse a folder held)."""
        if probe and (fcntl is None or not (self.path / LOCK).is_file()):
            return
        fd = os.open(self.path / LOCK, os.O_RDONLY if probe else os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(fd, (fcntl.LOCK_SH if probe else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):  # else held elsewhere
                raise
            raise RunError(f"{self.path} is in use by another process (pid {holder}); wait for it to end, or choose another --output") from None  # fmt: skip
        if probe:
            os.close(fd)
            return
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.lock_fd = fd

    def read_manifest(self, missing_ok: bool) -> dict[str, Any] | None:
        path = self.path / MANIFEST
        try:
            manifest = json.loads(path.read_bytes())
        except FileNotFoundError:
            if missing_ok:
                return None
            raise RunError(f"{path} is missing; this is not a run folder any more") from None
        except (ValueError, OSError) as exc:
            raise RunError(f"{path} is damaged ({type(exc).__name__}); delete it and the run's files by hand, or choose another --output") from None  # fmt: skip
        kinds = [type(manifest.get(k)) for k in ("files", "run_id")] if isinstance(manifest, dict) else []
        if kinds != [list, str]:
            raise RunError(f"{path} is damaged (not a manifest of {self.script}); choose another --output")
        return manifest

    def write_manifest(self) -> None:
        manifest = {"script": self.script, "run_id": self.run_id, "files": sorted(self.written)}
        write_atomic(self.path / MANIFEST, json.dumps(manifest, indent=1) + "\n")

    def record(self, name: str) -> None:
        """Note ``name`` (a top-level entry) as written by this run, before it is written."""
        if name not in self.written:
            self.written.add(name)
            self.write_manifest()

    def write(self, name: str, data: bytes | str) -> None:
        """Write the top-level file ``name`` atomically (recorded in the manifest first)."""
        self.record(name)
        write_atomic(self.path / name, data)

    def remove_temporaries(self) -> None:
        """Remove the temporaries of :func:`write_atomic` that a killed process left (we hold the lock)."""
        for name in (*self.outputs, MANIFEST):
            for tmp in self.path.glob(f".{name}.tmp-*"):
                tmp.unlink(missing_ok=True)

    def save_checkpoint(
        self, tag: int, files: Mapping[str, Callable[[Path], object]], meta: Mapping[str, Any]
    ) -> Checkpoint:
        """Write checkpoint ``tag`` whole (``files``: name -> writer of a path; ``meta``: JSON), older ones removed."""
        self.record(CHECKPOINTS)
        root = self.path / CHECKPOINTS
        root.mkdir(exist_ok=True)
        for stale in root.glob(".tmp-*"):  # left by a process that died mid-write (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        final, tmp = root / f"{tag:012d}", root / f".tmp-{tag:012d}-{os.getpid()}"
        if final.exists():  # this state is saved already: never delete it to rewrite it
            return read_checkpoint(final, self.script, self.run_id, verify=False)
        tmp.mkdir()
        try:
            hashes = {}
            for name, write in files.items():
                try:
                    write(tmp / name)
                except OSError as exc:  # name the file in the one line a full disk ends with
                    exc.filename = exc.filename or str(tmp / name)
                    raise
                fsync_dir(tmp / name)
                hashes[name] = {"bytes": (tmp / name).stat().st_size, "sha256": sha256(tmp / name)}
            manifest = {"script": self.script, "run_id": self.run_id, "tag": tag, "files": hashes}
            manifest["meta"] = dict(meta)
            write_atomic(tmp / CHECKPOINT_MANIFEST, json.dumps(manifest, indent=1) + "\n")
            fsync_dir(tmp)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        fsync_dir(root)
        for old in self.checkpoints():
            if old != final and is_checkpoint(old):
                shutil.rmtree(old, ignore_errors=True)
        return Checkpoint(final, tag, dict(meta))

    def checkpoints(self) -> list[Path]:
        """The whole checkpoints in the folder, oldest first (normally one)."""
        root = self.path / CHECKPOINTS
        return sorted(p for p in root.iterdir() if p.name.isdigit() and p.is_dir()) if root.is_dir() else []

    def resume_from(
        self, option: str, how: str, file: Path, settings: Mapping[str, Any], key: str
    ) -> Checkpoint:
        """The latest whole checkpoint, to go on from: its ``meta[key]`` must hold ``settings`` (those of ``file``)."""
        checkpoint = self.latest_checkpoint()
        if checkpoint is None:
            raise RunError(
                f"{option}: {self.path} has no checkpoint yet ({how}); start it again with --output {self.path} --force"
            )
        kept = checkpoint.meta.get(key)
        differ = sorted(k for k, v in settings.items() if not isinstance(kept, dict) or kept.get(k) != v)
        if differ:
            raise RunError(
                f"{option}: {file} differs from its checkpoint's settings in {differ}; restore {file.name} or start again with --force"
            )
        return checkpoint

    def latest_checkpoint(self, verify: bool = True) -> Checkpoint | None:
        """The newest checkpoint, checked whole and of this run; None if none (damaged: :class:`RunError`)."""
        for _ in range(3):
            found = self.checkpoints()
            if not found:
                return None
            try:
                return read_checkpoint(found[-1], self.script, self.run_id or None, verify)
            except (RunError, OSError):
                if found[-1].exists():  # else removed under a reader once a newer one was whole: look again
                    raise
        raise RunError(f"the checkpoints of {self.path} kept changing while being read; run the command again")  # fmt: skip


def read_checkpoint(path: Path, script: str, run_id: str | None, verify: bool = True) -> Checkpoint:
    """The checkpoint in ``path``, its manifest checked (and, with ``verify``, each file's size and hash)."""
    fix = "start again with --force, or put back a copy of the folder"
    try:
        manifest = json.loads((path / CHECKPOINT_MANIFEST).read_bytes())
        files, meta, tag = manifest["files"], manifest["meta"], int(manifest["tag"])
    except FileNotFoundError:
        raise RunError(f"checkpoint {path} has no {CHECKPOINT_MANIFEST}; it is not a whole checkpoint: {fix}") from None  # fmt: skip
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise RunError(f"checkpoint {path}: {CHECKPOINT_MANIFEST} is damaged ({type(exc).__name__}): {fix}") from None  # fmt: skip
    if manifest.get("script") != script or (run_id is not None and manifest.get("run_id") != run_id):
        raise RunError(f"checkpoint {path} belongs to another run (run id {manifest.get('run_id')}, of {manifest.get('script')}), not to this folder's run {run_id}: {fix}")  # fmt: skip
    for name, expected in files.items() if verify else ():
        size = (path / name).stat().st_size if (path / name).is_file() else None
        if size is None:
            raise RunError(f"checkpoint {path}: {name} is missing: {fix}")
        if size != expected["bytes"] or sha256(path / name) != expected["sha256"]:
            raise RunError(f"checkpoint {path}: {name} is damaged ({size} bytes, recorded {expected['bytes']}, content does not match its recorded SHA-256): {fix}")  # fmt: skip
    return Checkpoint(path, tag, meta)
