"""The training envs of ``examples/train.py``: several Fetch envs as one native vector env, else a DummyVecEnv.

A goalenvs ``FetchVectorEnv`` steps the physics of its envs in parallel threads; :class:`NativeVecEnv`
hands it to stable-baselines3 as a ``VecEnv`` that gives what a ``DummyVecEnv`` of the single envs,
seeded alike, gives: a run trains the same either way, only faster.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecEnv

from goalenvs.core import env_info

# The vector envs trained through NativeVecEnv: those whose physics is worth threads.
NATIVE_TRAINING = ("goalenvs.envs.fetch:FetchVectorEnv",)


class NativeVecEnv(VecEnv):
    """A goalenvs native vector env (SAME_STEP autoreset) as a stable-baselines3 VecEnv of ``Monitor``-ed envs.

    Infos as a DummyVecEnv's: ``TimeLimit.truncated``; for an ended episode its last info,
    ``terminal_observation`` and Monitor's ``episode``. ``get_attr("spec")`` is the single env's spec
    (a replay buffer rebuilds the goal functions from it). It pickles for checkpoints (``VecMonitor`` does not).
    """

    def __init__(self, vector_env: gym.vector.VectorEnv, single_spec: Any) -> None:
        self.vector_env, self.single_spec = vector_env, single_spec
        super().__init__(
            vector_env.num_envs, vector_env.single_observation_space, vector_env.single_action_space
        )
        self.t_start = time.time()
        self.episode_returns, self.episode_lengths = [0.0] * self.num_envs, [0] * self.num_envs

    def reset(self) -> Any:
        seeds = None if None in self._seeds else [int(s) for s in self._seeds if s is not None]
        # A native vector env takes one seed per env (Gymnasium's VectorEnv annotates an int).
        obs, info = self.vector_env.reset(seed=seeds, options=self._options[0] or None)  # type: ignore[arg-type]
        self.reset_infos = [env_info(info, i) for i in range(self.num_envs)]
        self.episode_returns, self.episode_lengths = [0.0] * self.num_envs, [0] * self.num_envs
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> Any:
        obs, reward, terminated, truncated, info = self.vector_env.step(self._actions)
        dones = terminated | truncated
        infos = []
        for i, r in enumerate(reward.tolist()):
            self.episode_returns[i] += r  # summed in order from 0.0, as Monitor's sum(rewards)
            self.episode_lengths[i] += 1
            if dones[i]:
                step_info = env_info(info["final_info"], i)
                step_info["terminal_observation"] = info["final_obs"][i]  # env i's observation dict
                step_info["episode"] = {
                    "r": round(self.episode_returns[i], 6),
                    "l": self.episode_lengths[i],
                    "t": round(time.time() - self.t_start, 6),
                }
                self.episode_returns[i], self.episode_lengths[i] = 0.0, 0
            else:
                step_info = env_info(info, i)
            step_info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            infos.append(step_info)
        return obs, reward.astype(np.float32), dones, infos

    def close(self) -> None:
        self.vector_env.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        value = self.single_spec if attr_name == "spec" else getattr(self.vector_env, attr_name)
        return [value] * len(list(self._get_indices(indices)))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        if len(list(self._get_indices(indices))) != self.num_envs:
            raise ValueError(
                f"the envs of a {type(self.vector_env).__name__} share {attr_name}: set it for all"
            )
        setattr(self.vector_env, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        method = getattr(self.vector_env, method_name)
        return [method(*method_args, **method_kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: Any = None) -> list[bool]:
        return [wrapper_class is Monitor] * len(list(self._get_indices(indices)))  # Monitor's infos

    def get_images(self) -> list[np.ndarray]:
        return list(self.vector_env.render() or [])  # type: ignore[arg-type]  # rgb_array frames


def make_training_envs(run: dict[str, Any]) -> VecEnv:
    """``run["n_envs"]`` envs of ``run["env"]``, env ``i`` seeded ``run["seed"] + i``: a :class:`NativeVecEnv`
    for several envs of an id in :data:`NATIVE_TRAINING`, else ``make_vec_env``'s ``DummyVecEnv``."""
    env_id, n_envs, kwargs = run["env"], run["n_envs"], run["env_kwargs"]
    spec = gym.spec(env_id)
    if n_envs == 1 or spec.vector_entry_point not in NATIVE_TRAINING:
        return make_vec_env(env_id, n_envs=n_envs, seed=run["seed"], env_kwargs=kwargs)
    vector_env = gym.make_vec(env_id, num_envs=n_envs, autoreset_mode="SameStep", **kwargs)
    single_spec = dataclasses.replace(spec, kwargs={**spec.kwargs, **kwargs})
    env = NativeVecEnv(vector_env, single_spec)
    env.seed(run["seed"])
    env.action_space.seed(run["seed"])
    return env
