"""HandReachVectorEnv and HandManipulateVectorEnv: N Shadow Hand envs on one MuJoCo model, stepped as
one batch.

The batches of N of :class:`~goalenvs.envs.hand.env.HandReachTask` and
:class:`~goalenvs.envs.hand.manipulate.HandManipulateTask`, the tasks :class:`HandReachEnv` and
:class:`HandManipulateEnv` are the batches of one of; this module adds the vector envs' arguments
(``num_envs``, ``num_threads``, the autoreset mode) and its docstring; the threads that step the
physics are the MuJoCo families' (:mod:`goalenvs.envs.mujoco_task`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gymnasium.vector import AutoresetMode

from goalenvs.envs.hand.env import ENV_DOC, HandReachAttributes, HandReachTask
from goalenvs.envs.hand.manipulate import MANIPULATE_DOC, HandManipulateAttributes, HandManipulateTask
from goalenvs.envs.hand.settings import DEFAULT_SIZE, HandManipulateSettings, HandReachSettings
from goalenvs.envs.mujoco_task import MujocoVectorEnv

__all__ = ["HandManipulateVectorEnv", "HandReachVectorEnv"]

_VECTOR_DOC = """
    ## Vector specifics
    * ``num_envs`` (int >= 1). ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list seeds each
      env), so env ``i`` replays exactly what the single env (``HandReachEnv``,
      ``HandManipulateEnv``) reset with seed ``s + i`` does. Every other argument is the single
      env's, for all envs.
    * ``num_threads`` (int >= 1, default ``os.cpu_count()``, capped at ``num_envs``): threads that step
      the physics, each a contiguous chunk of envs, as Fetch's. The results do not depend on it.
    * ``autoreset_mode``: ``AutoresetMode.NEXT_STEP`` (default; Gymnasium's), ``SAME_STEP`` or
      ``DISABLED`` (reset ended envs with ``options={"reset_mask": mask}``), as Fetch's vector env.
    * ``batched_final_obs`` (opt-in, ``SAME_STEP`` only): ``info["final_obs"]`` is one dict of
      ``(num_envs, ...)`` arrays instead, rows valid where ``info["_final_obs"]``.
    * ``info`` holds ``is_success`` (float32) and ``elapsed_steps`` (int64) arrays of shape
      ``(num_envs,)``; ``compute_reward`` / ``compute_terminated`` / ``compute_truncated`` are the
      single env's, on the batches this env returns.
    * ``render()`` (``render_mode="rgb_array"``) returns a tuple of ``num_envs`` frames; ``data[i]``
      is env ``i``'s ``MjData`` (one ``model`` for all) and ``goal[i]`` its goal.
"""


class HandReachVectorEnv(HandReachAttributes, MujocoVectorEnv):
    __doc__ = (
        "N HandReach envs stepped as one batch (``gym.make_vec('goalenvs/HandReach-v0', num_envs=N)``).\n"
        + ENV_DOC
        + _VECTOR_DOC
    )

    def __init__(
        self,
        num_envs: int = 1,
        reward_type: str = "sparse",
        *,
        distance_threshold: float = 0.01,
        n_substeps: int = 20,
        relative_control: bool = False,
        initial_qpos: Mapping[str, float] | None = None,
        max_steps: int | None = 50,
        width: int = DEFAULT_SIZE,
        height: int = DEFAULT_SIZE,
        render_mode: str | None = None,
        num_threads: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        batched_final_obs: bool = False,
    ) -> None:
        settings = HandReachSettings(
            reward_type,
            distance_threshold=distance_threshold,
            n_substeps=n_substeps,
            relative_control=relative_control,
            initial_qpos=initial_qpos,  # type: ignore[arg-type]  # None: REACH_INITIAL_QPOS
            max_steps=max_steps,
            width=width,
            height=height,
        )
        self._init_mujoco(
            HandReachTask(settings), num_envs, render_mode, num_threads, autoreset_mode, batched_final_obs
        )


class HandManipulateVectorEnv(HandManipulateAttributes, MujocoVectorEnv):
    __doc__ = (
        "N in-hand manipulation envs stepped as one batch "
        "(``gym.make_vec('goalenvs/HandManipulateBlock-v0', num_envs=N)``).\n" + MANIPULATE_DOC + _VECTOR_DOC
    )

    def __init__(
        self,
        num_envs: int = 1,
        object: str = "block",
        reward_type: str = "sparse",
        *,
        target_position: str = "random",
        target_rotation: str = "xyz",
        randomize_initial_position: bool = True,
        randomize_initial_rotation: bool | None = None,
        distance_threshold: float | None = None,
        rotation_threshold: float = 0.1,
        ignore_z_target_rotation: bool | None = None,
        touch_get_obs: str | None = None,
        n_substeps: int = 20,
        relative_control: bool = False,
        initial_qpos: Mapping[str, Any] | None = None,
        max_steps: int | None = 100,
        width: int = DEFAULT_SIZE,
        height: int = DEFAULT_SIZE,
        render_mode: str | None = None,
        num_threads: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        batched_final_obs: bool = False,
    ) -> None:
        settings = HandManipulateSettings(
            object,
            reward_type,
            target_position=target_position,
            target_rotation=target_rotation,
            randomize_initial_position=randomize_initial_position,
            randomize_initial_rotation=randomize_initial_rotation,
            distance_threshold=distance_threshold,
            rotation_threshold=rotation_threshold,
            ignore_z_target_rotation=ignore_z_target_rotation,
            touch_get_obs=touch_get_obs,
            n_substeps=n_substeps,
            relative_control=relative_control,
            initial_qpos=initial_qpos,  # type: ignore[arg-type]  # None: the model's own
            max_steps=max_steps,
            width=width,
            height=height,
        )
        self._init_mujoco(
            HandManipulateTask(settings),
            num_envs,
            render_mode,
            num_threads,
            autoreset_mode,
            batched_final_obs,
        )
