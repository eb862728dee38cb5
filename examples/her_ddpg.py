"""DDPG + HER as in the HER paper (Andrychowicz et al., 2017; Plappert et al., 2018), on ``her.HerStorage``,
top to bottom: the settings, the networks and their update, what one worker collects and evaluates, the loop.
docs/training.md says how to run it (resume, torchrun workers) and what each setting does."""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
import torch.distributed as dist

# The examples' shared modules (examples/nets.py, runfolder.py, workers.py):
from nets import EVAL_SEED, MLP, OUTPUTS, SCRIPT, Normalizer, native_bf16, net_input, record_gif, stack
from runfolder import Range, RunError, setting
from workers import Run, Timers, all_sum, part, share

import goalenvs  # noqa: F401  (registers the goalenvs/ ids)
from goalenvs.envs.mujoco_task import MujocoVectorEnv
from her import HerStorage
from her.strategies import goal_step_offsets

CONF_FILE = Path(__file__).resolve().parent / "hyperparams" / "her_ddpg.yml"  # per-task settings
POSITIVE, SHARE, COUNT = Range(float, 0.0, low_open=True), Range(float, 0.0, 1.0), Range(int, 1)


@dataclass
class Config:
    """The HER paper's Fetch settings; each an option (``--n-envs``), a key of hyperparams/her_ddpg.yml and config.json."""

    env_id: str = setting("goalenvs/FetchPush-v0", str)
    seed: int = setting(0, Range(int, 0, 2**32 - 1))
    epochs: int = setting(20, COUNT)
    n_envs: int = setting(16, COUNT)  # one episode each per cycle
    n_cycles: int = setting(50, COUNT)  # cycles per epoch
    n_batches: int = setting(40, COUNT)  # updates per cycle
    batch_size: int = setting(2048, COUNT)
    buffer_size: int = setting(1_000_000, COUNT)
    hidden: int = setting(256, COUNT)
    layers: int = setting(3, COUNT)
    lr_actor: float = setting(1e-3, POSITIVE)
    lr_critic: float = setting(1e-3, POSITIVE)
    lr_decay: float = setting(1.0, Range(float, 0.0, 1.0, low_open=True))  # the rates x lr_decay ** epoch
    gamma: float = setting(0.98, Range(float, 0.0, 1.0, high_open=True))  # targets in [-1/(1-gamma), 0]
    polyak: float = setting(0.95, SHARE)  # the target networks' move per cycle: 1 - polyak of the way
    # The greedy policy (evaluations, GIF): the actor averaged, 1 - policy_polyak a cycle; 0: the actor's
    policy_polyak: float = setting(0.0, Range(float, 0.0, 1.0, high_open=True))
    action_l2: float = setting(1.0, Range(float, 0.0))
    noise_eps: float = setting(0.2, Range(float, 0.0))  # Gaussian exploration noise ...
    random_eps: float = setting(0.3, SHARE)  # ... and this share of uniformly random actions
    n_sampled_goal: int = setting(4, Range(int, 0))  # 'future' goals: k / (k + 1) of a batch relabelled
    n_step: int = setting(1, COUNT)  # critic targets over the next n steps (MHER(lambda)); 1: the HER paper's
    mher_lambda: float = setting(0.7, SHARE)  # the i-step targets' weights: mher_lambda ** (i - 1)
    clip_obs: float = setting(200.0, POSITIVE)
    norm_clip: float = setting(5.0, POSITIVE)  # normalised inputs clipped to +-norm_clip std
    norm_eps: float = setting(0.01, POSITIVE)
    eval_episodes: int = setting(100, COUNT)
    bf16: bool = setting(lambda: native_bf16(), bool)  # hidden layers in bfloat16 (default: where native)
    fused_adam: bool = setting(True, bool)  # Adam in one pass over the weights
    flush_denormals: bool = setting(True, bool)  # Adam's subnormals read as zero, as TensorFlow's were
    threads: int = setting(1, COUNT)  # torch threads per worker
    device: str = setting("cpu", ("cpu", "cuda"))  # where the networks and batches live


