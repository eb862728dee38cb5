"""HER replay buffer: ``her.HerReplayBuffer`` against stable-baselines3's ``HerReplayBuffer``, same data.

Fetch-sized transitions (observation 25, goals 3, float64 as Gymnasium-Robotics' Fetch; action 4,
float32), one env, 50-step episodes ending in a time-limit truncation. Both buffers receive exactly
the same ``add`` calls through the stable-baselines3 interface and sample through it (torch tensors
on the CPU, relabelled rewards from the same env's ``compute_reward``).

Rows: construction; ``add`` (per transition, measured while filling the whole buffer, wrap-around
included); ``sample(256)`` and ``sample(2048)`` on the full buffer; one ``add`` followed by one
``sample(256)`` (a training loop with ``train_freq=1``); bytes per transition, counting the arrays,
and for stable-baselines3 also the info dict it builds per transition.

One more row, against torchrl 0.14's ``HERReplayBuffer``: ``extend`` of blocks of 1,000 transitions
(20 whole 50-step episodes, the same Fetch shapes and dtypes; ours is ``HerStorage.extend``, torchrl's
a ``TensorDict`` of batch 1,000 into a ``LazyTensorStorage``), per transition, while filling the
whole buffer (10% more: the ring wraps). Skipped, with a message, when torchrl is not installed.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from benchmarks.common import Row, median_seconds

OBS_DIM, GOAL_DIM, ACTION_DIM, EPISODE_STEPS = 25, 3, 4, 50
PEER = "sb3 HerReplayBuffer"


class FetchSizedEnv(gym.Env):
    """The spaces and reward of a Fetch task (distance threshold 0.05), nothing else."""

    observation_space = spaces.Dict(
        {
            "observation": spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float64),
            "achieved_goal": spaces.Box(-np.inf, np.inf, (GOAL_DIM,), np.float64),
            "desired_goal": spaces.Box(-np.inf, np.inf, (GOAL_DIM,), np.float64),
        }
    )
    action_space = spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return {key: np.zeros(space.shape) for key, space in self.observation_space.spaces.items()}, {}

    def step(self, action):
        obs, _ = self.reset()
        return obs, -1.0, False, False, {}

    def compute_reward(self, achieved_goal, desired_goal, info):
        distance = np.linalg.norm(achieved_goal - desired_goal, axis=-1)
        return -(distance > 0.05).astype(np.float32)


def make_vec_env():
    from stable_baselines3.common.vec_env import DummyVecEnv

    return DummyVecEnv([FetchSizedEnv])


def episode_block(n_episodes: int, seed: int = 0) -> list[tuple]:
    """SB3 ``add`` arguments for ``n_episodes`` random episodes (reused cyclically to fill buffers)."""
    rng = np.random.default_rng(seed)
    calls = []
    for _ in range(n_episodes):
        obs = rng.normal(size=(EPISODE_STEPS + 1, 1, OBS_DIM))
        achieved = rng.normal(size=(EPISODE_STEPS + 1, 1, GOAL_DIM)) * 0.1
        goal = rng.normal(size=(1, GOAL_DIM)) * 0.1
        for t in range(EPISODE_STEPS):
            last = t == EPISODE_STEPS - 1
            calls.append(
                (
                    {"observation": obs[t], "achieved_goal": achieved[t], "desired_goal": goal},
                    {"observation": obs[t + 1], "achieved_goal": achieved[t + 1], "desired_goal": goal},
                    rng.uniform(-1, 1, (1, ACTION_DIM)).astype(np.float32),
                    np.array([-1.0], np.float32),
                    np.array([last]),
                    [{"TimeLimit.truncated": last}],
                )
            )
    return calls


def _fill(buffer: Any, calls: list[tuple], n: int, chunk: int) -> float:
    """Add ``n`` transitions; return the median seconds per ``add`` over chunks of ``chunk`` adds."""
    per_add = []
    done = 0
    n_calls = len(calls)
    while done < n:
        count = min(chunk, n - done)
        start = time.perf_counter()
        for i in range(done, done + count):
            buffer.add(*calls[i % n_calls])
        per_add.append((time.perf_counter() - start) / count)
        done += count
    return statistics.median(per_add)


def _interleaved(ours: Any, peer: Any, rounds: int) -> tuple[float, float]:
    """Median seconds per call of ``ours`` and ``peer``, timed in alternating rounds.

    Alternating spreads any change in the machine's load over both sides (this machine is shared).
    """
    ours_times: list[float] = []
    peer_times: list[float] = []
    for _ in range(rounds * 2):
        for fn, times, calls in ((ours, ours_times, 20), (peer, peer_times, 3)):
            for _ in range(calls):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
    return statistics.median(ours_times), statistics.median(peer_times)


def _sb3_bytes(buffer: Any) -> tuple[int, int]:
    """(array bytes, array + info dict bytes) of stable-baselines3's HerReplayBuffer."""
    arrays = [*buffer.observations.values(), *buffer.next_observations.values()]
    arrays += [
        buffer.actions,
        buffer.rewards,
        buffer.dones,
        buffer.timeouts,
        buffer.ep_start,
        buffer.ep_length,
    ]
    arrays.append(buffer.infos)  # the object array: one pointer per transition
    array_bytes = sum(a.nbytes for a in arrays)
    dict_bytes = (
        sum(sys.getsizeof(info) for info in buffer.infos.reshape(-1)[:1000]) / 1000 * buffer.infos.size
    )
    return int(array_bytes), int(array_bytes + dict_bytes)


