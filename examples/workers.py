"""The workers of a run on ``torch.distributed``: which one this process is, its share, the collectives.

``torchrun`` starts W copies of a script and tells each, through the environment (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), who it is and where to meet the others;
:meth:`World.from_env` joins them in a process group: gloo for tensors on the CPU, and NCCL for those on a
GPU where CUDA is present (:func:`backend`). Without
``torchrun`` (or with one worker) it is the world of one: no process group, every collective a no-op,
so the one-process run does exactly what it did before workers existed.

A worker that dies closes its sockets, so the others' next collective fails at once (gloo: "Connection
reset by peer"); one that hangs is given up on after ``TIMEOUT_S``. Either way each survivor raises
:class:`WorkerLost`, one line, instead of a traceback or a hang. A launcher that dies (``kill -9`` of
``torchrun``) takes its workers with it (:func:`stop_with_launcher`).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
from runfolder import RunError

# Seconds a worker waits in a collective for the others (a checkpoint of a 4M-transition storage,
# written by rank 0 while the others wait, takes well under a minute).
TIMEOUT_S = 300
# Seconds a worker whose launcher is gone has to stop by itself before it is killed (stop_with_launcher).
LAUNCHER_GRACE_S = 10.0


class WorkerLost(RunError):
    """Another worker stopped (or cannot be reached): this one stops too (exit status 1)."""

    exit_code = 1


@dataclass(frozen=True)
class World:
    """This worker's ``rank`` among ``size`` workers (rank 0 writes the run folder)."""

    rank: int = 0
    size: int = 1

    @classmethod
    def from_env(cls, cores_each: int = 1) -> World:
        """The world ``torchrun`` describes in the environment, joined; the world of one without it.

        Each worker of a machine is pinned to ``cores_each`` cores of its own where they fit (see :func:`pin`).
        """
        try:
            size, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
        except ValueError:
            raise RunError(
                f"WORLD_SIZE={os.environ.get('WORLD_SIZE')!r} / RANK={os.environ.get('RANK')!r} are not integers; "
                "start workers with torchrun, which sets them"
            ) from None
        if size < 1 or not 0 <= rank < size:
            raise RunError(
                f"RANK={rank} WORLD_SIZE={size} do not describe a worker; start workers with torchrun"
            )
        if "TORCHELASTIC_RUN_ID" in os.environ:  # started by torchrun (of any number of workers)
            stop_with_launcher()
        if size == 1:
            return cls()
        pin(cores_each)
        import torch.distributed as dist

        where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
        timeout = timedelta(seconds=TIMEOUT_S)
        try:
            dist.init_process_group(
                backend(), store=_attempt_store(size, timeout), rank=rank, world_size=size, timeout=timeout
            )
        except (RuntimeError, ValueError) as exc:
            raise WorkerLost(
                f"worker {rank} of {size} could not join the others at {where}: {_first_line(exc)}"
            ) from None
        world = cls(rank, size)
        world._check_alike()
        return world

    def _check_alike(self) -> None:
        """Stop before anything is written where a worker runs other versions than worker 0 (:func:`software`):
        the workers must compute alike for a seed to give the same run on one machine or several. Worker 0
        names every worker that differs; the others stop without a word (exit status 2)."""
        import torch.distributed as dist

        everyone: list[Any] = [None] * self.size
        with self._comm("comparing versions"):
            dist.all_gather_object(everyone, (socket.gethostname(), software()))
        first = everyone[0][1]
        differ = [
            f"worker {r} on {host}: "
            + ", ".join(f"{k} {v}" for k, v in versions.items() if first.get(k) != v)
            for r, (host, versions) in enumerate(everyone)
            if versions != first
        ]
        if not differ:
            return
        if self.rank > 0:
            raise SystemExit(2)
        mine = ", ".join(f"{k} {v}" for k, v in first.items())
        raise RunError(
            f"the workers run other versions than worker 0 on {everyone[0][0]} ({mine}): {'; '.join(differ)}; "
            "accepted: the same versions on every machine of the run"
        )

    # ------------------------------------------------------------------ shares
    def share(self, n: int) -> tuple[int, int]:
        """This worker's items ``[lo, hi)`` of ``n`` (contiguous; sizes differ by at most one)."""
        return n * self.rank // self.size, n * (self.rank + 1) // self.size

    # ------------------------------------------------------------------ collectives
    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over the workers in place; every worker gets the same bits."""
        return self.start_sum(tensor)()

    def start_sum(
        self, tensor: torch.Tensor, scratch: torch.Tensor | None = None
    ) -> Callable[[], torch.Tensor]:
        """Start summing ``tensor`` over the workers in place; the returned call waits for the sum and returns
        ``tensor``. Until then ``tensor`` must not be touched; the caller may compute anything else meanwhile.

        A power-of-two world exchanges whole buffers pairwise (recursive doubling: ``log2 W`` rounds, each
        ``a + b`` on one side and ``b + a`` on the other, equal in floating point); on two workers this took
        half the time of gloo's ring ``all_reduce`` (0.63 against 1.25 ms for the 140k float32 gradients of
        one network, between two otherwise idle processes here). The first round is posted when this returns
        (gloo writes what the socket takes at once, and its own thread moves the rest); further rounds run
        in the wait. Other sizes use an asynchronous ``all_reduce``. ``scratch`` (like ``tensor``) receives the peer's buffer; it is made
        when not given.
        """
        if self.size == 1:
            return lambda: tensor
        import torch.distributed as dist

        if self.size & (self.size - 1):
            with self._comm("summing"):
                work = dist.all_reduce(tensor, async_op=True)

            def reduced() -> torch.Tensor:
                with self._comm("summing"):
                    work.wait()
                return tensor

            return reduced
        other = torch.empty_like(tensor) if scratch is None else scratch

        def exchange(step: int) -> list[Any]:
            peer = self.rank ^ step
            if tensor.is_cuda:  # NCCL: both sides' sends would wait for receives posted after them
                return dist.batch_isend_irecv(
                    [dist.P2POp(dist.isend, tensor, peer), dist.P2POp(dist.irecv, other, peer)]
                )
            return [dist.isend(tensor, peer), dist.irecv(other, peer)]

        with self._comm("summing"):
            first = exchange(1)

        def summed() -> torch.Tensor:
            with self._comm("summing"):
                works, step = first, 1
                while True:
                    for work in works:
                        if work is not None:  # None only for a rank outside the group
                            work.wait()
                    tensor.add_(other)
                    step *= 2
                    if step >= self.size:
                        return tensor
                    works = exchange(step)

        return summed

    def sum_array(self, array: np.ndarray) -> np.ndarray:
        """``array`` summed over the workers (a new array; ``array`` itself when alone)."""
        if self.size == 1:
            return array
        tensor = torch.from_numpy(np.array(array))
        return self.sum_(tensor).numpy()

    def broadcast(self, obj: Any = None) -> Any:
        """Rank 0's ``obj`` on every worker (pickled; for settings and states, not per-step data)."""
        if self.size == 1:
            return obj
        import torch.distributed as dist

        box = [obj]
        with self._comm("waiting for worker 0"):
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def send_bytes(self, data: bytes | memoryview, dst: int) -> None:
        """Send ``data`` to worker ``dst`` (which calls :meth:`recv_bytes`)."""
        import torch.distributed as dist

        with self._comm(f"sending to worker {dst}"):
            dist.send(torch.tensor([len(data)], dtype=torch.int64), dst)
            if data:
                writable = data if isinstance(data, memoryview) and not data.readonly else bytearray(data)
                dist.send(torch.frombuffer(writable, dtype=torch.uint8), dst)

    def recv_bytes(self, src: int) -> bytes:
        """The bytes worker ``src`` sends with :meth:`send_bytes`."""
        import torch.distributed as dist

        with self._comm(f"receiving from worker {src}"):
            size = torch.empty(1, dtype=torch.int64)
            dist.recv(size, src)
            data = torch.empty(int(size), dtype=torch.uint8)
            if int(size):
                dist.recv(data, src)
        return data.numpy().tobytes()

    def close(self) -> None:
        """Leave the process group (at the end of a run; a no-op when alone)."""
        if self.size > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()

    @contextmanager
    def _comm(self, doing: str) -> Iterator[None]:
        try:
            yield
        except RuntimeError as exc:  # gloo's errors (DistBackendError, DistNetworkError) are RuntimeErrors
            raise WorkerLost(
                f"worker {self.rank} of {self.size}: another worker stopped or cannot be reached while {doing} "
                f"({_first_line(exc)}); this worker stops too. {_going_on()}"
            ) from None


