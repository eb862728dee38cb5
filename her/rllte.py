"""``HerReplayStorage``: drop-in for rllte's ``rllte.xploit.storage.HerReplayStorage``, thin over :class:`her.HerStorage`.

Use it as rllte's, e.g. as the storage of one of rllte's off-policy agents::

    from her import HerReplayStorage
    storage = HerReplayStorage(env.observation_space, env.action_space, device, storage_size,
                               num_envs, batch_size, "future", 4, env.compute_reward)
    agent.set(storage=storage)

Same constructor (names, order, defaults; ``reward_fn`` aside), ``add`` (one step of every env as
torch tensors), ``sample()`` (``batch_size`` transitions as rllte's ``DictReplayBatch`` of float32
tensors on ``device``, the last ``int(her_ratio * batch_size)`` relabelled), ``update()`` (nothing)
and attributes (``storage_size`` per env, ``num_envs``, ``batch_size``, ``num_goals``, ``her_ratio``,
``step``, ``full``, ``obs_shape``, ``action_dim``, ...) as rllte's; the storage is :class:`her.HerStorage`
(attribute ``storage``). With rllte installed the class is registered as rllte's ``BaseStorage``
(``agent.set(storage=...)`` checks ``isinstance``) and ``sample()`` returns rllte's ``DictReplayBatch``;
without, this module's NamedTuple of the same fields. Importing it imports torch, not rllte.

Where rllte 1.0.1's class is buggy or ambiguous, this one chooses, on purpose:

* ``reward_fn`` defaults to ``None`` (relabelling then raises one line naming it); rllte's
  ``lambda x: x`` raises ``TypeError`` on the first relabelled sample (it is called with three).
* relabelled rewards are reshaped to ``(B, 1)``: rllte's ``torch.cat`` of the stored ``(B, 1)``
  rewards with a ``(B,)`` ``compute_reward`` (every GoalEnv's) raises.
* with ``copy_info_dict=True`` each transition keeps its own env's info (rllte stores the vector
  env's whole dict of arrays at each env's slot).
* the strategy is checked when the storage is built (rllte accepts ``"random"``, then raises at
  each sample); ``reset()`` forgets the episodes too (rllte's then samples rows without data).
* a Discrete action may come as ``(num_envs,)`` (rllte's random exploration gives it; its storage
  refuses it); flags may be bools, integers or 0.0 / 1.0 (rllte's ``Gymnasium2Torch``), other floats
  are refused; ``add`` checks a step before storing any of it (:meth:`her.HerStorage.add`).
* random draws come from the storage's own generator, seeded once from NumPy's global state when
  it is built (rllte's agents seed that state), not from the global state while sampling.

Kept as rllte does it: ``future`` is inclusive, ``her_ratio = 1 - 1 / (num_goals + 1)``, relabelled
transitions keep their stored ``terminated`` flag, ``reward_fn(next_achieved_goal, new_desired_goal,
infos)`` gets numpy arrays and, without ``copy_info_dict``, a list of empty dicts (with it, deep
copies of the stored info dicts). ``add`` expects same-step autoreset (Gymnasium 0.29's vector envs,
or ``autoreset_mode=SAME_STEP``): where an episode ended, ``next_observations`` holds its final
observation; with next-step autoreset the step that only resets an env must not be added.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces

from goalenvs.core import check_bool, check_int
from her.storage import GoalFn, HerStorage
from her.strategies import parse_strategy

__all__ = ["DictReplayBatch", "HerReplayStorage"]


class DictReplayBatch(NamedTuple):
    """What :meth:`HerReplayStorage.sample` returns without rllte: the fields of rllte's
    ``DictReplayBatch`` in its order (float32 tensors on the storage's device)."""

    observations: dict[str, th.Tensor]
    actions: th.Tensor
    rewards: th.Tensor
    terminateds: th.Tensor
    truncateds: th.Tensor
    next_observations: dict[str, th.Tensor]


# rllte's DictReplayBatch, or None before the first look / () when rllte is absent or unusable.
_RLLTE_BATCH: Any = None


def _rllte_batch_class() -> type | None:
    """rllte's ``DictReplayBatch`` once this class is registered as its ``BaseStorage``, or None (looked
    up once per process; rllte installed but failing to import is worth a warning)."""
    global _RLLTE_BATCH
    if _RLLTE_BATCH is None:
        _RLLTE_BATCH = ()
        if importlib.util.find_spec("rllte") is not None:
            try:
                base = importlib.import_module("rllte.common.prototype.base_storage").BaseStorage
                batch = importlib.import_module("rllte.common.type_alias").DictReplayBatch
                base.register(HerReplayStorage)
                _RLLTE_BATCH = batch
            except Exception as error:  # rllte's imports pull many packages; any failure lands here
                warnings.warn(
                    f"rllte is installed but could not be imported ({type(error).__name__}: {error}); "
                    "her.HerReplayStorage is not registered as rllte's BaseStorage, so rllte's "
                    "agent.set(storage=...) will refuse it",
                    RuntimeWarning,
                    stacklevel=3,
                )
    return _RLLTE_BATCH or None


def _obs_shape(space: spaces.Space) -> tuple[int, ...]:
    """rllte's shape of one observation entry (``process_observation_space``): a Discrete is ``(1,)``."""
    if isinstance(space, spaces.Discrete):
        return (1,)
    if isinstance(space, spaces.MultiDiscrete):
        return (len(space.nvec),)
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        return tuple(space.shape)
    raise TypeError(f"observation entries must be Box, Discrete, MultiDiscrete or MultiBinary, got {space}")


def _action_info(space: spaces.Space) -> tuple[tuple[int, ...], int, int, str]:
    """rllte's ``process_action_space``: (shape, action_dim, policy_action_dim, action_type)."""
    if isinstance(space, spaces.Discrete):
        return (), 1, int(space.n), "Discrete"
    if isinstance(space, spaces.Box):
        dim = int(np.prod(space.shape))
        return tuple(space.shape), dim, dim, "Box"
    if isinstance(space, spaces.MultiDiscrete):
        return tuple(space.shape), len(space.nvec), int(np.sum(space.nvec)), "MultiDiscrete"
    if isinstance(space, spaces.MultiBinary) and len(space.shape) == 1:
        return tuple(space.shape), int(space.shape[0]), int(space.shape[0]), "MultiBinary"
    raise TypeError(f"action_space must be Discrete, Box, MultiDiscrete or 1-d MultiBinary, got {space}")


def _numpy(value: Any) -> Any:
    """A torch tensor (any device) as a numpy array; anything else as it is."""
    return value.detach().cpu().numpy() if isinstance(value, th.Tensor) else value


class _RllteRewardFn:
    """``reward_fn`` called as rllte calls it: infos are a list of empty dicts without
    ``copy_info_dict``, else deep copies of the stored info dicts; a tensor result becomes numpy."""

    def __init__(self, reward_fn: GoalFn) -> None:
        self.reward_fn = reward_fn

    @classmethod
    def of(cls, reward_fn: GoalFn | None) -> _RllteRewardFn | None:
        if reward_fn is not None and not callable(reward_fn):
            raise TypeError(f"reward_fn must be callable, got {type(reward_fn).__name__}")
        return None if reward_fn is None else cls(reward_fn)

    def __call__(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, infos: Any) -> Any:
        if infos is None:
            infos = [{} for _ in range(len(achieved_goal))]
        else:
            infos = copy.deepcopy(infos)
            for i, info in enumerate(infos):
                if info is None:  # a step added with infos=None
                    infos[i] = {}
        return _numpy(self.reward_fn(achieved_goal, desired_goal, infos))


class HerReplayStorage:
    """Hindsight experience replay storage with rllte's interface (see the module docstring).

    Args:
        observation_space: one env's goal ``spaces.Dict``; action_space: one env's Discrete, Box,
            MultiDiscrete or 1-d MultiBinary space; device: where :meth:`sample` puts its tensors.
        storage_size: transitions kept in all (the attribute is the per-env ``storage_size //
            num_envs``, as rllte's); num_envs: envs adding one transition each per :meth:`add`.
        batch_size: transitions per :meth:`sample`; goal_selection_strategy: ``"future"``,
            ``"final"`` or ``"episode"``; num_goals: ``int(her_ratio * batch_size)`` of a batch are
            relabelled, ``her_ratio = 1 - 1 / (num_goals + 1)``.
        reward_fn: ``reward_fn(next_achieved_goal, new_desired_goal, infos) -> (B,) or (B, 1)``
            (numpy or torch), usually the env's ``compute_reward``; may be set later
            (``storage.reward_fn = ...``). copy_info_dict: pass the kept info dicts to ``reward_fn``.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: str = "cpu",
        storage_size: int = 1000000,
        num_envs: int = 1,
        batch_size: int = 1024,
        goal_selection_strategy: str = "future",
        num_goals: int = 4,
        reward_fn: GoalFn | None = None,
        copy_info_dict: bool = False,
    ) -> None:
        if not isinstance(observation_space, spaces.Dict):
            raise TypeError(
                "HerReplayStorage needs a goal env's spaces.Dict observation space, got "
                f"{type(observation_space).__name__}"
            )
        self.observation_space = observation_space
        self.action_space = action_space
        self.device = th.device(device)
        self.num_envs = check_int("num_envs", num_envs, 1)
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.num_goals = check_int("num_goals", num_goals, 0)
        self.copy_info_dict = check_bool("copy_info_dict", copy_info_dict)
        strategy = parse_strategy(goal_selection_strategy)
        self.goal_selection_strategy = strategy.name.lower() if not isinstance(strategy, str) else strategy
        self.obs_shape = {key: _obs_shape(space) for key, space in observation_space.spaces.items()}
        action_info = _action_info(action_space)  # rllte's attributes of the action space
        self.action_shape, self.action_dim, self.policy_action_dim, self.action_type = action_info
        self._reward_fn = reward_fn
        fields = {key: (self.obs_shape[key], observation_space.spaces[key].dtype) for key in self.obs_shape}
        # rllte's agents seed NumPy's global state before building the storage: derive ours from it once.
        seed = int(np.random.randint(0, 2**31 - 1))  # noqa: NPY002  (read once, on purpose)
        self.storage = HerStorage(
            check_int("storage_size", storage_size, 1),
            fields,
            ((self.action_dim,), action_space.dtype),
            _RllteRewardFn.of(reward_fn),
            n_envs=self.num_envs,
            n_sampled_goal=self.num_goals,
            goal_selection_strategy=strategy,
            copy_info_dict=self.copy_info_dict,
            seed=seed,
        )
        _rllte_batch_class()  # registers the class as rllte's BaseStorage when rllte is installed

    # ------------------------------------------------------------------ rllte's attributes
    @property
    def storage_size(self) -> int:
        """Steps kept per env (rllte's ``storage_size`` after the split among envs)."""
        return self.storage.steps_per_env

    @property
    def step(self) -> int:
        """Row the next :meth:`add` writes (rllte's ``step``)."""
        return self.storage.pos

    @property
    def full(self) -> bool:
        """Whether the storage has wrapped around at least once."""
        return self.storage.full

    @property
    def her_ratio(self) -> float:
        """Share of each batch that is relabelled: ``1 - 1 / (num_goals + 1)``."""
        return self.storage.her_ratio

    @property
    def reward_fn(self) -> GoalFn | None:
        """The function relabelling calls (settable, e.g. after unpickling)."""
        return self._reward_fn

    @reward_fn.setter
    def reward_fn(self, reward_fn: GoalFn | None) -> None:
        self.storage.set_functions(_RllteRewardFn.of(reward_fn))
        self._reward_fn = reward_fn

    def to_torch(self, x: np.ndarray) -> th.Tensor:
        """``x`` as a float32 tensor on ``device`` (rllte's ``BaseStorage.to_torch``)."""
        return th.as_tensor(x, device=self.device).float()

    # ------------------------------------------------------------------ rllte's methods
    def reset(self) -> None:
        """Forget every stored transition and episode."""
        self.storage.reset()

    def add(
        self,
        observations: Mapping[str, Any],
        actions: Any,
        rewards: Any,
        terminateds: Any,
        truncateds: Any,
        infos: Any,
        next_observations: Mapping[str, Any],
    ) -> None:
        """Store one step of every env: torch tensors (any device) or numpy arrays, leading axis ``num_envs``.

        ``observations`` / ``next_observations``: dicts of the observation space's keys; for an env
        whose episode ended, ``next_observations`` holds its final observation. ``actions``:
        ``(num_envs, action_dim)`` (or ``(num_envs,)`` for a Discrete action, ``(num_envs, *shape)``
        for a Box of more than one axis). ``terminateds`` / ``truncateds``: bools, integers or
        0.0 / 1.0. ``infos``: the vector env's infos (a dict of arrays, a list of dicts or None),
        kept only with ``copy_info_dict``. A step that does not fit is refused with a one-line
        error naming the argument, and nothing of it is stored.
        """
        n = self.num_envs
        if not isinstance(observations, Mapping) or not isinstance(next_observations, Mapping):
            raise TypeError(
                "observations and next_observations must be dicts of the observation space's keys, got "
                f"{type(observations).__name__} and {type(next_observations).__name__}"
            )
        actions = _numpy(actions)
        if isinstance(actions, np.ndarray) and actions.size == n * self.action_dim:
            actions = actions.reshape(n, self.action_dim)
        self.storage.add(
            {key: _numpy(value) for key, value in observations.items()},
            actions,
            _numpy(rewards),
            self._flags("terminateds", terminateds),
            self._flags("truncateds", truncateds),
            infos,
            {key: _numpy(value) for key, value in next_observations.items()},
        )

    @staticmethod
    def _flags(name: str, value: Any) -> Any:
        flags = _numpy(value)
        if isinstance(flags, np.ndarray) and flags.dtype.kind == "f":
            if not np.isin(flags, (0.0, 1.0)).all():
                raise ValueError(f"{name} must hold 0.0 or 1.0 when given as floats, got {flags.tolist()}")
            return flags != 0
        return flags

    def sample(self) -> Any:
        """``batch_size`` transitions of complete episodes, the last ``int(her_ratio * batch_size)`` relabelled.

        Returns rllte's ``DictReplayBatch`` (or this module's, without rllte): ``observations`` and
        ``next_observations`` dicts of ``(B, *obs_shape[key])``, ``actions`` ``(B, action_dim)``,
        ``rewards`` / ``terminateds`` / ``truncateds`` ``(B, 1)``, all float32 on ``device``. A
        relabelled transition has the new goal as ``desired_goal`` in both observations and
        ``reward_fn(next achieved goal, new goal, infos)`` as its reward.
        """
        batch_size = check_int("batch_size", self.batch_size, 1)
        if self._reward_fn is None and int(self.her_ratio * batch_size) > 0:
            raise RuntimeError(
                "this HerReplayStorage has no reward_fn to relabel with; pass reward_fn=env.compute_reward "
                "when building it, or set storage.reward_fn"
            )
        try:
            arrays = self.storage.sample_arrays(batch_size)
        except RuntimeError as error:
            # rllte's agents call it num_init_steps, stable-baselines3's learning_starts.
            raise RuntimeError(str(error).replace("learning_starts", "num_init_steps")) from None
        obs_shape, to_torch = self.obs_shape, self.to_torch

        def observations(values: Mapping[str, np.ndarray]) -> dict[str, th.Tensor]:
            return {key: to_torch(values[key].reshape(batch_size, *obs_shape[key])) for key in obs_shape}

        batch_class = _rllte_batch_class() or DictReplayBatch
        return batch_class(
            observations=observations(arrays["observations"]),
            actions=to_torch(arrays["actions"].reshape(batch_size, self.action_dim)),
            rewards=to_torch(arrays["rewards"].reshape(batch_size, 1)),
            terminateds=to_torch(arrays["terminateds"].reshape(batch_size, 1)),
            truncateds=to_torch(arrays["truncateds"].reshape(batch_size, 1)),
            next_observations=observations(arrays["next_observations"]),
        )

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to update (rllte's agents call ``storage.update(metrics)`` after each update)."""

    def __repr__(self) -> str:
        return (
            f"HerReplayStorage(storage_size={self.storage_size} per env, num_envs={self.num_envs}, "
            f"batch_size={self.batch_size}, goal_selection_strategy={self.goal_selection_strategy!r}, "
            f"num_goals={self.num_goals}, device={str(self.device)!r})"
        )
