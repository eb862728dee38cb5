"""The run machinery of ``examples/her_ddpg.py``: folder, timers, curve, TensorBoard, checkpoints, main.

``her_ddpg.py`` holds the algorithm (its settings, the networks, the loop); this module holds what a run
needs around it, so that the loop reads top to bottom. The folder's rules (lock, atomic checkpoints,
``--force``, settings checked before the first write) are ``examples/runfolder.py``'s, shared with
``examples/train.py``; the workers' collectives are ``examples/workers.py``'s. What is here is
her_ddpg.py's own, as ``checkpointing.py`` and ``evaluation.py`` are train.py's:

* the options and settings are ``examples/ddpg_options.py``'s, every value checked before a write;
* :class:`Run`: the clocks, the curve (``eval.csv``, ``success.png``), TensorBoard and the checkpoints
  of a run (``agent.pt``, each worker's ``storage*.pkl`` and ``envs*.pkl``), and taking one up again;
* :func:`main`: one line for a mistake, Ctrl-C or a lost worker, saying where to resume from.

The functions that build a run take the script's :class:`Recipe` (its ``Config`` class, its ``Trainer``
class and its loop) rather than importing ``her_ddpg``, which runs as ``__main__``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np
import torch
from ddpg_options import (
    ADDED_SETTINGS,
    FREE_ON_RESUME,
    OUTPUTS,
    SCRIPT,
    build_parser,
    cores_each,
    parse_args,
    read_config,
)
from numpy.typing import ArrayLike
from runfolder import (
    Checkpoint,
    RunError,
    RunFolder,
    csv_text,
    curve_png,
    make_numbered_folder,
    run_main,
    write_atomic,
)
from workers import World, launch

from her import HerStorage

if TYPE_CHECKING:  # her_ddpg runs as __main__: its classes reach this module as arguments
    from her_ddpg import Agent, Config, Trainer

TIMERS = ("env", "act", "store", "sample", "update", "sync", "eval", "checkpoint")


@dataclass(frozen=True)
class Recipe:
    """What this module needs of the script: its settings class, its trainer class and its loop."""

    config: type[Config]
    trainer: type[Trainer]
    train: Callable[[Trainer, Run], float]


class Timers:
    """Seconds spent in each phase of :data:`TIMERS` (eval.csv's ``t_*`` columns): ``with timers("env"): ...``."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(TIMERS, 0.0)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - t0

    def move(self, seconds: float, source: str, target: str) -> None:
        """Count ``seconds`` timed as ``source`` as ``target`` (the gradient sums inside an update)."""
        self.seconds[source] -= seconds
        self.seconds[target] += seconds


# ------------------------------------------------------------------------------------------ the run
class Run:
    """Around the loop of ``trainer``: the clocks, the curve, TensorBoard and the checkpoints.

    ``folder`` is rank 0's run folder (``None`` on the other workers, and for ``--evaluate``); every
    ``save_freq`` epochs (0: never) and at the last, :meth:`end_epoch` writes a checkpoint.
    """

    def __init__(
        self, trainer: Trainer, folder: RunFolder | None = None, save_freq: int = 0, log: bool = True
    ) -> None:
        self.trainer, self.folder, self.save_freq, self.log = trainer, folder, save_freq, log
        self.world = trainer.world
        self.saved_epoch = 0  # the epoch of the last whole checkpoint (0: none yet)
        self.rows: list[dict[str, Any]] = []  # the curve: one row per epoch (kept in checkpoints)
        self.wall0, self.cpu0 = 0.0, 0.0  # wall and CPU seconds spent before this process (resume)
        self.tb: Any = None  # a torch.utils.tensorboard.SummaryWriter (rank 0, with --tensorboard)
        # The policy of the best evaluation so far (the first of equals): its epoch, success rate and
        # Agent.policy_state; kept in the checkpoints, for --evaluate --best.
        self.best: dict[str, Any] | None = None
        self._clock = (time.perf_counter(), time.process_time())
        self._epoch_start = (dict(trainer.timers.seconds), trainer.updates)

    def begin(self) -> float:
        """Start this session's clocks; returns the last epoch's success rate (NaN before the first epoch):
        what a finished run that is resumed reports.

        The workers meet first, so that the later start of workers 1, 2, ... (they build their part once
        worker 0 has sent them the settings) is not timed as worker 0's wait in the first exchange: 1.2 s
        in a 12-cycle FetchPush run on 2 workers, a tenth of worker 0's updating time.
        """
        self.world.sum_array(np.zeros(1))
        self._clock = (time.perf_counter(), time.process_time())
        return self.rows[-1]["success_rate"] if self.rows else float("nan")

    def epoch_figures(self) -> np.ndarray:
        """What the epoch's evaluation sums over the workers besides its own figures, so that they cost
        no exchange of their own: the update's losses and Q values (each worker's batch means, weighted by
        its share: the whole batch's) and the training episodes' returns, count and successes."""
        agent = self.trainer.agent
        losses = np.zeros(4) if agent.stats is None else agent.stats.cpu().numpy() * agent.share
        return np.concatenate([losses, self.trainer.rollouts])

    def end_epoch(self, success: float) -> None:
        """The epoch's row of eval.csv, its TensorBoard points, its printed line and, when due, a checkpoint."""
        trainer, cfg = self.trainer, self.trainer.cfg
        if trainer.agent.stats is not None:
            trainer.agent.stats.zero_()
        trainer.rollouts[:] = 0.0
        wall = self.wall0 + time.perf_counter() - self._clock[0]
        cpu = self.cpu0 + time.process_time() - self._clock[1]
        timers = trainer.timers.seconds
        row = {
            "epoch": trainer.epoch,
            "env_steps": trainer.epoch * cfg.n_cycles * cfg.n_envs * trainer.horizon,
            "updates": trainer.updates,
            "success_rate": success,
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1),
            **{f"t_{k}": round(v, 1) for k, v in timers.items()},
        }
        self.rows.append(row)
        if self.best is None or success > self.best["success_rate"]:
            self.best = {"epoch": trainer.epoch, "success_rate": success, **trainer.agent.policy_state()}
        if self.folder is not None:
            self.folder.write("eval.csv", csv_text(self.rows))
        if self.tb is not None:
            self.write_tensorboard(row)
        if self.log and self.world.rank == 0:
            print(
                f"epoch {trainer.epoch:3d}  steps {row['env_steps']:8d}  success {success:.3f}  "
                f"wall {wall:7.0f}s  cpu {cpu:7.0f}s",
                flush=True,
            )
        if self.save_freq and (trainer.epoch % self.save_freq == 0 or trainer.epoch == cfg.epochs):
            with trainer.timers("checkpoint"):
                self.wall0, self.cpu0 = wall, cpu
                self._clock = (time.perf_counter(), time.process_time())
                self.save()
        self._epoch_start = (dict(timers), trainer.updates)

    def write_tensorboard(self, row: dict[str, Any]) -> None:
        """The epoch's figures, at its env-step count, flushed (a killed run loses no whole epoch of them).

        The losses and Q values are means over the epoch's updates of the whole batch; the rates are rank
        0's, over its seconds of collecting (act, env, store) and of updating (sample, update).
        """
        trainer, (before, updates0) = self.trainer, self._epoch_start
        timers = trainer.timers.seconds
        spent = {key: timers[key] - before[key] for key in timers}
        collect_s = spent["act"] + spent["env"] + spent["store"]
        update_s = spent["sample"] + spent["update"]
        updates = trainer.updates - updates0
        totals = trainer.totals
        losses = totals[:4] / max(updates, 1)
        returns, episodes, successes = totals[4:7]
        steps = trainer.cfg.n_cycles * trainer.cfg.n_envs * trainer.horizon
        scalars = {
            "eval/success_rate": row["success_rate"],
            "eval/mean_reward": trainer.eval_return,
            "rollout/ep_rew_mean": returns / max(episodes, 1),
            "rollout/success_rate": successes / max(episodes, 1),
            "train/critic_loss": losses[0],
            "train/actor_loss": losses[1],
            "train/q_mean": losses[2],
            "train/q_target_mean": losses[3],
            "train/n_updates": row["updates"],
            "time/env_steps_per_s": steps / collect_s if collect_s > 0 else 0.0,
            "time/updates_per_s": updates / update_s if update_s > 0 else 0.0,
            "time/wall_s": row["wall_s"],
            "time/cpu_s": row["cpu_s"],
            **{f"time/t_{key}": value for key, value in timers.items()},  # eval.csv's timers
        }
        for tag, value in scalars.items():
            self.tb.add_scalar(tag, float(value), row["env_steps"])
        self.tb.flush()

    def close(self) -> None:
        """Flush and close the TensorBoard events (at the end, and on Ctrl-C or an error)."""
        if self.tb is not None:
            self.tb.close()
            self.tb = None

    # ------------------------------------------------------------------ checkpoints
    def _shared_state(self) -> dict[str, Any]:
        """What every worker holds alike: the networks, optimisers, normalisers, counters and the curve."""
        t = self.trainer
        return {
            "agent": t.agent.state_dict(),
            "epoch": t.epoch,
            "updates": t.updates,
            "times": t.timers.seconds,
            "wall0": self.wall0,
            "cpu0": self.cpu0,
            "reset_seeds": t.reset_seeds,
            "rows": self.rows,
            "best": self.best,
        }

    def _write_storage(self, f: Any) -> None:
        """Pickle this worker's storage shard into the binary file ``f`` (streamed: no copy in memory).
        The storage pickles without its reward function (``pickle_functions=False``): not the env behind it."""
        pickle.dump(self.trainer.storage, f, protocol=5)

    def _envs_bytes(self) -> bytes:
        """This worker's random states, pickled: its envs' generators and its own. At a cycle boundary
        every env is about to be reset, and a Fetch reset (mj_resetData, then draws from its generator)
        depends on nothing else, so an env's generator is all there is of it. (Pickling the vector env
        itself would also carry each MjData's scratch memory: 80 MB for 8 envs, against a few kB.)"""
        mine = {
            "envs": list(self.trainer.envs._rngs),
            "rng": self.trainer.rng.bit_generator.state,
            "torch_rng": torch.get_rng_state().numpy(),
        }
        return pickle.dumps(mine, protocol=5)

    def _write_file(self, path: Path) -> None:
        with path.open("wb") as f:
            self._write_storage(f)

    def _write_envs(self, path: Path) -> None:
        path.write_bytes(self._envs_bytes())

    def save(self) -> None:
        """Write checkpoint ``checkpoints/<epoch>/`` as one unit (``RunFolder.save_checkpoint``).

        Rank 0 writes it all: ``agent.pt`` (the shared state), its own ``storage.pkl`` and ``envs.pkl``,
        and worker r's ``storage-<r>.pkl`` and ``envs-<r>.pkl``, which that worker sends it; only rank 0
        touches the folder, so workers on other machines need no shared file system.
        """
        epoch = self.trainer.epoch
        if self.world.rank > 0:
            storage = io.BytesIO()
            self._write_storage(storage)
            self.world.send_bytes(storage.getbuffer(), 0)
            del storage
            self.world.send_bytes(self._envs_bytes(), 0)
            self.saved_epoch = epoch
            return
        assert self.folder is not None
        received: dict[int, tuple[bytes, bytes]] = {}
        unheard = set(range(1, self.world.size))

        def receive(rank: int, index: int) -> Callable[[Path], None]:
            def write(path: Path) -> None:
                if rank in unheard:
                    received[rank] = self.world.recv_bytes(rank), self.world.recv_bytes(rank)
                    unheard.discard(rank)
                path.write_bytes(received[rank][index])
                if index == 1:
                    del received[rank]  # written: let the memory go

            return write

        state = self._shared_state()
        writers: dict[str, Callable[[Path], None]] = {
            "agent.pt": lambda path: torch.save(state, path),
            "storage.pkl": self._write_file,
            "envs.pkl": self._write_envs,
        }
        for rank in range(1, self.world.size):
            writers[f"storage-{rank}.pkl"] = receive(rank, 0)
            writers[f"envs-{rank}.pkl"] = receive(rank, 1)
        meta = {
            "epoch": epoch,
            "config": asdict(self.trainer.cfg),
            "world_size": self.world.size,
            "launch": launch()[0],  # torchrun's id of the launch that wrote it: its restarts go on from here
        }
        self.folder.save_checkpoint(epoch, writers, meta)
        for rank in sorted(unheard):  # the checkpoint existed already: nothing was written
            self.world.recv_bytes(rank), self.world.recv_bytes(rank)
        self.saved_epoch = epoch

    def load(self, checkpoint: Checkpoint) -> list[tuple[bytes, bytes]]:
        """Take up rank 0's part of ``checkpoint`` (already checked whole); a file that does not fit is one line.

        Returns every other worker's ``(storage, envs)`` bytes, each checked to fit that worker, for
        :meth:`hand_out`.
        """
        state = checkpoint.load("agent.pt", _load_torch)
        self._take_shared(state, checkpoint)
        others = []
        for rank in range(self.world.size):
            suffix = f"-{rank}" if rank else ""
            names = (f"storage{suffix}.pkl", f"envs{suffix}.pkl")
            storage_bytes, envs_bytes = (
                checkpoint.load(name, lambda path: path.read_bytes()) for name in names
            )
            storage, mine = self._fitting((storage_bytes, envs_bytes), rank, checkpoint, names, state)
            if rank == 0:
                self._take_own(storage, mine)
            else:
                others.append((storage_bytes, envs_bytes))
        self.saved_epoch = self.trainer.epoch
        return others

    def hand_out(self, others: list[tuple[bytes, bytes]]) -> None:
        """Rank 0 gives each worker its part of the checkpoint just loaded (the others call :meth:`take`)."""
        self.world.broadcast(self._shared_state())
        for rank, (storage, mine) in enumerate(others, start=1):
            self.world.send_bytes(storage, rank)
            self.world.send_bytes(mine, rank)

    def take(self) -> None:
        """A worker r > 0 takes up its part of the checkpoint rank 0 loaded (rank 0 checked it)."""
        self._take_shared(self.world.broadcast(), None)
        storage, mine = self.world.recv_bytes(0), self.world.recv_bytes(0)
        self._take_own(pickle.loads(storage), pickle.loads(mine))
        self.saved_epoch = self.trainer.epoch

    def _take_shared(self, state: dict[str, Any], checkpoint: Checkpoint | None) -> None:
        t = self.trainer
        try:
            t.agent.load_state_dict(state["agent"])
            t.epoch, t.updates, t.reset_seeds = state["epoch"], state["updates"], state["reset_seeds"]
            t.timers.seconds = {
                **dict.fromkeys(TIMERS, 0.0),
                **state["times"],
            }  # "sync" is newer than some runs
            self.wall0, self.cpu0, self.rows = state["wall0"], state["cpu0"], state["rows"]
            self.best = state.get("best")  # None in checkpoints written before it was kept
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            if checkpoint is None:
                raise
            raise checkpoint.unfit("agent.pt", exc) from None
        self._epoch_start = (dict(t.timers.seconds), t.updates)

    def _fitting(
        self,
        data: tuple[bytes, bytes],
        rank: int,
        checkpoint: Checkpoint,
        names: tuple[str, str],
        legacy: dict[str, Any],
    ) -> tuple[HerStorage, dict[str, Any]]:
        """Worker ``rank``'s storage and envs from their bytes, checked to fit that worker of this run
        (``legacy``: agent.pt's state, which held the random states of runs before workers existed)."""
        lo, hi = World(rank, self.world.size).share(self.trainer.cfg.n_envs)
        n_local = hi - lo
        envs = self.trainer.envs
        storage = checkpoint.load(names[0], lambda path: pickle.loads(data[0]))
        if not isinstance(storage, HerStorage):
            raise checkpoint.unfit(names[0], "holds no HerStorage")
        try:
            storage.check_spaces(self.trainer.observation_space, envs.single_action_space, n_local)
        except ValueError as exc:
            raise checkpoint.unfit(names[0], exc) from None
        mine = checkpoint.load(names[1], lambda path: pickle.loads(data[1]))
        if isinstance(mine, list) and rank == 0 and "rng" in legacy:  # one process, before workers existed:
            mine = {
                "envs": mine,
                "rng": legacy["rng"],
                "torch_rng": legacy["torch_rng"].numpy(),
            }  # in agent.pt
        generators = mine.get("envs") if isinstance(mine, dict) else None
        if (
            not isinstance(generators, list)
            or len(generators) != n_local
            or not all(isinstance(g, np.random.Generator) for g in generators)
        ):
            raise checkpoint.unfit(names[1], f"holds no random states of {n_local} envs")
        return storage, mine

    def _take_own(self, storage: HerStorage, mine: dict[str, Any]) -> None:
        t = self.trainer
        t.envs.reset(seed=list(range(t.n_local)))  # seeded: its next reset draws from the streams set here
        t.envs._rngs = list(mine["envs"])
        t.rng.bit_generator.state = mine["rng"]
        torch.set_rng_state(torch.from_numpy(np.array(mine["torch_rng"], dtype=np.uint8)))
        storage.pickle_functions = False  # storages of older runs were pickled with their flag on
        storage.set_functions(t.envs.compute_reward)
        t.storage = storage


