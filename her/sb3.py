"""``HerReplayBuffer``: drop-in for ``stable_baselines3.HerReplayBuffer``, thin over :class:`her.HerStorage`.

Use it exactly as stable-baselines3's::

    from her import HerReplayBuffer
    model = DQN("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"))

It subclasses stable-baselines3's class only so that the algorithms recognise it (they pass the env
to, and call ``set_env`` / ``truncate_last_trajectory`` on, instances of that class); none of the
parent's storage is built or used. What differs from stable-baselines3's buffer:

* storage: each observation is stored once (see :mod:`her.storage`), no info dicts unless
  ``copy_info_dict=True``; sampling is O(batch), not O(buffer);
* relabelled rewards come from the env's ``compute_reward`` resolved once into a function of this
  process (see :func:`goalenvs.core.resolve_env_function`), also behind a ``SubprocVecEnv``;
* the ``infos`` argument of ``compute_reward``: the info entries the env declares in
  ``reward_info_keys`` (or ``info_keys=``), stored as columns and passed as a dict of arrays
  ``{key: (B, ...)}`` (Parking's crash flag: relabelled crashes keep their penalty by default);
  with ``copy_info_dict=True`` the object array of the stored info dicts (slow; for envs that read
  their info without declaring it); else ``None``;
* randomness from the buffer's own ``np.random.Generator`` (``seed``; by default seeded once from
  NumPy's global state, so an algorithm's ``seed=`` still makes runs reproducible);
* extra keyword-only options: ``recompute_terminated`` (relabelled ``done`` from the env's
  ``compute_terminated``, stable-baselines3 issue #627), ``compute_reward`` / ``compute_terminated``
  (explicit functions instead of the env's), ``seed`` and ``check_finite``;
* ``add`` refuses a step that does not match the spaces (or, by default, holds NaN or inf) before
  storing any of it, and ``set_env`` (so ``model.load_replay_buffer``) a buffer saved for other
  spaces or another number of envs.

stable-baselines3's arrays, read-only: code written against the stock buffer that reads
``observations``, ``next_observations``, ``actions``, ``rewards``, ``dones``, ``timeouts``, ``infos``,
``ep_start``, ``ep_length`` or ``_current_ep_start`` keeps working. Each is a property returning
arrays in the stock layout ``(buffer_size, n_envs, ...)`` (``buffer_size`` per env, row ``pos - 1``
the latest step), with the stock dtypes (``dones`` / ``timeouts`` float32). ``observations``,
``actions`` and ``rewards`` are views of the storage; the others are assembled on each access (O(buffer):
each observation is stored once, so ``next_observations`` is rebuilt from the next rows and the kept
final observations). They cannot be written to: the storage is written by ``add`` only. See
:mod:`her.rows` for the details.
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


def _refuse_write(name: str) -> NoReturn:
    raise AttributeError(
        f"HerReplayBuffer.{name} is read-only: it views the storage, which only add() writes"
    )


class _EnvMethod:
    """Last resort: call ``env.env_method(name, ...)`` on env 0 (an inter-process call per batch)."""

    def __init__(self, env: VecEnv, name: str) -> None:
        self.env = env
        self.name = name

    def __call__(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, infos: Any) -> np.ndarray:
        return self.env.env_method(self.name, achieved_goal, desired_goal, infos, indices=[0])[0]


def _sb3_strategy(strategy: GoalSelectionStrategy | str) -> _SB3Strategy | str:
    """stable-baselines3's enum member of a built-in strategy (as its own buffer holds), else the
    registered strategy's name (its enum has no member for it)."""
    return _SB3Strategy[strategy.name] if isinstance(strategy, GoalSelectionStrategy) else strategy


