"""DDPG+HER gradient steps/s on FetchPush: ``examples/her_ddpg.py`` against stable-baselines3's DDPG.

Both sides sample a HER batch from a buffer holding the same 40 random FetchPush episodes and take
one critic and one actor step of ``[256, 256, 256]`` networks (the HER paper's), on one torch thread:
ours with ``HerStorage.sample_arrays`` + ``Agent.updates`` (bfloat16 hidden layers, and float32), the
peer with ``DDPG.train(gradient_steps=1)`` on our ``her.HerReplayBuffer`` (so the buffer is not what
differs). Batch 256 is one worker of the paper, 2048 its 8 workers' averaged gradient.

A third row per batch puts the float32 update against this core's own bound: the floating-point
operations of its matrix products (:func:`update_flop`, torch's count) per second, against those of
one ``(batch, 256) @ (256, 256)`` product, the networks' largest, timed in turn with it. Its ratio is
the share of the bound the update reaches: how much any float32 code could still gain on this CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from benchmarks.common import Row, interleaved_rates

N_EPISODES = 40


def _episodes(env, n: int):
    rng = np.random.default_rng(0)
    for episode in range(n):
        obs, _ = env.reset(seed=episode)
        done = False
        while not done:
            action = rng.uniform(-1, 1, 4).astype(np.float32)
            nxt, reward, terminated, truncated, info = env.step(action)
            yield obs, action, reward, terminated, truncated, info, nxt
            obs, done = nxt, terminated or truncated


def update_flop(agent, batch: dict) -> int:
    """Floating-point operations (2 a multiply-add) of the matrix products of one ``agent.updates([batch])``,
    as torch's ``FlopCounterMode`` counts them (the update is taken)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        agent.updates([batch])
    return int(counter.get_total_flops())


def _ours(agent, storage, batch: int, n_step: int = 1):
    return lambda: [agent.updates([storage.sample_arrays(batch, n_step)]) for _ in range(10)]


def _product(a, w):
    import torch

    return lambda: [torch.mm(a, w) for _ in range(10)]


def _peer(model, batch: int):
    return lambda: model.train(gradient_steps=10, batch_size=batch)