# ------------------------------------------------------------------------------------------ outputs
def record_gif(
    agent: Agent, env_id: str, path: Path, episodes: int = 3, seed: int = 0, size: int = 240
) -> None:
    """A GIF of ``episodes`` greedy episodes (``size`` x ``size`` frames, 25 frames per second), written atomically."""
    import imageio.v2 as imageio

    env = gym.make(env_id, render_mode="rgb_array", width=size, height=size)
    frames: list[ArrayLike] = []  # imageio's mimsave takes a list of ArrayLike
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        frames.append(cast(np.ndarray, env.render()))  # rgb_array frames
        done = False
        while not done:
            action = agent.pi(obs["observation"][None], obs["desired_goal"][None])[0]
            obs, _, terminated, truncated, _ = env.step(action)
            frames.append(cast(np.ndarray, env.render()))
            done = terminated or truncated
    env.close()
    data = io.BytesIO()
    imageio.mimsave(data, frames, format="GIF", duration=40, loop=0)
    write_atomic(path, data.getvalue())


def plot(rows: list[dict[str, Any]], title: str) -> bytes:
    """The success curve of ``rows`` as a PNG file's bytes."""
    steps = [r["env_steps"] / 1000 for r in rows]
    return curve_png(steps, [r["success_rate"] for r in rows], "env steps (thousands)", title)


