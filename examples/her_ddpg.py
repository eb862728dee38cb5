"""DDPG + HER as in the HER paper, compact, on ``her.HerStorage``: the Fetch recipe for one CPU process.

    python examples/her_ddpg.py --env goalenvs/FetchPush-v0 --seed 0
    python examples/her_ddpg.py --resume runs/FetchPush-v0_ddpg_s0          # continue a stopped run
    torchrun --standalone --nproc-per-node 2 examples/her_ddpg.py --env goalenvs/FetchPush-v0   # 2 workers

Per-task settings (epochs, envs per cycle, batch) come from ``examples/hyperparams/her_ddpg.yml``;
command-line options override them.

The algorithm is the one of Andrychowicz et al. (2017) and of OpenAI's multi-goal robotics report
(Plappert et al., 2018), whose Fetch results the tutorials reproduce with 8-19 MPI workers: each
*cycle* collects one episode in each of ``n_envs`` envs (the paper's 8 workers x 2 rollouts = 16),
then runs ``n_batches`` (40) Adam updates of batch ``batch_size`` (2048: 8 workers x 256, the
gradient the workers average), then moves the target networks once (polyak 0.95). An *epoch* is
``n_cycles`` (50) cycles. Exploration: Gaussian noise 0.2 plus 30% uniformly random actions.
Observations and goals are normalised by running statistics, clipped to +-5. The actor's loss has an
L2 penalty on its actions; critic targets are clipped to ``[-1/(1-gamma), 0]`` (Fetch rewards are
0 or -1). One process does the work of the paper's 8 workers: the envs are cheap, the updates are
the cost, and their hidden layers run in bfloat16 (``--no-bf16`` to turn it off), several times
faster than float32 at batch 2048 on a CPU with AMX or AVX-512 BF16. ``--profile`` prints where the
time went.

Writes to ``--output`` (default ``runs/<env>_ddpg_s<seed>``): ``config.json``, ``eval.csv`` (one row
per epoch: success over ``eval_episodes`` greedy episodes, steps, updates, wall and CPU seconds,
profile), ``success.png`` and, every ``--save-freq`` epochs and at the end, a checkpoint in
``checkpoints/<epoch>/``: ``agent.pt`` (networks, optimisers, normalisers, the curve), ``storage.pkl``
(the replay storage) and ``envs.pkl`` (the envs' and the run's random states), switched in as one
unit (``examples/runfolder.py``: written aside, fsynced, renamed; sizes and hashes checked on load).
The folder is locked while a run uses it; ``--force`` removes only what a run wrote there.
``--resume`` continues from the last checkpoint to the configured number of epochs (``--epochs`` may
raise it; equal to the epochs done, it only rewrites the plot and GIF), appending to the same curve.
On the same machine and torch build the resumed run is bit-for-bit the uninterrupted one: checkpoints
fall on cycle boundaries, where every env is about to be reset, and hold every random state
(``tests/examples/test_her_ddpg.py`` checks it, also after ``kill -9`` at random moments).
Ctrl-C (or SIGTERM) stops with one line saying where to resume from.

``--tensorboard DIR`` also writes TensorBoard events, one point per epoch at its env-step count, to a
folder of the run's own, ``DIR/<output folder's name>_<N>`` (N: one above the highest there, as
stable-baselines3 numbers its runs), named in ``config.json``: the evaluation's success rate and mean
return, the training episodes' mean return and success rate, the critic's and actor's losses and the
mean Q value and target over the epoch's updates (summed as tensors during the updates, read once an
epoch), collection env-steps/s and updates/s, and the timers of ``eval.csv``. ``--resume`` goes on in
that folder (TensorBoard hides what a stopped session wrote after the checkpoint); under ``torchrun``
only rank 0 writes.

Under ``torchrun`` the run is W workers (``examples/workers.py``): each steps its share of the envs,
keeps its own storage shard and samples its share of each batch; the gradients of every update and
the normalisers' statistics are summed over the workers, so every setting means what it means in one
process. Rank 0 writes the folder; its checkpoints hold every worker's part (``storage-<r>.pkl``,
``envs-<r>.pkl``), and ``--resume`` needs the same number of workers. docs/training.md says more.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import io
import json
import os
import pickle
import sys
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import yaml
from runfolder import (  # examples/runfolder.py (examples/ is on sys.path)
    Checkpoint,
    Range,
    RunError,
    RunFolder,
    check_capacity,
    check_new_folder,
    check_settings,
    folder_path,
    make_numbered_folder,
    resumed_folder,
    run_main,
    write_atomic,
)
from torch import nn
from workers import World

import goalenvs  # noqa: F401  (registers the goalenvs/ ids)
from her import HerStorage

SCRIPT = "her_ddpg.py"
CONF_FILE = Path(__file__).resolve().parent / "hyperparams" / "her_ddpg.yml"
TIMERS = ("env", "act", "store", "sample", "update", "sync", "eval", "checkpoint")
# What a run writes at the top of its folder (besides checkpoints/): --force removes these, if a run wrote them.
OUTPUTS = ("config.json", "commands.txt", "eval.csv", "success.png", "policy.gif")


@dataclass
class Config:
    """Hyperparameters (the HER paper's values for Fetch unless noted) and run settings."""

    env_id: str = "goalenvs/FetchPush-v0"
    seed: int = 0
    epochs: int = 20
    n_envs: int = 16  # episodes per cycle (paper: 8 workers x 2 rollouts)
    n_cycles: int = 50
    n_batches: int = 40
    batch_size: int = 2048  # paper: 256 per worker, averaged over 8 workers
    buffer_size: int = 1_000_000
    hidden: int = 256
    layers: int = 3
    lr_actor: float = 1e-3
    lr_critic: float = 1e-3
    gamma: float = 0.98
    polyak: float = 0.95
    action_l2: float = 1.0
    noise_eps: float = 0.2
    random_eps: float = 0.3
    n_sampled_goal: int = 4  # 'future' goals; 80% of each batch relabelled
    clip_obs: float = 200.0
    norm_clip: float = 5.0
    norm_eps: float = 0.01
    eval_episodes: int = 100
    bf16: bool = True
    threads: int = 1


# The accepted values of every numeric setting, checked before anything is written (options, the
# --conf-file entry and, on --resume, config.json alike).
_PROBABILITY = Range(float, 0.0, 1.0)
RANGES: dict[str, Range] = {
    "seed": Range(int, 0, 2**32 - 1),
    **{name: Range(int, 1) for name in ("epochs", "n_envs", "n_cycles", "n_batches", "batch_size",
                                        "buffer_size", "hidden", "layers", "eval_episodes", "threads")},
    "lr_actor": Range(float, 0.0, low_open=True),
    "lr_critic": Range(float, 0.0, low_open=True),
    "gamma": Range(float, 0.0, 1.0, high_open=True),  # 1: the critic's target clip 1/(1-gamma) is infinite
    "polyak": _PROBABILITY,
    "action_l2": Range(float, 0.0),
    "noise_eps": Range(float, 0.0),
    "random_eps": _PROBABILITY,
    "n_sampled_goal": Range(int, 0),
    "clip_obs": Range(float, 0.0, low_open=True),
    "norm_clip": Range(float, 0.0, low_open=True),
    "norm_eps": Range(float, 0.0, low_open=True),
}  # fmt: skip


def check_config(values: dict[str, Any], where: str) -> None:
    """Raise :class:`RunError` for a value of the wrong type or outside its range (``where``: its source)."""
    for name, value in values.items():
        if name in ("env_id",) and not isinstance(value, str):
            raise RunError(f"{where} {name}: {value!r} is not accepted; accepted: an env id (a string)")
        if name == "bf16" and not isinstance(value, bool):
            raise RunError(f"{where} {name}: {value!r} is not accepted; accepted: true or false")
    check_settings(values, RANGES, where)


class Normalizer:
    """Running mean and std of a vector (float64 sums), applied as ``clip((x - mean) / std, +-clip)``."""

    def __init__(self, size: int, eps: float, clip: float) -> None:
        self.sum = np.zeros(size)
        self.sumsq = np.zeros(size)
        self.count = 0
        self.eps, self.clip = eps, clip
        self.mean = np.zeros(size, np.float32)
        self.std = np.ones(size, np.float32)

    def stats(self, x: np.ndarray) -> np.ndarray:
        """What ``x`` (rows of the vector) adds: its sum, sum of squares and row count, in one float64 array
        (the workers of a distributed run sum these before :meth:`add`)."""
        x = x.reshape(-1, self.sum.size).astype(np.float64)
        return np.concatenate([x.sum(0), np.square(x).sum(0), [x.shape[0]]])

    def add(self, stats: np.ndarray) -> None:
        n = self.sum.size
        self.sum += stats[:n]
        self.sumsq += stats[n : 2 * n]
        self.count += int(stats[2 * n])
        mean = self.sum / self.count
        self.mean = mean.astype(np.float32)
        var = np.maximum(self.eps**2, self.sumsq / self.count - np.square(mean))
        self.std = np.sqrt(var).astype(np.float32)

    def update(self, x: np.ndarray) -> None:
        self.add(self.stats(x))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.mean) / self.std, -self.clip, self.clip)


