"""Train rllte's DDPG on a goalenvs env, with her.HerReplayStorage as its storage.

    python examples/rllte_ddpg_her.py [--env goalenvs/BitFlip-v0] [--env-kwargs '{"n_bits": 5, "continuous": true}']
                                      [--steps 4000] [--num-envs 2] [--num-goals 4] [--seed 0]

Needs rllte-core 1.0.1, installed as docs/her.md ("With rllte") says, which also says what this script
does for rllte under Gymnasium 1.x. rllte's ``OffPolicyAgent.train`` runs unmodified. Logs go under
``--workdir``; it prints the deterministic policy's success rate.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
import torch as th
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics

import goalenvs  # noqa: F401  (registers the goalenvs ids)
from her import HerReplayStorage, resolve_env_function


class GoalObs(dict):
    """Dict observations of ``num_envs`` envs, each entry a ``(num_envs, ...)`` tensor.

    ``obs[i] = row`` with an integer ``i`` writes env ``i``'s entries from ``row``, the entries
    flattened and concatenated in the observation space's order: what rllte's loop does with a
    final observation (``real_next_obs[idx] = th.as_tensor(infos["final_observation"][idx])``).
    """

    def __init__(self, tensors: dict[str, th.Tensor], parts: list[tuple[str, tuple[int, ...], int]]) -> None:
        super().__init__(tensors)
        self.parts = parts  # (key, shape, size) of each entry, in order

    def __setitem__(self, key: Any, value: Any) -> None:
        if not isinstance(key, (int, np.integer)):
            super().__setitem__(key, value)
            return
        row = th.as_tensor(value).reshape(-1)
        start = 0
        for name, shape, size in self.parts:
            entry = self[name]
            entry[key] = row[start : start + size].reshape(shape).to(entry.dtype)
            start += size


class TorchGoalVectorEnv:
    """A goalenvs vector env as rllte's agents use one (``Gymnasium2Torch``'s interface).

    Same-step autoreset; ``infos["final_observation"]`` holds the final observation of each env whose
    episode ended in the step, flattened (rows of the other envs are zeros); episode statistics in
    ``infos["episode"]`` (Gymnasium's ``RecordEpisodeStatistics``), which rllte's loop logs.
    """

    def __init__(self, env_id: str, num_envs: int, device: str = "cpu", **env_kwargs: Any) -> None:
        env = gym.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode="vector_entry_point",
            autoreset_mode=AutoresetMode.SAME_STEP,
            **env_kwargs,
        )
        self.env = RecordEpisodeStatistics(env)
        self.num_envs = num_envs
        self.device = th.device(device)
        self.observation_space: gym.spaces.Dict = env.single_observation_space  # type: ignore[assignment]
        self.action_space = env.single_action_space
        self.compute_reward = resolve_env_function(env, "compute_reward")
        self.parts = [
            (key, tuple(space.shape or ()), int(np.prod(space.shape or (), dtype=np.int64)))
            for key, space in self.observation_space.spaces.items()
        ]

    def _obs(self, obs: dict[str, np.ndarray]) -> GoalObs:
        return GoalObs(
            {key: th.as_tensor(obs[key], device=self.device) for key, _, _ in self.parts}, self.parts
        )

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[GoalObs, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._obs(obs), infos

    def step(self, actions: th.Tensor) -> tuple[GoalObs, th.Tensor, th.Tensor, th.Tensor, dict]:
        obs, rewards, terminated, truncated, infos = self.env.step(actions.cpu().numpy())
        final = np.zeros((self.num_envs, sum(size for _, _, size in self.parts)))
        ended = infos.get("_final_obs", np.zeros(self.num_envs, bool))
        for i in np.flatnonzero(ended):
            final[i] = np.concatenate([np.ravel(infos["final_obs"][i][key]) for key, _, _ in self.parts])
        infos["final_observation"] = final
        if "episode" not in infos:  # rllte's loop reads it first, else iterates final_info as a list
            zeros = np.zeros(self.num_envs)
            infos["episode"] = {"r": zeros, "l": zeros.astype(np.int64), "t": zeros}

        def tensor(values: np.ndarray) -> th.Tensor:
            return th.as_tensor(values, dtype=th.float32, device=self.device)

        return self._obs(obs), tensor(rewards), tensor(terminated), tensor(truncated), infos

    def close(self) -> None:
        self.env.close()


@contextmanager
def _dict_modules() -> Iterator[None]:
    """While DDPG is built: rllte's Dict encoder and storage in place of the ones it picks by shape."""
    from rllte.agent.legacy import ddpg
    from rllte.xploit.encoder import RaffinCombinedEncoder
    from rllte.xploit.storage import DictReplayStorage

    with (
        mock.patch.object(ddpg, "TassaCnnEncoder", RaffinCombinedEncoder),
        mock.patch.object(ddpg, "VanillaReplayStorage", DictReplayStorage),
    ):
        yield


def make_agent(env: TorchGoalVectorEnv, args: argparse.Namespace) -> Any:
    """rllte's DDPG with a HerReplayStorage (rllte's logs go to ``./logs/<tag>/``)."""
    from rllte.agent import DDPG

    with _dict_modules():
        agent = DDPG(
            env=env,
            tag=f"ddpg-her-seed{args.seed}-pid{os.getpid()}",
            seed=args.seed,
            device="cpu",
            num_init_steps=args.init_steps,
            storage_size=1000,  # DDPG's own storage, replaced below
            batch_size=args.batch_size,
            hidden_dim=args.hidden_dim,
            lr=args.lr,
            discount=args.discount,
        )
    storage = HerReplayStorage(
        env.observation_space,
        env.action_space,
        "cpu",
        args.storage_size,
        env.num_envs,
        args.batch_size,
        "future",
        args.num_goals,
        env.compute_reward,
    )
    agent.set(storage=storage)
    return agent


def success_rate(agent: Any, args: argparse.Namespace, episodes: int) -> float:
    """Share of ``episodes`` the agent's deterministic policy ends at its goal."""
    env = TorchGoalVectorEnv(args.env, args.num_envs, **args.env_kwargs)
    obs, _ = env.reset(seed=args.seed + 10_000)
    results: list[bool] = []
    while len(results) < episodes:
        with th.no_grad():
            actions = agent.policy(obs, training=False)
        obs, _, terminated, truncated, infos = env.step(actions)
        for i in np.flatnonzero((terminated + truncated).numpy()):
            results.append(bool(infos["final_info"]["is_success"][i]))
    env.close()
    return float(np.mean(results[:episodes]))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="goalenvs/BitFlip-v0")
    parser.add_argument("--env-kwargs", type=json.loads, default={"n_bits": 5, "continuous": True})
    for name, default, what in (
        ("steps", 4000, "env steps, all envs counted"), ("init-steps", 500, "random steps before the first update"),
        ("num-envs", 2, ""), ("batch-size", 256, ""), ("storage-size", 100_000, ""), ("hidden-dim", 256, ""),
        ("lr", 1e-3, ""), ("discount", 0.95, ""), ("num-goals", 4, "relabelled transitions per real one (0: no HER)"),
        ("eval-episodes", 20, ""), ("seed", 0, ""), ("workdir", Path("runs/rllte"), ""),
    ):  # fmt: skip
        parser.add_argument(f"--{name}", type=type(default), default=default, help=what or None)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    th.set_num_threads(args.threads)

    cwd = Path.cwd()
    args.workdir.mkdir(parents=True, exist_ok=True)
    try:
        os.chdir(args.workdir)  # rllte's agents write ./logs/<tag>/<time>/ and chdir into it
        env = TorchGoalVectorEnv(args.env, args.num_envs, **args.env_kwargs)
        agent = make_agent(env, args)
        agent.train(num_train_steps=args.steps, log_interval=args.steps, save_interval=args.steps)
        storage = agent.storage
        result = {
            "storage": type(storage).__name__,
            "transitions": storage.storage.num_transitions,
            "sampleable": storage.storage.num_sampleable,
            "success_rate": success_rate(agent, args, args.eval_episodes),
            "logs": str(agent.work_dir),
        }
    finally:
        os.chdir(cwd)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