FREE_ON_RESUME = ("epochs", "threads")  # what a resumed run may change: how it computes, not what it learns
TIMERS = ("env", "act", "store", "sample", "update", "sync", "eval", "checkpoint")  # eval.csv's t_* columns
LOSSES = ("train/critic_loss", "train/actor_loss", "train/q_mean", "train/q_target_mean")  # per update


def flat_grads(module: torch.nn.Module) -> torch.Tensor:
    """One zeroed buffer holding every gradient of ``module`` (each ``.grad`` a view into it)."""
    params = list(module.parameters())
    flat = torch.zeros(sum(p.numel() for p in params), device=params[0].device)
    for p, view in zip(params, flat.split([p.numel() for p in params]), strict=True):
        p.grad = view.view_as(p)
    return flat


# ------------------------------------------------------------------------------------------ networks
class Agent:
    """Actor, critic, their targets, optimisers, normalisers; workers' gradients summed (weighted by their share)."""

    def __init__(self, cfg: Config, obs_dim: int, goal_dim: int, act_dim: int, weight: float = 1.0) -> None:
        self.cfg, self.weight, self.timers = cfg, weight, Timers(TIMERS)
        self.o_norm = Normalizer(obs_dim, cfg.norm_eps, cfg.norm_clip)
        self.g_norm = Normalizer(goal_dim, cfg.norm_eps, cfg.norm_clip)
        n_in = obs_dim + goal_dim
        self.actor = MLP(n_in, act_dim, cfg.hidden, cfg.layers, cfg.bf16).to(cfg.device)
        self.critic = MLP(n_in + act_dim, 1, cfg.hidden, cfg.layers, cfg.bf16).to(cfg.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.greedy = copy.deepcopy(self.actor).requires_grad_(False) if cfg.policy_polyak > 0 else self.actor
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr_actor, fused=cfg.fused_adam)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.lr_critic, fused=cfg.fused_adam)
        self.clip_return = 1.0 / (1.0 - cfg.gamma)
        self.stats: torch.Tensor | None = None  # with TensorBoard: sums of the LOSSES over the updates
        # With workers, each network's gradients in one flat buffer: one all_reduce each.
        self.grads = [flat_grads(self.critic), flat_grads(self.actor)] if dist.is_initialized() else []

    def inputs(self, obs: np.ndarray, goal: np.ndarray) -> torch.Tensor:
        """The normalised network input of raw observations and goals, ``(B, obs_dim + goal_dim)``."""
        return self.tensor(net_input(self.o_norm, self.g_norm, self.cfg.clip_obs, obs, goal))

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(self.cfg.device)

    def pi(self, obs: np.ndarray, goal: np.ndarray, greedy: bool = True) -> np.ndarray:
        """The greedy policy's actions in [-1, 1] (``greedy=False``: the actor's, which exploration uses)."""
        with torch.no_grad():
            return torch.tanh((self.greedy if greedy else self.actor)(self.inputs(obs, goal))).cpu().numpy()

    def updates(self, batches: Iterable[dict[str, Any]]) -> None:
        """Per batch: a critic, then an actor Adam step; with workers, the gradient sums overlap other work."""
        targets = (self.targets(batch) for batch in batches)  # drawn one ahead, below
        inputs = next(targets, None)
        while inputs is not None:
            x, a, target = inputs
            q = self.critic(torch.cat([x, a], 1))
            critic_loss = (q - target).pow(2).mean()
            summing = self.backward(critic_loss, self.critic_opt, 0)
            pi = torch.tanh(self.actor(x))  # while the critic's gradients are summed
            self.step(self.critic_opt, summing)
            self.critic.requires_grad_(False)  # the actor's step needs no critic weight gradients
            actor_loss = -self.critic(torch.cat([x, pi], 1)).mean() + self.cfg.action_l2 * pi.pow(2).mean()
            self.critic.requires_grad_(True)
            summing = self.backward(actor_loss, self.actor_opt, 1)
            inputs = next(targets, None)  # the next batch's, from the target networks: not stepped here
            self.step(self.actor_opt, summing)
            if self.stats is not None:
                with torch.no_grad():
                    self.stats += torch.stack([critic_loss, actor_loss, q.mean(), target.mean()])

    def backward(self, loss: torch.Tensor, opt: torch.optim.Optimizer, which: int) -> Any:
        """``loss``'s gradients of network ``which`` (0: critic, 1: actor); with workers, their sum begun."""
        opt.zero_grad(set_to_none=not self.grads)  # with workers: keep the .grad views into the buffer
        loss.backward()
        return dist.all_reduce(self.grads[which].mul_(self.weight), async_op=True) if self.grads else None

    def step(self, opt: torch.optim.Optimizer, summing: Any) -> None:
        """Adam's step, once the workers' gradients are summed."""
        if summing is not None:
            with self.timers("sync"):
                summing.wait()
        torch.set_flush_denormal(self.cfg.flush_denormals)  # late in a run tiny moments are subnormal: slow
        try:
            opt.step()
        finally:
            torch.set_flush_denormal(False)

    def targets(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A batch's network input, actions and the critic's clipped targets (from the target networks)."""
        obs, nxt = batch["observations"], batch["next_observations"]
        x, a = self.inputs(obs["observation"], obs["desired_goal"]), self.tensor(batch["actions"])
        with torch.no_grad():
            if self.cfg.n_step > 1:
                return x, a, self.nstep_target(batch).clamp_(-self.clip_return, 0.0)
            x2 = self.inputs(nxt["observation"], nxt["desired_goal"])
            r, done = (self.tensor(batch[key]).unsqueeze(1) for key in ("rewards", "terminateds"))
            q2 = self.critic_target(torch.cat([x2, torch.tanh(self.actor_target(x2))], 1))
            return x, a, (r + self.cfg.gamma * (1.0 - done) * q2).clamp_(-self.clip_return, 0.0)

    def nstep_target(self, batch: dict[str, Any]) -> torch.Tensor:
        """MHER(lambda)'s target, ``(B, 1)``: the i-step returns ``y_i = sum_{j<i} gamma^j r_{t+j} + gamma^i
        Q'(s_{t+i})`` (i = 1 .. n, those within the episode) averaged with weights ``lambda ** (i - 1)``."""
        nxt, (b, n) = batch["nstep_observations"], batch["nstep_rewards"].shape
        x = self.inputs(nxt["observation"].reshape(b * n, -1), nxt["desired_goal"].reshape(b * n, -1))
        q = self.critic_target(torch.cat([x, torch.tanh(self.actor_target(x))], 1)).view(b, n)
        r, done, valid = (self.tensor(batch[f"nstep_{k}"]) for k in ("rewards", "terminateds", "valid"))
        discounts = self.cfg.gamma ** torch.arange(n + 1, dtype=torch.float32, device=q.device)
        returns = torch.cumsum(r * discounts[:n], 1) + discounts[1:] * (1.0 - done) * q
        weights = valid * self.cfg.mher_lambda ** torch.arange(n, dtype=torch.float32, device=q.device)
        return (weights * returns).sum(1, keepdim=True) / weights.sum(1, keepdim=True)

    def update_targets(self) -> None:
        """Move the target networks (and the averaged greedy policy) towards the networks."""
        polyak = self.cfg.polyak
        moves = [(self.actor, self.actor_target, polyak), (self.critic, self.critic_target, polyak)]
        if self.greedy is not self.actor:
            moves.append((self.actor, self.greedy, self.cfg.policy_polyak))
        with torch.no_grad():
            for net, target, polyak in moves:
                for p, tp in zip(net.parameters(), target.parameters(), strict=True):
                    tp.mul_(polyak).add_(p, alpha=1.0 - polyak)

    def parts(self) -> dict[str, Any]:
        """What a checkpoint keeps of the agent, by name, besides the normalisers."""
        names = ("actor", "critic", "actor_target", "critic_target", "actor_opt", "critic_opt")
        return {n: getattr(self, n) for n in names} | ({"actor_average": self.greedy} if self.greedy is not self.actor else {})  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        norms = (self.o_norm.state_dict(), self.g_norm.state_dict())
        return {name: kept.state_dict() for name, kept in self.parts().items()} | {"normalizers": norms}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, kept in self.parts().items():
            kept.load_state_dict(state[name])
        self.o_norm.load_state_dict(state["normalizers"][0])
        self.g_norm.load_state_dict(state["normalizers"][1])


def hindsight_goals(achieved_next: np.ndarray, rng: np.random.Generator, share: float) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per step of ``(N, T, G)`` achieved goals, the 'future' one HER picks and whether to relabel with it."""
    n, steps, _ = achieved_next.shape
    t = np.broadcast_to(np.arange(steps), (n, steps)).ravel()
    offsets = goal_step_offsets("future", t, steps - t, rng.random(n * steps))
    picked = np.take_along_axis(achieved_next, (t + offsets).reshape(n, steps, 1), axis=1)
    return picked, rng.random((n, steps)) < share


# ------------------------------------------------------------------------------------------ one worker
class Trainer:
    """One worker's share of the envs, its storage shard, agent, random generators and counters, and its steps."""

    def __init__(self, cfg: Config, run: Run):
        self.cfg, self.rank, self.size, self.timers = cfg, run.rank, run.size, run.timers
        rank, size = run.rank, run.size
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)  # the same initial networks on every worker
        seeds = [np.random.SeedSequence(cfg.seed, spawn_key=(rank, i) if rank else ()) for i in (0, 1)]
        self.rng = np.random.default_rng(seeds[0])
        lo, hi = share(cfg.n_envs, rank, size)  # its batch and buffer follow its share of the envs
        self.n_local, self.batch_local = hi - lo, part(cfg.batch_size, lo, hi, cfg.n_envs)
        make: Any = dict(vectorization_mode="vector_entry_point", num_threads=1)
        self.envs = cast(MujocoVectorEnv, gym.make_vec(cfg.env_id, self.n_local, **make))
        self.eval_lo, eval_hi = share(cfg.eval_episodes, rank, size)  # its episodes of each evaluation
        self.eval_local = eval_hi - self.eval_lo
        self.eval_envs = [gym.make(cfg.env_id).unwrapped for _ in range(min(self.n_local, self.eval_local))]
        self.horizon = cast(int, self.envs.settings.max_steps)
        self.space = space = cast(gym.spaces.Dict, self.envs.single_observation_space)
        spaces = (space["observation"], space["desired_goal"], self.envs.single_action_space)
        obs_dim, goal_dim, act_dim = (cast(tuple[int], x.shape)[0] for x in spaces)
        self.agent = Agent(cfg, obs_dim, goal_dim, act_dim, self.batch_local / cfg.batch_size)
        self.agent.timers = self.timers
        self.agent.stats = torch.zeros(4, device=cfg.device) if run.tracking else None
        self.storage = HerStorage(
            part(cfg.buffer_size, lo, hi, cfg.n_envs), space, self.envs.single_action_space,
            self.envs.compute_reward, n_envs=self.n_local, n_sampled_goal=cfg.n_sampled_goal,
            goal_selection_strategy="future", seed=seeds[1], pickle_functions=False,
        )  # fmt: skip
        self.epoch = self.cycle = self.updates = 0
        self.reset_seeds: list[int] | None = [cfg.seed * 100_003 + i for i in range(lo, hi)]  # any world size
        self.rollouts = np.zeros(3)  # the training episodes' returns, count and successes (TensorBoard)

    def policy(self, obs: np.ndarray, goal: np.ndarray, greedy: bool = True) -> np.ndarray:
        """The policy's actions; weights gone NaN (diverged) stop the run in one line (worker 0's)."""
        u = self.agent.pi(obs, goal, greedy)
        if not np.isfinite(u).all():
            if self.rank > 0:
                raise SystemExit(2)  # every worker holds these weights: worker 0 says it
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
        """An exploring episode per env, stored; its observations, achieved goals after each step and goals."""
        with self.timers("store"):
            obs, _ = self.envs.reset(seed=self.reset_seeds)  # later cycles go on with each env's own stream
        self.reset_seeds = None
        observations, achieved, returns = [], [], np.zeros(self.n_local)
        for _ in range(self.horizon):
            with self.timers("act"):
                action = self.explore(obs["observation"], obs["desired_goal"])
            with self.timers("env"):
                nxt, rewards, terminated, truncated, info = self.envs.step(action)
            with self.timers("store"):
                self.storage.add(obs, action, rewards, terminated, truncated, None, nxt)
            returns += rewards
            observations.append(obs["observation"])
            achieved.append(nxt["achieved_goal"])
            obs = nxt
            if (terminated | truncated).all():  # the robotics tasks' episodes all end together, by truncation
                break
        self.rollouts += (returns.sum(), self.n_local, np.sum(info.get("is_success", 0.0)))
        return np.stack(observations, 1), np.stack(achieved, 1), obs["desired_goal"]

    def normalise(self, observations: np.ndarray, achieved: np.ndarray, goals: np.ndarray) -> None:
        """Add the episodes' observations, and their goals as HER relabels them, to the normalisers (all workers')."""
        agent, clip = self.agent, self.cfg.clip_obs
        goals = np.repeat(goals[:, None], achieved.shape[1], axis=1)
        relabel, use = hindsight_goals(achieved, self.rng, self.storage.her_ratio)
        goals[use] = relabel[use]
        o_stats = agent.o_norm.stats(np.clip(observations, -clip, clip))
        stats = all_sum(np.concatenate([o_stats, agent.g_norm.stats(np.clip(goals, -clip, clip))]))
        agent.o_norm.add(stats[: o_stats.size])
        agent.g_norm.add(stats[o_stats.size :])

    def batches(self) -> Iterator[dict[str, Any]]:
        """The cycle's ``n_batches`` batches (this worker's share of each), drawn as they are needed."""
        for _ in range(self.cfg.n_batches):
            with self.timers("sample"):
                batch = self.storage.sample_arrays(self.batch_local, self.cfg.n_step)
            yield batch
            self.updates += 1

    def evaluate(
        self, base: int | None = None, extra: np.ndarray | None = None
    ) -> tuple[float, float, np.ndarray]:
        """The greedy policy's success rate and mean return over ``eval_episodes``, and ``extra``, all workers'."""
        base = 10**9 + self.cfg.seed * 10_007 + self.epoch * 1_009 if base is None else base
        successes, returns, done = 0.0, 0.0, 0
        while done < self.eval_local:
            envs = self.eval_envs[: self.eval_local - done]
            obs = stack([env.reset(seed=base + self.eval_lo + done + i)[0] for i, env in enumerate(envs)])
            for _ in range(self.horizon):
                action = self.policy(obs["observation"], obs["desired_goal"])
                results = [env.step(a) for env, a in zip(envs, action, strict=True)]
                obs = stack([r[0] for r in results])
                returns += sum(float(r[1]) for r in results)
            successes += sum(float(r[4]["is_success"]) for r in results)
            done += len(envs)
        total = all_sum(np.array([successes, returns, *(() if extra is None else extra)]))
        return float(total[0] / self.cfg.eval_episodes), float(total[1] / self.cfg.eval_episodes), total[2:]

    def state(self) -> dict[str, Any]:
        """What every worker holds alike (agent.pt, with the run's own state)."""
        return {"agent": self.agent.state_dict(), "epoch": self.epoch, "updates": self.updates, "reset_seeds": self.reset_seeds}  # fmt: skip

    def own(self) -> dict[str, Any]:
        """This worker's storage shard and random states (at a cycle's end an env's generator is all of it)."""
        rngs = {"envs": list(self.envs._rngs), "rng": self.rng.bit_generator.state, "torch_rng": torch.get_rng_state().numpy()}  # fmt: skip
        return {"storage": self.storage, "envs": rngs}

    def load(self, state: dict[str, Any], own: dict[str, Any]) -> None:
        """Take up a checkpoint's shared state and this worker's own part."""
        self.agent.load_state_dict(state["agent"])
        if not own:  # --evaluate: the networks only
            return
        self.epoch, self.updates, self.reset_seeds = state["epoch"], state["updates"], state["reset_seeds"]
        self.envs.reset(seed=list(range(self.n_local)))  # then its next reset draws from the streams set here
        self.envs._rngs = list(own["envs"]["envs"])
        self.rng.bit_generator.state = own["envs"]["rng"]
        torch.set_rng_state(torch.from_numpy(np.array(own["envs"]["torch_rng"], dtype=np.uint8)))
        self.storage = own["storage"]
        self.storage.set_functions(self.envs.compute_reward)

    def fits(self, state: dict[str, Any], own: dict[str, Any], rank: int) -> tuple[str, object] | None:
        """Whether worker ``rank``'s part of a checkpoint fits this run: None, or the file and why not."""
        if rank == 0:  # the networks: loaded into a copy, as the run has not started
            try:
                copy.deepcopy(self.agent).load_state_dict(state["agent"])
            except (KeyError, TypeError, ValueError, RuntimeError) as exc:
                return "agent.pt", exc
        if not own:  # --evaluate: the networks only
            return None
        lo, hi = share(self.cfg.n_envs, rank, self.size)
        storage, rngs = own.get("storage"), own.get("envs")
        try:
            cast(HerStorage, storage).check_spaces(self.space, self.envs.single_action_space, hi - lo)
        except (AttributeError, ValueError) as exc:
            return "storage.pkl", exc
        gens = rngs.get("envs") if isinstance(rngs, dict) else None
        if not isinstance(gens, list) or len(gens) != hi - lo or not all(isinstance(g, np.random.Generator) for g in gens):  # fmt: skip
            return "envs.pkl", f"holds no random states of {hi - lo} envs"
        return None