def _measure(size: int, calls: list[tuple], repeats: int, quick: bool) -> list[Row]:
    import torch
    from stable_baselines3 import HerReplayBuffer as SB3HerReplayBuffer

    from her import HerReplayBuffer

    env = make_vec_env()
    space, action_space = FetchSizedEnv.observation_space, FetchSizedEnv.action_space
    kwargs = dict(device="cpu", n_sampled_goal=4, goal_selection_strategy="future")
    label = f"{size // 1000}k" if size < 1_000_000 else f"{size // 1_000_000}M"
    torch.set_num_threads(1)
    np.random.seed(0)  # noqa: NPY002  (stable-baselines3's buffer samples from the global state)

    def build(cls):
        return lambda: cls(size, space, action_space, env=env, **kwargs)

    rows = []
    construction_repeats = 1 if size >= 1_000_000 else repeats
    gc.collect()
    ours_build = median_seconds(build(HerReplayBuffer), repeats)
    gc.collect()
    peer_build = median_seconds(build(SB3HerReplayBuffer), construction_repeats)
    rows.append(Row("her", f"construct {label}", "ms", ours_build * 1e3, peer_build * 1e3, PEER, False))

    chunk = 2000 if quick else 10_000
    ours = HerReplayBuffer(size, space, action_space, env=env, seed=0, **kwargs)
    ours_add = _fill(ours, calls, size + size // 10, chunk)  # 10% more: the ring wraps around
    peer = SB3HerReplayBuffer(size, space, action_space, env=env, **kwargs)
    peer_add = _fill(peer, calls, size + size // 10, chunk)
    rows.append(Row("her", f"add {label}", "us/transition", ours_add * 1e6, peer_add * 1e6, PEER, False))

    for batch in (256, 2048):
        ours_s, peer_s = _interleaved(lambda b=batch: ours.sample(b), lambda b=batch: peer.sample(b), repeats)
        rows.append(Row("her", f"sample({batch}) {label}", "ms", ours_s * 1e3, peer_s * 1e3, PEER, False))

    # A training loop with train_freq=1: one add, then one sample, so every sample writes one step.
    cursor = [0]

    def train_step(buffer: Any) -> None:
        buffer.add(*calls[cursor[0] % len(calls)])
        cursor[0] += 1
        buffer.sample(256)

    ours_s, peer_s = _interleaved(lambda: train_step(ours), lambda: train_step(peer), repeats)
    rows.append(Row("her", f"add+sample(256) {label}", "ms", ours_s * 1e3, peer_s * 1e3, PEER, False))

    peer_arrays, peer_total = _sb3_bytes(peer)
    transitions = ours.buffer_size * ours.n_envs
    ours_bytes = ours.storage.nbytes / transitions
    rows.append(
        Row(
            "her",
            f"bytes/transition {label}",
            "B",
            ours_bytes,
            peer_arrays / transitions,
            PEER + " arrays",
            False,
        )
    )
    rows.append(
        Row(
            "her",
            f"bytes/transition {label}",
            "B",
            ours_bytes,
            peer_total / transitions,
            PEER + " +infos",
            False,
        )
    )
    return rows


EXTEND = 1000  # transitions per extend call
TORCHRL = "torchrl 0.14 HERReplayBuffer"


def _extend_blocks(n_blocks: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Blocks of ``EXTEND`` transitions (whole 50-step episodes, time-limit ends), as numpy arrays."""
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(n_blocks):
        done = np.zeros(EXTEND, bool)
        done[EPISODE_STEPS - 1 :: EPISODE_STEPS] = True
        shapes = {"observation": OBS_DIM, "achieved_goal": GOAL_DIM, "desired_goal": GOAL_DIM}
        block = {key: rng.normal(size=(EXTEND, dim)) for key, dim in shapes.items()}
        block.update({"next_" + key: rng.normal(size=(EXTEND, dim)) for key, dim in shapes.items()})
        block.update(action=rng.uniform(-1, 1, (EXTEND, ACTION_DIM)).astype(np.float32), done=done)
        blocks.append(block)
    return blocks


def _median_extend(extend: Any, blocks: list[Any], n_calls: int) -> float:
    """Median seconds per transition of ``extend(block)`` over ``n_calls`` calls."""
    times = []
    for i in range(n_calls):
        start = time.perf_counter()
        extend(blocks[i % len(blocks)])
        times.append(time.perf_counter() - start)
    return statistics.median(times) / EXTEND


def _measure_extend(size: int) -> list[Row]:
    """``HerStorage.extend`` against torchrl's ``HERReplayBuffer.extend``, blocks of 1,000 transitions."""
    from her import HerStorage

    label = f"{size // 1000}k" if size < 1_000_000 else f"{size // 1_000_000}M"
    case = f"extend(1000) {label}"
    try:
        import torch
        from tensordict import TensorDict
        from torchrl.data import HERReplayBuffer, LazyTensorStorage
    except ImportError as error:
        print(
            f"bench_her: {case} against torchrl skipped: torchrl is not installed ({error})", file=sys.stderr
        )
        return []
    blocks = _extend_blocks(5)
    keys = ("observation", "achieved_goal", "desired_goal")
    n_calls = (size + size // 10) // EXTEND  # 10% more: the ring wraps

    ours = HerStorage(size, FetchSizedEnv.observation_space, FetchSizedEnv.action_space, None, seed=0)
    zeros, falses = np.zeros(EXTEND, np.float32), np.zeros(EXTEND, bool)

    def ours_extend(b: dict[str, np.ndarray]) -> None:
        obs = {key: b[key] for key in keys}
        nxt = {key: b["next_" + key] for key in keys}
        ours.extend(obs, b["action"], zeros, falses, b["done"], None, nxt)

    def as_tensordict(b: dict[str, np.ndarray]) -> Any:
        done = torch.from_numpy(b["done"]).reshape(EXTEND, 1)
        nxt = {key: torch.from_numpy(b["next_" + key]) for key in keys}
        nxt.update(
            reward=torch.zeros(EXTEND, 1), done=done, terminated=torch.zeros_like(done), truncated=done
        )
        data = {key: torch.from_numpy(b[key]) for key in keys}
        return TensorDict({**data, "action": torch.from_numpy(b["action"]), "next": nxt}, batch_size=[EXTEND])

    def reward_fn(td: Any) -> Any:
        distance = (td["next", "achieved_goal"] - td["desired_goal"]).norm(dim=-1, keepdim=True)
        return -(distance > 0.05).float()

    torch.set_num_threads(1)
    peer = HERReplayBuffer(reward_fn=reward_fn, storage=LazyTensorStorage(size), batch_size=256)
    tensordicts = [as_tensordict(b) for b in blocks]  # built outside the timing: torchrl's input
    ours_s = _median_extend(ours_extend, blocks, n_calls)
    peer_s = _median_extend(peer.extend, tensordicts, n_calls)
    return [Row("her", case, "us/transition", ours_s * 1e6, peer_s * 1e6, TORCHRL, False)]


def run(quick: bool) -> list[Row]:
    calls = episode_block(20 if quick else 200)
    sizes = (10_000, 100_000) if quick else (100_000, 1_000_000)
    repeats = 3 if quick else 5
    rows: list[Row] = []
    for size in sizes:
        rows.extend(_measure(size, calls, repeats, quick))
        rows.extend(_measure_extend(size))
        gc.collect()
    return rows
