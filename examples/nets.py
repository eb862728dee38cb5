"""What her_ddpg.py's policy is made of, for the scripts that read its checkpoints: the input normaliser,
the networks, and :func:`load_policy` (the greedy policy of a run's latest checkpoint); and what the scripts
share to show a run: the episode loop, the GIF and the success curve's plot."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from runfolder import RunError, RunFolder  # examples/runfolder.py
from torch import nn

import goalenvs  # noqa: F401  (registers the goalenvs/ ids)

# her_ddpg.py's name in its run folders' manifests, and the files it writes beside its checkpoints.
SCRIPT = "her_ddpg.py"
OUTPUTS = ("config.json", "commands.txt", "eval.csv", "success.png", "policy.gif")
EVAL_SEED = 2 * 10**9  # her_ddpg.py --evaluate's episodes: seeds EVAL_SEED + i, none of them a training seed

Policy = Callable[[dict[str, np.ndarray]], np.ndarray]


class Normalizer:
    """Running mean and std of a vector (float64 sums), applied as ``clip((x - mean) / std, +-clip)``."""

    def __init__(self, size: int, eps: float, clip: float) -> None:
        self.sum, self.sumsq, self.count = np.zeros(size), np.zeros(size), 0  # float64 sums, rows added
        self.eps, self.clip = eps, clip
        self.mean, self.std = np.zeros(size, np.float32), np.ones(size, np.float32)

    STATE = ("sum", "sumsq", "count", "mean", "std")  # what a checkpoint keeps; eps and clip are settings

    def state_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.STATE}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in self.STATE:
            setattr(self, key, state[key])

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


def net_input(
    o_norm: Normalizer, g_norm: Normalizer, clip: float, obs: np.ndarray, goal: np.ndarray
) -> np.ndarray:
    """The networks' input, ``(B, obs_dim + goal_dim)`` float32: raw observations and goals clipped to
    ``+-clip``, then normalised."""
    o = o_norm(np.clip(obs, -clip, clip))
    g = g_norm(np.clip(goal, -clip, clip))
    return np.concatenate([o, g], axis=-1, dtype=np.float32)


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX-512 BF16, AMX): else it is emulated, far slower."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # torch.cpu's own probes
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


class MLP(nn.Module):
    """ReLU hidden layers (in bfloat16 under ``bf16``; the ReLUs in place) and a float32 linear head."""

    def __init__(self, n_in: int, n_out: int, hidden: int, layers: int, bf16: bool) -> None:
        super().__init__()
        dims = [n_in] + [hidden] * layers
        pairs = [(nn.Linear(a, b), nn.ReLU(inplace=True)) for a, b in zip(dims[:-1], dims[1:], strict=True)]
        self.body = nn.Sequential(*[m for pair in pairs for m in pair])
        self.head = nn.Linear(hidden, n_out)
        self.bf16 = bf16

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            h = self.body(x)
        return self.head(h.float())


def load_policy(run_dir: Path, option: str = "--policy") -> tuple[Policy, dict[str, Any]]:
    """The greedy policy of the latest checkpoint of a her_ddpg.py run (a batch of observation dicts ->
    actions in the env's units, on the CPU), and the run's settings. A folder without a checkpoint, or with
    one that does not fit, is a :class:`RunError` of one line naming ``option``."""
    checkpoint = RunFolder.read_only(run_dir, SCRIPT, OUTPUTS, option=option).latest_checkpoint()
    if checkpoint is None:
        raise RunError(
            f"{option}: {run_dir} has no checkpoint yet ({SCRIPT} writes one every --save-freq epochs)"
        )
    cfg = checkpoint.meta.get("config")
    keys = "env_id hidden layers bf16 clip_obs norm_eps norm_clip noise_eps random_eps".split()
    if not isinstance(cfg, dict) or not set(keys) <= set(cfg):
        raise checkpoint.unfit("MANIFEST.json", f"its meta holds no {SCRIPT} settings")
    env = gym.make(cfg["env_id"])
    space: Any = env.observation_space
    box: Any = env.action_space
    obs_dim, goal_dim = space["observation"].shape[0], space["desired_goal"].shape[0]
    o_norm = Normalizer(obs_dim, cfg["norm_eps"], cfg["norm_clip"])
    g_norm = Normalizer(goal_dim, cfg["norm_eps"], cfg["norm_clip"])
    actor = MLP(obs_dim + goal_dim, box.shape[0], cfg["hidden"], cfg["layers"], cfg["bf16"])
    state = checkpoint.load("agent.pt", lambda path: torch.load(path, map_location="cpu", weights_only=False))
    try:
        agent = state["agent"]
        actor.load_state_dict(agent.get("actor_average", agent["actor"]))  # the greedy network
        o_norm.load_state_dict(agent["normalizers"][0])
        g_norm.load_state_dict(agent["normalizers"][1])
    except (KeyError, TypeError, IndexError, RuntimeError) as exc:
        raise checkpoint.unfit("agent.pt", exc) from None
    actor.requires_grad_(False)
    clip = cfg["clip_obs"]
    low, high = box.low.astype(np.float32), box.high.astype(np.float32)
    unit = bool(np.all(low == -1.0) and np.all(high == 1.0))

    def policy(obs: dict[str, np.ndarray]) -> np.ndarray:
        x = torch.from_numpy(net_input(o_norm, g_norm, clip, obs["observation"], obs["desired_goal"]))
        with torch.no_grad():
            u = torch.tanh(actor(x)).numpy()
        return u if unit else low + (u + 1.0) * 0.5 * (high - low)  # [-1, 1] -> the env's bounds

    return policy, cfg


def stack(dicts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One env's observations (dicts of arrays), stacked key by key: a batch of them."""
    return {key: np.stack([d[key] for d in dicts]) for key in dicts[0]}


def run_episodes(
    env: gym.Env, policy: Policy, seeds: Iterable[int | None], frames: list[Any] | None = None
) -> list[bool]:
    """An episode of ``policy`` (one observation dict -> one action) per seed (None: not reseeded), each
    frame rendered into ``frames`` if given; their successes (``info["is_success"]``, else ``"success"``)."""
    successes = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        done = False
        while not done:
            if frames is not None:
                frames.append(env.render())
            obs, _, terminated, truncated, info = env.step(policy(obs))
            done = terminated or truncated
        if frames is not None:
            frames.append(env.render())
        successes.append(bool(info.get("is_success", info.get("success", False))))
    return successes


def gif(frames: list[Any], duration: float) -> bytes:
    """``frames`` as a looping animated GIF's bytes, ``duration`` milliseconds each."""
    import imageio.v2 as imageio

    data = io.BytesIO()
    imageio.mimsave(data, [np.asarray(f) for f in frames], format="GIF", duration=duration, loop=0)
    return data.getvalue()


def record_gif(policy: Policy, env_id: str, seed: int, episodes: int = 3, size: int = 240) -> bytes:
    """A GIF (its bytes, 25 frames per second) of ``episodes`` episodes of ``policy``, seeded from ``seed``."""
    env = gym.make(env_id, render_mode="rgb_array", width=size, height=size)
    frames: list[Any] = []
    one = lambda obs: policy({k: v[None] for k, v in obs.items()})[0]  # noqa: E731  (a batch of one)
    run_episodes(env, one, range(seed, seed + episodes), frames)
    env.close()
    return gif(frames, 40)


def curve_png(rows: list[dict[str, Any]], x: str, xlabel: str, title: str, per: int = 1) -> bytes:
    """The success curve of eval.csv's ``rows`` (``success_rate`` against ``x`` / ``per``) as a PNG file's bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r[x] / per for r in rows], [r["success_rate"] for r in rows], marker="o", markersize=3)
    ax.set(xlabel=xlabel, ylabel="success rate", ylim=(-0.02, 1.02), title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    return png.getvalue()