# ------------------------------------------------------------------------------------------ the loop
def train(t: Trainer, run: Run) -> float:
    """DDPG + HER from ``t``'s epoch to ``cfg.epochs``; returns the last evaluation's success rate."""
    cfg, timers, agent = t.cfg, t.timers, t.agent
    success = run.begin()
    while t.epoch < cfg.epochs:
        for opt, lr in ((agent.critic_opt, cfg.lr_critic), (agent.actor_opt, cfg.lr_actor)):
            opt.param_groups[0]["lr"] = lr * cfg.lr_decay**t.epoch
        for t.cycle in range(cfg.n_cycles):
            observations, achieved, goals = t.collect()  # 1. collect, with exploration
            with timers("store"):  # with workers: here each waits for the slowest one's collection
                t.normalise(observations, achieved, goals)
            with timers("update"):  # 2. n_batches Adam steps on relabelled batches, then the targets
                agent.updates(t.batches())
            agent.update_targets()
        t.epoch, t.cycle = t.epoch + 1, 0
        with timers("eval"):  # 3. evaluate the greedy policy, with the epoch's other figures summed
            losses = np.zeros(4) if agent.stats is None else agent.stats.cpu().numpy() * agent.weight
            success, mean_return, sums = t.evaluate(extra=np.concatenate([losses, t.rollouts]))
        if agent.stats is not None:
            agent.stats.zero_()
        t.rollouts[:] = 0.0
        returns, n, won = sums[4], max(sums[5], 1), sums[6]
        figures = {k: v / (cfg.n_cycles * cfg.n_batches) for k, v in zip(LOSSES, sums, strict=False)}
        figures |= {"eval/mean_reward": mean_return, "rollout/ep_rew_mean": returns / n, "rollout/success_rate": won / n}  # fmt: skip
        steps = t.epoch * cfg.n_cycles * cfg.n_envs * t.horizon
        run.end_epoch(t.epoch, steps, t.updates, success, figures, lambda: (t.state(), t.own()))
    return success