def software() -> dict[str, str]:
    """The versions a worker computes with (Python, torch, NumPy, MuJoCo, Gymnasium, goalenvs)."""
    import platform

    import gymnasium
    import mujoco

    import goalenvs

    return {
        "Python": platform.python_version(),
        "torch": str(torch.__version__),
        "numpy": np.__version__,
        "mujoco": mujoco.__version__,
        "gymnasium": gymnasium.__version__,
        "goalenvs": goalenvs.__version__,
    }


def _going_on() -> str:
    """How the run goes on after a lost worker: by ``torchrun``'s next restart, while it has restarts left."""
    most = os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")
    restarts = launch()[1]
    if most.isdigit() and restarts < int(most):
        return f"torchrun restarts the workers (restart {restarts + 1} of {most}): they go on from the last checkpoint"
    return "Resume the run from its last checkpoint with the same launch and --resume"


def backend() -> str:
    """The process group's backends: gloo for tensors on the CPU (the normalisers' sums, the checkpoints'
    parts, and the gradients of networks on the CPU) and, where CUDA is present, NCCL for tensors on a GPU
    (the gradients of networks under ``--device cuda``; untested here: no GPU). NCCL makes its
    communicators on first use, so a run on the CPU of a GPU machine never starts one."""
    import torch.distributed as dist

    return "cpu:gloo,cuda:nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"


