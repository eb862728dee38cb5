"""her_ddpg.py's run on each of its torchrun workers (alone without torchrun): :class:`Run`, its settings,
checkpoints of every worker's part, the epoch curve; the folder and its rules are runfolder.py's."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import runfolder as rf  # examples/runfolder.py
import torch
import torch.distributed as dist
from nets import curve_png
from runfolder import Checkpoint, RunError, RunFolder

_T = TypeVar("_T")
SAVE_FREQ = 5  # epochs per checkpoint without --save-freq; a resume keeps the run's (5 if it predates)


class Timers:
    """Seconds per phase (eval.csv's ``t_*``), ``with timers("env"):``; an inner phase's are not the outer's."""

    def __init__(self, names: Iterable[str]) -> None:
        self.seconds, self.inner = dict.fromkeys(names, 0.0), [0.0]

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        self.inner.append(0.0)
        try:
            yield
        finally:
            spent = time.perf_counter() - t0
            self.seconds[name] += spent - self.inner.pop()
            self.inner[-1] += spent


def share(n: int, rank: int, size: int) -> tuple[int, int]:
    """Worker ``rank``'s items ``[lo, hi)`` of ``n`` (contiguous; sizes differ by at most one)."""
    return n * rank // size, n * (rank + 1) // size


def part(total: int, lo: int, hi: int, n: int) -> int:
    """The part of ``total`` (a batch, a buffer) that goes with items ``[lo, hi)`` of ``n`` envs."""
    return total * hi // n - total * lo // n


def all_sum(array: np.ndarray) -> np.ndarray:
    """``array`` summed over the workers (itself when alone)."""
    tensor = torch.from_numpy(np.array(array))
    if dist.is_initialized():
        dist.all_reduce(tensor)
    return tensor.numpy()


def orphaned() -> bool:
    """Whether this process's launcher is gone: reparented to PID 1, which is no torchrun (in some
    containers torchrun itself is PID 1). False where /proc cannot tell (or a subreaper adopted it)."""
    try:
        return os.getppid() == 1 and b"torch" not in Path("/proc/1/cmdline").read_bytes()
    except OSError:
        return False


class Run:
    """A run on each torchrun worker (alone without torchrun): settings (``config``'s fields: options, keys of
    ``conf_file`` and of config.json; ``free``: what a resume may change), folder, curve, TensorBoard, and
    checkpoints of the shared ``agent.pt`` and worker r's ``<key>-<r>.pkl``. Worker 0 decides and writes."""

    def __init__(self, script: str, outputs: Iterable[str], config: type, conf_file: Path, free: Iterable[str], timers: Iterable[str]) -> None:  # fmt: skip
        self.script, self.outputs, self.config, self.conf_file = script, tuple(outputs), config, conf_file
        self.free, self.specs = tuple(free), {f.name: f.metadata["accepted"] for f in fields(config)}
        self.rank, self.size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
        self.folder: RunFolder | None = None
        self.checkpoint: Checkpoint | None = None
        self.path, self.resuming, self.tracking = Path(), False, False
        self.tensorboard: Path | None = None  # a resumed run's TensorBoard folder
        self.tb: Any = None  # its SummaryWriter
        self.rows: list[dict[str, Any]] = []  # the curve, one row per epoch (kept in checkpoints)
        self.timers, self.seen = Timers(timers), dict.fromkeys(timers, 0.0)
        self.earlier = (0.0, 0.0)  # the wall and CPU seconds of the sessions before this one
        self.started = (time.perf_counter(), time.process_time())
        self.progress: Callable[[], str] = lambda: "before training started"  # where the loop is

    def main(self, body: Callable[[], _T]) -> _T:
        """``body`` as this worker (in torchrun's process group), ended by :func:`runfolder.run_main`."""
        return rf.run_main(self.script, lambda: self.session(body), self.where, quiet_interrupt=self.rank > 0)

    def session(self, body: Callable[[], _T]) -> _T:
        if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":  # torchrun ran the command again
            if self.rank > 0:
                raise SystemExit(2)
            raise RunError("torchrun restarted the workers; a restart replaces nothing: go on with --resume")
        if self.size > 1:
            import ctypes
            from datetime import timedelta

            with contextlib.suppress(OSError, AttributeError):  # Linux: stop when torchrun is killed
                ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            if orphaned():  # torchrun was killed before that call (while this worker imported torch)
                raise SystemExit(1)
            # NCCL sums what lives on a GPU (--device cuda's gradients), gloo what lives on the CPU.
            backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend, timeout=timedelta(seconds=300))
        try:
            return body()
        except RuntimeError as exc:  # another worker is gone: a DistError, or gloo's from any collective
            if rf.interrupted(exc) or not isinstance(exc, dist.DistError) and "gloo" not in str(exc):
                raise
            text = " ".join(str(exc).split("\n")[0].split())
            text = text.split("] ", 1)[-1].split(" This is typically caused by ")[0][:200]  # gloo's own words
            print(
                f"{self.script}: error: worker {self.rank} of {self.size}: another worker stopped or cannot be reached ({text}); this worker stops too. Resume the run from its last checkpoint with the same launch and --resume",
                file=sys.stderr,
            )
            raise SystemExit(1) from None
        finally:
            for held in (self.tb, self.folder):
                if held is not None:
                    held.close()
            if dist.is_initialized():
                dist.destroy_process_group()

    def agreed(self, decide: Callable[[], Any], scatter: bool = False) -> Any:
        """``decide()`` on worker 0, handed to every worker (``scatter``: a list, item r to worker r). If it
        fails, worker 0 says why and the others, waiting for its go-ahead, stop without a word."""
        result: Any = None
        if self.rank == 0:
            try:
                result = decide()
            except BaseException:
                with contextlib.suppress(Exception):
                    self.broadcast(None)
                raise
        go = self.broadcast(True if scatter else result)
        if go is None:
            raise SystemExit(2)
        mine = result[:1] if scatter and self.size == 1 else [None]
        if scatter and self.size > 1:
            dist.scatter_object_list(mine, result, src=0)
        return mine[0] if scatter else go

    def broadcast(self, obj: Any) -> Any:
        box = [obj]
        if self.size > 1:
            dist.broadcast_object_list(box, src=0)
        return box[0]

    # ------------------------------------------------------------------ settings and folder
    def start(self, argv: list[str] | None, output: Callable[[Any], Path], check: Callable[[Any, int], None]) -> tuple[Any, argparse.Namespace]:  # fmt: skip
        """The settings and options, checked (``check``: the script's own), and the folder locked, by worker 0."""
        argv = sys.argv[1:] if argv is None else list(argv)
        self.cfg, self.args, self.resuming, self.tracking = self.agreed(
            lambda: self.settings(argv, output, check)
        )
        return self.cfg, self.args

    def settings(
        self, argv: list[str], output: Callable[[Any], Path], check: Callable[[Any, int], None]
    ) -> tuple[Any, Any, bool, bool]:
        parser = rf.ArgumentParser(prog=self.script)
        for flag, kind, metavar, help in (
            ("--resume", Path, "RUN_DIR", "continue the run in RUN_DIR"),
            ("--output", Path, None, "the run's folder (made if needed)"),
            ("--force", bool, None, "replace the run in a non-empty --output (its own files only)"),
            ("--save-freq", rf.integer(0), None, "epochs per checkpoint (0: none; default 5 or as resumed)"),
            ("--evaluate", rf.integer(1), "N", "with --resume: the success over N episodes"),
            ("--tensorboard", rf.folder_path, "DIR", "also write TensorBoard events to DIR/<run>_<N>"),
            ("--conf-file", Path, None, "per-env settings (YAML: env id -> settings)"),
            ("--no-gif", bool, None, "skip the GIF of the trained policy"),
        ):
            kw = {"action": "store_true"} if kind is bool else {"type": kind, "metavar": metavar}
            parser.add_argument(flag, help=help, **kw)
        rf.add_settings(parser, self.config)
        args = parser.parse_args(argv)
        values = {k: getattr(args, k) for k in self.specs if getattr(args, k) is not None}
        rf.check_settings(values, self.specs, "option")
        if args.tensorboard is not None and args.evaluate is not None:
            raise RunError("--tensorboard: --evaluate writes nothing; accepted: --evaluate without --tensorboard")  # fmt: skip
        if args.evaluate is not None and (args.resume is None or self.size > 1):
            raise RunError("--evaluate: needs --resume RUN_DIR, in one process (not under torchrun)")
        if args.resume is not None:
            cfg = self.resumed(args, values, check)
            tracking = args.evaluate is None and (self.tensorboard or args.tensorboard) is not None
            return cfg, args, True, tracking
        path, env_id = args.conf_file or self.conf_file, values.get("env_id", self.config().env_id)
        entries = rf.load_conf(path, "--conf-file")
        if not isinstance(entries.get(env_id) or {}, dict):
            raise RunError(f"--conf-file: {path} is not a mapping of env ids to mappings of settings")
        entry = {k: v for k, v in (entries.get(env_id) or {}).items() if k != "env_id"}
        if set(entry) - set(self.specs):
            raise RunError(f"--conf-file: {path} entry {env_id!r} has unknown keys {sorted(set(entry) - set(self.specs))}")  # fmt: skip
        rf.check_settings(entry, self.specs, f"--conf-file: {path}, entry {env_id!r}, key")
        cfg = self.config(**{**entry, **values})
        check(cfg, self.size)
        args.save_freq = SAVE_FREQ if args.save_freq is None else args.save_freq
        self.path = args.output or output(cfg)
        RunFolder(self.path, self.script, self.outputs).check_new(args.force)
        rf.tensorboard_folder(None, args.tensorboard, "--tensorboard")
        self.folder = RunFolder.create(self.path, force=args.force, outputs=self.outputs, script=self.script)
        return cfg, args, False, args.tensorboard is not None

    def resumed(self, args: Any, values: dict[str, Any], check: Callable[[Any, int], None]) -> Any:
        """A resumed run's settings: its config.json's, those in ``free`` changed by options; and its checkpoint."""
        out = self.path = args.resume
        folder = RunFolder.read_only(out, self.script, self.outputs)  # a run folder of this script
        if args.output is not None and args.output.resolve() != out.resolve():
            raise RunError(f"--output: --resume continues the run in its own folder {out}, not {args.output}; accepted: no --output with --resume")  # fmt: skip
        if args.force or args.conf_file is not None:
            raise RunError(f"{'--force' if args.force else '--conf-file'}: cannot be given with --resume (the run keeps its folder and settings)")  # fmt: skip
        path = out / "config.json"
        fix = "restore it (the checkpoint's manifest holds the run's settings) or start again with --force"
        saved = rf.read_json(path, "--resume", self.script, fix)
        recorded = saved.pop("tensorboard", None) if isinstance(saved, dict) else None
        # A setting added since the run's checkpoint was written is absent from it (and from a config.json of
        # then): it takes its default, the behaviour the run had. Any other key must be in config.json.
        latest = folder.latest_checkpoint(verify=False)
        kept_config = latest.meta.get("config") if latest else None  # not a dict: resume_from says why below
        added = set(self.specs) - set(kept_config) if isinstance(kept_config, dict) else set()
        missing = set(self.specs) - set(saved) if isinstance(saved, dict) else set()
        if not isinstance(saved, dict) or set(saved) - set(self.specs) or missing - added:
            got = sorted(saved) if isinstance(saved, dict) else type(saved).__name__
            raise RunError(f"--resume: {path} does not hold the settings of a run of {self.script} (keys {got}); {fix}")  # fmt: skip
        rf.check_settings(saved, self.specs, f"--resume: {path}, key")
        defaults = asdict(self.config())
        saved = {**{k: defaults[k] for k in missing}, **saved}
        edited = {k: saved[k] for k in sorted(added) if saved[k] != defaults[k]}
        if edited:
            accepted = {k: defaults[k] for k in edited}
            why = f"settings its checkpoint predates; accepted: their defaults {accepted} (what the run ran with)"
            raise RunError(f"--resume: {path} sets {edited}, {why}")
        changed = {k: v for k, v in values.items() if k not in self.free and v != saved[k]}
        if changed:
            may = ", ".join("--" + k.replace("_", "-") for k in self.free)
            raise RunError(f"--resume: continues a run as configured; only {may} may change, got {changed}")
        if args.evaluate is None:
            self.tensorboard = rf.tensorboard_folder(
                recorded, args.tensorboard, "--tensorboard", "--resume", path
            )
        cfg = self.config(**{**saved, **values})
        check(cfg, self.size)
        if args.evaluate is None:  # else read only (the checkpoint's networks)
            self.folder = folder = RunFolder.open(out, outputs=self.outputs, script=self.script)
        kept = {k: v for k, v in asdict(cfg).items() if k not in self.free and k not in added}
        how = "checkpoints need --save-freq >= 1"
        cp = self.checkpoint = folder.resume_from("--resume", how, path, kept, "config")
        workers, done = cp.meta.get("world_size", 1), cp.meta.get("epoch")
        if type(done) is not int or type(workers) is not int:
            raise cp.unfit(rf.CHECKPOINT_MANIFEST, "its meta holds no epoch and world size")
        args.save_freq = cp.meta.get("save_freq", SAVE_FREQ) if args.save_freq is None else args.save_freq
        if type(args.save_freq) is not int or args.save_freq < 0:  # a damaged manifest, not a lost run
            why = f"key save_freq: {args.save_freq!r} is not accepted; accepted: an integer >= 0, or give --save-freq N"
            raise RunError(f"--resume: {cp.path}: {rf.CHECKPOINT_MANIFEST}, {why}")
        if workers != self.size and args.evaluate is None:  # --evaluate reads the networks only
            launch = "python"
            if workers > 1:
                launch = f"torchrun with {workers} workers in all, e.g. torchrun --nproc-per-node {workers}"
            raise RunError(f"--resume: {out} was trained by {workers} worker{'s' * (workers > 1)}, this launch has {self.size}; accepted: the same number ({launch} examples/{self.script}): the replay storage and envs are split between the workers")  # fmt: skip
        if cfg.epochs < done:
            raise RunError(f"--epochs: {out} has already run {done} epochs; accepted: --epochs >= {done}")
        return cfg

    # ------------------------------------------------------------------ checkpoints
    def resume(
        self, fits: Callable[[dict[str, Any], dict[str, Any], int], tuple[str, object] | None]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The checkpoint's shared state (``agent.pt``) and this worker's own part. Worker 0 reads every part,
        asks ``fits(state, own, rank)`` whether it fits (else the file and why: one line) and hands them out."""

        def read_parts() -> list[tuple[dict[str, Any], dict[str, Any]]]:
            cp = cast(Checkpoint, self.checkpoint)
            state = cp.load("agent.pt", lambda path: torch.load(path, map_location="cpu", weights_only=False))
            if not isinstance(state, dict) or not {"rows", "times", "wall0", "cpu0"} <= set(state):
                raise cp.unfit("agent.pt", "it holds no run state")
            parts = []
            for rank in range(self.size):
                load, suffix = lambda p: pickle.loads(p.read_bytes()), f"{'-' * bool(rank)}{rank or ''}.pkl"
                names = cp.meta.get("own", ()) if self.args.evaluate is None else ()
                own = {k: cp.load(f"{k}{suffix}", load) for k in names}
                unfit = fits(state, own, rank)
                if unfit is not None:
                    raise cp.unfit(unfit[0].replace(".pkl", suffix), unfit[1])
                parts.append((state, own))
            return parts

        state, own = self.agreed(read_parts, scatter=True)
        self.rows, self.earlier = state["rows"], (state["wall0"], state["cpu0"])
        self.timers.seconds |= state["times"]
        self.seen = dict(self.timers.seconds)
        return state, own

    def save(self, epoch: int, state: Callable[[], tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """Checkpoint ``epoch``: ``agent.pt`` (with the curve and clocks) and every worker's part, gathered by worker 0."""
        shared, own = state()
        suffix = f"{'-' * bool(self.rank)}{self.rank or ''}.pkl"
        files = {f"{k}{suffix}": pickle.dumps(v, protocol=5) for k, v in own.items()}
        if self.size > 1:
            everyone: list[Any] | None = [None] * self.size if self.rank == 0 else None
            dist.gather_object(files, everyone, dst=0)
            files = {name: b for part in everyone or () for name, b in part.items()}
        if self.folder is None:
            return
        wall0, cpu0 = self.earlier
        shared |= {"rows": self.rows, "times": dict(self.timers.seconds), "wall0": wall0, "cpu0": cpu0}
        data = io.BytesIO()
        torch.save(shared, data)  # to memory, then written: a full disk is an OSError naming the file
        blobs = {"agent.pt": data.getvalue(), **files}
        writers = {name: (lambda path, b=b: path.write_bytes(b)) for name, b in blobs.items()}
        meta = {"epoch": epoch, "config": asdict(self.cfg), "world_size": self.size, "own": sorted(own)}
        meta["save_freq"] = self.args.save_freq  # what a --resume without --save-freq keeps
        self.folder.save_checkpoint(epoch, writers, meta)

    # ------------------------------------------------------------------ the curve
    def begin(self) -> float:
        """Write config.json, commands.txt (and a resumed run's eval.csv), open TensorBoard, start the clocks."""
        if self.folder is not None:
            purge = self.rows[-1]["env_steps"] + 1 if self.resuming and self.rows else None
            self.tb = rf.summary_writer(self.tensorboard, self.args.tensorboard, self.path, purge)
            old = (self.path / "commands.txt").read_text() if (self.path / "commands.txt").is_file() else ""
            launcher = "python" if self.size == 1 else f"torchrun (world size {self.size})"
            config = {**asdict(self.cfg), "tensorboard": None if self.tb is None else self.tb.log_dir}
            self.folder.write("config.json", json.dumps(config, indent=2) + "\n")
            self.folder.write(
                "commands.txt", f"{old}{launcher} examples/{self.script} {' '.join(sys.argv[1:])}\n"
            )
            if self.resuming:  # eval.csv: drops rows written after the checkpoint
                self.folder.write("eval.csv", rf.csv_text(self.rows))
                last = self.rows[-1]["epoch"] if self.rows else 0
                print(f"resumed {self.path} at epoch {last}", flush=True)
        if self.size > 1:  # meet, so that the other workers' later start is not timed as worker 0's wait
            dist.barrier()
        self.started = (time.perf_counter(), time.process_time())
        return self.rows[-1]["success_rate"] if self.rows else float("nan")

    def end_epoch(self, epoch: int, steps: int, updates: int, success: float, figures: dict[str, float], state: Callable[[], tuple[dict[str, Any], dict[str, Any]]]) -> None:  # fmt: skip
        """The epoch's eval.csv row, TensorBoard points and line, and when due a checkpoint of ``state()``."""
        wall = self.earlier[0] + time.perf_counter() - self.started[0]  # over every session
        cpu = self.earlier[1] + time.process_time() - self.started[1]
        timers, before = self.timers.seconds, self.rows[-1] if self.rows else {"env_steps": 0, "updates": 0}
        row = {"epoch": epoch, "env_steps": steps, "updates": updates, "success_rate": success}
        row |= {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
        self.rows.append(row | {f"t_{k}": round(v, 3) for k, v in timers.items()})
        if self.folder is not None:
            self.folder.write("eval.csv", rf.csv_text(self.rows))
            print(
                f"epoch {epoch:3d}  steps {steps:8d}  success {success:.3f}  wall {wall:7.0f}s  cpu {cpu:7.0f}s",
                flush=True,
            )
        if self.tb is not None:  # the rates over this epoch's seconds of collecting and of updating
            spent = {k: v - self.seen[k] for k, v in timers.items()}
            collect, update = spent["act"] + spent["env"] + spent["store"], spent["sample"] + spent["update"]
            scalars = {
                "eval/success_rate": success,
                **figures,
                "train/n_updates": updates,
                "time/env_steps_per_s": (steps - before["env_steps"]) / max(collect, 1e-9),
                "time/updates_per_s": (updates - before["updates"]) / max(update, 1e-9),
                "time/wall_s": self.rows[-1]["wall_s"],
                "time/cpu_s": self.rows[-1]["cpu_s"],
                **{f"time/t_{k}": v for k, v in timers.items()},
            }
            for tag, value in scalars.items():
                self.tb.add_scalar(tag, float(value), steps)
            self.tb.flush()  # a killed run loses no whole epoch of them
        self.seen = dict(timers)
        if self.args.save_freq and (epoch % self.args.save_freq == 0 or epoch == self.cfg.epochs):
            with self.timers("checkpoint"):
                self.earlier, self.started = (wall, cpu), (time.perf_counter(), time.process_time())
                self.save(epoch, state)

    def finish(self, title: str, gif: Callable[[], bytes]) -> None:
        """The success curve's plot and the GIF of the trained policy (worker 0)."""
        if self.folder is not None and self.rows:
            title += f", {self.size} workers" if self.size > 1 else ""
            png = curve_png(self.rows, "env_steps", "env steps (thousands)", title, per=1000)
            self.folder.write("success.png", png)
        if self.folder is not None and not self.args.no_gif:
            self.folder.write("policy.gif", gif())

    def where(self) -> str:
        launch = "python" if self.size == 1 else "torchrun ..."
        return rf.stopped_at(self.progress(), self.folder, "epoch", launch)