def main(argv: list[str] | None = None) -> float:
    """Train, resume (``--resume``) or evaluate (``--evaluate N``) a run; returns the final success rate."""
    run = Run(SCRIPT, OUTPUTS, Config, CONF_FILE, FREE_ON_RESUME, TIMERS)

    def body() -> float:
        cfg, args = run.start(argv, lambda c: Path("runs") / f"{Path(c.env_id).name}_ddpg_s{c.seed}", check)
        cfg = cfg if args.evaluate is None else replace(cfg, eval_episodes=args.evaluate)
        t = Trainer(cfg, run)
        run.progress = lambda: f"at epoch {t.epoch}, cycle {t.cycle}"
        if run.resuming:
            t.load(*run.resume(t.fits))
        if args.evaluate is not None:
            success = t.evaluate(base=EVAL_SEED)[0]
            print(f"{run.path}: success rate {success:.3f} over {cfg.eval_episodes} episodes")
            return success
        success = train(t, run)
        policy = lambda obs: t.agent.pi(obs["observation"], obs["desired_goal"])  # noqa: E731
        run.finish(f"{cfg.env_id.split('/')[-1]} DDPG+HER, seed {cfg.seed}", lambda: record_gif(policy, cfg.env_id, 10**9 + cfg.seed))  # fmt: skip
        if run.rank == 0:
            print(f"final success rate {success:.3f} over {cfg.eval_episodes} episodes")
        return success

    return run.main(body)


