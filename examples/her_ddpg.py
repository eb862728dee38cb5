"""DDPG + HER as in the HER paper, compact, on ``her.HerStorage``: the Fetch recipe for one CPU process.

    python examples/her_ddpg.py --env goalenvs/FetchPush-v0 --seed 0
    python examples/her_ddpg.py --resume runs/FetchPush-v0_ddpg_s0          # continue a stopped run

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
profile), ``success.png`` and, every ``--save-freq`` epochs and at the end, ``checkpoint.pt`` (networks,
optimisers, normalisers, random states) with ``storage.pkl`` (the replay storage) and ``envs.pkl``
(the envs' random generators).
``--resume`` continues from the last checkpoint to the configured number of epochs (``--epochs`` may
raise it; equal to the epochs done, it only rewrites the plot and GIF), appending to the same curve.
On the same machine and torch build the resumed run is bit-for-bit the uninterrupted one: checkpoints
fall on cycle boundaries, where every env is about to be reset, and hold every random state
(``tests/test_her_ddpg.py`` checks it).
"""

from __future__ import annotations

import argparse
import copy
import csv
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
from torch import nn

import goalenvs  # noqa: F401  (registers the goalenvs/ ids)
from her import HerStorage

CONF_FILE = Path(__file__).resolve().parent / "hyperparams" / "her_ddpg.yml"
TIMERS = ("env", "act", "store", "sample", "update", "eval", "checkpoint")


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


class Normalizer:
    """Running mean and std of a vector (float64 sums), applied as ``clip((x - mean) / std, +-clip)``."""

    def __init__(self, size: int, eps: float, clip: float) -> None:
        self.sum = np.zeros(size)
        self.sumsq = np.zeros(size)
        self.count = 0
        self.eps, self.clip = eps, clip
        self.mean = np.zeros(size, np.float32)
        self.std = np.ones(size, np.float32)

    def update(self, x: np.ndarray) -> None:
        x = x.reshape(-1, self.sum.size).astype(np.float64)
        self.sum += x.sum(0)
        self.sumsq += np.square(x).sum(0)
        self.count += x.shape[0]
        mean = self.sum / self.count
        self.mean = mean.astype(np.float32)
        var = np.maximum(self.eps**2, self.sumsq / self.count - np.square(mean))
        self.std = np.sqrt(var).astype(np.float32)

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


class Agent:
    """Actor, critic, their targets and optimisers, and the input normalisers."""

    def __init__(self, cfg: Config, obs_dim: int, goal_dim: int, act_dim: int) -> None:
        self.cfg = cfg
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
        critic_loss = (self.critic(torch.cat([x, a], 1)) - target).pow(2).mean()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        pi = torch.tanh(self.actor(x))
        self.critic.requires_grad_(False)  # the actor's step needs no critic weight gradients
        actor_loss = -self.critic(torch.cat([x, pi], 1)).mean() + self.cfg.action_l2 * pi.pow(2).mean()
        self.critic.requires_grad_(True)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()

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


def future_goals(achieved_next: np.ndarray, rng: np.random.Generator, share: float) -> np.ndarray:
    """Goals for the normalizer as HER samples them: for each step ``t`` of ``(N, T, G)`` achieved
    goals (after each step), with probability ``share`` an achieved goal of a step in ``[t, T)``."""
    n, steps, _ = achieved_next.shape
    t = np.arange(steps)
    future = t + (rng.random((n, steps)) * (steps - t)).astype(np.int64)
    return np.take_along_axis(achieved_next, future[..., None], axis=1), rng.random((n, steps)) < share