def run(quick: bool) -> list[Row]:
    import gymnasium as gym
    import torch
    from stable_baselines3 import DDPG
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import DummyVecEnv

    import goalenvs  # noqa: F401
    from her import HerReplayBuffer, HerStorage

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import her_ddpg

    torch.set_num_threads(1)
    repeats = 3 if quick else 15
    env = gym.make("goalenvs/FetchPush-v0").unwrapped
    space = env.observation_space
    rows = []
    for batch in (256, 2048):
        agents = {}
        for bf16 in (True, False):
            cfg = her_ddpg.Config(bf16=bf16, batch_size=batch)
            agent = her_ddpg.Agent(cfg, space["observation"].shape[0], space["desired_goal"].shape[0], 4)
            agent.o_norm.update(np.zeros((2, space["observation"].shape[0])))
            agent.g_norm.update(np.zeros((2, 3)))
            agents[bf16] = agent
        storage = HerStorage(10**6, space, env.action_space, env.compute_reward, seed=0)
        vec = DummyVecEnv([lambda: gym.make("goalenvs/FetchPush-v0")])
        model = DDPG(
            "MultiInputPolicy", vec, buffer_size=10**6, batch_size=batch, learning_starts=0,
            replay_buffer_class=HerReplayBuffer, policy_kwargs={"net_arch": [256, 256, 256]},
            device="cpu", seed=0,
        )  # fmt: skip
        model.set_logger(configure(None, []))  # train() logs; learn() would have set this up
        for obs, action, reward, terminated, truncated, _info, nxt in _episodes(env, N_EPISODES):
            storage.add(
                {k: v[None] for k, v in obs.items()}, action[None], np.array([reward], np.float32),
                np.array([terminated]), np.array([truncated]), None, {k: v[None] for k, v in nxt.items()},
            )  # fmt: skip
            model.replay_buffer.add(
                {k: v[None] for k, v in obs.items()}, {k: v[None] for k, v in nxt.items()}, action[None],
                np.array([reward]), np.array([terminated or truncated]), [{"TimeLimit.truncated": truncated}],
            )  # fmt: skip

        ours = [_ours(agents[bf16], storage, batch) for bf16 in (True, False)]
        peer = _peer(model, batch)
        for fn in (*ours, peer):  # warm-up (allocations, oneDNN kernels)
            fn()
        bf16_rate, fp32_rate, peer_rate = interleaved_rates([*ours, peer], 10, repeats)
        for name, rate in (("bfloat16", bf16_rate), ("float32", fp32_rate)):
            rows.append(
                Row(
                    "ddpg_update",
                    f"sample + update, batch {batch}, [256]*3, {name}, 1 thread",
                    "updates/s",
                    rate,
                    peer_rate,
                    "sb3 DDPG.train",
                )
            )
        # The float32 update against the core's matrix-product rate, timed in turn.
        flop = update_flop(agents[False], storage.sample_arrays(batch))
        product = _product(torch.randn(batch, 256), torch.randn(256, 256))
        product()
        update_rate, product_rate = interleaved_rates([ours[1], product], 10, repeats)
        rows.append(
            Row(
                "ddpg_update",
                f"float32 sample + update's matrix products, batch {batch}, 1 thread",
                "GFLOP/s",
                update_rate * flop / 1e9,
                product_rate * 2 * batch * 256 * 256 / 1e9,
                f"one ({batch}, 256) @ (256, 256) product (the bound)",
            )
        )
    # The float32 FetchPush recipe of docs/training.md (D51: --hidden 128 --n-step 5, 2 workers of batch 512)
    # against the core's bound: at this width the products are small, and the update reaches a smaller share.
    cfg = her_ddpg.Config(batch_size=512, n_step=5, hidden=128, bf16=False)
    agent = her_ddpg.Agent(cfg, space["observation"].shape[0], space["desired_goal"].shape[0], 4)
    agent.o_norm.update(np.zeros((2, space["observation"].shape[0])))
    agent.g_norm.update(np.zeros((2, 3)))
    flop = update_flop(agent, storage.sample_arrays(512, 5))
    fns = [_ours(agent, storage, 512, 5), _product(torch.randn(512 * 5, 128), torch.randn(128, 128))]
    for fn in fns:
        fn()
    update_rate, product_rate = interleaved_rates(fns, 10, repeats)
    rows.append(
        Row(
            "ddpg_update",
            "float32 sample + update's matrix products, batch 512, [128]*3, --n-step 5, 1 thread",
            "GFLOP/s",
            update_rate * flop / 1e9,
            product_rate * 2 * 512 * 5 * 128 * 128 / 1e9,
            "one (2560, 128) @ (128, 128) product (the bound)",
        )
    )
    # MHER(lambda)'s multi-step target (--n-step 3) against the one-step one, batch 1024, bfloat16: what a
    # lever of docs/training.md costs per update (its target networks see 3 next states a transition).
    agents = {}
    for n_step in (3, 1):
        cfg = her_ddpg.Config(batch_size=1024, n_step=n_step)
        agents[n_step] = her_ddpg.Agent(cfg, space["observation"].shape[0], space["desired_goal"].shape[0], 4)
        agents[n_step].o_norm.update(np.zeros((2, space["observation"].shape[0])))
        agents[n_step].g_norm.update(np.zeros((2, 3)))
    fns = [_ours(agents[n], storage, 1024, n) for n in (3, 1)]
    for fn in fns:
        fn()
    n3_rate, n1_rate = interleaved_rates(fns, 10, repeats)
    bf16 = "bfloat16" if agents[1].cfg.bf16 else "float32 (no native bfloat16)"
    rows.append(
        Row(
            "ddpg_update",
            f"sample + update, batch 1024, --n-step 3 (MHER), {bf16}, 1 thread",
            "updates/s",
            n3_rate,
            n1_rate,
            "ours, --n-step 1",
        )
    )
    return rows