def check(cfg: Config, workers: int) -> None:
    """Refuse an env this agent does not run, a device this machine lacks, a run its workers cannot share."""
    robotics = sorted(i for i in gym.registry if i.startswith(("goalenvs/Fetch", "goalenvs/Hand")))
    if cfg.env_id not in robotics:
        raise RunError(f"--env-id: {cfg.env_id!r} is not accepted; accepted: one of {robotics}")
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise RunError("--device: 'cuda' is not accepted here: torch finds no CUDA GPU; accepted: cpu")
    if cfg.bf16 and not native_bf16():  # given, or resumed
        print(f"{SCRIPT}: note: this run computes in bfloat16, which this CPU emulates (no AVX-512 BF16 or AMX): an "
              "update takes ~16x its float32 time here; a new run's default here is --no-bf16", file=sys.stderr)  # fmt: skip
    horizon = int(gym.make(cfg.env_id).unwrapped.max_steps)  # type: ignore[attr-defined]
    if workers > cfg.n_envs:
        raise RunError(f"--n-envs: {cfg.n_envs} envs cannot be shared by {workers} workers; accepted: n_envs >= {workers}, or fewer workers")  # fmt: skip
    for rank in range(workers):
        lo, hi = share(cfg.n_envs, rank, workers)
        if part(cfg.batch_size, lo, hi, cfg.n_envs) < 1:
            raise RunError(f"--batch-size: {cfg.batch_size} cannot be shared by {workers} workers; accepted: batch_size >= n_envs ({cfg.n_envs})")  # fmt: skip
        if (size := part(cfg.buffer_size, lo, hi, cfg.n_envs)) // (hi - lo) < horizon:
            raise RunError(f"--buffer-size{f' (the share of worker {rank} of {workers})' * (workers > 1)}: {size} is not accepted; accepted: at least {hi - lo} envs x {horizon} steps = {(hi - lo) * horizon} (HER samples whole episodes)")  # fmt: skip


if __name__ == "__main__":
    sys.exit(0 if main() >= 0 else 1)