# ------------------------------------------------------------------------------------------ starting
def _load_torch(path: Path) -> Any:
    """A checkpoint's ``agent.pt``, its tensors on the CPU whatever device wrote them (``load_state_dict``
    then moves them to the networks' own device), so a run trained on a GPU resumes or is evaluated on any."""
    return torch.load(path, map_location="cpu", weights_only=False)


def evaluate_checkpoint(
    recipe: Recipe, cfg: Config, out: Path, episodes: int, best: bool = False
) -> tuple[float, str]:
    """Success of the greedy policy of the run's last checkpoint (``best``: of the best evaluation that
    checkpoint holds) over ``episodes`` episodes, and a report of which policy it is, where it fails and
    what the normalisers' clip (``cfg.norm_clip``, which may differ from the run's) hid from it; writes
    nothing.

    ``cfg.policy_polyak`` may differ from the run's where the checkpoint holds that policy: 0, the actor
    itself; the run's ``polyak``, the target actor (the running average of the actor that moves by
    ``polyak`` every cycle). Episode seeds start at 2e9, apart from training's and from the per-epoch
    evaluations'.
    """
    checkpoint = RunFolder.read_only(out, SCRIPT, OUTPUTS).latest_checkpoint()
    if checkpoint is None:
        raise RunError(f"--resume: {out} has no checkpoint yet (checkpoints need --save-freq >= 1)")
    own, asked = read_config(out, type(cfg))[0]["policy_polyak"], cfg.policy_polyak
    if asked != own and best:
        raise RunError(
            f"--policy-polyak: the best policy kept is the run's own greedy policy (policy_polyak {own}); "
            f"accepted: --best with no --policy-polyak, or --policy-polyak {own}"
        )
    if asked not in (own, 0.0, cfg.polyak):
        raise RunError(
            f"--policy-polyak: {asked} is not a policy this run keeps; accepted: 0 (the actor), {cfg.polyak} "
            f"(the target actor: the running average moved by --polyak)"
            + (f", {own} (the run's own average)" if own else "")
        )
    trainer = recipe.trainer(replace(cfg, eval_episodes=episodes, buffer_size=1))  # no replay needed
    state = checkpoint.load("agent.pt", _load_torch)
    policy = "" if asked == 0 else f" (the actor's running average, policy_polyak {asked})"
    if asked != own and asked == cfg.polyak:  # the target actor is that average, bit for bit
        state["agent"] = {**state["agent"], "actor_average": state["agent"]["actor_target"]}
        policy = f" (the actor's running average, policy_polyak {asked}: the target actor)"
    if best and state.get("best") is None:
        raise RunError(
            f"--best: the checkpoint {checkpoint.path} holds no best policy (it was written before they were "
            "kept); accepted: --evaluate without --best"
        )
    try:
        if best:
            trainer.agent.load_policy_state(state["best"])
            which = f"the best evaluation's policy: epoch {state['best']['epoch']}, "
            which += f"success {state['best']['success_rate']:.3f} at that evaluation"
        else:
            trainer.agent.load_state_dict(state["agent"])
            which = f"the last checkpoint's policy: epoch {state['epoch']}"
        which += policy
    except (KeyError, TypeError, RuntimeError) as exc:
        raise checkpoint.unfit("agent.pt", exc) from None
    success, report = trainer.evaluate_report(base=2 * 10**9)
    return success, f"{which}\n{report}"


