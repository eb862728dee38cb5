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
Observations and goals are normalised by running statistics, clipped to +-5 (PickAndPlace: +-10, whose
heights +-5 would hide). The actor's loss has an
L2 penalty on its actions; critic targets are clipped to ``[-1/(1-gamma), 0]`` (Fetch rewards are
0 or -1). One process does the work of the paper's 8 workers: the envs are cheap, the updates are
the cost, and their hidden layers run in bfloat16 where the CPU computes it natively (AMX or AVX-512
BF16: several times faster than float32 at batch 2048; elsewhere, where it would be emulated 16x slower,
in float32; ``--bf16`` / ``--no-bf16`` choose, and a run keeps its choice), and Adam runs its fused kernel
(``--no-fused-adam``: the per-tensor loop of runs recorded before it) with subnormal floats flushed to
zero (``--no-flush-denormals``: as runs recorded before it). ``--profile`` prints where the time went.

Writes to ``--output`` (default ``runs/<env>_ddpg_s<seed>``): ``config.json``, ``eval.csv`` (one row
per epoch: success over ``eval_episodes`` greedy episodes, steps, updates, wall and CPU seconds,
profile), ``success.png`` and, every ``--save-freq`` epochs and at the end, a checkpoint in
``checkpoints/<epoch>/``: ``agent.pt`` (networks, optimisers, normalisers, the curve, and the actor and
normalisers of the best evaluation so far, for ``--evaluate N --best``), ``storage.pkl`` (the replay
storage) and ``envs.pkl`` (the envs' and the run's random states), switched in as one unit
(``examples/runfolder.py``: written aside, fsynced, renamed; sizes and hashes checked on load).
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

``--device cuda`` puts the networks on a GPU (each worker on GPU ``LOCAL_RANK``, their gradients summed
by NCCL; untested here, where no GPU is); the envs and the storage stay on the CPU.

Under ``torchrun`` the run is W workers (``examples/workers.py``): each steps its share of the envs,
keeps its own storage shard and samples its share of each batch; the gradients of every update and
the normalisers' statistics are summed over the workers, so every setting means what it means in one
process. The sums overlap the work that does not need them (:meth:`Agent.updates`). Rank 0 writes the
folder; its checkpoints hold every worker's part (``storage-<r>.pkl``, ``envs-<r>.pkl``), and
``--resume`` needs the same number of workers; ``torchrun --max-restarts`` restarts go on from the
launch's last checkpoint (and replace nothing). docs/training.md says more.

