"""Offline goal-conditioned RL from a Minari dataset: record one, relabel it with HER, train TD3+BC, evaluate.

    python examples/offline_her.py record --policy runs/FetchReach-v0_ddpg_s0 --dataset goalenvs/fetchreach/ddpg-mixed-v0
    python examples/offline_her.py train --dataset goalenvs/fetchreach/ddpg-mixed-v0 --output runs/FetchReach-v0_offline

``record`` plays a ``her_ddpg.py`` run's greedy policy, then a noisy one, into a Minari dataset.
``train`` reads a local goal-conditioned Minari dataset into a ``her.HerStorage`` with 'future'
relabelling and trains TD3+BC (Fujimoto and Gu, 2021) on it; no checkpoints: a stopped run starts
over. docs/training.md ("Offline: Minari datasets") says what each command writes and accepts.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import runfolder
import torch
from gymnasium import spaces
from nets import MLP, Normalizer, Policy, load_policy, net_input, run_episodes
from runfolder import Range, RunError, integer, setting
from torch import nn

import goalenvs  # registers the goalenvs/ ids
from her import HerStorage

SCRIPT = "offline_her.py"
OUTPUTS = ("config.json", "commands.txt", "eval.csv", "policy.pt")
GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")
RECORD_SEED = 1_000_000  # episode i of `record --seed s` is seeded s * RECORD_SEED + i
EVAL_SEED = 3 * 10**9  # evaluation episode i is seeded EVAL_SEED + i: apart from any recorded one


def _minari(dataset_id: str | None = None) -> Any:
    """The minari module, or a one-line error saying how to install it; ``dataset_id`` checked if given."""
    try:
        import minari
        from minari.dataset.minari_dataset import parse_dataset_id
    except ImportError:
        raise RunError('minari is not installed; pip install "minari[create,hdf5]>=0.5"') from None
    if dataset_id is not None:
        try:
            parse_dataset_id(dataset_id)
        except (ValueError, TypeError):
            raise RunError(
                f"--dataset: {dataset_id!r} is not a Minari dataset id; accepted: (namespace/)name-v<version>, "
                "e.g. goalenvs/fetchreach/expert-v0"
            ) from None
    return minari


# ---------------------------------------------------------------------------------------- recording
def collector(env: gym.Env) -> Any:
    """``minari.DataCollector`` of ``env`` that keeps every step's info but the ``"TimeLimit.truncated"``
    that importing rl_zoo3 adds at time-limit steps only, which Minari refuses (docs/training.md)."""
    minari = _minari()

    class WithoutTimeLimitKey(minari.StepDataCallback):  # type: ignore[name-defined]
        def __call__(self, env: gym.Env, **kwargs: Any) -> Any:
            step_data = super().__call__(env, **kwargs)
            step_data["info"] = {k: v for k, v in step_data["info"].items() if k != "TimeLimit.truncated"}
            return step_data

    return minari.DataCollector(env, record_infos=True, step_data_callback=WithoutTimeLimitKey)


def noisy_policy(greedy: Policy, box: spaces.Box, noise_eps: float, random_eps: float, seed: int) -> Policy:
    """``greedy`` plus Gaussian noise ``noise_eps`` (in units of half the action range), and with
    probability ``random_eps`` a uniformly random action instead (her_ddpg.py's exploration)."""
    rng = np.random.default_rng(seed)
    low, high = box.low.astype(np.float32), box.high.astype(np.float32)

    def noisy(obs: dict[str, np.ndarray]) -> np.ndarray:
        u = greedy(obs)
        u = np.clip(u + noise_eps * 0.5 * (high - low) * rng.standard_normal(u.shape), low, high)
        if rng.random() < random_eps:
            u = rng.uniform(low, high)
        return u.astype(np.float32)

    return noisy


def record(args: argparse.Namespace) -> None:
    """The ``record`` command: a dataset of a her_ddpg.py policy, greedy then noisy."""
    _minari(args.dataset)
    from minari.storage import get_dataset_path

    if get_dataset_path(args.dataset).exists():
        raise RunError(
            f"--dataset: {args.dataset} exists in {get_dataset_path()} and Minari does not overwrite it; "
            f"choose another id, or delete it first (minari delete {args.dataset})"
        )
    torch.set_num_threads(args.threads)
    greedy, run = load_policy(args.policy)
    noise_eps = run["noise_eps"] if args.noise_eps is None else args.noise_eps  # the run's own by default
    random_eps = run["random_eps"] if args.random_eps is None else args.random_eps
    env_id = run["env_id"]
    env = collector(gym.make(env_id))
    noisy = noisy_policy(greedy, env.action_space, noise_eps, random_eps, args.seed)
    first, n_episodes = args.seed * RECORD_SEED, args.expert_episodes + args.noisy_episodes
    t0 = time.perf_counter()
    expert = run_episodes(env, greedy, range(first, first + args.expert_episodes))
    mixed = run_episodes(env, noisy, range(first + args.expert_episodes, first + n_episodes))
    with warnings.catch_warnings():  # Minari asks for an author, an e-mail address, a code link, ...
        warnings.filterwarnings("ignore", category=UserWarning, module="minari")
        dataset = env.create_dataset(
            args.dataset,
            algorithm_name=f"her_ddpg.py greedy ({args.expert_episodes} episodes), then with noise {noise_eps} "
            f"and random actions {random_eps} ({args.noisy_episodes} episodes)",
            description=f"{env_id}: episodes of the DDPG+HER policy of {args.policy}, greedy then noisy "
            f"(examples/offline_her.py record, seeds from {first})",
            requirements=[f"goalenvs>={goalenvs.__version__}"],
        )
    rates = [f"{np.mean(s):.3f}" if s else "-" for s in (expert, mixed)]
    print(
        f"{args.dataset}: {dataset.total_episodes} episodes, {dataset.total_steps} steps in "
        f"{time.perf_counter() - t0:.0f}s; success greedy {rates[0]}, noisy {rates[1]}; "
        f"in {get_dataset_path(args.dataset)}"
    )


# ---------------------------------------------------------------------------------------- the storage
def check_goal_dataset(dataset: Any) -> tuple[spaces.Dict, spaces.Box]:
    """The dataset's observation and action spaces, refused in one line unless goal-conditioned and bounded."""
    obs_space, act_space = dataset.observation_space, dataset.action_space
    if not isinstance(obs_space, spaces.Dict) or not set(GOAL_KEYS) <= set(obs_space.spaces):
        raise RunError(
            f"--dataset: {dataset.spec.dataset_id} is not goal-conditioned (observation space {obs_space}); "
            f"accepted: a Dict observation space with {list(GOAL_KEYS)}"
        )
    if not isinstance(act_space, spaces.Box) or not np.isfinite([act_space.low, act_space.high]).all():
        raise RunError(
            f"--dataset: {dataset.spec.dataset_id} has action space {act_space}; accepted: a bounded Box"
        )
    return obs_space, act_space


def fill_storage(
    dataset: Any, reward_fn: Callable[..., Any], *, n_sampled_goal: int = 4, seed: int | None = None
) -> HerStorage:
    """Every episode of a goal-conditioned Minari ``dataset`` in a ``HerStorage`` with 'future' relabelling.

    Minari keeps ``T + 1`` observations and infos per episode (the reset's first): step ``t`` is
    ``obs[t] -> obs[t + 1]`` with ``infos[t + 1]``. An episode ending neither way is cut (truncated).
    The step infos go to ``reward_fn`` (Parking's crash penalty reads them).
    """
    obs_space, act_space = check_goal_dataset(dataset)
    storage = HerStorage(
        max(dataset.total_steps, 1),
        spaces.Dict({key: obs_space[key] for key in GOAL_KEYS}),
        act_space,
        reward_fn,
        n_sampled_goal=n_sampled_goal,
        goal_selection_strategy="future",
        copy_info_dict=True,
        seed=seed,
    )
    # Each episode in one extend: its steps, each next observation the following one (the last: the final one).
    for episode in dataset.iterate_episodes():
        obs = {key: np.asarray(episode.observations[key]) for key in GOAL_KEYS}
        infos, steps = episode.infos or {}, len(episode)
        storage.extend(
            {key: value[:-1] for key, value in obs.items()},
            episode.actions,
            episode.rewards,
            episode.terminations,
            episode.truncations,
            [[_info_at(infos, t + 1)] for t in range(steps)],
            {key: value[1:] for key, value in obs.items()},
        )
        storage.end_episodes()  # cuts an episode that ended neither way; does nothing otherwise
    return storage


def _info_at(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Entry ``i`` of Minari's episode infos (a dict of arrays, possibly nested) as one info dict."""
    return {key: _info_at(value, i) if isinstance(value, dict) else value[i] for key, value in infos.items()}


# ---------------------------------------------------------------------------------------- TD3+BC
_POSITIVE, _COUNT, _NONNEGATIVE = Range(float, 0.0, low_open=True), Range(int, 1), Range(float, 0.0)


@dataclass
class Settings:
    """What ``train`` runs (an option each); TD3+BC's published values where they apply."""

    dataset: str = setting("", str)  # a local Minari dataset id
    seed: int = setting(0, Range(int, 0, 2**32 - 1))
    updates: int = setting(20_000, _COUNT)
    batch_size: int = setting(256, _COUNT)
    n_sampled_goal: int = setting(4, Range(int, 0))  # 'future' goals: 80% of each batch relabelled
    hidden: int = setting(256, _COUNT)
    layers: int = setting(2, _COUNT)
    lr: float = setting(3e-4, _POSITIVE)
    gamma: float = setting(0.98, Range(float, 0.0, 1.0, high_open=True))
    tau: float = setting(0.005, Range(float, 0.0, 1.0, low_open=True))
    alpha: float = setting(2.5, _NONNEGATIVE)
    policy_noise: float = setting(0.2, _NONNEGATIVE)
    noise_clip: float = setting(0.5, _NONNEGATIVE)
    policy_freq: int = setting(2, _COUNT)
    clip_obs: float = setting(200.0, _POSITIVE)
    norm_clip: float = setting(5.0, _POSITIVE)
    eval_episodes: int = setting(100, _COUNT)
    eval_freq: int = setting(5_000, _COUNT)
    threads: int = setting(1, _COUNT)


class TD3BC:
    """TD3+BC: an actor and twin critics over normalised ``(observation, goal)``; actions learnt in
    ``[-1, 1]`` (the box mapped linearly), critic targets clipped to the returns ``reward_range`` allows."""

    def __init__(
        self, s: Settings, o_norm: Normalizer, g_norm: Normalizer, action_space: spaces.Box, reward_range: tuple[float, float]
    ) -> None:  # fmt: skip
        self.s, self.o_norm, self.g_norm = s, o_norm, g_norm
        self.low, self.high = action_space.low.astype(np.float32), action_space.high.astype(np.float32)
        n_in, n_act = o_norm.sum.size + g_norm.sum.size, self.low.size
        self.actor = MLP(n_in, n_act, s.hidden, s.layers, bf16=False)
        self.critics = nn.ModuleList([MLP(n_in + n_act, 1, s.hidden, s.layers, bf16=False) for _ in range(2)])
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=s.lr)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=s.lr)
        self.q_low = min(reward_range[0], 0.0) / (1.0 - s.gamma)
        self.q_high = max(reward_range[1], 0.0) / (1.0 - s.gamma)
        self.updates = 0

    def inputs(self, obs: np.ndarray, goal: np.ndarray) -> torch.Tensor:
        """``(B, obs_dim + goal_dim)`` normalised input from raw ``(B, obs_dim)`` observations and ``(B, goal_dim)`` goals."""
        return torch.from_numpy(net_input(self.o_norm, self.g_norm, self.s.clip_obs, obs, goal))

    def to_unit(self, actions: np.ndarray) -> np.ndarray:
        """``(B, act_dim)`` env actions mapped to ``[-1, 1]``."""
        unit = 2.0 * (actions - self.low) / (self.high - self.low) - 1.0
        return np.clip(unit, -1.0, 1.0).astype(np.float32)

    def pi(self, obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """Greedy env actions, shape ``(B, act_dim)``."""
        with torch.no_grad():
            u = torch.tanh(self.actor(self.inputs(obs, goal))).numpy()
        return self.low + (u + 1.0) * 0.5 * (self.high - self.low)

    def update(self, batch: dict[str, Any]) -> dict[str, float]:
        """One critic step (and, every ``policy_freq`` updates, one actor step and the target moves) on a batch."""
        s = self.s
        obs, nxt = batch["observations"], batch["next_observations"]
        x = self.inputs(obs["observation"], obs["desired_goal"])
        x2 = self.inputs(nxt["observation"], nxt["desired_goal"])
        a = torch.from_numpy(self.to_unit(batch["actions"]))
        r = torch.from_numpy(np.asarray(batch["rewards"], dtype=np.float32)).unsqueeze(1)
        not_done = 1.0 - torch.from_numpy(np.asarray(batch["terminateds"], dtype=np.float32)).unsqueeze(1)
        with torch.no_grad():
            noise = (torch.randn_like(a) * s.policy_noise).clamp(-s.noise_clip, s.noise_clip)
            a2 = (torch.tanh(self.actor_target(x2)) + noise).clamp(-1.0, 1.0)
            q2 = torch.min(*(q(torch.cat([x2, a2], 1)) for q in self.critics_target))
            target = (r + s.gamma * not_done * q2).clamp(self.q_low, self.q_high)
        xa = torch.cat([x, a], 1)
        critic_loss = torch.stack([(q(xa) - target).pow(2).mean() for q in self.critics]).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        self.updates += 1
        out = {"critic_loss": float(critic_loss.detach())}
        if self.updates % s.policy_freq == 0:
            pi = torch.tanh(self.actor(x))
            self.critics.requires_grad_(False)
            q = self.critics[0](torch.cat([x, pi], 1))
            self.critics.requires_grad_(True)
            lmbda = s.alpha / q.abs().mean().detach().clamp_min(1e-6)
            bc = (pi - a).pow(2).mean()
            actor_loss = -lmbda * q.mean() + bc
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            with torch.no_grad():
                for net, tgt in ((self.actor, self.actor_target), (self.critics, self.critics_target)):
                    for p, tp in zip(net.parameters(), tgt.parameters(), strict=True):
                        tp.lerp_(p, s.tau)
            out.update(actor_loss=float(actor_loss.detach()), bc_loss=float(bc.detach()))
        return out

    def state_dict(self) -> dict[str, Any]:
        """What ``policy.pt`` holds: the actor, its normalisers and the action bounds."""
        return {
            "actor": self.actor.state_dict(),
            "normalizers": tuple(
                {**n.state_dict(), "eps": n.eps, "clip": n.clip} for n in (self.o_norm, self.g_norm)
            ),
            "low": self.low,
            "high": self.high,
            "settings": asdict(self.s),
        }


def fit_normalizers(storage: HerStorage, s: Settings) -> tuple[Normalizer, Normalizer]:
    """Observation and goal statistics of every stored step (goals: desired and achieved, the goals
    relabelled batches hold)."""
    stored = storage.rows("observations")  # (steps, 1, dim) per key: every stored step's observation
    obs = {key: np.asarray(stored[key]).reshape(-1, stored[key].shape[-1]) for key in GOAL_KEYS}
    o_norm = Normalizer(obs["observation"].shape[1], 0.01, s.norm_clip)
    g_norm = Normalizer(obs["desired_goal"].shape[1], 0.01, s.norm_clip)
    o_norm.update(np.clip(obs["observation"], -s.clip_obs, s.clip_obs))
    goals = np.concatenate([obs["desired_goal"], obs["achieved_goal"]])
    g_norm.update(np.clip(goals, -s.clip_obs, s.clip_obs))
    return o_norm, g_norm


def evaluate(agent: TD3BC, env: gym.Env, episodes: int) -> float:
    """Success rate of the greedy policy over ``episodes`` fresh episodes (seeds ``EVAL_SEED + i``)."""

    def policy(obs: dict[str, np.ndarray]) -> np.ndarray:
        return agent.pi(obs["observation"][None], obs["desired_goal"][None])[0]

    return float(np.mean(run_episodes(env, policy, range(EVAL_SEED, EVAL_SEED + episodes))))


def load_dataset(dataset_id: str) -> Any:
    """A local Minari dataset (never downloaded); a missing one is a one-line error."""
    minari = _minari(dataset_id)
    from minari.storage import get_dataset_path

    if not (get_dataset_path(dataset_id) / "data").is_dir():
        raise RunError(
            f"--dataset: no dataset {dataset_id} in {get_dataset_path()} (the local datasets: minari list local); "
            "record one with the record command, or set --datasets-path"
        )
    try:
        return minari.load_dataset(dataset_id)
    except DAMAGED as exc:
        raise unreadable(dataset_id, exc) from None


# What Minari, h5py and json raise on a damaged file (cut short, overwritten, edited).
DAMAGED = (OSError, ValueError, KeyError, TypeError)


def unreadable(dataset_id: str, exc: BaseException) -> RunError:
    """The one-line error for a dataset whose files cannot be read."""
    from minari.storage import get_dataset_path

    return RunError(
        f"--dataset: {dataset_id} cannot be read ({runfolder.describe_error(exc)}); its files in "
        f"{get_dataset_path(dataset_id) / 'data'} are damaged: record or download it again"
    )


def train(args: argparse.Namespace, argv: list[str]) -> float:
    """The ``train`` command; returns the final success rate."""
    given = {f.name: getattr(args, f.name) for f in fields(Settings) if getattr(args, f.name) is not None}
    runfolder.check_settings(given, {f.name: f.metadata["accepted"] for f in fields(Settings)}, "option")
    if "dataset" not in given:
        raise RunError("--dataset: missing; accepted: a local Minari dataset id")
    s = Settings(**given)
    # Refused before the dataset is read.
    runfolder.RunFolder(args.output, SCRIPT, OUTPUTS).check_new(args.force, resumable=False)
    dataset = load_dataset(s.dataset)
    check_goal_dataset(dataset)
    try:
        env = dataset.recover_environment(eval_env=True)
    except Exception as exc:  # a missing package (gymnasium_robotics, mujoco), an id not registered here
        raise RunError(
            f"--dataset: cannot make the env of {s.dataset} here ({type(exc).__name__}: {exc})"
        ) from None
    torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    t0 = time.perf_counter()
    reward_fn = env.unwrapped.compute_reward
    try:  # the episodes are read from the file here
        storage = fill_storage(dataset, reward_fn, n_sampled_goal=s.n_sampled_goal, seed=s.seed)
    except DAMAGED as exc:
        raise unreadable(s.dataset, exc) from None
    rewards = np.asarray(storage.rows("rewards"))
    o_norm, g_norm = fit_normalizers(storage, s)
    agent = TD3BC(s, o_norm, g_norm, dataset.action_space, (float(rewards.min()), float(rewards.max())))
    print(f"{s.dataset}: {dataset.total_episodes} episodes, {storage.num_transitions} steps loaded in "
          f"{time.perf_counter() - t0:.1f}s", flush=True)  # fmt: skip
    rows: list[dict[str, Any]] = []
    success = float("nan")
    with runfolder.RunFolder.create(args.output, force=args.force, outputs=OUTPUTS, script=SCRIPT) as folder:
        folder.write("config.json", json.dumps(asdict(s), indent=2) + "\n")
        folder.write("commands.txt", " ".join(["python", "examples/offline_her.py", *argv]) + "\n")
        start, cpu_start, losses = time.perf_counter(), time.process_time(), []
        for update in range(1, s.updates + 1):
            losses.append(agent.update(storage.sample_arrays(s.batch_size)))
            if update % s.eval_freq == 0 or update == s.updates:
                success = evaluate(agent, env, s.eval_episodes)
                recent = {
                    key: float(np.mean([row[key] for row in losses if key in row])) for key in losses[-1]
                }
                rows.append({"updates": update, "success_rate": success, **recent,
                             "wall_s": round(time.perf_counter() - start, 1),
                             "cpu_s": round(time.process_time() - cpu_start, 1)})  # fmt: skip
                losses = []
                wall, cpu = rows[-1]["wall_s"], rows[-1]["cpu_s"]
                print(
                    f"updates {update:7d}  success {success:.3f}  wall {wall:6.0f}s  cpu {cpu:6.0f}s",
                    flush=True,
                )
                folder.write("eval.csv", runfolder.csv_text(rows))
        data = io.BytesIO()
        torch.save(agent.state_dict(), data)
        folder.write("policy.pt", data.getvalue())
    print(f"final success rate {success:.3f} over {s.eval_episodes} fresh episodes; {args.output}")
    return success


# ---------------------------------------------------------------------------------------- command line
def build_parser() -> runfolder.ArgumentParser:
    parser = runfolder.ArgumentParser(prog=SCRIPT, description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets-path", type=Path, help="Minari's dataset folder (default: Minari's own)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{record,train}")
    rec = commands.add_parser("record", help="record a dataset of a her_ddpg.py policy, greedy then noisy")
    add = rec.add_argument
    add("--policy", type=Path, required=True, metavar="RUN_DIR", help="a run folder of her_ddpg.py")
    add("--dataset", required=True, help="id of the new dataset, e.g. goalenvs/fetchreach/ddpg-mixed-v0")
    add("--expert-episodes", type=integer(0), default=200, help="greedy episodes (default 200)")
    add("--noisy-episodes", type=integer(0), default=200, help="noisy episodes (default 200)")
    add("--noise-eps", type=float, help="Gaussian action noise (default: the run's noise_eps)")
    add("--random-eps", type=float, help="share of random actions (default: the run's random_eps)")
    seed = integer(0, 3999)  # x RECORD_SEED: below the evaluation's seeds
    add("--seed", type=seed, default=0, help=f"episode i is seeded seed x {RECORD_SEED} + i (default 0)")
    add("--threads", type=integer(1), default=1, help="torch threads (default 1)")
    tr = commands.add_parser("train", help="train TD3+BC on a goal-conditioned Minari dataset, relabelled")
    tr.add_argument("--output", type=Path, required=True, help="the run folder to write")
    tr.add_argument("--force", action="store_true", help="replace the run in a non-empty --output")
    runfolder.add_settings(tr, Settings)
    return parser


RECORD_RANGES = {"noise_eps": Range(float, 0.0), "random_eps": Range(float, 0.0, 1.0)}


def parse_args(argv: list[str]) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if args.command == "record":
        given = {k: v for k, v in vars(args).items() if k in RECORD_RANGES and v is not None}
        runfolder.check_settings(given, RECORD_RANGES, "option")
        if args.expert_episodes + args.noisy_episodes == 0:
            raise RunError("--expert-episodes, --noisy-episodes: no episodes to record; accepted: a sum >= 1")
    if args.datasets_path is not None:
        if args.datasets_path.exists() and not args.datasets_path.is_dir():
            raise RunError(f"--datasets-path: {args.datasets_path} is a file; accepted: a folder")
        os.environ["MINARI_DATASETS_PATH"] = str(args.datasets_path.resolve())
    return args


def main(argv: list[str] | None = None) -> float:
    """Run one command; returns the final success rate of ``train`` (NaN for ``record``)."""
    argv = sys.argv[1:] if argv is None else list(argv)

    def body() -> float:
        args = parse_args(argv)
        if args.command == "record":
            record(args)
            return float("nan")
        return train(args, argv)

    return runfolder.run_main(
        SCRIPT, body, lambda: "(nothing to resume: run the command again, with --force for train)"
    )


if __name__ == "__main__":
    main()