class MLP(nn.Module):
    """ReLU hidden layers (in bfloat16 under ``bf16``) and a float32 linear head."""

    def __init__(self, n_in: int, n_out: int, hidden: int, layers: int, bf16: bool) -> None:
        super().__init__()
        dims = [n_in] + [hidden] * layers
        self.body = nn.Sequential(
            *[m for a, b in zip(dims[:-1], dims[1:], strict=True) for m in (nn.Linear(a, b), nn.ReLU())]
        )
        self.head = nn.Linear(hidden, n_out)
        self.bf16 = bf16

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            h = self.body(x)
        return self.head(h.float())


def flat_grads(module: nn.Module) -> torch.Tensor:
    """One zeroed buffer holding every gradient of ``module`` (each parameter's ``.grad`` a view into it),
    so the workers sum them in one call; backward accumulates into the views in place."""
    params = list(module.parameters())
    flat = torch.zeros(sum(p.numel() for p in params))
    offset = 0
    for p in params:
        p.grad = flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
    return flat


class Agent:
    """Actor, critic, their targets and optimisers, and the input normalisers.

    With ``world.size > 1`` each worker computes the gradients of its ``share`` of the global batch
    and the workers sum them, each weighted by its share: the gradient of the global batch's mean loss,
    the same on every worker, so the networks and optimisers stay equal everywhere.
    """

    def __init__(
        self,
        cfg: Config,
        obs_dim: int,
        goal_dim: int,
        act_dim: int,
        world: World | None = None,
        share: float = 1.0,
    ) -> None:
        self.cfg = cfg
        self.world, self.share = world or World(), share
        self.o_norm = Normalizer(obs_dim, cfg.norm_eps, cfg.norm_clip)
        self.g_norm = Normalizer(goal_dim, cfg.norm_eps, cfg.norm_clip)
        n_in = obs_dim + goal_dim
        self.actor = MLP(n_in, act_dim, cfg.hidden, cfg.layers, cfg.bf16)
        self.critic = MLP(n_in + act_dim, 1, cfg.hidden, cfg.layers, cfg.bf16)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr_actor)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.lr_critic)
        self.clip_return = 1.0 / (1.0 - cfg.gamma)
        self.sync_s = 0.0  # seconds spent summing gradients with the other workers
        self.grads: tuple[torch.Tensor, torch.Tensor] | None = None
        # With track: per-update sums of the critic's and actor's losses, Q(s, a) and its target (batch
        # means), kept as a tensor so that the updates never wait on them; read once an epoch.
        self.stats: torch.Tensor | None = None
        if self.world.size > 1:
            self.grads = (flat_grads(self.critic), flat_grads(self.actor))

    def _step(self, loss: torch.Tensor, opt: torch.optim.Optimizer, which: int) -> None:
        """Backward and one Adam step, on the gradient summed over the workers."""
        if self.grads is None:
            opt.zero_grad(set_to_none=True)
            loss.backward()
        else:
            opt.zero_grad(set_to_none=False)  # keeps the .grad views into the flat buffer
            loss.backward()
            t0 = time.perf_counter()
            self.world.sum_(self.grads[which].mul_(self.share))
            self.sync_s += time.perf_counter() - t0
        opt.step()

    def inputs(self, obs: np.ndarray, goal: np.ndarray) -> torch.Tensor:
        """``(B, obs_dim + goal_dim)`` normalised network input from raw observations and goals."""
        o = self.o_norm(np.clip(obs, -self.cfg.clip_obs, self.cfg.clip_obs))
        g = self.g_norm(np.clip(goal, -self.cfg.clip_obs, self.cfg.clip_obs))
        return torch.from_numpy(np.concatenate([o, g], axis=1, dtype=np.float32))

    def pi(self, obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """Greedy actions in [-1, 1], shape ``(B, act_dim)``."""
        with torch.no_grad():
            return torch.tanh(self.actor(self.inputs(obs, goal))).numpy()

    def update(self, batch: dict[str, Any]) -> None:
        """One critic and one actor Adam step on a sampled batch."""
        obs, nxt = batch["observations"], batch["next_observations"]
        x = self.inputs(obs["observation"], obs["desired_goal"])
        x2 = self.inputs(nxt["observation"], nxt["desired_goal"])
        a = torch.from_numpy(np.ascontiguousarray(batch["actions"], dtype=np.float32))
        r = torch.from_numpy(batch["rewards"]).unsqueeze(1)
        not_done = 1.0 - torch.from_numpy(batch["terminateds"]).unsqueeze(1)
        with torch.no_grad():
            q2 = self.critic_target(torch.cat([x2, torch.tanh(self.actor_target(x2))], 1))
            target = (r + self.cfg.gamma * not_done * q2).clamp_(-self.clip_return, 0.0)
        q = self.critic(torch.cat([x, a], 1))
        critic_loss = (q - target).pow(2).mean()
        self._step(critic_loss, self.critic_opt, 0)

        pi = torch.tanh(self.actor(x))
        self.critic.requires_grad_(False)  # the actor's step needs no critic weight gradients
        actor_loss = -self.critic(torch.cat([x, pi], 1)).mean() + self.cfg.action_l2 * pi.pow(2).mean()
        self.critic.requires_grad_(True)
        self._step(actor_loss, self.actor_opt, 1)
        if self.stats is not None:
            with torch.no_grad():
                self.stats += torch.stack([critic_loss, actor_loss, q.mean(), target.mean()])

    def update_targets(self) -> None:
        with torch.no_grad():
            for net, target in ((self.actor, self.actor_target), (self.critic, self.critic_target)):
                for p, tp in zip(net.parameters(), target.parameters(), strict=True):
                    tp.mul_(self.cfg.polyak).add_(p, alpha=1.0 - self.cfg.polyak)

    def state_dict(self) -> dict[str, Any]:
        nets = ("actor", "critic", "actor_target", "critic_target", "actor_opt", "critic_opt")
        state = {name: getattr(self, name).state_dict() for name in nets}
        state["normalizers"] = (self.o_norm.__dict__, self.g_norm.__dict__)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name in ("actor", "critic", "actor_target", "critic_target", "actor_opt", "critic_opt"):
            getattr(self, name).load_state_dict(state[name])
        self.o_norm.__dict__.update(state["normalizers"][0])
        self.g_norm.__dict__.update(state["normalizers"][1])


def part(total: int, lo: int, hi: int, n: int) -> int:
    """The part of ``total`` that goes with items ``[lo, hi)`` of ``n`` (the parts of a partition sum to ``total``)."""
    return total * hi // n - total * lo // n


def future_goals(achieved_next: np.ndarray, rng: np.random.Generator, share: float) -> np.ndarray:
    """Goals for the normalizer as HER samples them: for each step ``t`` of ``(N, T, G)`` achieved
    goals (after each step), with probability ``share`` an achieved goal of a step in ``[t, T)``."""
    n, steps, _ = achieved_next.shape
    t = np.arange(steps)
    future = t + (rng.random((n, steps)) * (steps - t)).astype(np.int64)
    return np.take_along_axis(achieved_next, future[..., None], axis=1), rng.random((n, steps)) < share


class Trainer:
    """The cycle loop: collect, store, normalise, update; evaluate every epoch; checkpoint."""

    def __init__(
        self,
        cfg: Config,
        folder: RunFolder | None = None,
        save_freq: int = 0,
        world: World | None = None,
        env_threads: int = 1,
        track: bool = False,
    ) -> None:
        self.cfg, self.folder, self.save_freq = cfg, folder, save_freq
        self.world = world = world or World()
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)  # the same initial networks on every worker
        # Worker 0 draws what the one-process run draws; worker r > 0 the seed's r-th child streams.
        rank = world.rank
        self.rng = np.random.default_rng(
            np.random.SeedSequence(cfg.seed, spawn_key=(rank, 0) if rank else ())
        )
        storage_seed = np.random.SeedSequence(cfg.seed, spawn_key=(rank, 1) if rank else ())
        # This worker's envs [lo, hi) of the global n_envs; its shares of the batch and of the buffer
        # follow its share of the envs (so each transition is as likely to be sampled at any world size).
        lo, hi = world.share(cfg.n_envs)
        self.n_local = hi - lo
        self.batch_local = part(cfg.batch_size, lo, hi, cfg.n_envs)
        self.envs = gym.make_vec(
            cfg.env_id,
            num_envs=self.n_local,
            vectorization_mode="vector_entry_point",
            num_threads=env_threads,
        )
        self.eval_lo, eval_hi = world.share(cfg.eval_episodes)
        self.eval_local = eval_hi - self.eval_lo
        self.eval_envs = [gym.make(cfg.env_id).unwrapped for _ in range(min(self.n_local, self.eval_local))]
        self.horizon = int(self.envs.max_steps)
        space = self.envs.single_observation_space
        obs_dim, goal_dim = space["observation"].shape[0], space["desired_goal"].shape[0]
        act_space = self.envs.single_action_space
        self.agent = Agent(
            cfg, obs_dim, goal_dim, act_space.shape[0], world, self.batch_local / cfg.batch_size
        )
        self.storage = HerStorage(
            part(cfg.buffer_size, lo, hi, cfg.n_envs), space, act_space, self.envs.compute_reward,
            n_envs=self.n_local, n_sampled_goal=cfg.n_sampled_goal, goal_selection_strategy="future",
            seed=storage_seed,
        )  # fmt: skip
        self.epoch = self.cycle = self.updates = 0
        self.saved_epoch = 0  # the epoch of the last whole checkpoint (0: none yet)
        self.rows: list[dict[str, Any]] = []  # the curve: one row per epoch (kept in checkpoints)
        # Env i of the global n_envs starts from the same seed at every world size.
        self.reset_seeds: list[int] | None = [cfg.seed * 100_003 + i for i in range(lo, hi)]
        self.times = dict.fromkeys(TIMERS, 0.0)
        self.wall0, self.cpu0 = 0.0, 0.0  # wall and CPU seconds spent before this process (resume)
        # What TensorBoard shows of an epoch (rank 0 writes it, with --tensorboard): the losses and Q values
        # of the updates (track), and the training episodes' returns, count and successes.
        self.tb: Any = None  # a torch.utils.tensorboard.SummaryWriter
        if track:
            self.agent.stats = torch.zeros(4)
        self.rollouts = np.zeros(3)
        self.eval_return = float("nan")  # the mean return of the last evaluation's episodes
        self.totals = np.zeros(0)  # the last evaluation's sums of its ``extra`` over the workers

    # ------------------------------------------------------------------ collection
    def policy(self, obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """The greedy actions; a policy whose weights have gone NaN (diverged) stops the run in one line."""
        u = self.agent.pi(obs, goal)
        if not np.isfinite(u).all():  # ~1 us a step; else the env refuses the NaN action with a traceback
            raise RunError(
                f"training diverged in epoch {self.epoch + 1}: the actor's actions are not finite (its weights "
                "no longer are); lower --lr-actor / --lr-critic and start again with --force"
            )
        return u

    def explore(self, obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
        u = self.policy(obs, goal)
        u = np.clip(u + self.cfg.noise_eps * self.rng.standard_normal(u.shape), -1.0, 1.0)
        random = self.rng.random(len(u)) < self.cfg.random_eps
        u[random] = self.rng.uniform(-1.0, 1.0, (int(random.sum()), u.shape[1]))
        return u.astype(np.float32)

    def collect(self) -> None:
        """One episode in every env, stored step by step; normalisers updated as HER samples."""
        t0, spent = time.perf_counter(), 0.0  # spent: seconds counted as act or env
        obs, _ = self.envs.reset(seed=self.reset_seeds)  # later cycles go on with each env's own stream
        self.reset_seeds = None
        episode_obs, achieved = [], []
        returns = np.zeros(self.n_local)
        for _ in range(self.horizon):
            t1 = time.perf_counter()
            action = self.explore(obs["observation"], obs["desired_goal"])
            t2 = time.perf_counter()
            nxt, rewards, terminated, truncated, info = self.envs.step(action)
            t3 = time.perf_counter()
            returns += rewards
            self.storage.add(obs, action, rewards, terminated, truncated, None, nxt)
            episode_obs.append(obs["observation"])
            achieved.append(nxt["achieved_goal"])
            obs = nxt
            self.times["act"] += t2 - t1
            self.times["env"] += t3 - t2
            spent += t3 - t1
            if (terminated | truncated).all():  # Fetch episodes all end together, by truncation
                break
        self.rollouts += (returns.sum(), self.n_local, np.sum(info.get("is_success", 0.0)))
        goals = np.repeat(obs["desired_goal"][:, None], len(episode_obs), axis=1)
        relabel, use = future_goals(np.stack(achieved, axis=1), self.rng, self.storage.her_ratio)
        goals[use] = relabel[use]
        o_norm, g_norm = self.agent.o_norm, self.agent.g_norm
        o_stats = o_norm.stats(np.clip(np.stack(episode_obs, 1), -self.cfg.clip_obs, self.cfg.clip_obs))
        g_stats = g_norm.stats(np.clip(goals, -self.cfg.clip_obs, self.cfg.clip_obs))
        t1 = time.perf_counter()
        stats = self.world.sum_array(np.concatenate([o_stats, g_stats]))  # every worker's episodes
        self.times["sync"] += time.perf_counter() - t1
        spent += time.perf_counter() - t1
        o_norm.add(stats[: o_stats.size])
        g_norm.add(stats[o_stats.size :])
        self.times["store"] += time.perf_counter() - t0 - spent  # storage, resets, normalisers

    def train(self) -> None:
        for _ in range(self.cfg.n_batches):
            t0 = time.perf_counter()
            batch = self.storage.sample_arrays(self.batch_local)  # this worker's share of the batch
            t1 = time.perf_counter()
            synced = self.agent.sync_s
            self.agent.update(batch)
            self.times["sample"] += t1 - t0
            self.times["sync"] += self.agent.sync_s - synced
            self.times["update"] += time.perf_counter() - t1 - (self.agent.sync_s - synced)
            self.updates += 1
        self.agent.update_targets()

    def evaluate(self, base: int | None = None, extra: np.ndarray | None = None) -> float:
        """Success rate of the greedy policy over ``eval_episodes`` episodes seeded ``base``, ``base + 1``, ...

        By default the seeds depend on the epoch and lie apart from training's. The workers share the
        episodes (the same seeds at every world size) and sum their successes and returns (the mean
        return is left in ``eval_return``); ``extra`` is summed with them (in ``totals``), so that an
        epoch's figures cost the workers no exchange of their own.
        """
        t0 = time.perf_counter()
        successes: list[float] = []
        returns = 0.0
        if base is None:
            base = 10**9 + self.cfg.seed * 10_007 + self.epoch * 1_009
        base += self.eval_lo
        while len(successes) < self.eval_local:
            envs = self.eval_envs[: self.eval_local - len(successes)]
            obs = _stack([env.reset(seed=base + len(successes) + i)[0] for i, env in enumerate(envs)])
            for _ in range(self.horizon):
                action = self.policy(obs["observation"], obs["desired_goal"])
                results = [env.step(a) for env, a in zip(envs, action, strict=True)]
                obs = _stack([r[0] for r in results])
                returns += sum(float(r[1]) for r in results)
            successes += [float(r[4]["is_success"]) for r in results]
        local = np.array([sum(successes), returns, *(() if extra is None else extra)])
        total = self.world.sum_array(local)
        self.eval_return = float(total[1] / self.cfg.eval_episodes)
        self.totals = total[2:]
        self.times["eval"] += time.perf_counter() - t0
        return float(total[0] / self.cfg.eval_episodes)

    # ------------------------------------------------------------------ loop
    def run(self, log: bool = True) -> float:
        cfg = self.cfg
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        success = self.rows[-1]["success_rate"] if self.rows else float("nan")  # a finished run resumed
        while self.epoch < cfg.epochs:
            collect_s = update_s = 0.0  # this epoch's, for TensorBoard's rates
            updates = self.updates
            while self.cycle < cfg.n_cycles:
                t0 = time.perf_counter()
                self.collect()
                t1 = time.perf_counter()
                self.train()
                collect_s, update_s = collect_s + t1 - t0, update_s + time.perf_counter() - t1
                self.cycle += 1
            self.epoch += 1
            self.cycle = 0
            stats = self.agent.stats
            share = self.agent.share  # each worker's batch means, weighted by its share: the whole batch's
            extra = np.concatenate([np.zeros(4) if stats is None else stats.numpy() * share, self.rollouts])
            success = self.evaluate(extra=extra)
            if stats is not None:
                stats.zero_()
            self.rollouts[:] = 0.0
            wall = self.wall0 + time.perf_counter() - wall_start
            cpu = self.cpu0 + time.process_time() - cpu_start
            row = {"epoch": self.epoch, "env_steps": self.epoch * cfg.n_cycles * cfg.n_envs * self.horizon,
                   "updates": self.updates, "success_rate": success, "wall_s": round(wall, 1),
                   "cpu_s": round(cpu, 1), **{f"t_{k}": round(v, 1) for k, v in self.times.items()}}  # fmt: skip
            self.rows.append(row)
            if self.folder is not None:
                self.folder.write("eval.csv", csv_text(self.rows))
            if self.tb is not None:
                self.write_tensorboard(row, self.updates - updates, collect_s, update_s)
            if log and self.world.rank == 0:
                print(f"epoch {self.epoch:3d}  steps {row['env_steps']:8d}  success {success:.3f}  "
                      f"wall {wall:7.0f}s  cpu {cpu:7.0f}s", flush=True)  # fmt: skip
            if self.save_freq and (self.epoch % self.save_freq == 0 or self.epoch == cfg.epochs):
                t0 = time.perf_counter()
                self.wall0, self.cpu0 = wall, cpu
                wall_start, cpu_start = time.perf_counter(), time.process_time()
                self.save()
                self.times["checkpoint"] += time.perf_counter() - t0
        return success

    def write_tensorboard(self, row: dict[str, Any], updates: int, collect_s: float, update_s: float) -> None:
        """The epoch's figures, at its env-step count, flushed (a killed run loses no whole epoch of them).

        ``updates``: the epoch's updates; ``collect_s`` / ``update_s``: the seconds rank 0 spent collecting
        and updating in it. The losses and Q values are means over the epoch's updates of the whole batch.
        """
        losses = self.totals[:4] / max(updates, 1)
        returns, episodes, successes = self.totals[4:7]
        steps = self.cfg.n_cycles * self.cfg.n_envs * self.horizon
        scalars = {
            "eval/success_rate": row["success_rate"],
            "eval/mean_reward": self.eval_return,
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
            **{f"time/t_{key}": value for key, value in self.times.items()},  # eval.csv's timers
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
        return {"agent": self.agent.state_dict(), "epoch": self.epoch, "updates": self.updates,
                "times": self.times, "wall0": self.wall0, "cpu0": self.cpu0, "reset_seeds": self.reset_seeds,
                "rows": self.rows}  # fmt: skip

    def _write_storage(self, f: Any) -> None:
        """Pickle this worker's storage shard into the binary file ``f`` (streamed: no copy in memory)."""
        reward_fn, self.storage.reward_fn = self.storage.reward_fn, None  # not the env behind it
        try:
            pickle.dump(self.storage, f, protocol=5)
        finally:
            self.storage.reward_fn = reward_fn

    def _envs_bytes(self) -> bytes:
        """This worker's random states, pickled: its envs' generators and its own. At a cycle boundary
        every env is about to be reset, and a Fetch reset (mj_resetData, then draws from its generator)
        depends on nothing else, so an env's generator is all there is of it. (Pickling the vector env
        itself would also carry each MjData's scratch memory: 80 MB for 8 envs, against a few kB.)"""
        mine = {
            "envs": list(self.envs._rngs),
            "rng": self.rng.bit_generator.state,
            "torch_rng": torch.get_rng_state().numpy(),
        }
        return pickle.dumps(mine, protocol=5)

    def _write_file(self, path: Path) -> None:
        with path.open("wb") as f:
            self._write_storage(f)

    def save(self) -> None:
        """Write checkpoint ``checkpoints/<epoch>/`` as one unit (``RunFolder.save_checkpoint``).

        Rank 0 writes it all: ``agent.pt`` (the shared state), its own ``storage.pkl`` and ``envs.pkl``,
        and worker r's ``storage-<r>.pkl`` and ``envs-<r>.pkl``, which that worker sends it; only rank 0
        touches the folder, so workers on other machines need no shared file system.
        """
        if self.world.rank > 0:
            storage = io.BytesIO()
            self._write_storage(storage)
            self.world.send_bytes(storage.getbuffer(), 0)
            del storage
            self.world.send_bytes(self._envs_bytes(), 0)
            self.saved_epoch = self.epoch
            return
        assert self.folder is not None
        received: dict[int, tuple[bytes, bytes]] = {}
        unheard = set(range(1, self.world.size))

        def receive(rank: int, index: int) -> Any:
            def write(path: Path) -> None:
                if rank in unheard:
                    received[rank] = self.world.recv_bytes(rank), self.world.recv_bytes(rank)
                    unheard.discard(rank)
                path.write_bytes(received[rank][index])
                if index == 1:
                    del received[rank]  # written: let the memory go

            return write

        state = self._shared_state()
        writers: dict[str, Any] = {
            "agent.pt": lambda path: torch.save(state, path),
            "storage.pkl": self._write_file,
            "envs.pkl": lambda path: path.write_bytes(self._envs_bytes()),
        }
        for rank in range(1, self.world.size):
            writers[f"storage-{rank}.pkl"] = receive(rank, 0)
            writers[f"envs-{rank}.pkl"] = receive(rank, 1)
        meta = {"epoch": self.epoch, "config": asdict(self.cfg), "world_size": self.world.size}
        self.folder.save_checkpoint(self.epoch, writers, meta)
        for rank in sorted(unheard):  # the checkpoint existed already: nothing was written
            self.world.recv_bytes(rank), self.world.recv_bytes(rank)
        self.saved_epoch = self.epoch

    def load(self, checkpoint: Checkpoint) -> list[tuple[bytes, bytes]]:
        """Take up rank 0's part of ``checkpoint`` (already checked whole); a file that does not fit is one line.

        Returns every other worker's ``(storage, envs)`` bytes, each checked to fit that worker, for
        :meth:`hand_out`.
        """
        state = checkpoint.load("agent.pt", lambda path: torch.load(path, weights_only=False))
        self._take_shared(state, checkpoint)
        others = []
        for rank in range(self.world.size):
            suffix = f"-{rank}" if rank else ""
            names = (f"storage{suffix}.pkl", f"envs{suffix}.pkl")
            data = tuple(checkpoint.load(name, lambda path: path.read_bytes()) for name in names)
            storage, mine = self._fitting(data, rank, checkpoint, names, state)
            if rank == 0:
                self._take_own(storage, mine)
            else:
                others.append(data)
        self.saved_epoch = self.epoch
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
        self.saved_epoch = self.epoch

    def _take_shared(self, state: dict[str, Any], checkpoint: Checkpoint | None) -> None:
        try:
            self.agent.load_state_dict(state["agent"])
            for key in ("epoch", "updates", "times", "wall0", "cpu0", "reset_seeds", "rows"):
                setattr(self, key, state[key])
            self.times = {**dict.fromkeys(TIMERS, 0.0), **self.times}  # "sync" is newer than some runs
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            if checkpoint is None:
                raise
            raise checkpoint.unfit("agent.pt", exc) from None

    def _fitting(
        self,
        data: tuple[bytes, ...],
        rank: int,
        checkpoint: Checkpoint,
        names: tuple[str, str],
        legacy: dict[str, Any],
    ) -> tuple[HerStorage, dict[str, Any]]:
        """Worker ``rank``'s storage and envs from their bytes, checked to fit that worker of this run
        (``legacy``: agent.pt's state, which held the random states of runs before workers existed)."""
        n_envs = World(rank, self.world.size).share(self.cfg.n_envs)
        n_local = n_envs[1] - n_envs[0]
        storage = checkpoint.load(names[0], lambda path: pickle.loads(data[0]))
        if not isinstance(storage, HerStorage):
            raise checkpoint.unfit(names[0], "holds no HerStorage")
        try:
            storage.check_spaces(self.envs.single_observation_space, self.envs.single_action_space, n_local)
        except ValueError as exc:
            raise checkpoint.unfit(names[0], exc) from None
        mine = checkpoint.load(names[1], lambda path: pickle.loads(data[1]))
        if isinstance(mine, list) and rank == 0 and "rng" in legacy:  # one process, before workers existed:
            mine = {
                "envs": mine,
                "rng": legacy["rng"],
                "torch_rng": legacy["torch_rng"].numpy(),
            }  # in agent.pt
        envs = mine.get("envs") if isinstance(mine, dict) else None
        if (
            not isinstance(envs, list)
            or len(envs) != n_local
            or not all(isinstance(g, np.random.Generator) for g in envs)
        ):
            raise checkpoint.unfit(names[1], f"holds no random states of {n_local} envs")
        return storage, mine

    def _take_own(self, storage: HerStorage, mine: dict[str, Any]) -> None:
        self.envs.reset(
            seed=list(range(self.n_local))
        )  # seeded: its next reset draws from the streams set here
        self.envs._rngs = list(mine["envs"])
        self.rng.bit_generator.state = mine["rng"]
        torch.set_rng_state(torch.from_numpy(np.array(mine["torch_rng"], dtype=np.uint8)))
        storage.reward_fn = self.envs.compute_reward
        self.storage = storage


def csv_text(rows: list[dict[str, Any]]) -> str:
    text = io.StringIO()
    columns = list(dict.fromkeys(key for row in rows for key in row))  # t_sync came with workers
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def _stack(dicts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.stack([d[key] for d in dicts]) for key in dicts[0]}


def record_gif(
    agent: Agent, env_id: str, path: Path, episodes: int = 3, seed: int = 0, size: int = 240
) -> None:
    """A GIF of ``episodes`` greedy episodes (``size`` x ``size`` frames, 25 frames per second), written atomically."""
    import imageio.v2 as imageio

    env = gym.make(env_id, render_mode="rgb_array", width=size, height=size)
    frames = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        frames.append(env.render())
        done = False
        while not done:
            action = agent.pi(obs["observation"][None], obs["desired_goal"][None])[0]
            obs, _, terminated, truncated, _ = env.step(action)
            frames.append(env.render())
            done = terminated or truncated
    env.close()
    data = io.BytesIO()
    imageio.mimsave(data, frames, format="GIF", duration=40, loop=0)
    write_atomic(path, data.getvalue())


def plot(rows: list[dict[str, Any]], title: str) -> bytes:
    """The success curve of ``rows`` as a PNG file's bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(
        [r["env_steps"] / 1000 for r in rows], [r["success_rate"] for r in rows], marker="o", markersize=3
    )
    ax.set(xlabel="env steps (thousands)", ylabel="success rate", ylim=(-0.02, 1.02), title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    data = io.BytesIO()
    fig.savefig(data, format="png", dpi=100)
    plt.close(fig)
    return data.getvalue()


class ArgumentParser(argparse.ArgumentParser):
    """Errors are one line (what was wrong, what is accepted), exit status 2, without argparse's usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{SCRIPT}: error: {' '.join(str(message).split())}\n")


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=SCRIPT, description=__doc__.split("\n\n")[0])
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR")
    parser.add_argument("--output", type=Path, help="default runs/<env>_ddpg_s<seed>")
    parser.add_argument("--force", action="store_true", help="replace the run in a non-empty output folder")
    parser.add_argument("--save-freq", type=int, default=5, help="epochs between checkpoints (0: none)")
    parser.add_argument("--profile", action="store_true", help="print where the time went")
    parser.add_argument("--no-gif", action="store_true", help="skip the GIF of the trained policy")
    parser.add_argument(
        "--tensorboard",
        type=folder_path,
        metavar="DIR",
        help="also write TensorBoard events, per epoch, to DIR/<run name>_<N> (tensorboard --logdir DIR)",
    )
    parser.add_argument(
        "--env-threads", type=int, default=1, help="threads stepping each worker's envs' physics (default 1)"
    )
    parser.add_argument(
        "--evaluate",
        type=int,
        metavar="N",
        help="with --resume: only report the checkpoint's success over N episodes",
    )
    parser.add_argument(
        "--conf-file", type=Path, default=None, help=f"per-env settings (default {CONF_FILE})"
    )
    for f in fields(Config):
        flag = ["--" + f.name.replace("_", "-")] + (["--env"] if f.name == "env_id" else [])
        if f.type == "bool" or isinstance(f.default, bool):
            parser.add_argument(*flag, action=argparse.BooleanOptionalAction, default=None)
        else:
            text = "torch threads per worker (default 1)" if f.name == "threads" else f"default {f.default}"
            parser.add_argument(*flag, type=type(f.default), default=None, help=text)
    return parser


def read_conf(path: Path, env_id: str) -> dict[str, Any]:
    """The ``env_id`` entry of a her_ddpg YAML file, its keys and values checked (file and key named on error)."""
    try:
        entries = yaml.safe_load(path.read_text()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RunError(f"--conf-file: cannot read {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(entries, dict) or not isinstance(entries.get(env_id) or {}, dict):
        raise RunError(f"--conf-file: {path} is not a mapping of env ids to mappings of settings")
    entry = dict(entries.get(env_id) or {})
    unknown = sorted(set(entry) - {f.name for f in fields(Config)} - {"env_id"})
    if unknown:
        raise RunError(f"--conf-file: {path} entry {env_id!r} has unknown keys {unknown}")
    entry.pop("env_id", None)
    check_config(entry, f"--conf-file: {path}, entry {env_id!r}, key")
    return entry


def read_config(run_dir: Path) -> tuple[dict[str, Any], Any]:
    """The settings in the ``config.json`` of a run folder, checked as the options are (an edited file is
    one line), and the run's TensorBoard folder recorded there (None: none; checked by the caller)."""
    path = run_dir / "config.json"
    fix = "restore it (the checkpoint's manifest holds the run's settings) or start again with --force"
    try:
        saved = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunError(f"--resume: {run_dir} holds no config.json of a her_ddpg run") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunError(f"--resume: {path} is not valid JSON ({exc}); {fix}") from None
    names = {f.name for f in fields(Config)}
    tensorboard = saved.pop("tensorboard", None) if isinstance(saved, dict) else None  # absent: older runs
    if not isinstance(saved, dict) or set(saved) != names:
        got = sorted(saved) if isinstance(saved, dict) else type(saved).__name__
        raise RunError(f"--resume: {path} does not hold the settings of a her_ddpg run (keys {got}); {fix}")
    check_config(saved, f"--resume: {path}, key")
    return saved, tensorboard


def check_world(cfg: Config, world: World, horizon: int, where: str) -> None:
    """Raise :class:`RunError` unless every worker gets at least one env, one sample per batch and room
    for its envs' episodes (``where``: the option the buffer size came from)."""
    if world.size > cfg.n_envs:
        raise RunError(
            f"--n-envs: {cfg.n_envs} envs cannot be shared by {world.size} workers; accepted: n_envs >= the "
            f"number of workers ({world.size}), or fewer workers"
        )
    for rank in range(world.size):
        lo, hi = World(rank, world.size).share(cfg.n_envs)
        if part(cfg.batch_size, lo, hi, cfg.n_envs) < 1:
            raise RunError(
                f"--batch-size: {cfg.batch_size} cannot be shared by {world.size} workers; accepted: "
                f"batch_size >= n_envs ({cfg.n_envs})"
            )
        check_capacity(part(cfg.buffer_size, lo, hi, cfg.n_envs), hi - lo, horizon,
                       where + (f" (the share of worker {rank} of {world.size})" if world.size > 1 else ""))  # fmt: skip


def parse_args(argv: list[str] | None, world: World | None = None) -> tuple[Config, Path, argparse.Namespace]:
    """The run's settings and folder, every value checked; writes nothing (errors: :class:`RunError`)."""
    world = world or World()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.env_threads < 1:
        raise RunError(f"--env-threads: {args.env_threads} is not accepted; accepted: an integer >= 1")
    values = {f.name: getattr(args, f.name) for f in fields(Config) if getattr(args, f.name) is not None}
    check_config(values, "option")
    if args.save_freq < 0:
        raise RunError(
            f"--save-freq: {args.save_freq} is not accepted; accepted: an integer >= 0 (0: no checkpoints)"
        )
    if args.evaluate is not None and args.evaluate < 1:
        raise RunError(f"--evaluate: {args.evaluate} is not accepted; accepted: an integer >= 1")
    if args.evaluate is not None and args.tensorboard is not None:
        raise RunError("--tensorboard: --evaluate writes nothing; accepted: --evaluate without --tensorboard")
    if args.tensorboard is not None:
        _check_tensorboard_installed()
    args.tensorboard_run = None  # a resumed run's own TensorBoard folder (recorded in its config.json)
    if args.evaluate is not None and world.size > 1:
        raise RunError(
            f"--evaluate: runs in one process, not under torchrun ({world.size} workers); accepted: "
            f"python examples/her_ddpg.py --resume {args.resume} --evaluate {args.evaluate}"
        )
    if args.resume is not None:
        if args.output is not None and args.output.resolve() != args.resume.resolve():
            raise RunError(
                f"--output: --resume continues the run in its own folder {args.resume}, not {args.output}; "
                "accepted: no --output with --resume"
            )
        if args.force or args.conf_file is not None:
            given = "--force" if args.force else "--conf-file"
            raise RunError(f"{given}: cannot be given with --resume (the run keeps its folder and settings)")
        if (args.resume / "checkpoint.pt").is_file() and not (args.resume / ".run-manifest.json").exists():
            raise RunError(
                f"--resume: {args.resume} was written by an earlier her_ddpg.py (checkpoint.pt, storage.pkl, "
                "envs.pkl), whose checkpoints this version cannot resume; finish it with that version, or start "
                "a new run in another --output"
            )
        saved, recorded = read_config(args.resume)
        if args.evaluate is None:
            args.tensorboard_run = resumed_folder(
                recorded, args.tensorboard, "--tensorboard", "--resume", args.resume / "config.json"
            )
            if args.tensorboard_run is not None:
                _check_tensorboard_installed()
        changed = {k: v for k, v in values.items() if k not in ("epochs", "threads") and v != saved[k]}
        if changed:
            raise RunError(
                f"--resume: continues a run as configured; only --epochs and --threads may change, got {changed}"
            )
        return Config(**{**saved, **values}), args.resume, args
    if args.evaluate is not None:
        raise RunError("--evaluate: needs --resume RUN_DIR (the run whose checkpoint to evaluate)")
    env_id = values.get("env_id", Config.env_id)
    if env_id not in gym.registry:
        raise RunError(f"--env-id: no env {env_id!r} is registered; accepted: {_fetch_ids()}")
    if not env_id.startswith("goalenvs/Fetch"):
        raise RunError(f"--env-id: this agent runs the goalenvs Fetch ids {_fetch_ids()}, got {env_id!r}")
    entry = read_conf(args.conf_file or CONF_FILE, env_id)
    cfg = Config(**{**entry, **values})
    where = "--buffer-size"
    if "buffer_size" not in values:
        where = (
            f"--conf-file: {args.conf_file or CONF_FILE}, key buffer_size"
            if "buffer_size" in entry
            else "--buffer-size (its default)"
        )
    probe = gym.make(env_id)  # the episode length: Fetch envs truncate themselves
    horizon = int(probe.unwrapped.max_steps)
    probe.close()
    check_world(cfg, world, horizon, where)
    out = args.output or Path("runs") / f"{cfg.env_id.split('/')[-1]}_ddpg_s{cfg.seed}"
    RunFolder.check_new(out, args.force, OUTPUTS, SCRIPT)
    if args.tensorboard is not None:
        check_new_folder(args.tensorboard, "--tensorboard")
    return cfg, out, args


def _check_tensorboard_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        raise RunError("--tensorboard: needs the tensorboard package; pip install tensorboard")


def _fetch_ids() -> list[str]:
    return sorted(i for i in gym.registry if i.startswith("goalenvs/Fetch"))


def evaluate_checkpoint(cfg: Config, out: Path, episodes: int) -> float:
    """Success of the greedy policy of the run's last checkpoint over ``episodes`` episodes; writes nothing.

    Episode seeds start at 2e9, apart from training's and from the per-epoch evaluations'.
    """
    checkpoint = RunFolder.read_only(out, SCRIPT, OUTPUTS).latest_checkpoint()
    if checkpoint is None:
        raise RunError(f"--resume: {out} has no checkpoint yet (checkpoints need --save-freq >= 1)")
    trainer = Trainer(replace(cfg, eval_episodes=episodes, buffer_size=1))  # no replay needed
    state = checkpoint.load("agent.pt", lambda path: torch.load(path, weights_only=False))
    try:
        trainer.agent.load_state_dict(state["agent"])
    except (KeyError, TypeError, RuntimeError) as exc:
        raise checkpoint.unfit("agent.pt", exc) from None
    return trainer.evaluate(base=2 * 10**9)


def start(
    cfg: Config, out: Path, args: argparse.Namespace, argv: list[str], world: World
) -> tuple[RunFolder, Trainer, list[tuple[bytes, bytes]]]:
    """Rank 0: lock the run folder (new, or the one resumed), write config.json and commands.txt, build
    the trainer; returns with it the other workers' parts of the checkpoint resumed (empty when new).

    What is refused after the lock is taken releases it (``main`` may be called again in this process).
    """
    if args.resume is None:
        folder = RunFolder.create(out, force=args.force, outputs=OUTPUTS, script=SCRIPT)
    else:
        folder = RunFolder.open(out, outputs=OUTPUTS, script=SCRIPT)
    try:
        return folder, *_take_up(folder, cfg, args, argv, world)
    except BaseException:
        folder.close()
        raise


def _take_up(
    folder: RunFolder, cfg: Config, args: argparse.Namespace, argv: list[str], world: World
) -> tuple[Trainer, list[tuple[bytes, bytes]]]:
    """The trainer of a locked folder: a new run's, or the resumed one's at its latest checkpoint."""
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
        changed = sorted(
            k for k, v in asdict(cfg).items() if k not in ("epochs", "threads") and saved.get(k) != v
        )
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
    trainer = Trainer(cfg, folder, args.save_freq, world, args.env_threads, track=track)
    others: list[tuple[bytes, bytes]] = []
    if checkpoint is not None:
        others = trainer.load(checkpoint)  # before any write: a checkpoint that does not fit changes nothing
    if tensorboard is None and args.tensorboard is not None:  # a new run, or one that had no TensorBoard
        tensorboard = make_numbered_folder(args.tensorboard, out.resolve().name)
    config = {**asdict(cfg), "tensorboard": None if tensorboard is None else str(tensorboard)}
    folder.write("config.json", json.dumps(config, indent=2) + "\n")  # --epochs may have grown
    folder.write("commands.txt", commands)  # every command that wrote to this run, in order
    if checkpoint is not None:
        folder.write("eval.csv", csv_text(trainer.rows))  # drops rows written after the checkpoint
        print(f"resumed {out} at epoch {trainer.epoch}", flush=True)
    if tensorboard is not None:
        from torch.utils.tensorboard import SummaryWriter

        # A resumed run goes on in the same folder; TensorBoard hides what a stopped session wrote after
        # the checkpoint (purge_step: steps from there on), so no step is shown twice. No file is removed.
        done = trainer.rows[-1]["env_steps"] if checkpoint is not None and trainer.rows else None
        trainer.tb = SummaryWriter(str(tensorboard), purge_step=None if done is None else done + 1)
    return trainer, others


def _launch(workers: int) -> str:
    if workers == 1:
        return "python examples/her_ddpg.py"
    return f"torchrun with {workers} workers in all, e.g. torchrun --nproc-per-node {workers} examples/her_ddpg.py"


def _train(argv: list[str], progress: dict[str, Any], world: World) -> float:
    if world.rank > 0:
        return _follow(argv, progress, world)
    try:
        cfg, out, args = parse_args(argv, world)
        progress["out"] = out
        if args.evaluate is not None:
            success = evaluate_checkpoint(cfg, out, args.evaluate)
            print(f"{out}: success rate {success:.3f} over {args.evaluate} episodes")
            return success
        folder, trainer, others = start(cfg, out, args, argv, world)
    except BaseException:
        _tell_stopped(world)
        raise
    progress["trainer"] = trainer
    with folder, contextlib.closing(trainer):
        if world.size > 1:
            world.broadcast({"config": cfg, "save_freq": args.save_freq, "resumed": args.resume is not None,
                             "track": trainer.agent.stats is not None})  # fmt: skip
            if args.resume is not None:
                trainer.hand_out(others)
            del others
        success = trainer.run()
        title = cfg.env_id.split("/")[-1] + f" DDPG+HER, seed {cfg.seed}"
        if world.size > 1:
            title += f", {world.size} workers"
        if trainer.rows:
            folder.write("success.png", plot(trainer.rows, title))
        if not args.no_gif:
            folder.record("policy.gif")
            record_gif(trainer.agent, cfg.env_id, out / "policy.gif", seed=10**9 + cfg.seed)
    if args.profile:
        total = sum(trainer.times.values())
        print("time:", ", ".join(f"{k} {v:.1f}s ({v / total:.0%})" for k, v in trainer.times.items()))
    print(f"final success rate {success:.3f} over {cfg.eval_episodes} episodes")
    return success


def _tell_stopped(world: World) -> None:
    """Rank 0 refused to start (its line says why): let the other workers, waiting for it, stop too."""
    if world.size > 1:
        try:
            world.broadcast(None)
        except RunError:  # they are gone already
            pass


def _follow(argv: list[str], progress: dict[str, Any], world: World) -> float:
    """A worker r > 0: the run as rank 0 set it up (settings, and the checkpoint resumed), then its share."""
    go = world.broadcast()
    if go is None:
        raise SystemExit(2)  # rank 0 refused the run and said why
    args = build_parser().parse_args(argv)  # rank 0 accepted it: this worker reads its --env-threads
    trainer = Trainer(go["config"], None, go["save_freq"], world, args.env_threads, track=go["track"])
    progress["trainer"] = trainer
    if go["resumed"]:
        trainer.take()
    return trainer.run(log=False)


def main(argv: list[str] | None = None) -> float:
    """Train, resume or evaluate a run; returns the final success rate.

    A user's mistake (or a damaged file) ends with one line and exit status 2; Ctrl-C or SIGTERM with one
    line saying where to resume from and status 130; a failed write (a full disk) with one line and 1.
    Under ``torchrun`` rank 0 says these lines; a worker that loses another says so and exits with 1.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    progress: dict[str, Any] = {}

    def body() -> float:
        world = World.from_env(cores_each=_cores_each(argv))
        progress["world"] = world
        try:
            return _train(argv, progress, world)
        finally:
            world.close()

    follower = os.environ.get("RANK", "0") not in ("", "0")
    return run_main(SCRIPT, body, lambda: _where(progress), quiet_interrupt=follower)


def _int_option(argv: list[str], flag: str) -> int:
    """The value of ``flag`` in ``argv`` (1 if absent or not valid: parse_args reports it), read before
    the workers meet, so that each is pinned to as many cores as it runs threads."""
    value = "1"
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return int(value) if value.isdigit() and int(value) >= 1 else 1


def _env_threads(argv: list[str]) -> int:
    return _int_option(argv, "--env-threads")


def _cores_each(argv: list[str]) -> int:
    """The cores a worker keeps busy: its physics threads or its torch threads (``--threads`` given on
    the command line; one set in a --conf-file is read too late to count), whichever are more."""
    return max(_env_threads(argv), _int_option(argv, "--threads"))


def _where(progress: dict[str, Any]) -> str:
    """Where a run stopped and how to go on from there."""
    trainer: Trainer | None = progress.get("trainer")
    if trainer is None:
        return "before training started"
    where = f"at epoch {trainer.epoch}, cycle {trainer.cycle}"
    if trainer.saved_epoch:
        launch = (
            "python examples/her_ddpg.py" if trainer.world.size == 1 else "torchrun ... examples/her_ddpg.py"
        )
        return (f"{where}; go on from the checkpoint of epoch {trainer.saved_epoch} with: "
                f"{launch} --resume {progress.get('out')}")  # fmt: skip
    return f"{where}; no checkpoint was written yet (--save-freq), so a rerun starts over with --force"


if __name__ == "__main__":
    sys.exit(0 if main() >= 0 else 1)
