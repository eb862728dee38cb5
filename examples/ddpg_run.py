"""A run of her_ddpg.py, on each of its workers: its options and settings (checked before the first write),
its folder (examples/runfolder.py's rules), curve, TensorBoard events, checkpoints, resume and exits."""

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
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from runfolder import (
    CHECKPOINT_MANIFEST,
    ArgumentParser,
    Checkpoint,
    RunError,
    RunFolder,
    add_settings,
    check_new_folder,
    check_settings,
    csv_text,
    curve_png,
    folder_path,
    integer,
    make_numbered_folder,
    needs_tensorboard,
    resumed_folder,
    run_main,
)

_T = TypeVar("_T")
Fits = Callable[[dict[str, Any], dict[str, Any], int], "tuple[str, object] | None"]


class Timers:
    """Seconds spent in each phase (eval.csv's ``t_*`` columns), ``with timers("env"): ...``; a phase
    timed inside another is taken out of the outer one."""

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


def options(config: type, script: str) -> ArgumentParser:
    """The options of a run: its own and one per field of the settings dataclass ``config``."""
    parser = ArgumentParser(prog=script)
    add = parser.add_argument
    add("--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR")
    add("--output", type=Path, help="the run's folder (made if needed)")
    add("--force", action="store_true", help="replace the run in a non-empty --output (its own files only)")
    add("--save-freq", type=integer(0), default=5, help="epochs between checkpoints (0: none)")
    add("--evaluate", type=integer(1), metavar="N", help="with --resume: the success over N episodes")
    add(
        "--tensorboard",
        type=folder_path,
        metavar="DIR",
        help="also write TensorBoard events to DIR/<run>_<N>",
    )
    add("--env-threads", type=integer(1), default=1, help="threads stepping each worker's envs (default 1)")
    add("--conf-file", type=Path, help="per-env settings (YAML: env id -> settings)")
    add("--profile", action="store_true", help="print where the time went")
    add("--no-gif", action="store_true", help="skip the GIF of the trained policy")
    add_settings(parser, config)
    return parser