def start(
    recipe: Recipe, cfg: Config, out: Path, args: argparse.Namespace, argv: list[str], world: World
) -> tuple[RunFolder, Run, list[tuple[bytes, bytes]]]:
    """Rank 0: lock the run folder (new, or the one resumed), write config.json and commands.txt, build
    the run; returns with it the other workers' parts of the checkpoint resumed (empty when new).

    What is refused after the lock is taken releases it (``main`` may be called again in this process).
    """
    if args.resume is None:
        folder = RunFolder.create(out, force=args.force, outputs=OUTPUTS, script=SCRIPT)
    else:
        folder = RunFolder.open(out, outputs=OUTPUTS, script=SCRIPT)
    try:
        return folder, *_take_up(recipe, folder, cfg, args, argv, world)
    except BaseException:
        folder.close()
        raise


def _take_up(
    recipe: Recipe, folder: RunFolder, cfg: Config, args: argparse.Namespace, argv: list[str], world: World
) -> tuple[Run, list[tuple[bytes, bytes]]]:
    """The run of a locked folder: a new run's, or the resumed one's at its latest checkpoint."""
    out = folder.path
    launcher = "python" if world.size == 1 else f"torchrun (world size {world.size})"
    commands = " ".join([launcher, "examples/her_ddpg.py", *argv]) + "\n"
    checkpoint = None
    if args.resume is not None:
        checkpoint = folder.latest_checkpoint()
        if checkpoint is None:
            raise RunError(
                f"--resume: {out} has no checkpoint yet (checkpoints need --save-freq >= 1); "
                f"start it again with --output {out} --force"
            )
        saved, done = checkpoint.meta.get("config", {}), checkpoint.meta.get("epoch")
        workers = checkpoint.meta.get("world_size", 1)
        if not isinstance(saved, dict) or type(done) is not int or type(workers) is not int:
            raise checkpoint.unfit("MANIFEST.json", "its meta holds no config, epoch and world size")
        if workers != world.size:
            raise RunError(
                f"--resume: {out} was trained by {workers} worker{'s' if workers > 1 else ''}, this launch has "
                f"{world.size}; accepted: the same number ({_launch(workers)}): the replay storage and envs are "
                "split between the workers"
            )
        saved = {**ADDED_SETTINGS, **saved}
        changed = sorted(k for k, v in asdict(cfg).items() if k not in FREE_ON_RESUME and saved.get(k) != v)
        if changed:
            raise RunError(
                f"--resume: {out / 'config.json'} differs from its checkpoint's settings in {changed}; "
                "restore config.json or start again with --force"
            )
        if cfg.epochs < done:
            raise RunError(f"--epochs: {out} has already run {done} epochs; accepted: --epochs >= {done}")
        path = out / "commands.txt"
        commands = (path.read_text() if path.is_file() else "") + commands
    tensorboard: Path | None = args.tensorboard_run
    track = tensorboard is not None or args.tensorboard is not None
    run = Run(recipe.trainer(cfg, world, args.env_threads, track=track), folder, args.save_freq)
    others: list[tuple[bytes, bytes]] = []
    if checkpoint is not None:
        others = run.load(checkpoint)  # before any write: a checkpoint that does not fit changes nothing
    if tensorboard is None and args.tensorboard is not None:  # a new run, or one that had no TensorBoard
        tensorboard = make_numbered_folder(args.tensorboard, out.resolve().name)
    config = {**asdict(cfg), "tensorboard": None if tensorboard is None else str(tensorboard)}
    folder.write("config.json", json.dumps(config, indent=2) + "\n")  # --epochs may have grown
    folder.write("commands.txt", commands)  # every command that wrote to this run, in order
    if checkpoint is not None:
        folder.write("eval.csv", csv_text(run.rows))  # drops rows written after the checkpoint
        restarts = launch()[1]
        again = f" (torchrun restarted the workers: restart {restarts})" if restarts else ""
        print(f"resumed {out} at epoch {run.trainer.epoch}{again}", flush=True)
    if tensorboard is not None:
        from torch.utils.tensorboard import SummaryWriter

        # A resumed run goes on in the same folder; TensorBoard hides what a stopped session wrote after
        # the checkpoint (purge_step: steps from there on), so no step is shown twice. No file is removed.
        steps = run.rows[-1]["env_steps"] if checkpoint is not None and run.rows else None
        run.tb = SummaryWriter(str(tensorboard), purge_step=None if steps is None else steps + 1)
    return run, others