class Trainer:
    """The cycle loop: collect, store, normalise, update; evaluate every epoch; checkpoint."""

    def __init__(self, cfg: Config, out: Path, save_freq: int = 0) -> None:
        self.cfg, self.out, self.save_freq = cfg, out, save_freq
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        self.envs = [gym.make(cfg.env_id).unwrapped for _ in range(cfg.n_envs)]
        self.eval_envs = [gym.make(cfg.env_id).unwrapped for _ in range(min(cfg.n_envs, cfg.eval_episodes))]
        self.horizon = int(self.envs[0].max_steps)
        space = self.envs[0].observation_space
        obs_dim, goal_dim = space["observation"].shape[0], space["desired_goal"].shape[0]
        act_space = self.envs[0].action_space
        self.agent = Agent(cfg, obs_dim, goal_dim, act_space.shape[0])
        self.storage = HerStorage(
            cfg.buffer_size, space, act_space, self.envs[0].compute_reward, n_envs=cfg.n_envs,
            n_sampled_goal=cfg.n_sampled_goal, goal_selection_strategy="future", seed=cfg.seed,
        )  # fmt: skip
        self.epoch = self.cycle = self.updates = 0
        self.reset_seeds: list[int] | None = [cfg.seed * 100_003 + i for i in range(cfg.n_envs)]
        self.times = dict.fromkeys(TIMERS, 0.0)
        self.wall0, self.cpu0 = 0.0, 0.0  # wall and CPU seconds spent before this process (resume)

    # ------------------------------------------------------------------ collection
    def explore(self, obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
        u = self.agent.pi(obs, goal)
        u = np.clip(u + self.cfg.noise_eps * self.rng.standard_normal(u.shape), -1.0, 1.0)
        random = self.rng.random(len(u)) < self.cfg.random_eps
        u[random] = self.rng.uniform(-1.0, 1.0, (int(random.sum()), u.shape[1]))
        return u.astype(np.float32)

    def collect(self) -> None:
        """One episode in every env, stored step by step; normalisers updated as HER samples."""
        t0, spent = time.perf_counter(), 0.0  # spent: seconds counted as act or env
        seeds = self.reset_seeds or [None] * len(self.envs)
        self.reset_seeds = None
        obs = _stack([env.reset(seed=s)[0] for env, s in zip(self.envs, seeds, strict=True)])
        episode_obs, achieved = [], []
        for _ in range(self.horizon):
            t1 = time.perf_counter()
            action = self.explore(obs["observation"], obs["desired_goal"])
            t2 = time.perf_counter()
            results = [env.step(a) for env, a in zip(self.envs, action, strict=True)]
            t3 = time.perf_counter()
            nxt = _stack([r[0] for r in results])
            rewards = np.array([r[1] for r in results], np.float32)
            terminated = np.array([r[2] for r in results])
            truncated = np.array([r[3] for r in results])
            self.storage.add(obs, action, rewards, terminated, truncated, None, nxt)
            episode_obs.append(obs["observation"])
            achieved.append(nxt["achieved_goal"])
            obs = nxt
            self.times["act"] += t2 - t1
            self.times["env"] += t3 - t2
            spent += t3 - t1
            if (terminated | truncated).all():
                break
        goals = np.repeat(obs["desired_goal"][:, None], len(episode_obs), axis=1)
        relabel, use = future_goals(np.stack(achieved, axis=1), self.rng, self.storage.her_ratio)
        goals[use] = relabel[use]
        self.agent.o_norm.update(np.clip(np.stack(episode_obs, 1), -self.cfg.clip_obs, self.cfg.clip_obs))
        self.agent.g_norm.update(np.clip(goals, -self.cfg.clip_obs, self.cfg.clip_obs))
        self.times["store"] += time.perf_counter() - t0 - spent  # storage, resets, normalisers

    def train(self) -> None:
        for _ in range(self.cfg.n_batches):
            t0 = time.perf_counter()
            batch = self.storage.sample_arrays(self.cfg.batch_size)
            t1 = time.perf_counter()
            self.agent.update(batch)
            self.times["sample"] += t1 - t0
            self.times["update"] += time.perf_counter() - t1
            self.updates += 1
        self.agent.update_targets()

    def evaluate(self, base: int | None = None) -> float:
        """Success rate of the greedy policy over ``eval_episodes`` episodes seeded ``base``, ``base + 1``, ...

        By default the seeds depend on the epoch and lie apart from training's.
        """
        t0 = time.perf_counter()
        successes: list[float] = []
        if base is None:
            base = 10**9 + self.cfg.seed * 10_007 + self.epoch * 1_009
        while len(successes) < self.cfg.eval_episodes:
            envs = self.eval_envs[: self.cfg.eval_episodes - len(successes)]
            obs = _stack([env.reset(seed=base + len(successes) + i)[0] for i, env in enumerate(envs)])
            for _ in range(self.horizon):
                action = self.agent.pi(obs["observation"], obs["desired_goal"])
                results = [env.step(a) for env, a in zip(envs, action, strict=True)]
                obs = _stack([r[0] for r in results])
            successes += [float(r[4]["is_success"]) for r in results]
        self.times["eval"] += time.perf_counter() - t0
        return float(np.mean(successes))

    # ------------------------------------------------------------------ loop
    def run(self, log: bool = True) -> float:
        cfg = self.cfg
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        rows = (
            list(csv.DictReader((self.out / "eval.csv").open())) if (self.out / "eval.csv").exists() else []
        )
        success = float(rows[-1]["success_rate"]) if rows else float("nan")  # a finished run resumed
        while self.epoch < cfg.epochs:
            while self.cycle < cfg.n_cycles:
                self.collect()
                self.train()
                self.cycle += 1
            self.epoch += 1
            self.cycle = 0
            success = self.evaluate()
            wall = self.wall0 + time.perf_counter() - wall_start
            cpu = self.cpu0 + time.process_time() - cpu_start
            row = {"epoch": self.epoch, "env_steps": self.epoch * cfg.n_cycles * cfg.n_envs * self.horizon,
                   "updates": self.updates, "success_rate": success, "wall_s": round(wall, 1),
                   "cpu_s": round(cpu, 1), **{f"t_{k}": round(v, 1) for k, v in self.times.items()}}  # fmt: skip
            self._append_row(row)
            if log:
                print(f"epoch {self.epoch:3d}  steps {row['env_steps']:8d}  success {success:.3f}  "
                      f"wall {wall:7.0f}s  cpu {cpu:7.0f}s", flush=True)  # fmt: skip
            if self.save_freq and (self.epoch % self.save_freq == 0 or self.epoch == cfg.epochs):
                t0 = time.perf_counter()
                self.wall0, self.cpu0 = wall, cpu
                wall_start, cpu_start = time.perf_counter(), time.process_time()
                self.save()
                self.times["checkpoint"] += time.perf_counter() - t0
        return success

    def _append_row(self, row: dict[str, Any]) -> None:
        path = self.out / "eval.csv"
        new = not path.exists()
        with path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> None:
        """Write checkpoint.pt, storage.pkl and envs.pkl atomically (each via a temporary file)."""
        state = {"agent": self.agent.state_dict(), "rng": self.rng.bit_generator.state,
                 "torch_rng": torch.get_rng_state(), "epoch": self.epoch, "updates": self.updates,
                 "times": self.times, "wall0": self.wall0, "cpu0": self.cpu0,
                 "reset_seeds": self.reset_seeds}  # fmt: skip
        reward_fn, self.storage.reward_fn = self.storage.reward_fn, None  # not the env behind it
        try:
            _atomic(self.out / "storage.pkl", lambda f: pickle.dump(self.storage, f, protocol=5))
        finally:
            self.storage.reward_fn = reward_fn
        # At a cycle boundary every env is about to be reset, and a Fetch reset (mj_resetData, then
        # draws from np_random) depends on nothing else: the random generators are the envs' state.
        rngs = [env.np_random for env in self.envs]
        _atomic(self.out / "envs.pkl", lambda f: pickle.dump(rngs, f, protocol=5))
        _atomic(self.out / "checkpoint.pt", lambda f: torch.save(state, f))

    def load(self) -> None:
        state = torch.load(self.out / "checkpoint.pt", weights_only=False)
        self.agent.load_state_dict(state["agent"])
        self.rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        for key in ("epoch", "updates", "times", "wall0", "cpu0", "reset_seeds"):
            setattr(self, key, state[key])
        with (self.out / "envs.pkl").open("rb") as f:
            for env, rng in zip(self.envs, pickle.load(f), strict=True):
                env.np_random = rng
        with (self.out / "storage.pkl").open("rb") as f:
            self.storage = pickle.load(f)
        self.storage.reward_fn = self.envs[0].compute_reward
        # Rows of epochs after the checkpoint (a crash between the two) would be written again.
        path = self.out / "eval.csv"
        if path.exists():
            rows = list(csv.DictReader(path.open()))
            kept = [r for r in rows if int(r["epoch"]) <= self.epoch]
            if len(kept) != len(rows):
                with path.open("w", newline="") as f:
                    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                    writer.writeheader()
                    writer.writerows(kept)


def _stack(dicts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.stack([d[key] for d in dicts]) for key in dicts[0]}


def _atomic(path: Path, write: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("wb") as f:
        write(f)
    os.replace(tmp, path)


def record_gif(
    agent: Agent, env_id: str, path: Path, episodes: int = 3, seed: int = 0, size: int = 240
) -> None:
    """A GIF of ``episodes`` greedy episodes (``size`` x ``size`` frames, 25 frames per second)."""
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
    imageio.mimsave(path, frames, duration=40, loop=0)


def plot(out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(csv.DictReader((out / "eval.csv").open()))
    steps = [int(r["env_steps"]) for r in rows]
    success = [float(r["success_rate"]) for r in rows]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot([x / 1000 for x in steps], success, marker="o", markersize=3)
    ax.set(xlabel="env steps (thousands)", ylabel="success rate", ylim=(-0.02, 1.02), title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "success.png", dpi=100)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> tuple[Config, Path, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # Errors are one line (what was wrong, what is accepted), without argparse's usage block.
    parser.error = lambda message: parser.exit(2, f"{parser.prog}: error: {message}\n")  # type: ignore[method-assign]
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR")
    parser.add_argument("--output", type=Path, help="default runs/<env>_ddpg_s<seed>")
    parser.add_argument("--force", action="store_true", help="replace a non-empty output folder")
    parser.add_argument("--save-freq", type=int, default=5, help="epochs between checkpoints (0: none)")
    parser.add_argument("--profile", action="store_true", help="print where the time went")
    parser.add_argument("--no-gif", action="store_true", help="skip the GIF of the trained policy")
    parser.add_argument(
        "--evaluate",
        type=int,
        metavar="N",
        help="with --resume: only report the checkpoint's success over N episodes",
    )
    parser.add_argument(
        "--conf-file", type=Path, default=CONF_FILE, help="per-env settings (default %(default)s)"
    )
    for f in fields(Config):
        flag = ["--" + f.name.replace("_", "-")] + (["--env"] if f.name == "env_id" else [])
        if f.type == "bool" or isinstance(f.default, bool):
            parser.add_argument(*flag, action=argparse.BooleanOptionalAction, default=None)
        else:
            parser.add_argument(*flag, type=type(f.default), default=None, help=f"default {f.default}")
    args = parser.parse_args(argv)
    values = {f.name: getattr(args, f.name) for f in fields(Config) if getattr(args, f.name) is not None}
    if args.resume is not None:
        config_path = args.resume / "config.json"
        if not config_path.is_file():
            parser.error(f"--resume: {args.resume} holds no config.json of a her_ddpg run")
        saved = json.loads(config_path.read_text())
        changed = {k: v for k, v in values.items() if k not in ("epochs", "threads") and v != saved[k]}
        if changed:
            parser.error(
                f"--resume continues a run as configured; only --epochs and --threads may change, got {changed}"
            )
        if args.evaluate is not None and args.evaluate < 1:
            parser.error(f"--evaluate must be >= 1, got {args.evaluate}")
        if not (args.resume / "checkpoint.pt").is_file():
            parser.error(
                f"--resume: {args.resume} has no checkpoint.pt yet (checkpoints need --save-freq >= 1)"
            )
        saved.update(values)
        done = torch.load(args.resume / "checkpoint.pt", weights_only=False)["epoch"]
        if saved["epochs"] < done:
            parser.error(f"--epochs: {args.resume} has already run {done} epochs; pass --epochs >= {done}")
        return Config(**saved), args.resume, args
    env_id = values.get("env_id", Config.env_id)
    try:
        entries = yaml.safe_load(args.conf_file.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        parser.error(f"--conf-file: cannot read {args.conf_file}: {str(exc).splitlines()[0]}")
    entry = dict(entries.get(env_id) or {})
    unknown = sorted(set(entry) - {f.name for f in fields(Config)})
    if unknown:
        parser.error(f"--conf-file: {args.conf_file} entry {env_id!r} has unknown keys {unknown}")
    if args.evaluate is not None:
        parser.error("--evaluate: needs --resume RUN_DIR (the run whose checkpoint to evaluate)")
    cfg = Config(**{**entry, **values})
    for name in ("epochs", "n_envs", "n_cycles", "n_batches", "batch_size", "buffer_size", "hidden", "layers",
                 "eval_episodes", "threads"):  # fmt: skip
        if getattr(cfg, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(cfg, name)}")
    if args.save_freq < 0:
        parser.error(f"--save-freq must be >= 0 (0: no checkpoints), got {args.save_freq}")
    try:
        gym.spec(cfg.env_id)
    except gym.error.Error as exc:
        parser.error(f"--env-id: {exc}")
    if not cfg.env_id.startswith("goalenvs/Fetch"):
        fetch = sorted(i for i in gym.registry if i.startswith("goalenvs/Fetch"))
        parser.error(f"--env-id: this agent runs the goalenvs Fetch ids {fetch}, got {cfg.env_id!r}")
    name = cfg.env_id.split("/")[-1]
    out = args.output or Path("runs") / f"{name}_ddpg_s{cfg.seed}"
    if out.exists() and any(out.iterdir()) and not args.force:
        parser.error(
            f"--output: {out} is not empty; pass --resume {out} to continue it or --force to replace it"
        )
    return cfg, out, args


def evaluate_checkpoint(cfg: Config, out: Path, episodes: int) -> float:
    """Success of the greedy policy in ``out/checkpoint.pt`` over ``episodes`` episodes; writes nothing.

    Episode seeds start at 2e9, apart from training's and from the per-epoch evaluations'.
    """
    trainer = Trainer(replace(cfg, eval_episodes=episodes, buffer_size=1), out)  # no replay needed
    trainer.agent.load_state_dict(torch.load(out / "checkpoint.pt", weights_only=False)["agent"])
    return trainer.evaluate(base=2 * 10**9)


def main(argv: list[str] | None = None) -> float:
    cfg, out, args = parse_args(argv)
    if args.evaluate is not None:
        success = evaluate_checkpoint(cfg, out, args.evaluate)
        print(f"{out}: success rate {success:.3f} over {args.evaluate} episodes")
        return success
    if args.resume is None:
        if out.exists():
            for child in out.iterdir():  # --force on a non-empty folder
                if child.is_file():
                    child.unlink()
        out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")  # --epochs may have grown
    with (out / "commands.txt").open("a") as f:  # every command that wrote to this run, in order
        f.write(
            " ".join(["python", "examples/her_ddpg.py", *(sys.argv[1:] if argv is None else argv)]) + "\n"
        )
    trainer = Trainer(cfg, out, args.save_freq)
    if args.resume is not None:
        trainer.load()
        print(f"resumed {out} at epoch {trainer.epoch}", flush=True)
    success = trainer.run()
    plot(out, cfg.env_id.split("/")[-1] + f" DDPG+HER, seed {cfg.seed}")
    if not args.no_gif:
        record_gif(trainer.agent, cfg.env_id, out / "policy.gif", seed=10**9 + cfg.seed)
    if args.profile:
        total = sum(trainer.times.values())
        print("time:", ", ".join(f"{k} {v:.1f}s ({v / total:.0%})" for k, v in trainer.times.items()))
    print(f"final success rate {success:.3f} over {cfg.eval_episodes} episodes")
    return success


if __name__ == "__main__":
    sys.exit(0 if main() >= 0 else 1)
