"""``HerReplayBuffer``: drop-in for ``stable_baselines3.HerReplayBuffer``, thin over :class:`her.HerStorage`.

Use it exactly as stable-baselines3's::

    from her import HerReplayBuffer
    model = DQN("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"))

It subclasses stable-baselines3's class only so that the algorithms recognise it; none of the
parent's storage is built or used. What differs (docs/her.md has more): each observation is stored
once (:mod:`her.storage`), no info dicts unless ``copy_info_dict``, O(batch) sampling; relabelled
rewards from the env's ``compute_reward`` resolved once into a function of this process (also behind
a ``SubprocVecEnv``), given the columns of the env's ``reward_info_keys`` as ``infos`` (Parking's crash
flag); the buffer's own generator (``seed``; by default seeded once from NumPy's global state);
keyword-only ``recompute_terminated``, ``compute_reward`` / ``compute_terminated``, ``seed``,
``check_finite``, ``info_keys``; ``add`` refuses a step that does not fit the spaces before storing
any of it, and ``set_env`` a buffer saved for other spaces or ``n_envs``. stable-baselines3's arrays
(``observations``, ``dones``, ``ep_start``, ...) read the storage in the stock layout, read-only
(:meth:`her.HerStorage.rows`; the assembled ones, e.g. ``next_observations``, cost O(buffer)).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from typing import Any, NoReturn

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.preprocessing import get_action_dim, get_obs_shape
from stable_baselines3.common.type_aliases import DictReplayBufferSamples
from stable_baselines3.common.utils import get_device
from stable_baselines3.common.vec_env import VecEnv, VecNormalize
from stable_baselines3.her.goal_selection_strategy import GoalSelectionStrategy as _SB3Strategy
from stable_baselines3.her.her_replay_buffer import HerReplayBuffer as _SB3HerReplayBuffer

from goalenvs.core import IDS_IN_WORKERS, resolve_env_attribute, resolve_env_function_or_reason
from her.specs import readonly
from her.storage import GoalFn, HerStorage
from her.strategies import GoalSelectionStrategy

__all__ = ["HerReplayBuffer"]


class _StockArray:
    """A read-only attribute of stable-baselines3's buffer, read from the storage: ``(buffer_size, n_envs,
    ...)`` arrays in the stock layout and dtypes (``dones`` / ``timeouts`` float32), read-only; setting
    one raises ``AttributeError`` (as a property without a setter)."""

    def __init__(self, name: str, read: Callable[[HerStorage], Any], timeouts: bool = False) -> None:
        self.name, self.read, self.timeouts = name, read, timeouts

    def __get__(self, buffer: Any, owner: type | None = None) -> Any:
        if buffer is None:
            return self
        value = self.read(buffer._storage)
        if self.timeouts and not buffer.handle_timeout_termination:
            value = np.zeros_like(value)
        return readonly(value) if isinstance(value, np.ndarray) else value

    def __set__(self, buffer: Any, value: Any) -> NoReturn:
        raise AttributeError(
            f"HerReplayBuffer.{self.name} is read-only: it views the storage, which only add() writes"
        )


class _EnvMethod:
    """Last resort: call ``env.env_method(name, ...)`` on env 0 (an inter-process call per batch)."""

    def __init__(self, env: VecEnv, name: str) -> None:
        self.env, self.name = env, name

    def __call__(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, infos: Any) -> np.ndarray:
        return self.env.env_method(self.name, achieved_goal, desired_goal, infos, indices=[0])[0]


def _sb3_strategy(strategy: GoalSelectionStrategy | str) -> _SB3Strategy | str:
    """stable-baselines3's enum member of a built-in strategy (as its own buffer holds), else the
    registered strategy's name (its enum has no member for it)."""
    return _SB3Strategy[strategy.name] if isinstance(strategy, GoalSelectionStrategy) else strategy