Read it top to bottom: the settings (:class:`Config`), the networks (:class:`Agent`), what the loop works
on and its steps (:class:`Trainer`), then the loop (:func:`train`). The run machinery (options, the
folder and its checkpoints, the curve, TensorBoard, the workers' hand-over on resume) is
``examples/ddpg_run.py``'s, over ``examples/runfolder.py`` and ``examples/workers.py``.
"""

from __future__ import annotations

import copy
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import ddpg_run
import gymnasium as gym
import numpy as np
import torch
from ddpg_run import Recipe, Run, Timers  # examples/ddpg_run.py: options, folder, checkpoints, curve
from gymnasium import spaces
from nets import MLP, Normalizer  # examples/nets.py
from runfolder import RunError  # examples/runfolder.py
from torch import nn
from workers import World, part  # examples/workers.py

import goalenvs  # noqa: F401  (registers the goalenvs/ ids)
from goalenvs.envs.fetch import FetchEnv, FetchVectorEnv
from her import HerStorage
from her.strategies import GoalSelectionStrategy, goal_step_offsets


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
    # The greedy policy (evaluations, the best policy kept, --evaluate, the GIF) is a running average of the
    # actor's weights, moved ``1 - policy_polyak`` of the way to the actor every cycle, as the target actor
    # is with ``polyak``; 0: the actor itself (the HER paper's). Exploration always acts with the actor.
    # What it gave on FetchSlide checkpoints: docs/training.md.
    policy_polyak: float = 0.0
    action_l2: float = 1.0
    noise_eps: float = 0.2
    random_eps: float = 0.3
    n_sampled_goal: int = 4  # 'future' goals; 80% of each batch relabelled
    clip_obs: float = 200.0
    norm_clip: float = 5.0
    norm_eps: float = 0.01
    eval_episodes: int = 100
    # Where the networks live: "cpu", or "cuda" (each worker on GPU LOCAL_RANK; gloo and NCCL: untested here).
    device: str = "cpu"
    # The hidden layers in bfloat16: by default where this CPU computes it natively (:func:`native_bf16`).
    bf16: bool = field(default_factory=lambda: native_bf16())
    # Adam's fused kernel: the same update in one pass over the weights, 0.25 against 0.75 ms a step here
    # (the last bits differ). Runs recorded before it existed used the per-tensor loop (``--no-fused-adam``).
    fused_adam: bool = True
    # Adam's steps read and write subnormal floats (< 1.2e-38) as zero, as TensorFlow's threads (and so
    # the HER paper's code) do: late in a run, decaying second moments of tiny gradients are subnormal
    # and every operation on them takes a slow path (an update ~15% slower here). Off in runs recorded
    # before the setting existed (``--no-flush-denormals``).
    flush_denormals: bool = True
    threads: int = 1


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 matrix products in hardware (AVX-512 BF16 or AMX), the default of
    ``Config.bf16``. With it the hidden layers run 2.6-3.4x faster in bfloat16 than in float32 at batch
    2048; without it (AVX2 only) oneDNN emulates bfloat16 and an update is 16x slower than in float32
    (975 against 60 ms at batch 1024 on a Zen 3 EPYC), so there the default is float32."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # torch.cpu's own probes (torch >= 2.3)
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def torch_device(name: str) -> torch.device:
    """The torch device of setting ``device`` for this worker: the CPU, or under ``"cuda"`` the GPU
    ``LOCAL_RANK`` of this machine (torchrun's local worker number; 0 without it), made current."""
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():  # rank 0 checked its own machine; this worker may be on another
        raise RunError(f"--device: cuda is not available on {socket.gethostname()}; accepted: cpu")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def flat_grads(module: nn.Module) -> torch.Tensor:
    """One zeroed buffer holding every gradient of ``module`` (each parameter's ``.grad`` a view into it),
    so the workers sum them in one call; backward accumulates into the views in place."""
    params = list(module.parameters())
    flat = torch.zeros(sum(p.numel() for p in params), device=params[0].device)
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
        self.device = torch_device(cfg.device)
        self.o_norm = Normalizer(obs_dim, cfg.norm_eps, cfg.norm_clip)
        self.g_norm = Normalizer(goal_dim, cfg.norm_eps, cfg.norm_clip)
        n_in = obs_dim + goal_dim
        # Made on the CPU, then moved: the same initial weights on every device.
        self.actor = MLP(n_in, act_dim, cfg.hidden, cfg.layers, cfg.bf16).to(self.device)
        self.critic = MLP(n_in + act_dim, 1, cfg.hidden, cfg.layers, cfg.bf16).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        # The greedy policy's network: the actor, or the running average of its weights (``policy_polyak``).
        self.greedy = copy.deepcopy(self.actor).requires_grad_(False) if cfg.policy_polyak > 0 else self.actor
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr_actor, fused=cfg.fused_adam)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.lr_critic, fused=cfg.fused_adam)
        self.clip_return = 1.0 / (1.0 - cfg.gamma)
        self.sync_s = 0.0  # seconds spent summing gradients with the other workers
        self.grads: tuple[torch.Tensor, torch.Tensor] | None = None
        # With track: per-update sums of the critic's and actor's losses, Q(s, a) and its target (batch
        # means), kept as a tensor so that the updates never wait on them; read once an epoch.
        self.stats: torch.Tensor | None = None
        if self.world.size > 1:
            self.grads = (flat_grads(self.critic), flat_grads(self.actor))
            # Where each gradient's sum receives the other workers' part.
            self.scratch = (torch.empty_like(self.grads[0]), torch.empty_like(self.grads[1]))

    def _backward(self, loss: torch.Tensor, opt: torch.optim.Optimizer, which: int) -> Callable[[], None]:
        """Backward into network ``which``'s gradients (0: critic, 1: actor) and start summing them over the
        workers; the returned call waits for the sum and takes the Adam step."""
        if self.grads is None:
            opt.zero_grad(set_to_none=True)
            loss.backward()
            return lambda: self._step(opt)
        opt.zero_grad(set_to_none=False)  # keeps the .grad views into the flat buffer
        loss.backward()
        t0 = time.perf_counter()
        summed = self.world.start_sum(self.grads[which].mul_(self.share), self.scratch[which])
        self.sync_s += time.perf_counter() - t0

        def step() -> None:
            t0 = time.perf_counter()
            summed()
            self.sync_s += time.perf_counter() - t0
            self._step(opt)

        return step

    def _step(self, opt: torch.optim.Optimizer) -> None:
        """``opt``'s Adam step; under ``flush_denormals`` with subnormal floats read and written as zero by
        this thread, as they are not before or after (torch's other threads, with ``threads > 1``, keep
        them: their share of the step is not flushed)."""
        if not self.cfg.flush_denormals:
            opt.step()
            return
        torch.set_flush_denormal(True)
        try:
            opt.step()
        finally:
            torch.set_flush_denormal(False)

    def take_sync_seconds(self) -> float:
        """The seconds spent summing gradients with the other workers since the last call."""
        seconds, self.sync_s = self.sync_s, 0.0
        return seconds

    def inputs(self, obs: np.ndarray, goal: np.ndarray) -> torch.Tensor:
        """``(B, obs_dim + goal_dim)`` normalised network input from raw observations and goals."""
        o = self.o_norm(np.clip(obs, -self.cfg.clip_obs, self.cfg.clip_obs))
        g = self.g_norm(np.clip(goal, -self.cfg.clip_obs, self.cfg.clip_obs))
        return self.tensor(np.concatenate([o, g], axis=1, dtype=np.float32))

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        """``array`` (float32) as a tensor on the networks' device (no copy on the CPU)."""
        return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(self.device)

    def pi(self, obs: np.ndarray, goal: np.ndarray, greedy: bool = True) -> np.ndarray:
        """The greedy policy's actions in [-1, 1], shape ``(B, act_dim)``; with ``greedy=False`` the actor's
        own (what exploration adds noise to; the same unless ``policy_polyak``)."""
        with torch.no_grad():
            return torch.tanh((self.greedy if greedy else self.actor)(self.inputs(obs, goal))).cpu().numpy()

    def update(self, batch: dict[str, Any]) -> None:
        """One critic and one actor Adam step on a sampled batch."""
        self.updates([batch])

    def updates(self, batches: Iterable[dict[str, Any]]) -> None:
        """One critic and then one actor Adam step on each of ``batches`` in turn.

        The steps are those of one :meth:`update` a batch, and give the same bits, but with workers the
        gradient sums overlap the work that does not need them. The critic's loss needs neither the actor
        nor its last step, and its target only the target networks, which stay put here: so the actor's
        sum runs while the critic's next gradient is computed, and the critic's sum while the actor takes
        its step and the next batch is drawn (``batches`` may be lazy) and turned into inputs and targets.
        """
        actor_step: Callable[[], None] = _nothing  # the last batch's actor step, waiting for its sum
        batches = iter(batches)
        ahead = self._targets(next(batches, None))
        while ahead is not None:
            x, a, target = ahead
            q = self.critic(torch.cat([x, a], 1))
            critic_loss = (q - target).pow(2).mean()
            critic_step = self._backward(critic_loss, self.critic_opt, 0)
            actor_step()
            ahead = self._targets(next(batches, None))
            pi = torch.tanh(self.actor(x))
            critic_step()
            self.critic.requires_grad_(False)  # the actor's step needs no critic weight gradients
            actor_loss = -self.critic(torch.cat([x, pi], 1)).mean() + self.cfg.action_l2 * pi.pow(2).mean()
            self.critic.requires_grad_(True)
            actor_step = self._backward(actor_loss, self.actor_opt, 1)
            if self.stats is not None:
                with torch.no_grad():
                    self.stats += torch.stack([critic_loss, actor_loss, q.mean(), target.mean()])
        actor_step()

    def _targets(
        self, batch: dict[str, Any] | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """A batch's network input, actions and the critic's targets (from the target networks)."""
        if batch is None:
            return None
        obs, nxt = batch["observations"], batch["next_observations"]
        x = self.inputs(obs["observation"], obs["desired_goal"])
        x2 = self.inputs(nxt["observation"], nxt["desired_goal"])
        a = self.tensor(batch["actions"])
        r = self.tensor(batch["rewards"]).unsqueeze(1)
        not_done = 1.0 - self.tensor(batch["terminateds"]).unsqueeze(1)
        with torch.no_grad():
            q2 = self.critic_target(torch.cat([x2, torch.tanh(self.actor_target(x2))], 1))
            target = (r + self.cfg.gamma * not_done * q2).clamp_(-self.clip_return, 0.0)
        return x, a, target

    def update_targets(self) -> None:
        """Move the target networks (and the averaged policy, under ``policy_polyak``) towards the networks."""
        moves = [
            (self.actor, self.actor_target, self.cfg.polyak),
            (self.critic, self.critic_target, self.cfg.polyak),
        ]
        if self.greedy is not self.actor:
            moves.append((self.actor, self.greedy, self.cfg.policy_polyak))
        with torch.no_grad():
            for net, target, polyak in moves:
                for p, tp in zip(net.parameters(), target.parameters(), strict=True):
                    tp.mul_(polyak).add_(p, alpha=1.0 - polyak)

    def state_dict(self) -> dict[str, Any]:
        nets = ("actor", "critic", "actor_target", "critic_target", "actor_opt", "critic_opt")
        state = {name: getattr(self, name).state_dict() for name in nets}
        state["normalizers"] = (self.o_norm.state_dict(), self.g_norm.state_dict())
        if self.greedy is not self.actor:
            state["actor_average"] = self.greedy.state_dict()
        return on_cpu(state) if self.device.type != "cpu" else state

    def policy_state(self) -> dict[str, Any]:
        """A copy of what the greedy policy needs (its network's weights, under ``"actor"``, and the
        normalisers' statistics), for :meth:`load_policy_state`."""
        norms = (self.o_norm.state_dict(), self.g_norm.state_dict())
        actor = {key: value.detach().to("cpu", copy=True) for key, value in self.greedy.state_dict().items()}
        return {"actor": actor, "normalizers": copy.deepcopy(norms)}

    def load_policy_state(self, state: dict[str, Any]) -> None:
        self.greedy.load_state_dict(state["actor"])
        self.o_norm.load_state_dict(state["normalizers"][0])
        self.g_norm.load_state_dict(state["normalizers"][1])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name in ("actor", "critic", "actor_target", "critic_target", "actor_opt", "critic_opt"):
            getattr(self, name).load_state_dict(state[name])
        if self.greedy is not self.actor:
            self.greedy.load_state_dict(state["actor_average"])
        self.o_norm.load_state_dict(state["normalizers"][0])
        self.g_norm.load_state_dict(state["normalizers"][1])


def on_cpu(tree: Any) -> Any:
    """``tree`` (dicts, lists and tuples of tensors and other values) with its tensors copied to the CPU:
    checkpoints and the workers' hand-over load on any device."""
    if isinstance(tree, torch.Tensor):
        return tree.cpu()
    if isinstance(tree, dict):
        return {key: on_cpu(value) for key, value in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(on_cpu(value) for value in tree)
    return tree


def hindsight_goals(
    achieved_next: np.ndarray,
    rng: np.random.Generator,
    share: float,
    strategy: GoalSelectionStrategy | str = GoalSelectionStrategy.FUTURE,
) -> tuple[np.ndarray, np.ndarray]:
    """The goals of ``(N, T, G)`` achieved goals (after each step of N episodes) as HER relabels them, for
    the goal normaliser: for each step, the achieved goal of the step ``strategy`` picks (the storage's
    :func:`~her.strategies.goal_step_offsets`), and whether to use it (probability ``share``)."""
    n, steps, _ = achieved_next.shape
    t = np.broadcast_to(np.arange(steps), (n, steps)).ravel()
    offsets = goal_step_offsets(strategy, t, steps - t, rng.random(n * steps))
    picked = np.take_along_axis(achieved_next, (t + offsets).reshape(n, steps, 1), axis=1)
    return picked, rng.random((n, steps)) < share


class Trainer:
    """What the loop (:func:`train`) works on: the envs, the agent, the replay storage, the exploration's
    random generator and the counters; and its steps: collect, normalise, evaluate.

    Under ``torchrun`` (``world.size > 1``) this worker steps its share of the envs, keeps its own storage
    shard and samples its share of each batch (``examples/workers.py``).
    """

    def __init__(
        self, cfg: Config, world: World | None = None, env_threads: int = 1, track: bool = False
    ) -> None:
        self.cfg = cfg
        self.world = world = world or World()
        torch.set_num_threads(cfg.threads)
        if cfg.bf16 and world.rank == 0 and not native_bf16():  # a resumed run, or --bf16 given
            print(
                "her_ddpg.py: note: this run computes in bfloat16, which this CPU emulates (no AVX-512 BF16 or "
                "AMX): an update takes ~16x its float32 time here; a new run's default here is --no-bf16",
                file=sys.stderr,
                flush=True,
            )
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
        self.envs = cast(
            FetchVectorEnv,
            gym.make_vec(
                cfg.env_id,
                num_envs=self.n_local,
                vectorization_mode="vector_entry_point",
                num_threads=env_threads,
            ),
        )
        self.eval_lo, eval_hi = world.share(cfg.eval_episodes)
        self.eval_local = eval_hi - self.eval_lo
        n_eval_envs = min(self.n_local, self.eval_local)
        self.eval_envs = [cast(FetchEnv, gym.make(cfg.env_id).unwrapped) for _ in range(n_eval_envs)]
        max_steps = self.envs.settings.max_steps
        assert max_steps is not None  # Fetch episodes are truncated after max_steps (default 50)
        self.horizon = max_steps
        self.observation_space = space = cast(spaces.Dict, self.envs.single_observation_space)
        obs_dim, goal_dim = _width(space["observation"]), _width(space["desired_goal"])
        act_dim = _width(self.envs.single_action_space)
        self.agent = Agent(cfg, obs_dim, goal_dim, act_dim, world, self.batch_local / cfg.batch_size)
        if track:  # for TensorBoard: the updates' losses and Q values
            self.agent.stats = torch.zeros(4, device=self.agent.device)
        self.storage = HerStorage(
            part(cfg.buffer_size, lo, hi, cfg.n_envs),
            space,
            self.envs.single_action_space,
            self.envs.compute_reward,
            n_envs=self.n_local,
            n_sampled_goal=cfg.n_sampled_goal,
            goal_selection_strategy="future",
            seed=storage_seed,
            pickle_functions=False,  # a checkpoint keeps the storage, not the envs behind compute_reward
        )
        self.epoch = self.cycle = self.updates = 0
        # Env i of the global n_envs starts from the same seed at every world size.
        self.reset_seeds: list[int] | None = [cfg.seed * 100_003 + i for i in range(lo, hi)]
        self.timers = Timers()  # eval.csv's t_* columns
        self.rollouts = np.zeros(3)  # the training episodes' returns, count and successes (TensorBoard)
        self.eval_return = float("nan")  # the mean return of the last evaluation's episodes
        self.totals = np.zeros(0)  # the last evaluation's sums of its ``extra`` over the workers
        self.sample_s = 0.0  # seconds spent drawing the last cycle's batches

    def batches(self) -> Iterator[dict[str, Any]]:
        """A cycle's ``n_batches`` batches, each this worker's share of the global batch, drawn as they are
        needed; counts the updates and the seconds spent drawing (``sample_s``)."""
        self.sample_s = 0.0
        for _ in range(self.cfg.n_batches):
            t0 = time.perf_counter()
            batch = self.storage.sample_arrays(self.batch_local)
            self.sample_s += time.perf_counter() - t0
            yield batch
            self.updates += 1

    def policy(self, obs: np.ndarray, goal: np.ndarray, greedy: bool = True) -> np.ndarray:
        """The greedy policy's actions (``greedy=False``: the actor's, for exploration); a policy whose
        weights have gone NaN (diverged) stops the run in one line."""
        u = self.agent.pi(obs, goal, greedy)
        if not np.isfinite(u).all():  # ~1 us a step; else the env refuses the NaN action with a traceback
            net = self.agent.greedy if greedy else self.agent.actor
            if self.world.rank > 0 and not all(torch.isfinite(p).all() for p in net.parameters()):
                raise SystemExit(2)  # every worker holds these weights: worker 0 says it, once
            raise RunError(
                f"training diverged in epoch {self.epoch + 1}: the actor's actions are not finite (its weights "
                "no longer are); lower --lr-actor / --lr-critic and start again with --force"
            )
        return u

    def explore(self, obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """The actor's actions plus Gaussian noise, and a share ``random_eps`` of uniformly random ones."""
        u = self.policy(obs, goal, greedy=False)
        u = np.clip(u + self.cfg.noise_eps * self.rng.standard_normal(u.shape), -1.0, 1.0)
        random = self.rng.random(len(u)) < self.cfg.random_eps
        u[random] = self.rng.uniform(-1.0, 1.0, (int(random.sum()), u.shape[1]))
        return u.astype(np.float32)

    def collect(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One episode in every env with the exploring policy, stored step by step. Returns the episodes'
        observations ``(N, T, obs)``, achieved goals after each step ``(N, T, G)`` and goals ``(N, G)``."""
        timers = self.timers
        with timers("store"):
            obs, _ = self.envs.reset(seed=self.reset_seeds)  # later cycles go on with each env's own stream
        self.reset_seeds = None
        observations, achieved = [], []
        returns = np.zeros(self.n_local)
        for _ in range(self.horizon):
            with timers("act"):
                action = self.explore(obs["observation"], obs["desired_goal"])
            with timers("env"):
                nxt, rewards, terminated, truncated, info = self.envs.step(action)
            with timers("store"):
                self.storage.add(obs, action, rewards, terminated, truncated, None, nxt)
            returns += rewards
            observations.append(obs["observation"])
            achieved.append(nxt["achieved_goal"])
            obs = nxt
            if (terminated | truncated).all():  # Fetch episodes all end together, by truncation
                break
        self.rollouts += (returns.sum(), self.n_local, np.sum(info.get("is_success", 0.0)))
        return np.stack(observations, 1), np.stack(achieved, 1), obs["desired_goal"]

    def update_normalizers(self, observations: np.ndarray, achieved: np.ndarray, goals: np.ndarray) -> None:
        """Add the episodes' observations, and their goals as HER relabels them, to the normalisers
        (summed over the workers: every worker's episodes).

        Timed as storing, the sum included: there a worker waits for the others to end their collection,
        so collection's time is the slowest worker's, and ``t_sync`` holds only the gradients' sums.
        """
        agent, clip = self.agent, self.cfg.clip_obs
        with self.timers("store"):
            goals = np.repeat(goals[:, None], achieved.shape[1], axis=1)
            strategy = self.storage.goal_selection_strategy
            relabel, use = hindsight_goals(achieved, self.rng, self.storage.her_ratio, strategy)
            goals[use] = relabel[use]
            o_stats = agent.o_norm.stats(np.clip(observations, -clip, clip))
            g_stats = agent.g_norm.stats(np.clip(goals, -clip, clip))
            stats = self.world.sum_array(np.concatenate([o_stats, g_stats]))
        agent.o_norm.add(stats[: o_stats.size])
        agent.g_norm.add(stats[o_stats.size :])

    def evaluate(self, base: int | None = None, extra: np.ndarray | None = None) -> float:
        """Success rate of the greedy policy over ``eval_episodes`` episodes seeded ``base``, ``base + 1``, ...

        By default the seeds depend on the epoch and lie apart from training's. The workers share the
        episodes (the same seeds at every world size) and sum their successes and returns (the mean
        return is left in ``eval_return``); ``extra`` is summed with them (in ``totals``), so that an
        epoch's figures cost the workers no exchange of their own.
        """
        with self.timers("eval"):
            successes: list[float] = []
            offsets: list[np.ndarray] = []  # each episode's goal minus its achieved goal, at the start
            returns = 0.0
            if base is None:
                base = 10**9 + self.cfg.seed * 10_007 + self.epoch * 1_009
            base += self.eval_lo
            while len(successes) < self.eval_local:
                envs = self.eval_envs[: self.eval_local - len(successes)]
                obs = _stack([env.reset(seed=base + len(successes) + i)[0] for i, env in enumerate(envs)])
                offsets.append(obs["desired_goal"] - obs["achieved_goal"])
                for _ in range(self.horizon):
                    action = self.policy(obs["observation"], obs["desired_goal"])
                    results = [env.step(a) for env, a in zip(envs, action, strict=True)]
                    obs = _stack([r[0] for r in results])
                    returns += sum(float(r[1]) for r in results)
                successes += [float(r[4]["is_success"]) for r in results]
            self.eval_successes, self.eval_offsets = successes, np.concatenate(offsets)  # in seed order
            local = np.array([sum(successes), returns, *(() if extra is None else extra)])
            total = self.world.sum_array(local)
        self.eval_return = float(total[1] / self.cfg.eval_episodes)
        self.totals = total[2:]
        return float(total[0] / self.cfg.eval_episodes)

    def evaluate_report(self, base: int) -> tuple[float, str]:
        """:meth:`evaluate` (one worker) and a report of where the policy fails: its success by the goal's
        distance from the achieved goal at the start (quartiles) and, where goals lie above it, by their
        height; and what the normalisers' clip hid from it: the episodes in which an input lay beyond
        ``+-norm_clip`` std of its running mean, their success, and the inputs most often beyond it."""
        names = [f"observation[{i}]" for i in range(self.agent.o_norm.sum.size)]
        names += [f"desired_goal[{i}]" for i in range(self.agent.g_norm.sum.size)]
        norms = (self.agent.o_norm, self.agent.g_norm)
        for norm in norms:
            norm.beyond = []
        try:
            success = self.evaluate(base=base)
            o_calls, g_calls = (cast(list[np.ndarray], norm.beyond) for norm in norms)
        finally:
            for norm in norms:
                norm.beyond = None
        won = np.array(self.eval_successes, bool)
        distance = np.linalg.norm(self.eval_offsets, axis=1)
        edges = np.quantile(distance, [0.25, 0.5, 0.75])
        lines = [
            _bands(
                "success by the goal's distance from the achieved goal at the start (m)", distance, edges, won
            )
        ]
        height = self.eval_offsets[:, 2] if self.eval_offsets.shape[1] == 3 else np.zeros(0)
        if (height >= 0.01).any():
            lines.append(_bands("by the goal's height above it", height, np.array([0.01, 0.15, 0.30]), won))
        # One call per step, `horizon` calls per batch of episodes: (steps, episodes, inputs) per batch.
        calls = [np.concatenate(pair, axis=1) for pair in zip(o_calls, g_calls, strict=True)]
        batches = [np.stack(calls[i : i + self.horizon]) for i in range(0, len(calls), self.horizon)]
        hit = np.concatenate([b.any(axis=(0, 2)) for b in batches])  # per episode, in seed order
        share = sum(b.sum(axis=(0, 1)) for b in batches) / (hit.size * self.horizon)  # per input
        clip = self.cfg.norm_clip
        lines.append(
            f"episodes with an input beyond the clip (+-{clip:g} std): {int(hit.sum())} of {hit.size}"
        )
        if hit.any():
            lines[-1] += f"; success {won[hit].mean():.3f} in those"
            if not hit.all():
                lines[-1] += f", {won[~hit].mean():.3f} in the others"
            top = [i for i in np.argsort(-share, kind="stable")[:5] if share[i] > 0]
            lines.append(
                "inputs most often beyond it (share of steps): "
                + ", ".join(
                    f"{names[i]} {share[i]:.2%}" if share[i] >= 5e-5 else f"{names[i]} <0.01%" for i in top
                )
            )
        return success, "\n".join(lines)


def _bands(title: str, values: np.ndarray, edges: np.ndarray, won: np.ndarray) -> str:
    """``title: <a success (episodes), a-b success (episodes), ..., >=z success (episodes)`` over the bands
    that ``edges`` (increasing) cut ``values`` into; empty bands are left out."""
    band = np.searchsorted(edges, values, side="right")
    names = (
        [f"<{edges[0]:.2f}"]
        + [f"{a:.2f}-{b:.2f}" for a, b in zip(edges[:-1], edges[1:], strict=True)]
        + [f">={edges[-1]:.2f}"]
    )
    parts = [
        f"{names[k]} {won[band == k].mean():.3f} ({int((band == k).sum())})"
        for k in range(len(names))
        if (band == k).any()
    ]
    return f"{title}: " + ", ".join(parts)


def _width(space: gym.Space[Any]) -> int:
    """The length of the vectors of a one-dimensional Box."""
    return cast(spaces.Box, space).shape[0]


def _nothing() -> None:
    """The actor step before the first batch of :meth:`Agent.updates`: none."""


def _stack(dicts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.stack([d[key] for d in dicts]) for key in dicts[0]}


def train(t: Trainer, run: Run) -> float:
    """DDPG + HER, from ``t``'s epoch and cycle to ``cfg.epochs``; returns the last evaluation's success.

    Every cycle: collect an episode in each env and store it, update the normalisers, then ``n_batches``
    updates of the critic and the actor and one move of the target networks. Every epoch: evaluate the
    greedy policy; ``run`` writes the curve, TensorBoard and, every ``--save-freq`` epochs, a checkpoint.
    """
    cfg, timers = t.cfg, t.timers
    success = run.begin()
    while t.epoch < cfg.epochs:
        while t.cycle < cfg.n_cycles:
            # 1. Collect one episode in every env with the exploring policy, storing it step by step.
            observations, achieved, goals = t.collect()
            t.update_normalizers(observations, achieved, goals)
            # 2. Update: n_batches Adam steps of the critic and the actor on relabelled batches, then
            #    one move of the target networks.
            with timers("update"):
                t.agent.updates(t.batches())
            timers.move(t.sample_s, "update", "sample")
            t.agent.update_targets()
            timers.move(t.agent.take_sync_seconds(), "update", "sync")  # the gradients' sums over the workers
            t.cycle += 1
        t.epoch, t.cycle = t.epoch + 1, 0
        # 3. Evaluate the greedy policy; the run writes eval.csv, TensorBoard and, when due, a checkpoint.
        success = t.evaluate(extra=run.epoch_figures())
        run.end_epoch(success)
    return success


def main(argv: list[str] | None = None) -> float:
    """Train, resume or evaluate a run (``examples/ddpg_run.py``); returns the final success rate."""
    return ddpg_run.main(RECIPE, argv, description=__doc__.split("\n\n")[0])


RECIPE = Recipe(Config, Trainer, train)

if __name__ == "__main__":
    sys.exit(0 if main() >= 0 else 1)