class Run:
    """her_ddpg.py's run on each worker: settings (``config``'s fields: options, keys of ``conf_file`` and of
    config.json; ``free``: what a resume may change), folder, curve, TensorBoard, checkpoints and resume.
    Worker 0 decides and writes; the others follow (without torchrun: one worker)."""

    def __init__(self, script: str, outputs: Iterable[str], config: type, conf_file: Path, free: Iterable[str], timers: Iterable[str]) -> None:  # fmt: skip
        self.script, self.outputs, self.config = script, tuple(outputs), config
        self.conf_file, self.free = conf_file, tuple(free)
        self.rank, self.size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
        self.specs = {f.name: f.metadata["accepted"] for f in fields(config)}
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
        """``body`` as this torchrun worker (alone without torchrun), ended by :func:`run_main`."""
        return run_main(self.script, lambda: self.session(body), self.where, quiet_interrupt=self.rank > 0)

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
            # NCCL sums what lives on a GPU (--device cuda's gradients), gloo what lives on the CPU.
            backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend, timeout=timedelta(seconds=300))
        try:
            return body()
        finally:
            for held in (self.tb, self.folder):
                if held is not None:
                    held.close()
            if self.size > 1 and dist.is_initialized():
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
        if not scatter:
            return go
        if self.size == 1:
            return result[0]
        mine = [None]
        dist.scatter_object_list(mine, result, src=0)
        return mine[0]

    def broadcast(self, obj: Any) -> Any:
        """Worker 0's ``obj`` on every worker."""
        box = [obj]
        if self.size > 1:
            dist.broadcast_object_list(box, src=0)
        return box[0]

    # ------------------------------------------------------------------ settings and folder
    def start(self, argv: list[str] | None, output: Callable[[Any], Path], check: Callable[[Any, int], None]) -> tuple[Any, argparse.Namespace]:  # fmt: skip
        """The run's settings and options, checked (``check(cfg, workers)`` adds the script's checks), and
        its folder locked by worker 0, which hands them to the others; nothing is written yet."""
        argv = sys.argv[1:] if argv is None else list(argv)
        go = self.agreed(lambda: self.settings(argv, output, check))
        self.cfg, self.args, self.resuming, self.tracking = go  # tracking: TensorBoard's figures are summed
        return self.cfg, self.args

    def settings(self, argv: list[str], output: Callable[[Any], Path], check: Callable[[Any, int], None]) -> tuple[Any, Any, bool, bool]:  # fmt: skip
        args = options(self.config, self.script).parse_args(argv)
        values = {k: getattr(args, k) for k in self.specs if getattr(args, k) is not None}
        check_settings(values, self.specs, "option")
        if args.tensorboard is not None and args.evaluate is not None:
            raise RunError("--tensorboard: --evaluate writes nothing; accepted: --evaluate without --tensorboard")  # fmt: skip
        if args.evaluate is not None and (args.resume is None or self.size > 1):
            raise RunError("--evaluate: needs --resume RUN_DIR, in one process (not under torchrun)")
        if args.tensorboard is not None:
            needs_tensorboard("--tensorboard")
        if args.resume is not None:
            return self.resumed(args, values, check)
        conf = args.conf_file or self.conf_file
        cfg = self.config(**{**self.conf_entry(conf, values.get("env_id", self.config().env_id)), **values})
        check(cfg, self.size)
        self.path = args.output or output(cfg)
        RunFolder.check_new(self.path, args.force, self.outputs, self.script)
        if args.tensorboard is not None:
            check_new_folder(args.tensorboard, "--tensorboard")
        self.folder = RunFolder.create(self.path, force=args.force, outputs=self.outputs, script=self.script)
        return cfg, args, False, args.tensorboard is not None

    def conf_entry(self, path: Path, env_id: str) -> dict[str, Any]:
        """The ``env_id`` entry of a YAML settings file, its keys and values checked."""
        import yaml

        try:
            entries = yaml.safe_load(path.read_text()) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise RunError(f"--conf-file: cannot read {path}: {str(exc).splitlines()[0]}") from None
        if not isinstance(entries, dict) or not isinstance(entries.get(env_id) or {}, dict):
            raise RunError(f"--conf-file: {path} is not a mapping of env ids to mappings of settings")
        entry = {k: v for k, v in (entries.get(env_id) or {}).items() if k != "env_id"}
        if set(entry) - set(self.specs):
            raise RunError(f"--conf-file: {path} entry {env_id!r} has unknown keys {sorted(set(entry) - set(self.specs))}")  # fmt: skip
        check_settings(entry, self.specs, f"--conf-file: {path}, entry {env_id!r}, key")
        return entry

    def resumed(self, args: Any, values: dict[str, Any], check: Callable[[Any, int], None]) -> tuple[Any, Any, bool, bool]:  # fmt: skip
        """A resumed run's settings: its config.json's, those in ``free`` changed by options; and its checkpoint."""
        out = self.path = args.resume
        RunFolder.read_only(out, self.script, self.outputs)  # a run folder of this script
        if args.output is not None and args.output.resolve() != out.resolve():
            raise RunError(f"--output: --resume continues the run in its own folder {out}, not {args.output}; accepted: no --output with --resume")  # fmt: skip
        if args.force or args.conf_file is not None:
            raise RunError(f"{'--force' if args.force else '--conf-file'}: cannot be given with --resume (the run keeps its folder and settings)")  # fmt: skip
        path = out / "config.json"
        fix = "restore it (the checkpoint's manifest holds the run's settings) or start again with --force"
        try:
            saved = json.loads(path.read_text())
        except FileNotFoundError:
            raise RunError(f"--resume: {out} holds no config.json of a run of {self.script}") from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise RunError(f"--resume: {path} is not valid JSON ({exc}); {fix}") from None
        recorded = saved.pop("tensorboard", None) if isinstance(saved, dict) else None
        if not isinstance(saved, dict) or set(saved) != set(self.specs):
            got = sorted(saved) if isinstance(saved, dict) else type(saved).__name__
            raise RunError(f"--resume: {path} does not hold the settings of a run of {self.script} (keys {got}); {fix}")  # fmt: skip
        check_settings(saved, self.specs, f"--resume: {path}, key")
        changed = {k: v for k, v in values.items() if k not in self.free and v != saved[k]}
        if changed:
            may = ", ".join("--" + k.replace("_", "-") for k in self.free)
            raise RunError(f"--resume: continues a run as configured; only {may} may change, got {changed}")
        if args.evaluate is None:
            self.tensorboard = resumed_folder(recorded, args.tensorboard, "--tensorboard", "--resume", path)
        cfg = self.config(**{**saved, **values})
        check(cfg, self.size)
        if args.evaluate is None:
            self.folder = RunFolder.open(out, outputs=self.outputs, script=self.script)
        folder = self.folder or RunFolder.read_only(out, self.script, self.outputs)
        cp = self.checkpoint = folder.latest_checkpoint()
        if cp is None:
            raise RunError(f"--resume: {out} has no checkpoint yet (checkpoints need --save-freq >= 1); start it again with --output {out} --force")  # fmt: skip
        workers, done, kept = cp.meta.get("world_size", 1), cp.meta.get("epoch"), cp.meta.get("config")
        if type(done) is not int or type(workers) is not int or not isinstance(kept, dict):
            raise cp.unfit(CHECKPOINT_MANIFEST, "its meta holds no config, epoch and world size")
        if workers != self.size:
            launch = "python"
            if workers > 1:
                launch = f"torchrun with {workers} workers in all, e.g. torchrun --nproc-per-node {workers}"
            raise RunError(f"--resume: {out} was trained by {workers} worker{'s' * (workers > 1)}, this launch has {self.size}; accepted: the same number ({launch} examples/{self.script}): the replay storage and envs are split between the workers")  # fmt: skip
        differ = sorted(k for k, v in asdict(cfg).items() if k not in self.free and kept.get(k) != v)
        if differ:
            raise RunError(f"--resume: {path} differs from its checkpoint's settings in {differ}; restore config.json or start again with --force")  # fmt: skip
        if cfg.epochs < done:
            raise RunError(f"--epochs: {out} has already run {done} epochs; accepted: --epochs >= {done}")
        return cfg, args, True, args.evaluate is None and (self.tensorboard or args.tensorboard) is not None

    # ------------------------------------------------------------------ checkpoints
    def resume(self, fits: Fits) -> tuple[dict[str, Any], dict[str, Any]]:
        """The checkpoint resumed: its shared state (``agent.pt``) and this worker's own part (``<key>.pkl``;
        worker r's ``<key>-<r>.pkl``). Worker 0 reads every part, asks ``fits(state, own, rank)`` whether
        it fits (else the file and why: one line, nothing changed) and hands the others theirs."""
        state, own = self.agreed(lambda: self.read_parts(fits), scatter=True)
        self.rows = state["rows"]
        self.timers.seconds |= state["times"]
        self.seen = dict(self.timers.seconds)
        self.earlier = (state["wall0"], state["cpu0"])
        return state, own

    def read_parts(self, fits: Fits) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        cp = self.checkpoint
        assert cp is not None
        state = cp.load("agent.pt", lambda path: torch.load(path, map_location="cpu", weights_only=False))
        if not isinstance(state, dict) or not {"rows", "times", "wall0", "cpu0"} <= set(state):
            raise cp.unfit("agent.pt", "it holds no run state")
        parts = []
        for rank in range(self.size):
            load = lambda p: pickle.loads(p.read_bytes())  # noqa: E731
            own = {k: cp.load(f"{k}{suffix(rank)}.pkl", load) for k in cp.meta.get("own", ())}
            unfit = fits(state, own, rank)
            if unfit is not None:
                raise cp.unfit(unfit[0].replace(".pkl", f"{suffix(rank)}.pkl"), unfit[1])
            parts.append((state, own))
        return parts

    def save(self, epoch: int, state: Callable[[], tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """Checkpoint ``epoch`` as one unit: the shared state (``agent.pt``, with the curve and the clocks)
        and every worker's own part, which worker 0 gathers and writes (no shared file system needed)."""
        shared, own = state()
        files = {f"{k}{suffix(self.rank)}.pkl": pickle.dumps(v, protocol=5) for k, v in own.items()}
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
        files = {"agent.pt": data.getvalue(), **files}
        writers = {name: (lambda path, b=content: path.write_bytes(b)) for name, content in files.items()}
        meta = {"epoch": epoch, "config": asdict(self.cfg), "world_size": self.size, "own": sorted(own)}
        self.folder.save_checkpoint(epoch, writers, meta)

    # ------------------------------------------------------------------ the curve
    def clocks(self) -> tuple[float, float]:
        """The run's wall and CPU seconds so far, over every session."""
        wall, cpu = time.perf_counter() - self.started[0], time.process_time() - self.started[1]
        return self.earlier[0] + wall, self.earlier[1] + cpu

    def begin(self) -> float:
        """Write config.json and commands.txt (a resumed run's curve cut at its checkpoint), open TensorBoard
        and start the clocks; returns the last epoch's success rate (NaN before the first)."""
        tensorboard = self.tensorboard
        if self.folder is not None:
            if tensorboard is None and self.args.tensorboard is not None:
                tensorboard = make_numbered_folder(self.args.tensorboard, self.path.resolve().name)
            old = (self.path / "commands.txt").read_text() if (self.path / "commands.txt").is_file() else ""
            launcher = "python" if self.size == 1 else f"torchrun (world size {self.size})"
            config = {**asdict(self.cfg), "tensorboard": None if tensorboard is None else str(tensorboard)}
            self.folder.write("config.json", json.dumps(config, indent=2) + "\n")
            self.folder.write(
                "commands.txt", f"{old}{launcher} examples/{self.script} {' '.join(sys.argv[1:])}\n"
            )
            if self.resuming:
                self.folder.write("eval.csv", csv_text(self.rows))  # drops rows written after the checkpoint
                print(
                    f"resumed {self.path} at epoch {self.rows[-1]['epoch'] if self.rows else 0}", flush=True
                )
        if tensorboard is not None:
            from torch.utils.tensorboard import SummaryWriter

            # A resumed run goes on in its folder; TensorBoard hides what a stopped session wrote after the
            # checkpoint (purge_step), so no step shows twice, and no file is removed.
            purge = self.rows[-1]["env_steps"] + 1 if self.resuming and self.rows else None
            self.tb = SummaryWriter(str(tensorboard), purge_step=purge)
        if self.size > 1:  # meet, so that the other workers' later start is not timed as worker 0's wait
            dist.barrier()
        self.started = (time.perf_counter(), time.process_time())
        return self.rows[-1]["success_rate"] if self.rows else float("nan")

    def end_epoch(self, epoch: int, steps: int, updates: int, success: float, figures: dict[str, float], state: Callable[[], tuple[dict[str, Any], dict[str, Any]]]) -> None:  # fmt: skip
        """The epoch's row of eval.csv, its TensorBoard points (``figures`` and the clocks') and printed line,
        and when due (every ``--save-freq`` epochs, and the last) a checkpoint of ``state()``."""
        wall, cpu = self.clocks()
        timers, before = self.timers.seconds, self.rows[-1] if self.rows else {"env_steps": 0, "updates": 0}
        times = {f"t_{k}": round(v, 3) for k, v in timers.items()}
        row = {"epoch": epoch, "env_steps": steps, "updates": updates, "success_rate": success}
        row |= {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), **times}
        self.rows.append(row)
        if self.folder is not None:
            self.folder.write("eval.csv", csv_text(self.rows))
            line = f"epoch {epoch:3d}  steps {steps:8d}  success {success:.3f}  wall {wall:7.0f}s  cpu {cpu:7.0f}s"
            print(line, flush=True)
        if self.tb is not None:  # the rates over this epoch's seconds of collecting and of updating
            spent = {k: v - self.seen[k] for k, v in timers.items()}
            collect, update = spent["act"] + spent["env"] + spent["store"], spent["sample"] + spent["update"]
            scalars = {"eval/success_rate": success, **figures, "train/n_updates": updates,
                       "time/env_steps_per_s": (steps - before["env_steps"]) / max(collect, 1e-9),
                       "time/updates_per_s": (updates - before["updates"]) / max(update, 1e-9),
                       "time/wall_s": row["wall_s"], "time/cpu_s": row["cpu_s"], **{f"time/t_{k}": v for k, v in timers.items()}}  # fmt: skip
            for tag, value in scalars.items():
                self.tb.add_scalar(tag, float(value), steps)
            self.tb.flush()  # a killed run loses no whole epoch of them
        self.seen = dict(timers)
        if self.args.save_freq and (epoch % self.args.save_freq == 0 or epoch == self.cfg.epochs):
            with self.timers("checkpoint"):
                self.earlier, self.started = (wall, cpu), (time.perf_counter(), time.process_time())
                self.save(epoch, state)

    def finish(self, title: str, gif: Callable[[], bytes]) -> None:
        """The success curve's plot and the GIF of the trained policy (worker 0), and where the time went."""
        if self.folder is not None and self.rows:
            steps, success = (
                [r["env_steps"] / 1000 for r in self.rows],
                [r["success_rate"] for r in self.rows],
            )
            title += f", {self.size} workers" if self.size > 1 else ""
            self.folder.write("success.png", curve_png(steps, success, "env steps (thousands)", title))
        if self.folder is not None and not self.args.no_gif:
            self.folder.write("policy.gif", gif())
        if self.args.profile and self.rank == 0:
            total = sum(self.timers.seconds.values()) or 1.0
            print(
                "time:", ", ".join(f"{k} {v:.1f}s ({v / total:.0%})" for k, v in self.timers.seconds.items())
            )

    def where(self) -> str:
        """Where the run stopped, and how to go on: from the latest whole checkpoint on disk."""
        latest = None
        if self.folder is not None:
            with contextlib.suppress(RunError, OSError):
                latest = self.folder.latest_checkpoint(verify=False)
        if latest is None:
            return f"{self.progress()}; no checkpoint was written yet (--save-freq), so a rerun starts over with --force"
        launch = "python" if self.size == 1 else "torchrun ..."
        return f"{self.progress()}; go on from the checkpoint of epoch {latest.tag} with: {launch} examples/{self.script} --resume {self.path}"  # fmt: skip


def suffix(rank: int) -> str:
    """Of the file names of worker ``rank``'s parts of a checkpoint: ``storage-1.pkl``; worker 0's ``storage.pkl``."""
    return f"-{rank}" if rank else ""


def share(n: int, rank: int, size: int) -> tuple[int, int]:
    """Worker ``rank``'s items ``[lo, hi)`` of ``n`` (contiguous; sizes differ by at most one)."""
    return n * rank // size, n * (rank + 1) // size


def part(total: int, lo: int, hi: int, n: int) -> int:
    """The part of ``total`` (a batch, a buffer) that goes with items ``[lo, hi)`` of ``n`` envs."""
    return total * hi // n - total * lo // n


def all_sum(array: np.ndarray) -> np.ndarray:
    """``array`` summed over the workers (itself when alone)."""
    if not dist.is_initialized():
        return array
    tensor = torch.from_numpy(np.array(array))
    dist.all_reduce(tensor)
    return tensor.numpy()


def flat_grads(module: torch.nn.Module) -> torch.Tensor:
    """One zeroed buffer holding every gradient of ``module`` (each ``.grad`` a view into it)."""
    params = list(module.parameters())
    flat = torch.zeros(sum(p.numel() for p in params), device=params[0].device)
    offset = 0
    for p in params:
        p.grad = flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
    return flat


def check_shares(n_envs: int, batch_size: int, buffer_size: int, workers: int, horizon: int) -> None:
    """Refuse a run its workers cannot share: each needs an env, a sample per batch and room for its envs'
    whole episodes of ``horizon`` steps."""
    if workers > n_envs:
        raise RunError(f"--n-envs: {n_envs} envs cannot be shared by {workers} workers; accepted: n_envs >= {workers}, or fewer workers")  # fmt: skip
    for rank in range(workers):
        lo, hi = share(n_envs, rank, workers)
        whose = f" (the share of worker {rank} of {workers})" if workers > 1 else ""
        if part(batch_size, lo, hi, n_envs) < 1:
            raise RunError(f"--batch-size: {batch_size} cannot be shared by {workers} workers; accepted: batch_size >= n_envs ({n_envs})")  # fmt: skip
        if (size := part(buffer_size, lo, hi, n_envs)) // (hi - lo) < horizon:
            raise RunError(f"--buffer-size{whose}: {size} is not accepted; accepted: at least {hi - lo} envs x {horizon} steps = {(hi - lo) * horizon} (HER samples whole episodes)")  # fmt: skip