class HerReplayBuffer(_SB3HerReplayBuffer):
    """Hindsight Experience Replay buffer for stable-baselines3's off-policy algorithms: the constructor
    and methods of ``stable_baselines3.HerReplayBuffer`` (``buffer_size`` transitions over all envs).

    Keyword-only extras: ``recompute_terminated`` (relabelled ``done`` from the env's
    ``compute_terminated``; default ``False``), ``compute_reward`` / ``compute_terminated`` (instead of
    the env's, pickled with the buffer), ``seed`` (``None``: drawn from NumPy's global state),
    ``check_finite`` (default ``True``), ``info_keys`` (default: the env's ``reward_info_keys``).
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        env: VecEnv | None,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        n_sampled_goal: int = 4,
        goal_selection_strategy: GoalSelectionStrategy | str = "future",
        copy_info_dict: bool = False,
        *,
        recompute_terminated: bool = False,
        compute_reward: GoalFn | None = None,
        compute_terminated: GoalFn | None = None,
        seed: int | None = None,
        check_finite: bool = True,
        info_keys: Any = None,
    ) -> None:
        # The parent constructors are not called on purpose: they would allocate the storage we
        # replace (including one info dict per transition). We set the attributes SB3 code reads.
        if not isinstance(observation_space, spaces.Dict):
            raise TypeError(
                f"HerReplayBuffer needs a spaces.Dict observation space, got {type(observation_space).__name__}"
            )
        if optimize_memory_usage:
            raise ValueError(
                "optimize_memory_usage=True is not supported (nor by stable-baselines3's HerReplayBuffer); "
                "this buffer already stores each observation once"
            )
        self.observation_space = observation_space
        self.action_space = action_space
        # stable-baselines3's typing: the same ignore as in its own BaseBuffer (a dict for Dict spaces).
        self.obs_shape = get_obs_shape(observation_space)  # type: ignore[assignment]
        self.action_dim = get_action_dim(action_space)
        self.device = get_device(device)
        self.n_envs = n_envs
        self.buffer_size = max(buffer_size // n_envs, 1)
        self.optimize_memory_usage = False
        self.handle_timeout_termination = handle_timeout_termination
        self.copy_info_dict = copy_info_dict
        self.n_sampled_goal = n_sampled_goal
        self.recompute_terminated = recompute_terminated
        self._user_compute_reward = compute_reward
        self._user_compute_terminated = compute_terminated
        # Same shapes and dtypes as stable-baselines3 (a Discrete entry is stored with shape (1,)).
        fields = {key: (shape, observation_space[key].dtype) for key, shape in self.obs_shape.items()}
        action_dtype = ReplayBuffer._maybe_cast_dtype(action_space.dtype)
        if seed is None:
            # Algorithms seed NumPy's global state before building the buffer: derive ours from it once.
            seed = int(np.random.randint(0, 2**31 - 1))  # noqa: NPY002  (read once, on purpose)
        # Functions resolved from the env are resolved again by set_env after loading: pickle only
        # functions given explicitly, so that the env never travels with the buffer.
        explicit_functions = compute_reward is not None and (
            not recompute_terminated or compute_terminated is not None
        )
        if info_keys is None and env is not None and not copy_info_dict:
            info_keys = resolve_env_attribute(env, "reward_info_keys") or None
        self._storage = HerStorage(
            buffer_size,
            fields,
            ((self.action_dim,), action_dtype),
            reward_fn=None,  # given by _attach_functions, from the env or the arguments
            n_envs=n_envs,
            n_sampled_goal=n_sampled_goal,
            goal_selection_strategy=goal_selection_strategy,
            copy_info_dict=copy_info_dict,
            info_keys=info_keys,
            recompute_terminated=recompute_terminated,
            seed=seed,
            pickle_functions=explicit_functions,
            check_finite=check_finite,
        )
        # stable-baselines3's enum member (its attribute's type), or a registered strategy's name.
        strategy = _sb3_strategy(self._storage.goal_selection_strategy)
        self.goal_selection_strategy = strategy  # type: ignore[assignment]
        self.her_ratio = self._storage.her_ratio
        self.env = None
        if env is not None:
            self._bind_env(env)
        elif compute_reward is not None:
            self._attach_functions(None)

    # ------------------------------------------------------------------ env and functions
    def _bind_env(self, env: VecEnv) -> None:
        self.env = env
        self._attach_functions(env)

    def _attach_functions(self, env: VecEnv | None) -> None:
        reward_fn = self._resolve(env, "compute_reward", self._user_compute_reward)
        terminated_fn = None
        if self.recompute_terminated:
            terminated_fn = self._resolve(env, "compute_terminated", self._user_compute_terminated)
            if terminated_fn is None:
                raise ValueError(
                    "recompute_terminated=True needs the env's compute_terminated, which this env does not "
                    "define; pass compute_terminated= in replay_buffer_kwargs"
                )
        self._storage.set_functions(reward_fn, terminated_fn)

    @staticmethod
    def _resolve(
        env: VecEnv | None, name: str, given: Callable[..., Any] | None
    ) -> Callable[..., Any] | None:
        if given is not None:
            return given
        if env is None:
            return None
        function, reason = resolve_env_function_or_reason(env, name)
        if function is not None:
            return function
        if not env.has_attr(name):
            return None
        warnings.warn(
            f"could not get {name} of the env in this process: {reason}. Falling back to "
            f"env.env_method({name!r}) on every sample, which is slow. Fix: make the envs with gym.make / "
            f"make_vec_env(env_id), or pass {name}= in replay_buffer_kwargs. Note: " + IDS_IN_WORKERS + ".",
            stacklevel=3,
        )
        return _EnvMethod(env, name)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the env (as stable-baselines3); the env's functions come back with set_env."""
        return {name: value for name, value in self.__dict__.items() if name != "env"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.env = None

    def set_env(self, env: VecEnv) -> None:
        """Attach the env after unpickling and resolve its ``compute_reward`` again (``model.load_replay_buffer``
        calls it): a buffer saved for other spaces or another number of envs is refused, in one line."""
        if self.env is not None:
            raise ValueError("Trying to set env of already initialized environment.")
        self._check_env(env)
        self._bind_env(env)

    def _check_env(self, env: VecEnv) -> None:
        """Raise ``ValueError`` unless ``env`` has the spaces and number of envs this buffer stores."""
        obs_space, action_space = env.observation_space, env.action_space
        if not isinstance(obs_space, spaces.Dict):
            raise ValueError(
                f"this HerReplayBuffer was saved for the observation space {self.observation_space}, "
                f"not for the env's {obs_space} (HER needs a spaces.Dict)"
            )
        # The layout the storage was built for, from the env's spaces as __init__ derives it (bounds
        # may differ; shapes and dtypes may not).
        shapes = get_obs_shape(obs_space)
        assert isinstance(shapes, dict)  # of a spaces.Dict
        fields = {key: (shape, obs_space[key].dtype) for key, shape in shapes.items()}
        action = ((get_action_dim(action_space),), ReplayBuffer._maybe_cast_dtype(action_space.dtype))
        try:
            self._storage.check_spaces(fields, action)
        except ValueError:
            raise ValueError(
                f"this HerReplayBuffer was saved for observation_space {self.observation_space} and "
                f"action_space {self.action_space}, not for the env's {obs_space} and {action_space}; "
                "load it into a model of the same env, or start a new buffer"
            ) from None
        if env.num_envs != self.n_envs:
            raise ValueError(
                f"this HerReplayBuffer was saved for n_envs={self.n_envs} envs, not for the env's "
                f"{env.num_envs}; load it into a model with {self.n_envs} envs, or start a new buffer"
            )

    # ------------------------------------------------------------------ SB3 buffer interface
    @property
    def storage(self) -> HerStorage:
        """The framework-free storage under this adapter."""
        return self._storage

    # -------- stable-baselines3's attributes, read-only (for code written against the stock buffer):
    # views of the storage (see _StockArray), which only add() writes.
    pos = _StockArray("pos", lambda storage: storage.pos)
    full = _StockArray("full", lambda storage: storage.full)
    observations = _StockArray("observations", lambda s: s.rows("observations"))
    next_observations = _StockArray("next_observations", lambda s: s.rows("next_observations"))
    actions = _StockArray("actions", lambda storage: storage.rows("actions"))
    rewards = _StockArray("rewards", lambda storage: storage.rows("rewards"))
    # done: ended by a termination or a time limit; timeouts: by a time limit, if timeouts are handled.
    dones = _StockArray("dones", lambda s: (s.rows("terminateds") | s.rows("truncateds")).astype(np.float32))
    timeouts = _StockArray("timeouts", lambda s: s.rows("truncateds").astype(np.float32), timeouts=True)
    infos = _StockArray("infos", lambda storage: storage.rows("infos"))
    ep_start = _StockArray("ep_start", lambda storage: storage.rows("episode_starts"))
    ep_length = _StockArray("ep_length", lambda storage: storage.rows("episode_lengths"))
    _current_ep_start = _StockArray("_current_ep_start", lambda storage: storage.current_episode_starts)

    def size(self) -> int:
        """Steps stored per env (stable-baselines3's meaning)."""
        return self.buffer_size if self._storage.full else self._storage.pos

    def reset(self) -> None:
        self._storage.reset()

    def add(  # type: ignore[override]  # dicts of arrays, as stable-baselines3's own override
        self,
        obs: dict[str, np.ndarray],
        next_obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        ended = np.asarray(done, dtype=bool).reshape(self.n_envs)
        if any(info.get("TimeLimit.truncated", False) for info in infos):
            timeouts = np.array([info.get("TimeLimit.truncated", False) for info in infos], dtype=bool)
            terminated, truncated = ended & ~timeouts, ended & timeouts
        else:  # most steps: no time limit reached (and no array made)
            terminated, truncated = ended, np.zeros(self.n_envs, dtype=bool)
        # The timeout flag is kept whatever handle_timeout_termination says: sample() decides whether
        # it cancels `done`, and recompute_terminated needs it either way.
        self._storage.add(obs, action, reward, terminated, truncated, infos, next_obs)

    # Dict samples, as stable-baselines3's own override (with the same ignore).
    def sample(self, batch_size: int, env: VecNormalize | None = None) -> DictReplayBufferSamples:  # type: ignore[override]
        data = self._storage.sample_arrays(batch_size)
        observations = self._normalized(data["observations"], env)
        next_observations = self._normalized(data["next_observations"], env)
        dones = data["terminateds"]
        if not self.handle_timeout_termination:
            # Without timeout handling a time-limit end is an end like any other (stable-baselines3).
            dones = np.maximum(dones, data["truncateds"])
        device = self.device
        if device.type == "cpu":
            to_tensor: Callable[[np.ndarray], th.Tensor] = th.from_numpy  # shares the fresh batch arrays
        else:
            to_tensor = partial(th.as_tensor, device=device)
        return DictReplayBufferSamples(
            observations={key: to_tensor(value) for key, value in observations.items()},
            actions=to_tensor(data["actions"]),
            next_observations={key: to_tensor(value) for key, value in next_observations.items()},
            dones=to_tensor(dones.reshape(-1, 1)),
            rewards=to_tensor(self._normalize_reward(data["rewards"].reshape(-1, 1), env)),
        )

    def _normalized(self, obs: dict[str, np.ndarray], env: VecNormalize | None) -> dict[str, np.ndarray]:
        normalized = self._normalize_obs(obs, env)
        assert isinstance(normalized, dict)  # a dict in, a dict out
        return normalized

    def truncate_last_trajectory(self) -> None:
        """End every env's unfinished episode at its last stored step (after loading a buffer), as
        stable-baselines3: a time-limit end; the episode can then be sampled and relabelled."""
        if self._storage.current_episode_lengths.any():
            warnings.warn(
                "The last trajectory in the replay buffer will be truncated.\n"
                "If you are in the same episode as when the replay buffer was saved,\n"
                "you should use `truncate_last_traj=False` to avoid that issue.",
                stacklevel=2,
            )
            self._storage.end_episodes()