def _attempt_store(size: int, timeout: timedelta) -> Any:
    """The store the workers meet in: under ``torchrun``, its own (the launcher's), with keys of this attempt
    only; elsewhere None (``init_process_group`` makes one from ``MASTER_ADDR`` and ``MASTER_PORT``).

    Why: after a restart (``--max-restarts``) the launcher's store still holds the first attempt's keys,
    among them where each dead worker listened; a worker that read one before its peer wrote the new one
    waited on a closed port until the timeout (2 restarts in 3 under ``--standalone`` in a scratch script
    of two workers, one killing itself; 6 in 6 went on with the keys kept apart).
    """
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    import torch.distributed as dist

    store = dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), size, is_master=False, timeout=timeout
    )
    return dist.PrefixStore(f"goalenvs/attempt_{launch()[1]}", store)


def launch() -> tuple[str | None, int]:
    """This launch's id, as ``torchrun`` names it (``TORCHELASTIC_RUN_ID``: a fresh one per ``--standalone``
    launch, ``--rdzv-id`` on a cluster; None outside ``torchrun`` and for its default ``none``, which names
    no launch), and how many times ``torchrun`` has restarted the workers since the launch began
    (``--max-restarts``; 0 on the first attempt)."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID") or None
    restarts = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return (None if run_id == "none" else run_id), (int(restarts) if restarts.isdigit() else 0)


def stop_with_launcher(grace_s: float = LAUNCHER_GRACE_S) -> threading.Thread:
    """Stop this process when the process that started it (``torchrun``) is gone; returns the watching thread.

    Why: ``torchrun`` starts each worker in a session of its own and stops them itself when it is
    stopped (Ctrl-C, SIGTERM). Killed with SIGKILL (``kill -9``, the out-of-memory killer), it cannot: its
    workers would go on training, unseen, using the cores and holding the run folder.

    How: a daemon thread looks at the parent's pid once a second. Once it has changed (the worker was
    handed to ``init``), the thread sends this process SIGTERM, which stops it as Ctrl-C does (rank 0's
    one line says where to resume; the others of a run over several machines stop as they lose it); a
    worker that cannot act on it within ``grace_s`` (blocked in a C++ call: joining the process group,
    waiting for a peer) is killed. A launcher that died before this call is not seen (the worker's first
    second; it then fails to join the others).
    """
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="launcher-watch", daemon=True)
    thread.start()
    return thread


def part(total: int, lo: int, hi: int, n: int) -> int:
    """The part of ``total`` that goes with items ``[lo, hi)`` of ``n`` (the parts of a partition sum to
    ``total``): a worker's share of a batch or of a buffer, following its share of the envs."""
    return total * hi // n - total * lo // n


def pin(cores_each: int) -> set[int] | None:
    """Pin this worker to ``cores_each`` cores of its own, when its machine's workers fit on the cores this
    process may use (``LOCAL_RANK`` of ``LOCAL_WORLD_SIZE``); returns the cores, or None (left alone).

    Why: each exchange of gradients wakes a worker's communication thread; with the workers and their
    threads free to move between cores, wake-ups wait behind the other worker's computation. Pinned,
    two FetchPush workers on the 2-core development machine spent 3.2 instead of 4.6 ms an update
    exchanging gradients (``t_sync`` of ``her_ddpg.py --profile`` over 12 cycles).
    """
    try:
        local, local_size = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
        allowed = sorted(os.sched_getaffinity(0))
    except (KeyError, ValueError, AttributeError):
        return None
    if local_size * cores_each > len(allowed) or not 0 <= local < local_size:
        return None
    cores = set(allowed[local * cores_each : (local + 1) * cores_each])
    os.sched_setaffinity(0, cores)
    return cores


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[0].split())
    # gloo prefixes its messages with the source file that raised them: keep the message.
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]
    # Drop gloo's advice after the message ("This is typically caused by a remote worker crashing. Check
    # the logs ..."): the line says what to do.
    text = text.replace(" GLHF! 🏖️", "").split(" This is typically caused by ")[0]
    return text if len(text) <= 200 else text[:197] + "..."
