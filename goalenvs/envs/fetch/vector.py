"""FetchVectorEnv: N Fetch envs on one MuJoCo model, their physics stepped in parallel threads.

The batch of N of :class:`~goalenvs.envs.fetch.env.FetchTask`, the task :class:`FetchEnv` is the
batch of one of (the threads are the task's: see there); this module adds the vector env's arguments
(``num_envs``, ``num_threads``, the autoreset mode) and its docstring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gymnasium.vector import AutoresetMode

from goalenvs.envs.fetch.env import ENV_DOC, FetchAttributes, FetchTask
from goalenvs.envs.fetch.settings import DEFAULT_SIZE, FetchSettings
from goalenvs.envs.mujoco_task import MujocoVectorEnv

__all__ = ["FetchVectorEnv"]

_VECTOR_DOC = """
    ## Vector specifics
    * ``num_envs`` (int >= 1). ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list seeds each
      env), so env ``i`` replays exactly what ``FetchEnv`` reset with seed ``s + i`` does (observation,
      reward, flags and info, bit for bit). Every other argument is ``FetchEnv``'s, for all envs.
    * ``num_threads`` (int >= 1, default ``os.cpu_count()``, capped at ``num_envs``): threads that step
      the physics, each a contiguous chunk of envs. With 1 no thread pool is made. The results do not
      depend on it.
    * ``autoreset_mode``: ``AutoresetMode.NEXT_STEP`` (default; Gymnasium's), ``SAME_STEP`` or
      ``DISABLED`` (reset ended envs with ``options={"reset_mask": mask}``; torchrl's choice), the
      ``autoreset_mode`` attribute and ``metadata["autoreset_mode"]``. With ``SAME_STEP``, in a step that ends an
      episode, ``info["final_obs"]`` is an object array holding each ended env's last observation
      dict (None elsewhere) and ``info["final_info"]`` their last infos (a dict of arrays with its
      own masks), as in a ``SyncVectorEnv`` of ``FetchEnv``.
    * ``batched_final_obs`` (opt-in, ``SAME_STEP`` only): ``info["final_obs"]`` is one dict of
      ``(num_envs, ...)`` arrays instead, rows valid where ``info["_final_obs"]``.
    * ``info`` holds ``is_success`` (float32) and ``elapsed_steps`` (int64) arrays of shape
      ``(num_envs,)``, every env reporting both (all-True masks): an env whose episode has just
      started (at ``reset``, or by an autoreset) reports ``FetchEnv.reset``'s info, the success of
      its start state and 0 elapsed steps, as in a ``SyncVectorEnv`` of ``FetchEnv``.
    * ``compute_reward`` / ``compute_terminated`` / ``compute_truncated`` are the single env's, on the
      batches this env returns.
    * ``render()`` (``render_mode="rgb_array"``) returns a tuple of ``num_envs`` frames, as
      Gymnasium's vector envs do; ``data[i]`` is env ``i``'s ``MjData`` (one ``model`` for all) and
      ``goal[i]`` its goal.
    * ``close()`` ends the thread pool; ``reset``, ``step`` and ``render`` then raise
      ``ClosedVectorEnvError`` (a ``RuntimeError`` and Gymnasium's ``ClosedEnvironmentError``), and
      ``close()`` again does nothing. The env pickles (and deep-copies): MuJoCo's model and data and
      each env's random stream are kept, the thread pool and renderer are made anew.
    * One env, one thread: ``reset`` / ``step`` / ``render`` / ``close`` called while another thread
      is inside one of them raise ``ConcurrentUseError`` (a ``RuntimeError``) at once; two threads
      stepping the same ``MjData`` would crash MuJoCo. Give each thread its own env.
    * Actions with NaN or infinite entries raise ``ValueError`` before any env moves (see ``FetchEnv``).
"""


class FetchVectorEnv(FetchAttributes, MujocoVectorEnv):
    __doc__ = (
        "N Fetch envs stepped as one batch (``gym.make_vec('goalenvs/FetchPush-v0', num_envs=N)``).\n"
        + ENV_DOC
        + _VECTOR_DOC
    )

    def __init__(
        self,
        num_envs: int = 1,
        task: str = "reach",
        reward_type: str = "sparse",
        *,
        distance_threshold: float | None = None,
        target_in_the_air: bool | None = None,
        target_offset: float | Sequence[float] | None = None,
        obj_range: float | None = None,
        target_range: float | None = None,
        gripper_extra_height: float | None = None,
        block_gripper: bool | None = None,
        n_substeps: int | None = None,
        initial_qpos: Mapping[str, Any] | None = None,
        max_steps: int | None = 50,
        width: int = DEFAULT_SIZE,
        height: int = DEFAULT_SIZE,
        render_mode: str | None = None,
        num_threads: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        batched_final_obs: bool = False,
    ) -> None:
        settings = FetchSettings(
            task,
            reward_type,
            distance_threshold=distance_threshold,  # type: ignore[arg-type]  # None: the task's
            target_in_the_air=target_in_the_air,  # type: ignore[arg-type]
            target_offset=target_offset,  # type: ignore[arg-type]
            obj_range=obj_range,  # type: ignore[arg-type]
            target_range=target_range,  # type: ignore[arg-type]
            gripper_extra_height=gripper_extra_height,  # type: ignore[arg-type]
            block_gripper=block_gripper,  # type: ignore[arg-type]
            n_substeps=n_substeps,  # type: ignore[arg-type]
            initial_qpos=initial_qpos,  # type: ignore[arg-type]
            max_steps=max_steps,
            width=width,
            height=height,
        )
        self._init_mujoco(
            FetchTask(settings), num_envs, render_mode, num_threads, autoreset_mode, batched_final_obs
        )