class HerReplayBuffer(_SB3HerReplayBuffer):
    """Hindsight Experience Replay buffer for stable-baselines3's off-policy algorithms.

    Same constructor and methods as ``stable_baselines3.HerReplayBuffer`` (see the module docstring
    for the differences). ``buffer_size`` counts transitions over all envs; each env keeps
    ``buffer_size // n_envs`` steps.

    Extra keyword-only arguments:
        recompute_terminated: recompute ``done`` of relabelled transitions with the env's
            ``compute_terminated`` (default ``False``, as stable-baselines3).
        compute_reward: a function ``(achieved_goal, desired_goal, infos) -> rewards`` to use instead
            of the env's ``compute_reward`` (kept when the buffer is pickled; should then be picklable).
        compute_terminated: likewise for ``compute_terminated``.
        seed: seed of the buffer's generator; ``None`` draws one from NumPy's global state.
        check_finite: refuse NaN or infinite observations, actions and rewards in ``add`` (default
            ``True``; see :class:`her.HerStorage`).
        info_keys: the info keys ``compute_reward`` reads, stored for relabelling; by default the
            env's ``reward_info_keys`` (none when it declares none, or with ``copy_info_dict``).
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
                "HerReplayBuffer needs a spaces.Dict observation space, "
                f"got {type(observation_space).__name__}"
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
        state = self.__dict__.copy()
        del state["env"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.env = None

    def set_env(self, env: VecEnv) -> None:
        """Attach the env after unpickling (and resolve its ``compute_reward`` again).

        stable-baselines3's ``model.load_replay_buffer`` calls it with the model's env: a buffer saved
        for other spaces (shapes or dtypes) or another number of envs is refused here, in one line
        naming both, rather than at the first ``add`` or ``sample``.
        """
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

    # -------- stable-baselines3's attributes, read-only (for code written against the stock buffer).
    # The stock buffer has them as plain attributes; here they are views of the storage, which only
    # add() writes, so each setter refuses (as AttributeError, like a property without a setter).
    # The two ignores below: stable-baselines3 types observations and next_observations as arrays in
    # ReplayBuffer and as dicts in DictReplayBuffer (itself ignoring that override), so a dict here
    # cannot satisfy the checker either.
    @property
    def pos(self) -> int:
        return self._storage.pos

    @pos.setter
    def pos(self, value: int) -> None:
        _refuse_write("pos")

    @property
    def full(self) -> bool:
        return self._storage.full

    @full.setter
    def full(self, value: bool) -> None:
        _refuse_write("full")

    @property  # type: ignore[override]  # see above
    def observations(self) -> dict[str, np.ndarray]:
        """``{key: (buffer_size, n_envs, *shape)}``: read-only views of the stored observations."""
        return self._storage.rows("observations")

    @observations.setter
    def observations(self, value: dict[str, np.ndarray]) -> None:
        _refuse_write("observations")

    @property  # type: ignore[override]  # see above
    def next_observations(self) -> dict[str, np.ndarray]:
        """``{key: (buffer_size, n_envs, *shape)}``: the observation each stored step led to (assembled)."""
        return self._storage.rows("next_observations")

    @next_observations.setter
    def next_observations(self, value: dict[str, np.ndarray]) -> None:
        _refuse_write("next_observations")

    @property
    def actions(self) -> np.ndarray:
        """``(buffer_size, n_envs, action_dim)``: a read-only view of the stored actions."""
        return self._storage.rows("actions")

    @actions.setter
    def actions(self, value: np.ndarray) -> None:
        _refuse_write("actions")

    @property
    def rewards(self) -> np.ndarray:
        """``(buffer_size, n_envs)`` float32: a read-only view of the stored (not relabelled) rewards."""
        return self._storage.rows("rewards")

    @rewards.setter
    def rewards(self, value: np.ndarray) -> None:
        _refuse_write("rewards")

    @property
    def dones(self) -> np.ndarray:
        """``(buffer_size, n_envs)`` float32: 1 where the step ended its episode (terminated or truncated)."""
        done = self._storage.rows("terminateds") | self._storage.rows("truncateds")
        return readonly(done.astype(np.float32))

    @dones.setter
    def dones(self, value: np.ndarray) -> None:
        _refuse_write("dones")

    @property
    def timeouts(self) -> np.ndarray:
        """``(buffer_size, n_envs)`` float32: 1 where a time limit ended the episode, if timeouts are handled."""
        truncated = self._storage.rows("truncateds").astype(np.float32)
        return readonly(truncated if self.handle_timeout_termination else np.zeros_like(truncated))

    @timeouts.setter
    def timeouts(self, value: np.ndarray) -> None:
        _refuse_write("timeouts")

    @property
    def infos(self) -> np.ndarray:
        """``(buffer_size, n_envs)`` object array of the kept info dicts (empty dicts unless copy_info_dict)."""
        return self._storage.rows("infos")

    @infos.setter
    def infos(self, value: np.ndarray) -> None:
        _refuse_write("infos")

    @property
    def ep_start(self) -> np.ndarray:
        """``(buffer_size, n_envs)``: the row where each row's episode starts (0 where unknown)."""
        return self._storage.rows("episode_starts")

    @ep_start.setter
    def ep_start(self, value: np.ndarray) -> None:
        _refuse_write("ep_start")

    @property
    def ep_length(self) -> np.ndarray:
        """``(buffer_size, n_envs)``: each row's episode length where it can be sampled, else 0."""
        return self._storage.rows("episode_lengths")

    @ep_length.setter
    def ep_length(self, value: np.ndarray) -> None:
        _refuse_write("ep_length")

    @property
    def _current_ep_start(self) -> np.ndarray:
        """``(n_envs,)``: the row where each env's unfinished episode started (``pos`` if none)."""
        return self._storage.current_episode_starts

    @_current_ep_start.setter
    def _current_ep_start(self, value: np.ndarray) -> None:
        _refuse_write("_current_ep_start")

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
        """End every env's unfinished episode at its last stored step (called after loading a buffer).

        As stable-baselines3: the step becomes a time-limit end (so values bootstrap from it when
        ``handle_timeout_termination`` is true), and the episode can be sampled and relabelled.
        """
        if self._storage.current_episode_lengths.any():
            warnings.warn(
                "The last trajectory in the replay buffer will be truncated.\n"
                "If you are in the same episode as when the replay buffer was saved,\n"
                "you should use `truncate_last_traj=False` to avoid that issue.",
                stacklevel=2,
            )
            self._storage.end_episodes()