def _launch(workers: int) -> str:
    if workers == 1:
        return "python examples/her_ddpg.py"
    return f"torchrun with {workers} workers in all, e.g. torchrun --nproc-per-node {workers} examples/her_ddpg.py"


# ------------------------------------------------------------------------------------------ main
def main(recipe: Recipe, argv: list[str] | None = None, description: str = "") -> float:
    """Train, resume or evaluate a run; returns the final success rate.

    A user's mistake (or a damaged file) ends with one line and exit status 2; Ctrl-C or SIGTERM with one
    line saying where to resume from and status 130; a failed write (a full disk) with one line and 1.
    Under ``torchrun`` rank 0 says these lines; a worker that loses another says so and exits with 1.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    progress: dict[str, Any] = {}

    def body() -> float:
        world = World.from_env(cores_each=cores_each(argv))
        progress["world"] = world
        try:
            return _train(recipe, argv, progress, world, description)
        finally:
            world.close()

    follower = os.environ.get("RANK", "0") not in ("", "0")
    return run_main(SCRIPT, body, lambda: _where(progress), quiet_interrupt=follower)


def _train(
    recipe: Recipe, argv: list[str], progress: dict[str, Any], world: World, description: str
) -> float:
    if world.rank > 0:
        return _follow(recipe, argv, progress, world)
    try:
        cfg, out, args = parse_args(argv, world, recipe.config, description)
        progress["out"] = out
        if args.evaluate is not None:
            success, report = evaluate_checkpoint(recipe, cfg, out, args.evaluate, args.best)
            print(f"{out}: success rate {success:.3f} over {args.evaluate} episodes\n{report}")
            return success
        folder, run, others = start(recipe, cfg, out, args, argv, world)
    except BaseException:
        _tell_stopped(world)
        raise
    progress["run"] = run
    with folder, contextlib.closing(run):
        if world.size > 1:
            go = {"config": cfg, "save_freq": args.save_freq, "resumed": args.resume is not None}
            world.broadcast({**go, "track": run.trainer.agent.stats is not None})
            if args.resume is not None:
                run.hand_out(others)
            del others
        success = recipe.train(run.trainer, run)
        title = cfg.env_id.split("/")[-1] + f" DDPG+HER, seed {cfg.seed}"
        if world.size > 1:
            title += f", {world.size} workers"
        if run.rows:
            folder.write("success.png", plot(run.rows, title))
        if not args.no_gif:
            folder.record("policy.gif")
            record_gif(run.trainer.agent, cfg.env_id, out / "policy.gif", seed=10**9 + cfg.seed)
    if args.profile:
        times = run.trainer.timers.seconds
        total = sum(times.values())
        print("time:", ", ".join(f"{k} {v:.1f}s ({v / total:.0%})" for k, v in times.items()))
    print(f"final success rate {success:.3f} over {cfg.eval_episodes} episodes")
    return success


def _tell_stopped(world: World) -> None:
    """Rank 0 refused to start (its line says why): let the other workers, waiting for it, stop too."""
    if world.size > 1:
        try:
            world.broadcast(None)
        except RunError:  # they are gone already
            pass


def _follow(recipe: Recipe, argv: list[str], progress: dict[str, Any], world: World) -> float:
    """A worker r > 0: the run as rank 0 set it up (settings, and the checkpoint resumed), then its share."""
    go = world.broadcast()
    if go is None:
        raise SystemExit(2)  # rank 0 refused the run and said why
    args = build_parser(recipe.config, "").parse_args(argv)  # rank 0 accepted it: this worker's --env-threads
    trainer = recipe.trainer(go["config"], world, args.env_threads, track=go["track"])
    run = Run(trainer, None, go["save_freq"], log=False)
    progress["run"] = run
    if go["resumed"]:
        run.take()
    return recipe.train(trainer, run)


def _where(progress: dict[str, Any]) -> str:
    """Where a run stopped and how to go on from there."""
    run: Run | None = progress.get("run")
    if run is None:
        return "before training started"
    where = f"at epoch {run.trainer.epoch}, cycle {run.trainer.cycle}"
    if run.saved_epoch:
        launch = "python examples/her_ddpg.py" if run.world.size == 1 else "torchrun ... examples/her_ddpg.py"
        return (
            f"{where}; go on from the checkpoint of epoch {run.saved_epoch} with: "
            f"{launch} --resume {progress.get('out')}"
        )
    return f"{where}; no checkpoint was written yet (--save-freq), so a rerun starts over with --force"
